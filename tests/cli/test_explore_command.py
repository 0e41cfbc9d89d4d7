"""``interp explore``: a clear one-line error on a bad store, the page on a good one."""

import json

import pytest

from interp import cli
from interp.core import constructions
from interp.inspect.tools import hooks
from interp.training import checkpoints
from interp.sweeps import store
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A sweep folder whose store holds one run: the paper's case-2 construction (n = 10, where
    the circle test has power)."""
    root = tmp_path_factory.mktemp("one")
    cfg = TrainConfig(case=2, n=10, d_token=2, pos_embed="none", seed=0)
    model = constructions.build(2, 10)
    with store.Store(root / "results" / "store.sqlite") as db:
        path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
        db.put(store.RunRecord(name=cfg.name(), sweep="one", config=cfg.to_dict(), seed=0,
                               status="ok", accuracy=evaluate_accuracy(model, cfg)), path)
    return root


@pytest.mark.parametrize("argv, message", [
    (["{tmp}/nowhere"], "no results store at"),
    (["{tmp}/empty.sqlite"], "holds no runs"),
    (["{sweep}", "--where", "case=4"], "no finished runs with a checkpoint"),
    (["{sweep}", "--where", "case"], "--where 'case'; accepted: FIELD=VALUE"),
    (["{sweep}", "--inputs", "0"], "inputs=0; accepted: an integer in 1..32"),
])
def test_bad_stores_exit_with_a_clear_error(argv, message, sweep_dir, tmp_path, capsys):
    with store.Store(tmp_path / "empty.sqlite"):
        pass
    argv = [a.format(tmp=tmp_path, sweep=sweep_dir) for a in argv]
    assert cli.main(["explore", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("interp explore: error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written


def test_good_store_writes_the_page(sweep_dir, tmp_path, capsys):
    out = tmp_path / "explore"
    argv = ["explore", str(sweep_dir), "--out", str(out), "--inputs", "1", "--batch-size", "32",
            "--where", "case=2", "--json"]
    assert cli.main(argv) == 0
    index = json.loads(capsys.readouterr().out)["index"]
    assert index == str(out / "index.html")
    text = (out / "index.html").read_text()
    assert '<script src="circuitsvis.js"></script>' in text and (out / "circuitsvis.js").is_file()
    assert "<td>success</td><td>construction</td>" in text
