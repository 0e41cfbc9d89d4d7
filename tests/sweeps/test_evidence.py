"""A stored run's row, its checkpoint's config.json and the model cross-checked (issue 55):
an accuracy forged in the row (its digests recomputed), forged in the row and config.json
(every checksum recomputed), a checkpoint of another shape with config.json's train_config
edited to the row's, NaN weights: each a CheckpointMismatch naming the run, its folder and
what disagreed; an honest run passes and its model is the saved one.

References, independent of the code under test: the model's accuracy on the run's test inputs
counted here with TransformerLens's own forward (its logits at the last position, argmax),
over the same test stream regenerated here; the tolerance computed by hand."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import struct
from contextlib import closing

import pytest
import torch

from interp.core import tasks
from interp.sweeps import store
from interp.sweeps.store_evidence import ACCURACY_SLACK, checked_model, cross_check, store_of_folder, tolerance
from interp.training import checkpoints
from interp.training.runs import TrainConfig, generator
from interp.training.trainer import train_group

FILES = ("config.json", "model.safetensors")


def _configs(d_token=4, seeds=(0, 1)):
    return [TrainConfig(case=1, n=5, d_token=d_token, pos_embed="learned", seed=s, max_steps=40,
                        stop_loss=0.0, batch_size=64, eval_batches=2, curve_every=10) for s in seeds]


def _put(db, root, result):
    """A run stored as the sweep driver stores it: its checkpoint, then its row with checksums."""
    c = result.config
    path = checkpoints.save(result, root / "checkpoints" / c.name())
    sums = {f: hashlib.sha256((path / f).read_bytes()).hexdigest() for f in FILES}
    db.put(store.RunRecord(name=c.name(), sweep="t", config=c.to_dict(), seed=c.seed, status=result.status,
                           accuracy=float(result.accuracy), steps=int(result.steps),
                           final_loss=float(result.final_loss), seconds=1.0,
                           curve=[list(p) for p in result.curve]), path, sums)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("evidence")
    results = train_group(_configs())
    wide = train_group(_configs(d_token=16, seeds=(0,)))[0]
    return root, results, wide


@pytest.fixture
def sweep(trained, tmp_path):
    _, results, wide = trained
    with store.Store(tmp_path / "store.sqlite") as db:
        for r in results:
            _put(db, tmp_path, r)
    checkpoints.save(wide, tmp_path / "wide")
    return tmp_path / "store.sqlite", results


def _row(path, name):
    df = store.read(path)
    return df[df["name"] == name].iloc[0]


def _reseal(path, name, **changes):
    """The forger's tools: row fields changed, the checksums recomputed over the folder's files
    and the row's digest recomputed (the plain sha256 the store uses)."""
    folder = path.parent / "checkpoints" / name
    sums = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}
    with closing(sqlite3.connect(path)) as db, db:
        for k, v in changes.items():
            db.execute(f"UPDATE runs SET {k}=? WHERE name=?", (v, name))
        db.execute("UPDATE runs SET checksums=? WHERE name=?", (json.dumps(sums, sort_keys=True), name))
        values = db.execute(f"SELECT {', '.join(store.RUN_COLUMNS)} FROM runs WHERE name=?", (name,)).fetchone()
        db.execute("UPDATE runs SET row_sha256=? WHERE name=?", (store.row_digest(values), name))


def _edit_meta(folder, edit):
    meta = json.loads((folder / "config.json").read_text())
    edit(meta)
    meta["sha256"] = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    (folder / "config.json").write_text(json.dumps(meta, indent=1))


def _true_accuracy(model, config) -> float:
    """The run's test accuracy counted here: the test stream regenerated, TransformerLens's own
    forward, the argmax of the last position's logits."""
    g, correct = generator(config.seed, "test"), 0
    for _ in range(config.eval_batches):
        tokens, answers = tasks.sample(config.case, config.n, config.batch_size, generator=g)
        with torch.no_grad():
            logits = model(tokens, return_type="logits")
        correct += int((logits[:, -1].argmax(-1) == answers).sum())
    return correct / (config.eval_batches * config.batch_size)


