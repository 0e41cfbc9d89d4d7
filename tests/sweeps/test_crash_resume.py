"""Crash-resume: `interp sweep` killed with SIGKILL mid-run (driver and pool workers at once)
resumes to the store an uninterrupted sweep writes.

The sweep runs in a subprocess (`python -m interp sweep DIR --workers 2`) in its own session;
the test polls the store read-only until a row is committed, then SIGKILLs the whole process
group (driver, forkserver, pool workers): nothing gets to clean up, and the DriverLock (an
flock) dies with the driver. The resume and the reference run in-process pools (--workers 1),
which give the pool's bits (tests/sweeps/test_sweeps.py). Independent
reference: the same command run uninterrupted into another store (a subprocess too, so that
its MKL mode, set by the CLI before torch starts, is the same; see interp.training.fast_train),
run once for the module (:func:`reference`) and compared with by every test that resumes.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.training import progress
from interp.sweeps import store, driver as sweeps, workers
from test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)

# Two short groups (30 steps) scheduled first, then two long ones (300 steps, no early stop):
# the kill lands while the long groups train.
SWEEP = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

def tiny(case, pe, d_token, steps, seed):
    return TrainConfig(case=case, n=5, d_token=d_token, pos_embed=pe, seed=seed, max_steps=steps,
                       stop_loss=0.0, batch_size=64, eval_batches=2, curve_every=10)

CONFIGS = [tiny(case, pe, d, steps, seed)
           for d, steps in [(8, 30), (4, 300)]
           for case, pe in [(1, "learned"), (3, "none")]
           for seed in (0, 1)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="crash")
"""

COMPARED = ("accuracy", "steps", "final_loss", "curve", "status", "seed", "config")


def _rows_committed(path: Path) -> int:
    if not path.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.1) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # no table yet, or the driver holds the write lock
        return 0


