"""``interp sweep --snapshots`` (issue 52, item 2): snapshots written while the sweep trains.

Independent references: the plain sweep's checkpoints and rows (snapshots must change no bit
of them), each run's initial model (``init_model``: step 0), the snapshot files
``train_with_snapshots`` gives for the same group in this process, and the snapshots ``interp
timeline`` writes when it trains a plain sweep's runs again (its own recorder, its own choice
of steps: every one of them is among a dense sweep's, and must be that file byte for byte).
``interp timeline`` of a sweep with snapshots trains nothing (training refused while it runs).
Tiny sweep: 2 groups x 2 seeds, n = 5, 30 steps, a curve point every 10 steps.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import torch
from safetensors.torch import load as load_bytes

from interp import cli
from interp.inspect.studies import timelines
from interp.sweeps import driver as sweeps, store
from interp.training import snapshot_plans, snapshots, trainer
from interp.training.runs import TrainConfig, init_model
from test_sweeps import calls, make_sweep  # noqa: F401 - calls: a fixture (tests/ is on sys.path)

KEYS = ("config", "seed", "status", "accuracy", "steps", "final_loss", "curve")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The tiny sweep trained plainly, with a snapshot at every step (``dense``), and at every
    curve point through the command line (``curve``)."""
    root = tmp_path_factory.mktemp("snapshots")
    sw = sweeps.load(make_sweep(root))
    sweeps.run_sweep(sw, store=root / "plain" / "store.sqlite")
    sweeps.run_sweep(sw, store=root / "dense" / "store.sqlite", snapshots=1)
    assert cli.main(["sweep", str(sw.root), "--store", str(root / "curve" / "store.sqlite"),
                     "--snapshots", "curve"]) == 0
    return root, sw


def _rows(path):
    return {r["name"]: r for r in store.read(path).to_dict("records")}


def _ckpt(root, kind, name):
    return root / kind / "checkpoints" / name


def _same_run(root, kind, name, plain):
    """The run's checkpoint in store ``kind`` is the plain sweep's: model file byte for byte,
    config.json equal but for the seconds training took."""
    a, b = _ckpt(root, kind, name), _ckpt(root, "plain", name)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes(), name
    meta = [json.loads((x / "config.json").read_text()) for x in (a, b)]
    for m in meta:
        m["result"].pop("seconds"), m["result"].pop("cpu_seconds")
    assert meta[0] == meta[1], name
    row = _rows(root / kind / "store.sqlite")[name]
    assert {k: row[k] for k in KEYS} == {k: plain[k] for k in KEYS}, name
    assert row["checksums"]["model.safetensors"] == plain["checksums"]["model.safetensors"]


@pytest.mark.parametrize("kind", ["dense", "curve"])
def test_snapshots_change_no_bit_of_the_sweep(swept, kind):
    root, sw = swept
    plain = _rows(root / "plain" / "store.sqlite")
    assert sorted(plain) == sorted(c.name() for c in sw.configs)
    for name, row in plain.items():
        _same_run(root, kind, name, row)
        snaps = snapshots.load_snapshots(_ckpt(root, kind, name))  # sealed, checked against its checkpoint
        curve_steps = [s for s, _ in row["curve"]]
        want = range(row["steps"] + 1) if kind == "dense" else [0, *curve_steps]
        assert sorted(snaps) == list(want), name
        final = load_bytes((_ckpt(root, "plain", name) / "model.safetensors").read_bytes())
        last = snaps[row["steps"]]
        assert all(torch.equal(last[k], final[k]) for k in final)  # the last: the plain checkpoint
        fresh = init_model(TrainConfig.from_dict(json.loads(row["config"]))).state_dict()
        assert all(torch.equal(snaps[0][k], fresh[k]) for k in fresh)  # step 0: before training


def test_sweep_snapshots_are_train_with_snapshots_files(swept):
    root, sw = swept
    for group in sweeps.group_by_seed(sw.configs):
        _, snaps = snapshots.train_with_snapshots(group, plan=snapshot_plans.Every(1))
        for c in group:
            files = snapshots.timeline_files(snaps[c.seed])
            folder = _ckpt(root, "dense", c.name()) / snapshots.FOLDER
            assert sorted(p.name for p in folder.iterdir()) == sorted(files)
            for name, data in files.items():
                assert (folder / name).read_bytes() == data, (c.name(), name)