def test_an_honest_run_passes_and_its_model_is_the_saved_one(sweep):
    path, results = sweep
    for r in results:
        model = checked_model(path, _row(path, r.config.name()))
        saved = r.model.state_dict()
        assert all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())
        assert r.accuracy == _true_accuracy(model, r.config)  # what was stored is the model's
    assert cross_check(path) == {}


def test_an_accuracy_forged_in_the_row_is_refused_by_config_json(sweep):
    path, results = sweep
    name = results[0].config.name()
    assert results[0].accuracy < 0.99  # 40 steps: far from a success
    _reseal(path, name, accuracy=1.0)
    assert store.verify(path)["verified"] == 2  # the checksums alone pass it
    with pytest.raises(store.CheckpointMismatch, match="its recorded accuracy is .*the store row's 1.0"):
        store.checked_checkpoint(path, _row(path, name))
    assert set(cross_check(path, measure=False)) == {name}


def test_an_accuracy_forged_in_the_row_and_config_json_is_refused_by_measuring(sweep):
    path, results = sweep
    r = results[0]
    name, folder = r.config.name(), path.parent / "checkpoints" / r.config.name()
    _edit_meta(folder, lambda m: m["result"].update(accuracy=1.0))
    _reseal(path, name, accuracy=1.0)
    store.checked_checkpoint(path, _row(path, name))  # every file agrees with the row now
    truth = _true_accuracy(r.model, r.config)
    with pytest.raises(store.CheckpointMismatch) as e:
        checked_model(path, _row(path, name))
    assert f"it measures {truth:.4f}" in str(e.value) and str(folder) in str(e.value)
    assert cross_check(path) == {name: e.value.what}


def test_the_tolerance_is_the_stated_one(sweep):
    path, results = sweep
    r = results[1]
    name, folder = r.config.name(), path.parent / "checkpoints" / r.config.name()
    total = r.config.eval_batches * r.config.batch_size  # 128 inputs, all evaluated again
    assert tolerance(r.accuracy, total, total) == ACCURACY_SLACK
    for shift, accepted in ((0.004, True), (1.0 / total, False)):
        forged = r.accuracy - shift
        _edit_meta(folder, lambda m: m["result"].update(accuracy=forged))
        _reseal(path, name, accuracy=forged)
        if accepted:
            checked_model(path, _row(path, name))
        else:
            with pytest.raises(store.CheckpointMismatch, match="tolerance 0.0050"):
                checked_model(path, _row(path, name))
    # a sample of k of N inputs: four standard errors of sampling without replacement, by hand
    assert tolerance(0.5, 1000, 4000) == pytest.approx(0.005 + 4 * math.sqrt(0.25 / 1000 * 0.75))
    assert tolerance(1.0, 10, 4000) == ACCURACY_SLACK


def test_a_checkpoint_of_another_shape_dressed_as_the_run_is_refused(sweep):
    path, results = sweep
    r = results[0]
    name, folder = r.config.name(), path.parent / "checkpoints" / r.config.name()
    wide = path.parent / "wide"
    for f in FILES:  # a d_token-16 model put in the run's folder
        (folder / f).write_bytes((wide / f).read_bytes())
    _edit_meta(folder, lambda m: m.update(train_config=r.config.to_dict(),
                                          result={**m.get("result", {}), "accuracy": r.accuracy}))
    _reseal(path, name)
    with pytest.raises(store.CheckpointMismatch, match="d_model=16.*builds d_model=4"):
        store.checked_checkpoint(path, _row(path, name))
    # and when the spec and hooked_config are edited to the row's too, the weights no longer fit
    _edit_meta(folder, lambda m: m.update(model=json.loads((path.parent / "checkpoints" / results[1].config.name()
                                                            / "config.json").read_text())["model"]))
    _reseal(path, name)
    with pytest.raises(store.CheckpointMismatch, match="does not fit"):
        checked_model(path, _row(path, name))


