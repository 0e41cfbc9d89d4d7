"""Progress files that lie, and progress saves that fail (issue 24, items 1 and 2).

A damaged or edited progress file must never be resumed: it is set aside and the group trains
from step 0, so its results equal an uninterrupted run's. A save that fails (full disk,
``progress/`` replaced by a file) must not fail the run: it is stored ``ok`` with the numbers of
an uninterrupted run. Runs an older interp stored as failed for such faults are retrained by a
plain rerun, runs that failed in training are not.

Independent references: the same group trained straight through in this process
(``train_ensemble`` without a progress file) or the same sweep run without saving; the
checksum a test forges follows the documented format (sha256 over each tensor's
name, dtype, shape and bytes in name order, then the metadata JSON, each piece
length-prefixed), written out here, not taken from the module.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import math
import sqlite3
import struct
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from interp.training import checkpoints, fast_train, progress, trainer
from interp.sweeps import store, driver as sweeps, workers
from interp.training.trainer import TrainConfig
from sweeps.test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)


def _group(**kw) -> list[TrainConfig]:
    base = dict(case=5, n=5, d_token=4, pos_embed="learned", n_layers=2, d_mlp=8, max_steps=12,
                batch_size=32, eval_batches=1, curve_every=3, stop_loss=0.0)
    base.update(kw)
    return [TrainConfig(seed=s, **base) for s in (0, 1)]


class Stop(Exception):
    pass


def _stopped(configs, path: Path, after: int = 7) -> None:
    """Train with a save after every step and stop the process's work in step ``after``."""
    real, calls = fast_train.Ensemble.step, []

    def step_then_stop(self):
        calls.append(self.t)
        if len(calls) == after:
            raise Stop
        real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", step_then_stop)
        with pytest.raises(Stop):
            fast_train.train_ensemble(configs, progress=path, every=0.0)
    assert path.is_file()


def _resumed(configs, path: Path) -> tuple[list, list[int]]:
    """train_ensemble from ``path``; its results and the step counter at each step call."""
    real, seen = fast_train.Ensemble.step, []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", lambda self: (seen.append(self.t), real(self)))
        results = fast_train.train_ensemble(configs, progress=path, every=0.0)
    return results, seen


def _same_results(a: list, b: list) -> None:
    for x, y in zip(a, b, strict=True):
        assert (x.curve, x.steps, x.final_loss, x.accuracy, x.status) == \
               (y.curve, y.steps, y.final_loss, y.accuracy, y.status)
        for (name, pa), (_, pb) in zip(x.model.named_parameters(), y.model.named_parameters(), strict=True):
            assert torch.equal(pa, pb), name


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _header(path: Path) -> tuple[int, dict]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return 8 + n, json.loads(raw[8 : 8 + n])


def _read(path: Path) -> tuple[dict, dict]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())


def _sign(tensors: dict, meta_json: str) -> str:
    """The documented progress checksum, computed here independently of the module."""
    h = hashlib.sha256()
    for piece in [b for name in sorted(tensors) for b in (
            name.encode(), str(tensors[name].dtype).encode(),
            json.dumps(list(tensors[name].shape)).encode(),
            tensors[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())] + [meta_json.encode()]:
        h.update(len(piece).to_bytes(8, "little"))
        h.update(piece)
    return h.hexdigest()


def _rewrite(path: Path, edit_meta=None, edit_tensors=None, *, sign: bool) -> None:
    """Rewrite a progress file with edited metadata/tensors; ``sign``: with a matching
    checksum (a consistent file that still does not fit), else keeping the old one (a hand
    edit)."""
    tensors, header = _read(path)
    meta = json.loads(header["interp_progress"])
    if edit_meta:
        edit_meta(meta)
    if edit_tensors:
        edit_tensors(tensors)
    header["interp_progress"] = json.dumps(meta)
    if sign:
        header["interp_progress_sha256"] = _sign(tensors, header["interp_progress"])
    save_file(tensors, str(path), metadata=header)


# ------------------------------------------------------------------ files that lie


def test_a_flipped_byte_in_a_progress_file_restarts_the_group_from_zero(tmp_path, caplog):
    configs = _group()
    straight = fast_train.train_ensemble(configs)
    path = tmp_path / "g.safetensors"
    _stopped(configs, path)
    start, header = _header(path)
    begin, end = header["model.0.embed.W_E"]["data_offsets"]
    raw = bytearray(path.read_bytes())
    raw[start + begin + 3] ^= 0x01  # the top byte of the first float: another weight, still finite
    path.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="interp.training.progress"):
        resumed, seen = _resumed(configs, path)
    assert seen[0] == 0, "the damaged file was resumed"
    lines = [w for w in _warnings(caplog) if "not used" in w]
    assert len(lines) == 1 and str(path) in lines[0] and "sha256" in lines[0]
    assert (tmp_path / "g.safetensors.bad").is_file()
    _same_results(straight, resumed)