def test_interp_timeline_trains_again_the_same_snapshots(swept, tmp_path):
    root, _ = swept
    copy = tmp_path / "plain"
    shutil.copytree(root / "plain", copy)
    runs = timelines.runs_of(copy)
    written = timelines.ensure_snapshots(runs, keep=8)  # retrains each group, checks its checkpoint
    assert len(written) == 4
    for r in runs:
        retrained = r.folder / snapshots.FOLDER
        dense = _ckpt(root, "dense", r.config.name()) / snapshots.FOLDER
        steps = snapshots.load_snapshots(r.folder)
        assert 3 <= len(steps) <= 8
        for k in steps:
            name = snapshots.file_name(k)
            assert (retrained / name).read_bytes() == (dense / name).read_bytes(), (r.config.name(), k)
        kept = snapshots.load_snapshots(dense.parent)
        assert {k: kept.losses[k] for k in steps} == steps.losses


def test_a_sweeps_timeline_rows_equal_a_retrained_ones(swept, tmp_path):
    """The issue's criterion, on the rows: ``interp timeline`` of the sweep written with
    ``--snapshots curve`` and of a copy of the plain sweep trained again, at their common steps."""
    root, _ = swept
    copy = tmp_path / "plain"
    shutil.copytree(root / "plain", copy)
    retrained = timelines.timeline(copy, keep=6)
    swept_rows = timelines.timeline(root / "curve")
    on = ["run", "step"]
    both = retrained.merge(swept_rows[on], on=on)
    assert len(both) >= 2 * 4  # step 0 and the last step of every run at least
    theirs = swept_rows.merge(both[on], on=on)
    assert list(both.columns) == list(theirs.columns)
    pd.testing.assert_frame_equal(both.sort_values(on).reset_index(drop=True),
                                  theirs.sort_values(on).reset_index(drop=True), check_exact=True)


def test_interp_timeline_reads_a_sweeps_snapshots_without_training(swept, monkeypatch):
    root, sw = swept

    def refuse(*a, **k):
        raise AssertionError("interp timeline trained a run that has its snapshots")

    monkeypatch.setattr(trainer, "train_group", refuse)
    monkeypatch.setattr(snapshots, "train_with_snapshots", refuse)
    df = timelines.timeline(root / "curve")
    assert df.attrs["skipped"] == {}
    plain = _rows(root / "plain" / "store.sqlite")
    for name, row in plain.items():
        assert list(df[df.run == name].step) == [0, *(s for s, _ in row["curve"])], name


def test_a_dense_then_sparse_plan_keeps_exactly_its_steps_of_the_dense_sweep(swept, tmp_path):
    """``--snapshots 2:10:5``: every 2 steps to step 10, then every 5, step 0 and the last step
    always; each snapshot is the every-step sweep's at that step, and no bit of the sweep changes."""
    root, sw = swept
    assert cli.main(["sweep", str(sw.root), "--store", str(tmp_path / "store.sqlite"), "--snapshots", "2:10:5"]) == 0
    plain = _rows(root / "plain" / "store.sqlite")
    for name, row in plain.items():
        assert (tmp_path / "checkpoints" / name / "model.safetensors").read_bytes() == \
            (_ckpt(root, "plain", name) / "model.safetensors").read_bytes()
        got = snapshots.load_snapshots(tmp_path / "checkpoints" / name)
        last = row["steps"]
        want = sorted({0, last, *range(2, min(10, last) + 1, 2), *range(15, last + 1, 5)})
        assert sorted(got) == want, name
        dense = snapshots.load_snapshots(_ckpt(root, "dense", name))
        for step, tensors in got.items():
            assert all(torch.equal(tensors[k], dense[step][k]) for k in tensors), (name, step)


@pytest.mark.parametrize("value, message", [
    (0, r"--snapshots 0; accepted: a whole number N >= 1 \(a snapshot every N steps\), N:U:M"),
    ("2:3:5", r"--snapshots '2:3:5'; accepted: .* U a multiple of N"),
    ("2:x:5", r"--snapshots '2:x:5'; accepted"),
    ("2:40:5", r"snapshots 2:40:5: step 40 is beyond run \w+ \(.*\), which trains at most 30 steps"),
    (-2, r"--snapshots -2; accepted"),
    ("every", r"--snapshots 'every'; accepted"),
    (31, r"snapshot interval 31 is beyond run \w+ \(.*\), which trains at most 30 steps; accepted: 1 to 30, or 'curve'"),
])
def test_a_bad_snapshot_value_is_refused_before_anything(tmp_path, calls, value, message):  # noqa: F811
    folder = make_sweep(tmp_path)
    with pytest.raises(ValueError, match=message):
        sweeps.run_sweep(sweeps.load(folder), snapshots=value)
    assert calls == [] and not (folder / "results").exists()


