"""The report: cells computed from a hand-filled store, the paper's numbers read from its CSV.

References: accuracies chosen by hand (max/avg worked out here), the paper's numbers read with
the csv module, PNG files checked by their signature.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import textwrap
from pathlib import Path

import pytest

from interp import cli
from interp.sweeps import report, driver as sweeps
from interp.sweeps.store import RunRecord, Store

REPO = Path(__file__).resolve().parents[2]

CONFIGS = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=case, n=100, d_token=d, pos_embed=pe, seed=s)
           for case, pe in [(1, "learned"), (4, "none")] for d in (2, 8) for s in range(3)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
                     title="Two rows of Table 1")
"""

#: (case, pos_embed, d_token) -> accuracies of seeds 0, 1, 2 (None: not in the store)
ACCS = {
    (1, "learned", 2): [0.10, 0.50, 1.00],
    (1, "learned", 8): [0.99, None, 0.97],  # partial
    (4, "none", 2): [None, None, None],  # missing
    (4, "none", 8): [0.01, 0.01, 0.01],  # identical: a degenerate violin
}


def paper_numbers() -> dict:
    with open(REPO / "experiments" / "table1" / "paper.csv") as f:
        return {(int(r["case"]), r["pe"], int(r["d_token"])): (float(r["max"]), float(r["avg"]), r["keys"])
                for r in csv.DictReader(f)}


@pytest.fixture
def filled(tmp_path):
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(CONFIGS))
    shutil.copy(REPO / "experiments" / "table1" / "paper.csv", folder / "paper.csv")
    sw = sweeps.load(folder)
    with Store(sw.default_store) as db:
        for c in sw.configs:
            acc = ACCS[(c.case, c.pos_embed, c.d_token)][c.seed]
            if acc is not None:
                db.put(RunRecord(name=c.name(), sweep="two", config=c.to_dict(), seed=c.seed,
                                 status="ok", accuracy=acc, steps=100 * (c.seed + 1),
                                 final_loss=0.1, seconds=1.0, curve=[[1, 4.6]],
                                 cpu_seconds=None if c.case == 4 else 0.5 * (c.seed + 1)))
        stray = sw.configs[0].replace(n=7)  # another sweep's run in the same store: ignored
        db.put(RunRecord(name=stray.name(), sweep="other", config=stray.to_dict(), seed=0,
                         status="ok", accuracy=0.0, steps=1, final_loss=1.0, seconds=1.0))
        i = db.begin_sweep("two", 2, {"cpus": 2, "torch": "2", "load_average": [1.5, 1, 1]})
        db.end_sweep(i, runs_done=8, wall_seconds=61.0, environment={"load_average_end": [2.5, 2, 1]})
        j = db.begin_sweep("other", 2, {"cpus": 2})  # another sweep folder's invocation, same store
        db.end_sweep(j, runs_done=5, wall_seconds=1000.0, environment={})
    return sw


def test_cells_match_hand_computed_stats_and_the_paper(filled):
    table = report.cells(filled, report.runs(filled), report.paper_table(filled))
    paper = paper_numbers()
    assert len(table) == 4
    for _, r in table.iterrows():
        key = (r["case"], r["pos_embed"], r["d_token"])
        accs = [100 * a for a in ACCS[key] if a is not None]
        assert r["declared"] == 3 and r["runs"] == len(accs) and r["accuracies"] == accs
        assert r["chance"] == 1.0
        pmax, pavg, keys = paper[key]
        assert (r["paper_max"], r["paper_avg"], r["keys"]) == (pmax, pavg, keys)
        if accs:
            assert r["max"] == pytest.approx(max(accs)) and r["avg"] == pytest.approx(sum(accs) / len(accs))
            assert r["diff_max"] == pytest.approx(max(accs) - pmax)
            assert r["diff_avg"] == pytest.approx(sum(accs) / len(accs) - pavg)
        else:
            assert math.isnan(r["max"]) and math.isnan(r["avg"]) and math.isnan(r["diff_avg"])
    first = table.iloc[0]
    assert first["max"] == pytest.approx(100.0) and first["avg"] == pytest.approx(160 / 3)
    assert first["steps"] == pytest.approx(200)
    assert (first["seconds"], first["cpu_seconds"]) == (1.0, pytest.approx(1.0))  # 0.5, 1, 1.5
    assert math.isnan(table.iloc[3]["cpu_seconds"])  # case 4: no CPU time recorded


