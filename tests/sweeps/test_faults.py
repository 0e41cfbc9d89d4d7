"""Faults end in one line naming the path, what happened and what to do (exit 2, no traceback),
and never lose a committed run: a locked store, a read-only store or folder, a full disk,
permission errors. "Locked", "read-only" and "corrupt" are different messages.
"""

from __future__ import annotations

import errno
import resource
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from interp import cli
from interp.sweeps import store, driver as sweeps
from test_sweeps import make_sweep  # tests/training is on sys.path (pytest's rootdir-based import)

COMPARED = ["accuracy", "steps", "final_loss", "status", "seed"]


def _sweep_cli(folder: Path, store_path: Path, *args, limit_bytes: int | None = None):
    """`python -m interp sweep` in a subprocess, optionally under a file-size limit (a full
    disk, as the process sees it: writes past the limit fail with EFBIG)."""

    def limit():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    cmd = [sys.executable, "-m", "interp", "sweep", str(folder), "--store", str(store_path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit, timeout=600)


def _one_line_error(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"interp {command}: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_locked_store_is_called_locked_not_corrupt(tmp_path, capsys):
    folder = make_sweep(tmp_path)
    path = tmp_path / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path), "--limit", "2"]) == 0
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # another process in the middle of a write
    try:
        capsys.readouterr()
        assert cli.main(["report", str(folder), "--store", str(path), "--out", str(tmp_path / "r")]) == 2
        line = _one_line_error(capsys.readouterr().err, "report")
        assert "is locked by another process" in line and str(path) in line and "not a results store" not in line
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.verify(path, files=True)["verified"] == 2  # nothing lost


def test_the_messages_differ_for_locked_read_only_full_and_corrupt():
    path = Path("s.sqlite")
    said = {
        "locked": store.sqlite_problem(path, sqlite3.OperationalError("database is locked")),
        "read-only": store.sqlite_problem(path, sqlite3.OperationalError("attempt to write a readonly database")),
        "full": store.sqlite_problem(path, sqlite3.OperationalError("database or disk is full")),
        "corrupt": store.sqlite_problem(path, sqlite3.DatabaseError("file is not a database")),
    }
    assert len(set(said.values())) == 4
    assert "locked" in said["locked"] and "read-only" in said["read-only"]
    assert "disk is full" in said["full"] and "not a results store" in said["corrupt"]
    assert all("not a results store" not in said[k] for k in ("locked", "read-only", "full"))


def test_os_errors_name_the_path_and_what_to_do(tmp_path, monkeypatch, capsys):
    """Permission denied while placing a checkpoint (as a non-root user would get in a folder
    it cannot write): one line with the path, the committed runs kept, the rerun completes."""
    folder = make_sweep(tmp_path)
    path = tmp_path / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path), "--limit", "2"]) == 0
    real = store.place_checkpoint

    def denied(files, target):
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr(store, "place_checkpoint", denied)
    capsys.readouterr()
    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 2
    line = _one_line_error(capsys.readouterr().err, "sweep")
    assert "permission denied" in line and str(tmp_path / "checkpoints") in line
    assert store.verify(path, files=True)["verified"] == 2  # the two committed runs are intact
    monkeypatch.setattr(store, "place_checkpoint", real)
    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 0
    assert store.verify(path, files=True)["verified"] == len(sweeps.load(folder).configs)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The store of `interp sweep` on test_sweeps.TINY, never limited (a subprocess, as the
    faulted sweeps are: the same MKL mode)."""
    folder = make_sweep(tmp_path_factory.mktemp("ref"))
    reference = _sweep_cli(folder, folder.parent / "ref" / "store.sqlite")
    assert reference.returncode == 0, reference.stderr[-2000:]
    return folder.parent / "ref" / "store.sqlite"


@pytest.mark.parametrize("limit_kib", [12, 16])
def test_a_full_disk_leaves_the_store_valid_and_resumable(tmp_path, limit_kib, uninterrupted):
    """`interp sweep` under a file-size limit fails partway with one line; the store it leaves
    verifies (rows and checkpoint files); rerun without the limit, it equals an uninterrupted
    sweep's store run for run (same numbers, same weights)."""
    folder = make_sweep(tmp_path)
    full = _sweep_cli(folder, tmp_path / "full" / "store.sqlite", limit_bytes=limit_kib * 1024)
    assert full.returncode == 2, full.stderr[-2000:]
    line = _one_line_error(full.stderr, "sweep")
    assert "no space left" in line or "disk is full" in line, line
    assert str(tmp_path / "full") in line, line  # the line names the path (the store or a file beside it)
    kept = store.verify(tmp_path / "full" / "store.sqlite", files=True) if (tmp_path / "full" / "store.sqlite").is_file() else {}
    resumed = _sweep_cli(folder, tmp_path / "full" / "store.sqlite")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a = store.read(tmp_path / "full" / "store.sqlite").set_index("name").sort_index()
    b = store.read(uninterrupted).set_index("name").sort_index()
    assert list(a.index) == list(b.index) and a[COMPARED].equals(b[COMPARED])
    weights = lambda df: [c["model.safetensors"] for c in df["checksums"]]  # noqa: E731
    assert weights(a) == weights(b)
    assert kept.get("verified", 0) < len(a)  # the limit really cut the first sweep short


def _mount_read_only(src: Path, dst: Path) -> bool:
    dst.mkdir()
    ok = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True).returncode == 0
    ok = ok and subprocess.run(["mount", "-o", "remount,ro,bind", str(dst)], capture_output=True).returncode == 0
    if not ok:
        subprocess.run(["umount", str(dst)], capture_output=True)
    return ok


def test_a_read_only_store_and_folder_are_called_read_only(tmp_path, capsys):
    """A healthy store on a read-only mount: `interp sweep` says read-only (not corrupt) and
    `interp report` into that folder says so too; the store is untouched."""
    folder = make_sweep(tmp_path)
    data = tmp_path / "data"
    path = data / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path), "--limit", "2"]) == 0
    ro = tmp_path / "ro"
    if not _mount_read_only(data, ro):
        pytest.skip("no bind mounts here (needs root in a namespace that allows mount)")
    try:
        before = path.read_bytes()
        capsys.readouterr()
        assert cli.main(["sweep", str(folder), "--store", str(ro / "store.sqlite")]) == 2
        line = _one_line_error(capsys.readouterr().err, "sweep")
        assert "read-only" in line and "not a results store" not in line, line
        assert cli.main(["report", str(folder), "--store", str(ro / "store.sqlite"), "--out", str(ro)]) == 2
        line = _one_line_error(capsys.readouterr().err, "report")
        assert "read-only" in line and str(ro) in line, line
        assert path.read_bytes() == before
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
    shutil.rmtree(ro, ignore_errors=True)