def test_snapshots_that_would_not_fit_in_memory_are_refused_before_anything(tmp_path, calls, monkeypatch):  # noqa: F811
    from interp.core import limits

    folder = make_sweep(tmp_path)
    sw = sweeps.load(folder)  # its own memory check first, on this machine's memory
    monkeypatch.setattr(limits, "memory_bytes", lambda: 2**12)  # 4 KiB: not even one snapshot
    with pytest.raises(ValueError, match=r"--snapshots 1: 32 snapshots per seed of case1 n5 .* x 2 seeds need"):
        sweeps.run_sweep(sw, snapshots=1)
    assert calls == [] and not (folder / "results").exists()


@pytest.mark.parametrize("flags, message", [
    (["--snapshots", "40"], "snapshot interval 40 is beyond run"),
    (["--snapshots", "0"], "--snapshots 0; accepted"),
    (["--snapshots", "5", "--save-every", "60"], "--save-every 60 with --snapshots 5: a group with snapshots trains from step 0"),
    (["--snapshots", "curve", "--no-checkpoints"], "--snapshots curve with --no-checkpoints: snapshots live in each run's checkpoint folder"),
])
def test_the_command_refuses_snapshots_that_cannot_apply(tmp_path, capsys, calls, flags, message):  # noqa: F811
    folder = make_sweep(tmp_path)
    assert cli.main(["sweep", str(folder), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert calls == [] and not (folder / "results").exists()


def test_the_pool_writes_the_same_snapshots(swept, tmp_path):
    root, sw = swept
    s = sweeps.run_sweep(sw, store=tmp_path / "pool" / "store.sqlite", workers=2, threads=1, snapshots=1)
    assert s.trained == 4
    _compare_stores(root, tmp_path / "pool", sw)


def test_a_sweep_stopped_before_a_row_commits_leaves_nothing_half_written(swept, tmp_path, monkeypatch):
    root, sw = swept
    real = store.Store.put

    def stop(self, record, checkpoint=None, checksums=None):  # the timeline is placed, the row not
        assert (checkpoint / snapshots.FOLDER / snapshots.MANIFEST).is_file()
        raise KeyboardInterrupt("stopped before the row")

    monkeypatch.setattr(store.Store, "put", stop)
    with pytest.raises(KeyboardInterrupt):
        sweeps.run_sweep(sw, store=tmp_path / "s" / "store.sqlite", snapshots=1)
    monkeypatch.setattr(store.Store, "put", real)
    assert store.read(tmp_path / "s" / "store.sqlite").empty  # no row: the run trains again
    assert sweeps.run_sweep(sw, store=tmp_path / "s" / "store.sqlite", snapshots=1).trained == 4
    _compare_stores(root, tmp_path / "s", sw)


def _compare_stores(root, other, sw):
    plain = _rows(root / "plain" / "store.sqlite")
    for c in sw.configs:
        _same_run_at(other, root, c.name(), plain[c.name()])
        a = other / "checkpoints" / c.name() / snapshots.FOLDER
        b = _ckpt(root, "dense", c.name()) / snapshots.FOLDER
        assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        assert all((a / p.name).read_bytes() == p.read_bytes() for p in b.iterdir()), c.name()


def _same_run_at(other, root, name, plain):
    assert ((other / "checkpoints" / name / "model.safetensors").read_bytes()
            == (_ckpt(root, "plain", name) / "model.safetensors").read_bytes()), name
    row = _rows(other / "store.sqlite")[name]
    assert {k: row[k] for k in KEYS} == {k: plain[k] for k in KEYS}, name


@pytest.mark.slow  # a local Ray instance starts in 20-40 s
def test_the_ray_backend_writes_the_same_snapshots(swept, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed: the Ray backend's snapshots are "
                                            "not tested here (pip install 'interp-funceval[ray]')")
    from interp.training import fast_train

    if fast_train.mkl_reproducible():  # the workers take the MKL mode this process really has
        monkeypatch.setenv("MKL_CBWR", "AUTO")
    else:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    root, sw = swept
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        s = sweeps.run_sweep(sw, store=tmp_path / "ray" / "store.sqlite", backend="ray", snapshots=1)
    finally:
        ray.shutdown()
    assert (s.trained, s.backend) == (4, "ray")
    _compare_stores(root, tmp_path / "ray", sw)