@pytest.mark.parametrize("edit", [
    lambda m: m.update(t=3990),  # the step counter out of range
    lambda m: m.update(active=m["active"][:1]),  # a live seed dropped
    lambda m: m.update(steps=[s + 2 for s in m["steps"]], t=m["t"] + 2),  # steps moved on
], ids=["t", "active", "steps"])
def test_edited_progress_metadata_restarts_the_group_from_zero(tmp_path, caplog, edit):
    configs = _group()
    straight = fast_train.train_ensemble(configs)
    path = tmp_path / "g.safetensors"
    _stopped(configs, path)
    _rewrite(path, edit, sign=False)  # a hand edit: the checksum is the old one
    with caplog.at_level(logging.WARNING, logger="interp.training.progress"):
        resumed, seen = _resumed(configs, path)
    assert seen[0] == 0, "the edited file was resumed"
    assert len([w for w in _warnings(caplog) if "not used" in w and str(path) in w]) == 1
    _same_results(straight, resumed)


def _nan_weight(tensors):
    tensors["model.1.blocks.0.attn.W_Q"] = tensors["model.1.blocks.0.attn.W_Q"].clone()
    tensors["model.1.blocks.0.attn.W_Q"].view(-1)[2] = math.nan


@pytest.mark.parametrize("meta_edit, tensor_edit, reason", [
    (lambda m: m.update(t=3990), None, "step counter"),
    (lambda m: m.update(t=-1), None, "step counter"),
    (lambda m: m.update(t=5.5), None, "step counter"),
    (lambda m: m.update(active=[0]), None, "live"),
    (lambda m: m.update(active=[1, 1]), None, "live seeds"),
    (lambda m: m.update(active=[0, 7]), None, "live seeds"),
    (lambda m: m.update(steps=[m["t"], m["t"] + 1]), None, "steps"),
    (lambda m: m.update(steps=[m["t"], m["t"] - 1]), None, "live"),
    (lambda m: m.update(configs=m["configs"][:1]), None, "1 seeds"),
    (lambda m: m.update(status=["ok"]), None, "status"),
    (lambda m: m.update(curves=[[[1, 2.0]], "x"]), None, "curve"),
    (lambda m: m.update(wall=-3.0), None, "wall"),
    (lambda m: m.update(cpu=math.inf), None, "cpu"),
    (None, _nan_weight, "non-finite"),
    (None, lambda t: t.update({"model.0.unembed.W_U": torch.zeros(2, 2)}), "shape"),
    (None, lambda t: t.update({"adam.0.step": t["adam.0.step"] + 1}), "steps"),
    (None, lambda t: t.update({"generator.1": t["generator.1"][:100]}), "generator"),
    (None, lambda t: t.update({"extra": torch.zeros(1)}), "extra"),
    (None, lambda t: t.pop("model.1.embed.W_E"), "missing"),
])
def test_a_consistent_file_that_does_not_fit_the_group_is_set_aside(
        tmp_path, caplog, meta_edit, tensor_edit, reason):
    """Checksum right, content wrong (a bug, or a careful edit): the metadata and tensor checks
    refuse it before any parameter changes."""
    configs = _group(max_steps=6)
    ens = fast_train.Ensemble(configs)
    for _ in range(3):
        ens.step()
    path = tmp_path / "g.safetensors"
    progress.save(ens, path)
    _rewrite(path, meta_edit, tensor_edit, sign=True)
    fresh = fast_train.Ensemble(configs)
    before = [p.clone() for m in fresh.models for p in m.parameters()]
    with caplog.at_level(logging.WARNING, logger="interp.training.progress"):
        assert not progress.resume(fresh, path)
    assert fresh.t == 0 and fresh.steps == [0, 0] and fresh.active == [0, 1]
    after = [p for m in fresh.models for p in m.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    lines = _warnings(caplog)
    assert len(lines) == 1 and str(path) in lines[0] and reason in lines[0], lines
    assert not path.exists() and (tmp_path / "g.safetensors.bad").is_file()


def test_a_file_without_a_checksum_is_not_trusted(tmp_path, caplog):
    """A file written before checksums existed: its weights cannot be verified, so it is not
    resumed (the group trains from 0) rather than trusted on its metadata alone."""
    configs = _group(max_steps=6)
    ens = fast_train.Ensemble(configs)
    ens.step()
    path = tmp_path / "g.safetensors"
    progress.save(ens, path)
    tensors, header = _read(path)
    save_file(tensors, str(path), metadata={"interp_progress": header["interp_progress"]})
    with caplog.at_level(logging.WARNING, logger="interp.training.progress"):
        assert not progress.resume(fast_train.Ensemble(configs), path)
    assert "checksum" in caplog.text and str(path) in caplog.text


def test_a_bad_file_that_cannot_be_moved_aside_still_starts_at_zero(tmp_path, caplog, monkeypatch):
    configs = _group(max_steps=6)
    path = tmp_path / "g.safetensors"
    path.write_bytes(b"garbage")
    real = progress.os.replace

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(dst))

    monkeypatch.setattr(progress.os, "replace", refuse)
    ens = fast_train.Ensemble(configs)
    with caplog.at_level(logging.WARNING, logger="interp.training.progress"):
        assert not progress.resume(ens, path)
    monkeypatch.setattr(progress.os, "replace", real)
    assert ens.t == 0 and len(_warnings(caplog)) == 1 and "could not be moved" in caplog.text


