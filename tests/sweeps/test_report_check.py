"""The report's test section and escaping (interp.sweeps.report_check), end to end through
``interp report`` on a hand-filled store, and the premise of the non-informative rule checked on
models.

References: accuracies chosen by hand, so which cell the paper lies outside of is known before
the check runs; the rule's premise against a model's own forward pass on permuted inputs.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from interp.sweeps import driver as sweeps
from interp.sweeps import report
from interp.sweeps.report_check import md_text
from interp.sweeps.store import RunRecord, Store

REPO = Path(__file__).resolve().parents[2]

CONFIGS = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=case, n=100, d_token=d, pos_embed=pe, seed=s)
           for case, pe in [(1, "learned"), (4, "none")] for d in (8, 16) for s in range(10)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
                     title=TITLE)
"""

#: (case, pos_embed, d_token) -> our 10 seeds (%)
OURS = {
    (1, "learned", 8): [1.2, 0.9, 1.1, 1.0, 1.3, 0.8, 1.0, 1.1, 0.9, 1.2],  # never learned; paper 99.88
    (1, "learned", 16): [99.9, 1.0, 99.8, 100.0, 1.1, 99.7, 1.3, 100.0, 99.6, 1.2],  # bimodal, paper inside
    (4, "none", 8): [1.0] * 10,
    (4, "none", 16): [0.9] * 10,
}
PAPER = "case,pe,keys,d_token,max,avg\n" + "\n".join([
    "1,learned,none,8,99.88,61.72", "1,learned,none,16,100.00,60.10",
    "4,none,a|b <i>x</i>,8,1.04,1.00", "4,none,ordered,16,1.09,1.00"]) + "\n"


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "synthetic"
    out.mkdir()
    title = repr("Synthetic <script>alert(1)</script> | table")
    (out / "configs.py").write_text(textwrap.dedent(CONFIGS).replace("TITLE", title))
    (out / "paper.csv").write_text(PAPER)
    sw = sweeps.load(out)
    with Store(sw.default_store) as db:
        for c in sw.configs:
            acc = OURS[(c.case, c.pos_embed, c.d_token)][c.seed] / 100
            db.put(RunRecord(name=c.name(), sweep="synthetic", config=c.to_dict(), seed=c.seed, status="ok",
                             accuracy=acc, steps=10, final_loss=0.1, seconds=1.0, curve=[[1, 4.6]]))
    return sw


def test_the_report_flags_the_cell_outside_and_lists_the_construction_cells_apart(folder):
    text = report.write(folder).markdown.read_text()
    section = text.split("## The paper's numbers tested, cell by cell")[1].split("A count, not a test")[0]
    assert "Informative cells tested: 2; the paper outside our distribution: 1" in section
    rows = {line.split(" | ")[0].lstrip("| "): line for line in section.splitlines() if line.startswith("| case")}
    outside = next(v for k, v in rows.items() if k.startswith("case 1") and k.endswith("d_token 8"))
    assert "**outside**: paper max above ours by 98.7, mean above ours by 60.7" in outside  # medians by hand: 1.2 and 1.04-1.06 and "0 of 10 (0-31%)" in outside
    inside = next(v for k, v in rows.items() if k.startswith("case 1") and k.endswith("d_token 16"))
    assert inside.endswith("| consistent |") and "| 6 of 10 (26-88%) |" in inside
    apart = section.split("Non-informative by construction (2 cells")[1]
    assert apart.count("| non-informative |") == 2


def test_user_text_is_escaped_in_the_report(folder):
    text = report.write(folder).markdown.read_text()
    assert "<script>" not in text and "<i>" not in text
    assert text.startswith("# Synthetic &lt;script&gt;alert(1)&lt;/script&gt; \\| table")
    assert "a\\|b &lt;i&gt;x&lt;/i&gt;" in text  # a paper.csv label inside the tables
    for line in text.splitlines():
        if line.startswith("| case"):  # every table row keeps its column count
            assert line.replace("\\|", "").count("|") in (12, 11, 10, 9, 8, 7, 6), line


def test_md_text():
    assert md_text("a|b") == "a\\|b" and md_text("<b>&</b>") == "&lt;b&gt;&amp;&lt;/b&gt;"
    assert md_text("two\nlines") == "two lines" and md_text(3) == "3"


@pytest.mark.parametrize("case", [1, 4])
@pytest.mark.parametrize("arch", [{}, dict(d_mlp=32, mlp="last", W_O="identity", unembed_bias=False,
                                          n_layers=2, residual="embed")])
def test_without_positions_the_final_logits_ignore_everything_but_the_query(case, arch):
    """The rule's premise: cases 1 and 4 without PE, on permutations, give one output per query."""
    from interp.core import tasks
    from interp.training.runs import init_model
    from interp.training.trainer import TrainConfig

    model = init_model(TrainConfig(case=case, n=6, d_token=8, pos_embed="none", seed=3, init="pytorch", **arch))
    tokens, _ = tasks.sample(case, 6, 64, generator=torch.Generator().manual_seed(0), function="permutation")
    with torch.no_grad():
        logits = model(tokens)[:, -1]
        shuffled = torch.cat([tokens[:, :-1][:, torch.randperm(tokens.shape[1] - 1)], tokens[:, -1:]], dim=1)
        assert torch.allclose(model(shuffled)[:, -1], logits, atol=1e-5)
    for q in tokens[:, -1].unique():
        same = logits[tokens[:, -1] == q]
        assert torch.allclose(same, same[0].expand_as(same), atol=1e-5)


@pytest.mark.parametrize("row, words", [
    ("1,learned,none,8,50.0,60.0", "above paper_max"),
    ("1,learned,none,8,101.0,60.0", "in [0, 100]"),
    ("1,learned,none,8,99.5,5.0", "puts the mean"),
])
def test_a_paper_csv_the_test_cannot_read_is_refused_before_any_file_is_written(folder, row, words):
    (folder.root / "paper.csv").write_text("case,pe,keys,d_token,max,avg\n" + row + "\n")
    with pytest.raises(ValueError, match=r"paper\.csv, data row 1: .*" + words.replace("[", r"\[").replace("]", r"\]")):
        report.write(folder)
    assert not (folder.root / "report.md").exists() and not (folder.root / "violins.png").exists()
