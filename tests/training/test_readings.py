"""experiments/readings: the declared readings load as sweeps and carry the paper's numbers."""

import csv
import importlib.util
import pathlib

import pytest

from interp.sweeps import driver as sweeps

ROOT = pathlib.Path(__file__).resolve().parents[2] / "experiments"


def test_every_reading_is_a_sweep_of_the_declared_cells():
    widths = {}
    for name in ("attention-only", "mlp-1x", "mlp-4x", "torch-encoder"):
        sweep = sweeps.load(ROOT / "readings" / name)
        cells = {(c.case, c.n, c.n_layers, c.pos_embed, c.d_token) for c in sweep.configs}
        assert len(cells) == 14 and len(sweep.configs) == 70
        assert all(c.init == "pytorch" for c in sweep.configs)
        widths[name] = {(c.case, c.d_token): c.d_mlp for c in sweep.configs}
    assert set(widths["attention-only"].values()) == {0}
    assert set(widths["torch-encoder"].values()) == {2048}
    assert widths["mlp-4x"][(3, 8)] == 4 * 16 and widths["mlp-1x"][(5, 32)] == 32  # d_model = 2 d_token in case 3


def test_paper_numbers_are_the_tables_own():
    t1 = {(r["case"], r["pe"], r["d_token"]): (r["max"], r["avg"])
          for r in csv.DictReader((ROOT / "table1" / "paper.csv").read_text().splitlines())}
    t2 = {(r["n"], r["layers"], r["d_token"]): (r["max"], r["avg"])
          for r in csv.DictReader((ROOT / "table2" / "paper.csv").read_text().splitlines())}
    rows = list(csv.DictReader((ROOT / "readings" / "mlp-4x" / "paper.csv").read_text().splitlines()))
    assert len(rows) == 14
    for r in rows:
        want = t1[(r["case"], r["pe"], r["d_token"])] if r["case"] != "5" else t2[(r["n"], r["layers"], r["d_token"])]
        assert (r["max"], r["avg"]) == want


@pytest.mark.parametrize("reading", ["mlp-1x", "mlp-4x", "torch-encoder"])
@pytest.mark.parametrize("table", ["table1", "table2"])
def test_full_tables_under_a_reading_are_the_tables_with_its_width(reading, table):
    ours = sweeps.load(ROOT / "readings" / reading / table)
    theirs = sweeps.load(ROOT / table)
    assert ours.name == table and ours.layout == theirs.layout
    assert (ours.root / "paper.csv").read_text() == (theirs.root / "paper.csv").read_text()
    assert len(ours.configs) == len(theirs.configs)
    for a, b in zip(ours.configs, theirs.configs, strict=True):
        d_model = 2 * b.d_token if b.case in (2, 3) else b.d_token
        width = {"mlp-1x": d_model, "mlp-4x": 4 * d_model, "torch-encoder": 2048}[reading]
        assert b.d_mlp == 0 and a == b.replace(d_mlp=width)