def test_markdown_has_the_layout_the_paper_numbers_and_what_is_missing(filled):
    written = report.write(filled)
    text = written.markdown.read_text()
    assert (written.runs, written.declared) == (8, 12)
    assert "**8 of 12 runs are in the store** (4 missing" in text
    paper = paper_numbers()
    # header in the paper's layout, then one line per row: ours / paper (difference)
    assert "| case | pos_embed | keys | d_token=2 max | d_token=2 avg | d_token=8 max | d_token=8 avg |" in text
    pmax, pavg, _ = paper[(1, "learned", 2)]
    assert f"100.00 / {pmax:.2f} ({100 - pmax:+.2f})" in text
    assert f"53.33 / {pavg:.2f} ({160 / 3 - pavg:+.2f})" in text
    pmax, pavg, _ = paper[(1, "learned", 8)]
    assert f"99.00* / {pmax:.2f} ({99 - pmax:+.2f})" in text  # partial cell marked
    pmax, pavg, _ = paper[(4, "none", 2)]
    assert f"— / {pmax:.2f}" in text and f"— / {pavg:.2f}" in text  # missing cell
    assert "| 1 | learned | none | 2 | 3/3 | 0: 10.00, 1: 50.00, 2: 100.00 | 1.00 | 200 | 1.0 / 1.0 |" in text
    assert "| 1 | learned | none | 8 | 2/3 | 0: 99.00, 2: 97.00 | 1.00 | 200 | 1.0 / 1.0 |" in text
    assert "| 4 | none | ordered | 2 | 0/3 | — | 1.00 | — | — / — |" in text
    assert "| 4 | none | ordered | 8 | 3/3 | 0: 1.00, 1: 1.00, 2: 1.00 | 1.00 | 200 | 1.0 / — |" in text
    assert "Total wall time: 61 s" in text and "| 1000 |" not in text  # only this sweep's invocations
    assert "2 cpus, torch 2, load at start 1.5, at end 2.5 |" in text
    png = written.violins.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_report_without_paper_numbers_or_runs(tmp_path):
    folder = tmp_path / "nopaper"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(CONFIGS).replace(
        'paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},', ""))
    sw = sweeps.load(folder)
    written = report.write(sw, out=tmp_path / "out")
    text = written.markdown.read_text()
    assert "**0 of 12 runs are in the store**" in text and "no numbers for these settings" in text
    assert "| 1 | learned | — | — | — | — |" in text
    assert (tmp_path / "out" / "violins.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_report(filled, capsys):
    assert cli.main(["report", str(filled.root)]) == 0
    out = capsys.readouterr().out
    assert "8 of 12 runs" in out and (filled.root / "violins.png").is_file()
    assert cli.main(["report", str(filled.root / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("paper_text, names", [
    ("case,pe,keys,d_token,max,avg\n1,learned,none,2,high,1.0\n", "'max' holds a non-number"),
    ('case,pe,"d_token\n1,learned,2\n', "not a readable CSV"),
])
def test_cli_report_names_a_bad_paper_csv(filled, capsys, paper_text, names):
    (filled.root / "paper.csv").write_text(paper_text)
    assert cli.main(["report", str(filled.root)]) == 2
    err = capsys.readouterr().err
    assert "paper.csv" in err and names in err and "Traceback" not in err


def test_cli_report_refuses_a_store_that_is_not_there(filled, tmp_path, capsys):
    assert cli.main(["report", str(filled.root), "--store", str(tmp_path / "missing.sqlite")]) == 2
    assert "missing.sqlite: no such store file" in capsys.readouterr().err
    assert not (filled.root / "report.md").exists()  # nothing half-written


def test_regenerate_line_names_a_store_other_than_the_default(filled, tmp_path):
    """A report read from another store says how to read that store again."""
    default = report.write(filled, out=tmp_path / "a").markdown.read_text()
    assert "--store" not in default.split("Regenerate with")[1]
    moved = tmp_path / "elsewhere.sqlite"
    moved.write_bytes(filled.default_store.read_bytes())
    text = report.write(filled, store=moved, out=tmp_path / "b").markdown.read_text()
    assert f"--store {moved}`." in text.split("Regenerate with")[1]
    assert "**8 of 12 runs are in the store**" in text


def test_the_log_names_the_cpu_mkl_branch_and_code_that_trained_the_runs():
    env = dict(cpus=2, torch="2.13.0", MKL_CBWR="AUTO", cpu_model="Intel(R) Xeon(R)", mkl_branch=2,
               code="9996044ffff49cd919294a3e6ab8f7c5036dd695+dirty", load_average=[0.5, 0, 0])
    assert report._env(json.dumps(env)) == ("2 cpus, torch 2.13.0, MKL_CBWR=AUTO, Intel(R) Xeon(R) (MKL branch 2), "
                                            "code 9996044ffff4+dirty, load at start 0.5")