# ------------------------------------------------------------------ saves that fail

TWO_GROUPS = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=5, n=5, d_token=4, pos_embed="learned", n_layers=1, seed=s,
                       max_steps=m, stop_loss=0.0, batch_size=32, eval_batches=1, curve_every=5)
           for m in (12, 15) for s in (0, 1)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="two")
"""

COMPARED = ("accuracy", "steps", "final_loss", "curve", "status", "seed", "config")


def _rows(store_path: Path, where: str = "1") -> dict:
    """Each run's numbers and its weights' sha256."""
    with sqlite3.connect(store_path) as db:
        db.row_factory = sqlite3.Row
        return {r["name"]: {**{k: r[k] for k in COMPARED},
                            "weights": json.loads(r["checksums"])["model.safetensors"]}
                for r in db.execute(f"SELECT * FROM runs WHERE {where}")}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict:
    """The two-group sweep run without progress saving: the reference rows."""
    root = tmp_path_factory.mktemp("straight")
    path = root / "s" / "store.sqlite"
    sweeps.run_sweep(sweeps.load(make_sweep(root, TWO_GROUPS, "two")), store=path, save_every=None)
    rows = _rows(path)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows.values())
    return rows


def _save_warnings(caplog) -> list[str]:
    return [w for w in _warnings(caplog) if "could not save progress" in w]


def test_a_save_that_fails_with_a_full_disk_does_not_fail_the_run(tmp_path, caplog, monkeypatch, straight):
    tries = []

    def full(ens, path):
        tries.append(path)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(progress, "save", full)
    path = tmp_path / "s" / "store.sqlite"
    with caplog.at_level(logging.WARNING):
        summary = sweeps.run_sweep(sweeps.load(make_sweep(tmp_path, TWO_GROUPS, "two")), store=path,
                                   save_every=1e-9)
    assert summary.failed == 0 and _rows(path) == straight
    lines = _save_warnings(caplog)
    assert len(lines) == 2, lines  # one per group, though every step tried to save
    assert len(tries) > 10 and all("No space left" in w and ".safetensors" in w for w in lines)


@pytest.mark.parametrize("when", ["before", "during"])
def test_progress_replaced_by_a_file_does_not_fail_the_run(tmp_path, caplog, straight, when):
    path = tmp_path / "s" / "store.sqlite"
    saves = progress.folder(path)
    saves.parent.mkdir(parents=True)
    if when == "before":
        saves.write_text("not a folder")
    real, calls = fast_train.Ensemble.step, []

    def step(self):
        calls.append(self.t)
        if when == "during" and len(calls) == 5:  # the first group has saved 4 times by now
            for p in saves.iterdir():
                p.unlink()
            saves.rmdir()
            saves.write_text("not a folder")
        real(self)

    with caplog.at_level(logging.WARNING), pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", step)
        summary = sweeps.run_sweep(sweeps.load(make_sweep(tmp_path, TWO_GROUPS, "two")), store=path,
                                   save_every=1e-9)
    assert summary.failed == 0 and _rows(path) == straight
    lines = _save_warnings(caplog)
    assert len(lines) == 2 and all(str(saves) in w for w in lines), lines
    assert saves.read_text() == "not a folder"  # not ours to remove


def test_a_checkpoint_that_cannot_be_written_makes_the_group_lost_not_failed(monkeypatch):
    configs = _group(max_steps=3)

    def full(*args, **kwargs):
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(checkpoints, "save", full)
    records = workers.train_records([c.to_dict() for c in configs], "s")
    assert [r.name for r in records] == [c.name() for c in configs]
    assert all(r.status.startswith("lost: ") and "File too large" in r.status for r in records)
    assert all(r.accuracy is None and r.steps is None and not r.files for r in records)


def test_a_group_whose_checkpoint_cannot_be_written_is_trained_by_a_plain_rerun(tmp_path, monkeypatch, straight):
    """End to end with the driver's side of the "lost" contract: the lost group is not stored,
    the other one is, and a plain rerun (no --retry-failed) gives the uninterrupted sweep's rows."""
    sweep = sweeps.load(make_sweep(tmp_path, TWO_GROUPS, "two"))
    first = {c.name() for c in sweeps.group_by_seed(sweep.configs)[0]}
    real = checkpoints.save

    def full_for_the_first_group(result, path, *args, **kwargs):
        if result.config.name() in first:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(result, path, *args, **kwargs)

    path = tmp_path / "s" / "store.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoints, "save", full_for_the_first_group)
        summary = sweeps.run_sweep(sweep, store=path, save_every=None)
    assert (summary.trained, summary.failed, summary.lost) == (2, 0, 2)
    assert set(_rows(path)) == set(straight) - first
    again = sweeps.run_sweep(sweep, store=path, save_every=None)
    assert again.trained == 2 and _rows(path) == straight