def test_nan_weights_and_a_missing_checkpoint_are_named(sweep):
    path, results = sweep
    a, b = (r.config.name() for r in results)
    w = path.parent / "checkpoints" / a / "model.safetensors"
    data = w.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    start, end = header["embed.W_E"]["data_offsets"]
    body = bytearray(data[8 + n:])
    body[start:start + 4] = struct.pack("<f", float("nan"))
    w.write_bytes(data[:8 + n] + bytes(body))
    _edit_meta(w.parent, lambda m: None)
    _reseal(path, a)
    with pytest.raises(store.CheckpointMismatch, match="non-finite values"):
        checked_model(path, _row(path, a))
    for f in FILES:
        (path.parent / "checkpoints" / b / f).unlink()
    found = cross_check(path)
    assert set(found) == {a, b} and "non-finite" in found[a] and "missing" in found[b]


def test_a_run_folder_inside_a_store_is_found_with_its_row(sweep, tmp_path):
    path, results = sweep
    name = results[0].config.name()
    got = store_of_folder(path.parent / "checkpoints" / name)
    assert got[0] == path.resolve() and got[1]["name"] == name
    assert store_of_folder(path.parent / "wide") is None
    stray = path.parent / "checkpoints" / "not-a-run"
    stray.mkdir()
    with pytest.raises(ValueError, match="does not\nlist|does not list"):
        store_of_folder(stray)


def test_store_verify_names_a_forged_row_a_bad_timeline_and_a_killed_writes_folder(sweep, capsys):
    from interp import cli
    from interp.training import snapshots

    path, results = sweep
    a, b = (r.config.name() for r in results)
    assert cli.main(["store", "verify", str(path)]) == 0
    _reseal(path, a, accuracy=1.0)
    timeline = path.parent / "checkpoints" / b / "timeline"
    timeline.mkdir()
    (timeline / "manifest.json").write_text("{")
    stale = path.parent / "checkpoints" / b / ".timeline.tmp-0123abcd"
    stale.mkdir()
    capsys.readouterr()
    assert cli.main(["store", "verify", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "1 whose checkpoint disagrees with the row" in out and "1 with a bad timeline" in out
    assert f"  {a}: its recorded accuracy is" in err and f"  {b}: run " in err and "truncated or corrupt" in err
    assert f"temporary timeline folder {stale}" in err and stale.is_dir()
    assert cli.main(["store", "verify", str(path), "--remove-orphans", "--measure"]) == 1
    assert not stale.exists() and snapshots.stale_temporaries(stale.parent) == []


CONFIGS_PY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token", paper={}, title="forged")
CONFIGS = [TrainConfig(case=1, n=5, d_token=4, pos_embed="learned", seed=s, max_steps=40, stop_loss=0.0,
                       batch_size=64, eval_batches=2, curve_every=10) for s in (0, 1)]
"""


def test_the_report_shows_a_forged_row_as_a_named_failure_not_a_score(sweep, tmp_path):
    """interp report's table: the forged run is a failure that names what disagrees, its forged
    1.0 nowhere; the honest run keeps its stored accuracy."""
    from interp.sweeps import driver, report_table

    path, results = sweep
    name = results[0].config.name()
    _reseal(path, name, accuracy=1.0)
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / "configs.py").write_text(CONFIGS_PY)
    df = report_table.runs(driver.load(folder), path).set_index("name")
    assert df.loc[name, "status"].startswith("evidence disagrees") and "1.0" in df.loc[name, "status"]
    assert math.isnan(df.loc[name, "accuracy"])
    honest = results[1].config.name()
    assert df.loc[honest, "status"] == "ok" and df.loc[honest, "accuracy"] == results[1].accuracy