def _interp_sweep(folder: Path, *args: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`python -m interp sweep` in its own session (its pool workers share its process group)."""
    cmd = [sys.executable, "-m", "interp", "sweep", str(folder), "--threads", "1", *args]
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=stderr,
                            text=True)


def _wait_for(done, proc: subprocess.Popen, err: Path, what: str, timeout: float = 300) -> None:
    """Poll ``done()`` while the sweep runs; fail with its stderr if it exits, or on timeout."""
    deadline = time.monotonic() + timeout
    while not done():
        assert proc.poll() is None, err.read_text()[-2000:]
        assert time.monotonic() < deadline, f"{what} in {timeout:.0f} s"
        time.sleep(0.05)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _to_completion(proc: subprocess.Popen, timeout: float = 300) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)  # never leave workers behind, even on a timeout
    assert proc.returncode == 0, err[-2000:]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The rows of SWEEP run uninterrupted (`interp sweep --workers 1`), indexed by name."""
    folder = make_sweep(tmp_path_factory.mktemp("ref"), SWEEP, name="crash")
    ref_store = folder.parent / "ref" / "store.sqlite"
    _to_completion(_interp_sweep(folder, "--workers", "1", "--store", str(ref_store)))
    return store.read(ref_store).set_index("name").sort_index()


def _equals_reference(final, ref) -> None:
    """``final`` holds the reference's runs with the same numbers, curves and weights."""
    final = final.sort_index()
    assert list(final.index) == list(ref.index)
    for col in COMPARED:
        assert list(final[col]) == list(ref[col]), col
    assert [s["model.safetensors"] for s in final["checksums"]] == [
        s["model.safetensors"] for s in ref["checksums"]]


def test_sigkilled_sweep_resumes_to_the_uninterrupted_store(tmp_path, reference):
    """Killed once 3 rows are in: the first short group stored whole, the second (one
    transaction per row) stored in part or whole, the long groups training. (A kill after the
    first row went the same way: one case of a kill between commits is enough.)"""
    kill_after = 3
    folder = make_sweep(tmp_path, SWEEP, name="crash")
    sw = sweeps.load(folder)
    path = sw.default_store
    queue = sorted(sweeps.plan(sw.configs, {}), key=workers.cost, reverse=True)
    assert [g[0].max_steps for g in queue] == [30, 30, 300, 300]  # short groups go first

    with open(tmp_path / "killed.err", "w") as err:  # a file: nobody reads a pipe meanwhile
        proc = _interp_sweep(folder, "--workers", "2", stderr=err)
        try:
            _wait_for(lambda: _rows_committed(path) >= kill_after, proc, tmp_path / "killed.err",
                      "no run finished")
        finally:
            _kill_group(proc)  # SIGKILL to the driver and its pool workers: no clean-up at all
    assert proc.returncode == -signal.SIGKILL

    killed = store.read(path).set_index("name")
    assert kill_after <= len(killed) < len(sw.configs)  # killed mid-sweep, after a commit
    assert set(killed["status"]) == {"ok"}
    log = store.read_sweeps(path)
    assert len(log) == 1 and log.iloc[0]["finished_at"] is None  # no chance to record an end

    out = _to_completion(_interp_sweep(folder, "--workers", "1"))  # the lock died with the driver
    missing = len(sw.configs) - len(killed)
    assert f"{len(killed)} already stored, {missing} trained now (0 failed)" in out

    final = store.read(path).set_index("name")
    assert sorted(final.index) == sorted(c.name() for c in sw.configs)  # one row each
    for name in killed.index:  # finished runs kept as they were, not retrained
        assert final.loc[name, "finished_at"] == killed.loc[name, "finished_at"]
        assert final.loc[name, "checksums"] == killed.loc[name, "checksums"]
    log = store.read_sweeps(path)
    assert list(log["runs_done"]) == [0, missing] and log.iloc[1]["outcome"] == "done"
    assert store.verify(path, files=True) == {"verified": len(sw.configs), "unverified": 0,
                                              "files": 2 * len(sw.configs)}
    ckpts = sorted(p.name for p in (path.parent / "checkpoints").iterdir())
    assert ckpts == sorted(final.index)  # no stray partial (.tmp/.old) or orphan folders
    _equals_reference(final, reference)  # the same command, never killed


def test_sigkilled_sweep_goes_on_from_its_progress_files(tmp_path, reference):
    """Killed while a long group trains with progress saving on (every 0.05 s, so the kill can
    land mid-save): the next sweep resumes that group from its file, and the store ends equal
    to the uninterrupted sweep's, weights included."""
    folder = make_sweep(tmp_path, SWEEP, name="crash")
    sw = sweeps.load(folder)
    path = sw.default_store
    saves = progress.folder(path)
    long = {progress.group_id([c.name() for c in g]) for g in sweeps.group_by_seed(sw.configs)
            if g[0].max_steps == 300}
    with open(tmp_path / "killed.err", "w") as err:
        proc = _interp_sweep(folder, "--workers", "2", "--save-every", "0.05", stderr=err)
        try:
            # a long group's file: a short group's may be gone (committed) by the kill
            _wait_for(lambda: saves.is_dir() and any((saves / f"{i}.safetensors").exists() for i in long),
                      proc, tmp_path / "killed.err", "no progress file of a long group")
            time.sleep(0.15)  # a few more saves, one may be under way
        finally:
            _kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    ids = sorted(p.stem for p in saves.glob("*.safetensors"))
    assert ids
    # a group whose rows were committed just before the kill, its file not yet deleted, is
    # done: the next sweep deletes that file instead of resuming it
    stored = set(store.read(path)["name"])
    done = {progress.group_id([c.name() for c in g])
            for g in sweeps.group_by_seed(sweeps.load(folder).configs)
            if all(c.name() in stored for c in g)}
    ids = [i for i in ids if i not in done]
    resumed = subprocess.run([sys.executable, "-m", "interp", "sweep", str(folder), "--threads", "1",
                              "--workers", "1", "--save-every", "0.05"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    for group in ids:  # each saved group went on from its file, not from step 0
        assert re.search(rf"resumed group {group} at step [1-9]", resumed.stderr), resumed.stderr[-2000:]
    assert list(saves.iterdir()) == []  # resumed groups' files deleted, stray temporaries gone
    _equals_reference(store.read(path).set_index("name"), reference)


def test_sigterm_stops_the_sweep_and_its_workers(tmp_path):
    """SIGTERM to the driver alone (what `timeout` and job schedulers send) ends it like Ctrl-C:
    exit 130, the invocation logged as interrupted, and no pool worker left training."""
    folder = make_sweep(tmp_path, SWEEP, name="crash")
    path = sweeps.load(folder).default_store
    with open(tmp_path / "term.err", "w") as err:
        proc = _interp_sweep(folder, "--workers", "2", stderr=err)
        try:
            _wait_for(lambda: _rows_committed(path) >= 1, proc, tmp_path / "term.err",
                      "no run finished")  # the pool is up and training
            proc.send_signal(signal.SIGTERM)  # the driver only, not its process group
            assert proc.wait(timeout=60) == 130, (tmp_path / "term.err").read_text()[-2000:]
            deadline = time.monotonic() + 30
            while True:  # the workers (same process group) are gone
                try:
                    os.killpg(proc.pid, 0)
                except ProcessLookupError:
                    break
                assert time.monotonic() < deadline, "pool workers outlived the driver"
                time.sleep(0.1)
        finally:
            _kill_group(proc)
    log = store.read_sweeps(path)
    assert list(log["outcome"]) == ["interrupted: KeyboardInterrupt"]