def test_a_training_error_still_fails_the_group_and_an_os_error_loses_it(monkeypatch):
    configs = _group(max_steps=3)
    dicts = [c.to_dict() for c in configs]

    def raising(error):
        def train_group(*args, **kwargs):
            raise error
        return train_group

    monkeypatch.setattr(trainer, "train_group", raising(ValueError("shapes do not fit")))
    assert {r.status for r in workers.train_records(dicts, "s")} == {"failed: ValueError: shapes do not fit"}
    monkeypatch.setattr(trainer, "train_group", raising(PermissionError(errno.EACCES, "Permission denied")))
    assert all(r.status.startswith("lost: PermissionError") for r in workers.train_records(dicts, "s"))


# ------------------------------------------------------------------ older stores

OLD_ENVIRONMENTAL = [  # statuses an older interp stored when saving progress failed
    "failed: OSError: [Errno 27] File too large",
    "failed: SafetensorError: Error while serializing: I/O error: File too large (os error 27)",
    "failed: FileNotFoundError: [Errno 2] No such file or directory: '/s/progress/.a.tmp-1' -> '/s/progress/a'",
    'failed: SafetensorError: Error while serializing: I/O error: Not a directory (os error 20) at path "/s/progress/.tmp1"',
    "failed: FileExistsError: [Errno 17] File exists: '/s/progress'",
    "lost: worker process 123 killed by SIGKILL",
]
TRAINING_FAILURES = [
    "failed: non-finite loss (nan) at step 26",
    "failed: ValueError: the fast path cannot compute this model: n_heads=2",
    "failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied",
]


@pytest.mark.parametrize("status", OLD_ENVIRONMENTAL)
def test_plan_retrains_a_run_that_failed_for_the_machine(status):
    configs = _group()
    done = {configs[0].name(): status, configs[1].name(): "ok"}
    assert sweeps.plan(configs, done) == [[configs[0]]]


@pytest.mark.parametrize("status", TRAINING_FAILURES)
def test_plan_keeps_a_run_that_failed_in_training(status):
    configs = _group()
    done = {configs[0].name(): status, configs[1].name(): "ok"}
    assert sweeps.plan(configs, done) == []
    assert sweeps.plan(configs, done, retry_failed=True) == [[configs[0]]]


def test_a_plain_rerun_retrains_an_old_stores_environmental_failures(tmp_path, caplog, straight):
    """An older store: the first group failed while saving progress (file-size limit), the
    second has one run that failed in training. A plain rerun trains the first group (its
    rows then equal an uninterrupted sweep's) and leaves the training failure alone."""
    sweep = sweeps.load(make_sweep(tmp_path, TWO_GROUPS, "two"))
    groups = sweeps.group_by_seed(sweep.configs)
    path = tmp_path / "s" / "store.sqlite"
    path.parent.mkdir()
    with store.Store(path) as db:
        for c in groups[0]:
            db.put(store.RunRecord(name=c.name(), sweep="two", config=c.to_dict(), seed=c.seed,
                                   status="failed: OSError: [Errno 27] File too large"))
        db.put(store.RunRecord(name=groups[1][0].name(), sweep="two", config=groups[1][0].to_dict(),
                               seed=0, status="failed: non-finite loss (nan) at step 3"))
    with caplog.at_level(logging.WARNING):
        summary = sweeps.run_sweep(sweep, store=path, save_every=None)
    assert summary.trained == 3 and summary.failed == 0
    with sqlite3.connect(path) as db:
        statuses = dict(db.execute("SELECT name, status FROM runs"))
    assert statuses[groups[1][0].name()] == "failed: non-finite loss (nan) at step 3"
    for c in [*groups[0], groups[1][1]]:
        assert statuses[c.name()] == "ok"
    got = _rows(path, "status = 'ok'")  # the training failure has no checkpoint
    assert got == {k: v for k, v in straight.items() if k != groups[1][0].name()}
    assert any("trained again" in w and "File too large" in w for w in _warnings(caplog))
