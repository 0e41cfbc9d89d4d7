"""``interp atlas`` on a store whose seeds are known: the case-3 construction (a successful seed
whose mechanism is the construction's) and random inits (failed seeds, near chance). Where the
files go, the JSON, the cache across runs, and the one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from interp import cli
from interp.core import constructions, models
from interp.inspect.studies import analysis
from interp.inspect.tools import hooks
from interp.sweeps import store
from interp.training import checkpoints
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

CASE, N = 3, 10  # n >= 10: the circle test has power (min_n_circle)
FILES = ("atlas.csv", "atlas.md", "atlas-success.png", "atlas-mechanism.png")


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A sweep folder's store: seed 0 the construction, seeds 1-2 random inits; accuracies
    measured, not invented."""
    root = tmp_path_factory.mktemp("atlas-cli") / "known"
    with store.Store(root / "results" / "store.sqlite") as db:
        for seed in range(3):
            cfg = TrainConfig(case=CASE, n=N, d_token=2, pos_embed="none", init="pytorch", seed=seed)  # the grid's reading
            model = (constructions.build(CASE, N) if seed == 0 else
                     models.build_model(CASE, N, 2, pos_embed="none", seed=seed))
            path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            db.put(store.RunRecord(name=cfg.name(), sweep="known", config=cfg.to_dict(), seed=seed,
                                   status="ok", accuracy=evaluate_accuracy(model, cfg),
                                   steps=10), path)
    return root


def test_atlas_of_a_sweep_folder_writes_beside_it_and_labels_the_seeds(sweep_dir, capsys, assert_drawn):
    assert cli.main(["atlas", str(sweep_dir), "--batch-size", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == 3 and [p["name"] for p in out["predictions"]] == [f"P{i}" for i in range(1, 10)]
    for name in FILES:
        assert (sweep_dir / name).is_file(), name
    assert_drawn(sweep_dir / "atlas-success.png")
    df = pd.read_csv(sweep_dir / "atlas.csv").set_index("seed")
    runs = store.read(sweep_dir / "results" / "store.sqlite").set_index("seed")
    assert df.accuracy.to_dict() == runs.accuracy.to_dict()
    assert df.loc[0, "outcome"] == "success" and df.loc[0, "label"] == "construction"
    assert df.loc[0, "acc"] == 1.0 and df.loc[0, "qk_diag"] == 1.0
    for seed in (1, 2):  # random inits: near chance, not measured
        assert df.loc[seed, "accuracy"] < 2 / N and df.loc[seed, "label"] == "failed"
    md = (sweep_dir / "atlas.md").read_text()
    assert "## case 3, 1 layer, attention-only, permutation" in md and f"| {N} | 1/3 c1 |" in md


def test_a_store_file_writes_beside_it_and_prints_the_predictions(sweep_dir, tmp_path, capsys):
    db = tmp_path / "store.sqlite"
    db.write_bytes((sweep_dir / "results" / "store.sqlite").read_bytes())
    assert cli.main(["atlas", str(db), "--batch-size", "64"]) == 0
    printed = capsys.readouterr().out
    assert "| prediction | verdict | numbers |" in printed and "**P9**" in printed
    assert all((tmp_path / name).is_file() for name in FILES)


def test_a_rerun_measures_nothing_known_and_remeasure_everything(sweep_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert cli.main(["atlas", str(sweep_dir), "--out", str(out), "--batch-size", "64", "--json"]) == 0
    first = (out / "atlas.csv").read_text()
    calls = []
    real = analysis.measure
    monkeypatch.setattr(analysis, "measure", lambda model, **kw: calls.append(kw) or real(model, **kw))
    assert cli.main(["atlas", str(sweep_dir), "--out", str(out), "--batch-size", "64", "--json"]) == 0
    assert calls == [] and (out / "atlas.csv").read_text() == first
    assert cli.main(["atlas", str(sweep_dir), "--out", str(out), "--batch-size", "64", "--json",
                     "--remeasure"]) == 0
    assert len(calls) == 1  # the one successful seed


@pytest.mark.parametrize("args, says", [
    (["{tmp}/nowhere"], "no results store at"),
    (["{sweep}", "--batch-size", "0"], "--batch-size 0; accepted: an integer >= 1"),
    (["{sweep}", "--out", "{tmp}/theirs"], "is not an atlas table"),
])
def test_refusals_are_one_line_before_any_work(sweep_dir, tmp_path, args, says):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "atlas.csv").write_text("a,b\n1,2\n")
    argv = [a.format(tmp=tmp_path, sweep=sweep_dir) for a in args]
    p = subprocess.run([sys.executable, "-m", "interp", "atlas", *argv], capture_output=True, text=True)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interp atlas: error: ") and says in lines[0], p.stderr
    assert (tmp_path / "theirs" / "atlas.csv").read_text() == "a,b\n1,2\n"  # not overwritten
    assert not (tmp_path / "theirs" / "atlas.md").exists()