def _score_module():
    spec = importlib.util.spec_from_file_location("score", ROOT / "readings" / "score.py")
    import sys

    sys.path.insert(0, str(ROOT / "readings"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_declared_rule_picks_most_within_then_smallest_mean_diff():
    score = _score_module()
    full = 2 * 14
    names = ["attention-only", "mlp-1x", "mlp-4x", "torch-encoder"]
    totals = [(n, w, full, m, "") for n, w, m in zip(names, [9, 12, 12, 5], [20.0, 18.5, 17.9, 30.0])]
    assert score.chosen(totals) == "mlp-4x"  # tie on 12: the smaller mean |diff|
    totals[0] = ("attention-only", 13, full, 40.0, "")
    assert score.chosen(totals) == "attention-only"
    assert score.chosen(totals[:3]) is None  # a reading missing
    totals[1] = ("mlp-1x", 20, full - 2, 1.0, "")
    assert score.chosen(totals) is None  # a reading with cells left to run that already leads


def test_the_rule_is_settled_early_only_when_no_result_left_can_change_it():
    score = _score_module()
    full = 2 * 14
    done = [("attention-only", 10, full, 37.07, ""), ("mlp-1x", 10, full, 33.96, ""),
            ("mlp-4x", 12, full, 32.41, "")]
    # 8 comparisons left: 7 + 8 = 15 could beat 12
    assert score.chosen(done + [("torch-encoder", 7, 20, 30.19, "")]) is None
    # 3 + 8 = 11 < 12 whatever the cells left give
    assert score.chosen(done + [("torch-encoder", 3, 20, 30.19, "")]) == "mlp-4x"
    assert score.undecided_by(done + [("torch-encoder", 3, 20, 30.19, "")], "mlp-4x") == ["torch-encoder"]
    # 4 + 8 = 12 ties; at |diff| 0 on the 8 left its mean could be 30.19 * 20 / 28 = 21.6 < 32.41
    assert score.chosen(done + [("torch-encoder", 4, 20, 30.19, "")]) is None
    # the same tie, but its best possible mean 50 * 20 / 28 = 35.7 loses the tie-break
    assert score.chosen(done + [("torch-encoder", 4, 20, 50.0, "")]) == "mlp-4x"
    # no complete reading: nothing to name
    assert score.chosen([(n, 0, 0, float("nan"), "") for n, *_ in done + [("torch-encoder",)]]) is None


def test_scores_come_from_seeds_csv_where_the_local_store_is_missing(tmp_path, monkeypatch):
    score = _score_module()
    monkeypatch.setattr(score, "HERE", tmp_path)  # no reading has a store here
    monkeypatch.setattr(score, "SEEDS_CSV", tmp_path / "seeds.csv")
    assert score.seeds_from_store("mlp-4x") is None and score.write_seeds_csv() == 0
    lines = ["reading,case,n,n_layers,pos_embed,d_token,d_mlp,seed,accuracy_pct,steps,run",
             "mlp-4x,5,2,2,learned,32,128,0,100.0,77,aaa", "mlp-4x,5,2,2,learned,32,128,1,62.5,10000,bbb",
             "mlp-1x,5,2,2,learned,32,32,0,50.0,10000,ccc"]
    (tmp_path / "seeds.csv").write_text("\n".join(lines) + "\n")
    seeds = score.seeds_from_store("mlp-4x")
    assert seeds[(5, 2, 2, "learned", 32)] == [100.0, 62.5]
    assert sum(len(v) for v in seeds.values()) == 2  # the other reading's line is not mixed in
    assert score.write_seeds_csv() == 3  # kept as they were when no store adds to them
    _, (_, within, comparisons, _, _) = score.score("mlp-4x", seeds, "")
    assert (within, comparisons) == (1, 2)  # max 100 vs 100 within; mean 81.25 vs 100 not


def test_the_step_budget_probe_is_the_tables_runs_made_longer():
    probe = sweeps.load(ROOT / "budget")
    tables = {c.name(): c for t in ("table1", "table2") for c in sweeps.load(ROOT / t).configs}
    assert len(probe.configs) == 15 and {c.max_steps for c in probe.configs} == {40_000}
    for c in probe.configs:
        assert tables[c.replace(max_steps=10_000).name()] == c.replace(max_steps=10_000)
    paper = list(csv.DictReader((ROOT / "budget" / "paper.csv").read_text().splitlines()))
    readings_paper = list(csv.DictReader((ROOT / "readings" / "mlp-4x" / "paper.csv").read_text().splitlines()))
    assert paper and all(r in readings_paper for r in paper)


def test_the_budget_probe_finds_the_first_step_below_the_plateau():
    import importlib.util as iu

    spec = iu.spec_from_file_location("budget", ROOT / "budget" / "budget.py")
    budget = iu.module_from_spec(spec)
    spec.loader.exec_module(budget)
    # ln 100 = 4.605; 0.9 ln 100 = 4.145
    assert budget.left_plateau([[1, 4.7], [50, 4.6], [100, 4.15], [150, 4.14], [200, 1.0]], 100) == 150
    assert budget.left_plateau([[1, 3.1], [50, 2.99]], 20) is None
