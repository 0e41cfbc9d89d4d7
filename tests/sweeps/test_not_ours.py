"""Nothing overwrites what it did not write (issue 43): ``interp store rows A B`` replaces B only
when B is an earlier rows-only copy of A; a ``--store`` given as a symbolic link is followed once,
by the driver and the readers alike.

Every refusal is checked end to end through ``interp.cli.main``: exit 2, one line naming the
path, the file's bytes unchanged.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from interp import cli
from interp.sweeps import driver as sweeps
from interp.sweeps import store
from test_sweeps import make_sweep  # tests/sweeps is on sys.path (pytest rootdir conftest)


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    """Two stores of the same tiny sweep folder's configs (each trained apart: 2 runs here, 4
    there), and a third sweep's store under another name."""
    root = tmp_path_factory.mktemp("two")
    a = sweeps.load(make_sweep(root / "a"))
    sweeps.run_sweep(a, limit=2)
    b = sweeps.load(make_sweep(root / "b"))
    sweeps.run_sweep(b)
    return root, a.default_store, b.default_store


def _rows(argv, capsys) -> tuple[int, list[str]]:
    code = cli.main(["store", "rows", *map(str, argv)])
    return code, capsys.readouterr().err.strip().splitlines()


def test_store_rows_refuses_a_destination_that_is_not_an_earlier_copy(two_sweeps, tmp_path, capsys):
    root, a, b = two_sweeps
    text = tmp_path / "notes.txt"
    text.write_text("the user's notes\n")
    foreign = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(foreign)) as db, db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('keep me')")
    b_rows = tmp_path / "b-rows.sqlite"
    assert _rows([b, b_rows], capsys)[0] == 0  # a rows-only copy of the OTHER store
    for dest, why in ((b, "checkpoints"), (text, "not an SQLite file"), (foreign, "another program"),
                      (b_rows, "is not a run of that store")):
        before = dest.read_bytes()
        code, err = _rows([a, dest], capsys)
        assert code == 2 and len(err) == 1, err
        assert f"dest {dest} exists and is not an earlier" in err[0] and why in err[0], err
        assert dest.read_bytes() == before
    assert len(store.read(b)) == 4 and store.verify(b, files=True)["verified"] == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_store_rows_replaces_an_earlier_copy_of_the_same_store(two_sweeps, tmp_path, capsys):
    root, a, _ = two_sweeps
    src = tmp_path / "copy" / "store.sqlite"  # a copy of A's folder, to grow
    shutil.copytree(a.parent, src.parent, ignore=shutil.ignore_patterns("*.lock"))
    dest = tmp_path / "rows.sqlite"
    assert _rows([a, dest], capsys)[0] == 0
    assert _rows([a, dest], capsys)[0] == 0  # the same copy again
    assert len(store.read(dest)) == 2
    # a store that gained a run since: the earlier copy is replaced, the new run in
    sw = sweeps.load(a.parent.parent)
    sweeps.run_sweep(sw, store=src, limit=1)
    assert _rows([src, dest], capsys)[0] == 0 and len(store.read(dest)) == 3
    # the other way round: the newer copy is not an earlier copy of the older store
    code, err = _rows([a, dest], capsys)
    assert code == 2 and "not a run of that store" in err[0]
    # a user's file named like SQLite's temporary name is not touched
    (tmp_path / "rows.sqlite.tmp").write_text("mine")
    assert _rows([src, dest], capsys)[0] == 0 and (tmp_path / "rows.sqlite.tmp").read_text() == "mine"


def test_a_store_given_through_a_symlink_is_its_real_file_for_driver_and_readers(tmp_path, capsys):
    """``--store LINK``: the driver resolves the link once (lock, store, checkpoints and progress
    in the real folder); a driver through the link and one through the real path see the same
    runs and no run trains twice; readers find every checkpoint."""
    folder = make_sweep(tmp_path)
    real = tmp_path / "real" / "store.sqlite"
    real.parent.mkdir()
    links = tmp_path / "links"
    links.mkdir()
    link = links / "store.sqlite"
    link.symlink_to(real)
    assert cli.main(["sweep", str(folder), "--store", str(link), "--limit", "2"]) == 0
    assert link.is_symlink() and real.is_file()
    assert not (links / "checkpoints").exists() and (real.parent / "checkpoints").is_dir()
    assert cli.main(["store", "verify", str(link)]) == 0
    capsys.readouterr()
    summary = sweeps.run_sweep(sweeps.load(folder), store=real)  # the real path: 2 left
    assert (summary.trained, summary.skipped) == (2, 2)
    summary = sweeps.run_sweep(sweeps.load(folder), store=link)  # the link again: nothing left
    assert (summary.trained, summary.skipped) == (0, 4) and summary.store == real
    df = store.read(link)
    assert len(df) == 4 and all(Path(p).parent == real.parent / "checkpoints" for p in df["checkpoint"])
    assert store.verify(link, files=True)["files"] == 8
    with closing(sqlite3.connect(real)) as db:
        assert sum(n for (n,) in db.execute("SELECT runs_done FROM sweeps")) == 4  # none trained twice
    # the lock is the real folder's: a driver through the link while one holds the real path
    with store.DriverLock(real):
        with pytest.raises(ValueError, match="another driver"):
            sweeps.run_sweep(sweeps.load(folder), store=link)


def test_an_overlong_store_or_dest_is_refused_before_any_work(two_sweeps, tmp_path, capsys):
    """A store path SQLite could not open (over 503 bytes with its journal) or a name over the
    file system's limit: one line naming it, before anything is written or trained."""
    root, a, _ = two_sweeps
    deep = tmp_path / ("d" * 200) / ("e" * 200) / ("f" * 100) / "store.sqlite"
    for path in (deep, tmp_path / ("s" * 250)):
        code, err = _rows([a, path], capsys)
        assert code == 2 and len(err) == 1 and f"dest {path}: " in err[0] and "accepted: at most" in err[0], err
        assert cli.main(["sweep", str(a.parent.parent), "--store", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--store {path}: " in err[0], err
    assert not (tmp_path / ("d" * 200)).exists()
