"""Issue 26, item 5: every command that reads a store takes the store file or its sweep folder
(in any spelling); flags that another flag makes do nothing are refused by name; an R^2 at the
probes' floor prints as floored, not as a plain -1.

References: the store's rows read with sqlite3 directly; the unfloored held-out R^2 computed
here with scikit-learn from the embedding table itself.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap

import numpy as np
import pytest

from interp import cli
from interp.core import constructions, models
from interp.inspect.tools import hooks, probes
from interp.sweeps import store
from interp.training import checkpoints
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

CONFIG = dict(case=2, n=5, d_token=2, pos_embed="none", seed=0)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A sweep folder (configs.py declares one run) whose store holds that run: the paper's
    case-2 construction."""
    root = tmp_path_factory.mktemp("paths")
    (root / "configs.py").write_text(textwrap.dedent(f"""
        from interp.sweeps import TableLayout
        from interp.training.trainer import TrainConfig
        CONFIGS = [TrainConfig(**{CONFIG!r})]
        LAYOUT = TableLayout(rows=("case",), column="d_token")
    """))
    cfg = TrainConfig(**CONFIG)
    model = constructions.build(2, 5)
    with store.Store(root / "results" / "store.sqlite") as db:
        path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
        db.put(store.RunRecord(name=cfg.name(), sweep=root.name, config=cfg.to_dict(), seed=0,
                               status="ok", accuracy=evaluate_accuracy(model, cfg)), path)
    return root


def _names(path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT name FROM runs ORDER BY rowid")]


FORMS = ["{root}", "{root}/", "{root}/results", "{root}/results/store.sqlite", ".", "results/"]


@pytest.mark.parametrize("form", FORMS)
def test_runs_and_store_verify_take_the_store_or_its_sweep_folder(sweep_dir, form, monkeypatch, capsys):
    monkeypatch.chdir(sweep_dir)
    arg = form.format(root=sweep_dir)
    expected = _names(sweep_dir / "results" / "store.sqlite")
    assert cli.main(["runs", arg, "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == expected
    assert cli.main(["store", "verify", arg, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] == len(expected) and out["damaged"] == {}


def test_report_and_sweep_take_a_store_folder_for_store(sweep_dir, tmp_path, capsys):
    assert cli.main(["report", str(sweep_dir), "--store", str(sweep_dir / "results"),
                     "--out", str(tmp_path), "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [c["runs"] for c in cells] == [1]
    assert cli.main(["sweep", str(sweep_dir), "--store", str(sweep_dir / "results"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["skipped"], summary["trained"]) == (1, 0)  # the folder's store, not a new one
    assert summary["store"] == str(sweep_dir / "results" / "store.sqlite")


def test_a_folder_without_a_store_is_refused_naming_what_is_accepted(tmp_path, capsys):
    for argv in (["runs", str(tmp_path)], ["store", "verify", str(tmp_path)]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert f"no results store at {tmp_path}" in err and "a sweep folder" in err


@pytest.mark.parametrize("argv, names", [
    (["probe", "--construction", "3", "--n", "4", "--case", "2"], ("--case 2", "--construction 3")),
    (["viz", "--construction", "3", "--n", "4", "--case", "2", "--out", "{tmp}/v"], ("--case 2", "--construction 3")),
    (["probe", "{ckpt}", "--attention", "softmax"], ("--attention softmax", "checkpoint")),
    (["sweep", "{root}", "--backend", "ray", "--save-every", "5"], ("--save-every 5", "--backend ray")),
    (["sweep", "{root}", "--backend", "ray", "--address", "auto", "--workers", "2"],
     ("--workers 2", "--address auto")),
    (["verify", "--plan", "exhaustive"], ("--plan exhaustive", "--case/--n")),
    (["verify", "--function", "any", "--quick"], ("--function any", "--case/--n")),
    (["verify", "--case", "1", "--n", "3", "--quick"], ("--quick", "--case/--n")),
    (["counterexample", "{ckpt}", "--n", "4"], ("--n 4", "--random")),
    (["lower-bounds", "{ckpt}", "--steps", "5"], ("--steps", "--train")),
])
def test_conflicting_flags_are_refused_by_name(sweep_dir, tmp_path, argv, names, capsys):
    ckpt = next((sweep_dir / "results" / "checkpoints").iterdir())
    argv = [a.format(tmp=tmp_path, ckpt=ckpt, root=sweep_dir) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"interp {argv[0]}: error: ") and "Traceback" not in err
    assert all(name in err for name in names), err
    assert not (tmp_path / "v").exists()


def _raw_best_r2(rows, labels, n: int) -> float:
    """The best held-out cos/sin R^2 over (N, m), not floored: scikit-learn on the table."""
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold, cross_val_predict

    X, k = rows.detach().double().numpy(), np.asarray(labels)
    best = -np.inf
    for N in (n, n + 1):
        for m in range(1, (N - 1) // 2 + 1):
            Y = np.stack([np.cos(2 * np.pi * m * k / N), np.sin(2 * np.pi * m * k / N)], axis=1)
            pred = cross_val_predict(LinearRegression(), X, Y, cv=KFold(5, shuffle=True, random_state=0))
            best = max(best, r2_score(Y, pred))
    return best


def test_an_r2_at_the_floor_prints_as_floored(tmp_path, capsys):
    cfg = TrainConfig(case=3, n=6, d_token=8, pos_embed="none", seed=0)
    model = models.build_model(3, 6, 8, pos_embed="none", seed=0)  # a random init
    rows, labels = probes.embedding_tables(model)["token_value"]
    assert _raw_best_r2(rows, labels, 6) < probes.R2_FLOOR  # truly below the floor
    ckpt = checkpoints.save(model, tmp_path / "ckpt", cfg)
    assert cli.main(["probe", str(ckpt), "--batch-size", "64"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.strip().startswith("token_value"))
    assert line.rstrip().endswith("<= -1 (floored)"), line
    measure = next(l for l in out.splitlines() if l.strip().startswith("r2_token_value "))
    assert "<= -1 (floored)" in measure and "-1.0000" not in measure, measure
