"""What a store is and who writes it: the driver lock survives its file's deletion, files that
are not ours (or are newer) are refused by every command before a byte is written, and a row
whose checksum was removed is an edit, not an older row.

References: file bytes before and after, SQLite's header read as bytes (the application id is
the ASCII "intp" at offset 68), a second process holding the lock, and hand-edited rows.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from interp import cli
from interp.sweeps import store, driver as sweeps
from interp.training import trainer as training
from interp.sweeps.store import RunRecord, Store

REPO = Path(__file__).resolve().parents[2]

TINY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=3, n=5, d_token=4, seed=seed, max_steps=20, batch_size=32,
                       eval_batches=1, curve_every=10) for seed in (0, 1, 2)]
LAYOUT = TableLayout(rows=("case",), column="d_token", paper={"case": "case", "d_token": "d_token"},
                     title="tiny")
"""


def make_sweep(root: Path) -> Path:
    folder = root / "tiny"
    folder.mkdir(parents=True)
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    shutil.copy(REPO / "experiments" / "table1" / "paper.csv", folder / "paper.csv")
    return folder


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if anything trains: every refusal here comes before work."""

    def refuse(*a, **kw):
        raise AssertionError("trained although the store was refused")

    monkeypatch.setattr(training, "train_group", refuse)


def record(name: str, seed: int = 0, accuracy: float = 0.5) -> RunRecord:
    config = dict(case=3, n=5, d_token=4, seed=seed)
    return RunRecord(name=name, sweep="tiny", config=config, seed=seed, status="ok",
                     accuracy=accuracy, steps=20, final_loss=0.3, seconds=1.0, curve=[(1, 2.0)])


def one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(n in err for n in needles), err
    return err


# --------------------------------------------------------------------------- the lock

HOLD = """
import sys
from interp.sweeps.store import DriverLock
with DriverLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
    """Start another process that holds the driver lock of a store until told to stop."""
    procs = []

    def start(path: Path) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
        procs.append(p)
        assert p.stdout.readline().strip() == "held"
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
        if not p.stdin.closed:
            p.stdin.close()


def test_deleting_the_lock_file_does_not_let_a_second_driver_in(tmp_path, holder, capsys, no_training):
    folder = make_sweep(tmp_path)
    path = folder / "results" / "store.sqlite"
    first = holder(path)
    lock_file = Path(f"{path}.lock")
    assert lock_file.read_text().strip() == str(first.pid)
    lock_file.unlink()  # what let a second driver run beside the first
    with pytest.raises(ValueError, match=rf"another driver \(pid .*\) is writing {path}"):
        with store.DriverLock(path):
            pass
    assert cli.main(["sweep", str(folder)]) == 2
    one_line_error(capsys, "another driver", str(path))
    first.stdin.close()  # the holder exits: its lock goes with it
    first.wait()
    with store.DriverLock(path):
        assert lock_file.read_text().strip() == str(os.getpid())
    assert not lock_file.exists()  # removed on a clean exit


def test_a_killed_drivers_lock_is_taken_over_and_its_pid_file_may_be_anything(tmp_path, holder):
    path = tmp_path / "store.sqlite"
    first = holder(path)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    lock_file = Path(f"{path}.lock")
    assert lock_file.read_text().strip() == str(first.pid)  # stale: the dead driver's
    with store.DriverLock(path):
        pass
    for garbage in (b"", b"not a pid\n", b"-1", b"0", b"99999999999999999999", b"\xff\xfe"):
        lock_file.write_bytes(garbage)
        with store.DriverLock(path):
            with pytest.raises(ValueError, match=rf"another driver \(pid {os.getpid()}\) is writing {path}"):
                with store.DriverLock(path):  # the holder rewrote the file with its pid
                    pass


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path, holder):
    path = tmp_path / "store.sqlite"
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock_file = Path(f"{path}.lock")
    lock_file.symlink_to(target)
    with pytest.raises(ValueError, match=rf"{lock_file} is not a plain file .*remove it"):
        with store.DriverLock(path):
            pass
    assert target.read_text() == "keep me\n" and lock_file.is_symlink()
    with pytest.raises(ValueError, match=f"{lock_file} is not a plain file"):  # the driver's way in
        sweeps.run_sweep(sweeps.load(make_sweep(tmp_path)), store=path)
    assert target.read_text() == "keep me\n" and not path.exists()
    lock_file.unlink()
    os.link(target, lock_file)  # a hard link would be truncated just the same
    with pytest.raises(ValueError, match=f"{lock_file} is not a plain file"):
        with store.DriverLock(path):
            pass
    assert target.read_text() == "keep me\n"


def test_one_driver_per_folder_names_the_store_being_written(tmp_path, holder):
    """The stores of a folder share its checkpoints/ and progress/, which a driver cleans."""
    holder(tmp_path / "a.sqlite")
    with pytest.raises(ValueError, match=rf"another driver \(pid \d+\) is writing {tmp_path / 'a.sqlite'}, "
                                         rf"in the folder of {tmp_path / 'b.sqlite'}"):
        with store.DriverLock(tmp_path / "b.sqlite"):
            pass
    with store.DriverLock(tmp_path / "elsewhere" / "b.sqlite"):  # another folder: free
        pass


# --------------------------------------------------------------------------- files that are not ours

FOREIGN = {
    "its own runs table": "CREATE TABLE runs (id INTEGER PRIMARY KEY, cmd TEXT); "
                          "INSERT INTO runs (cmd) VALUES ('make');",
    "no runs table": "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello');",
    "our tables plus one": store._SCHEMA + "CREATE TABLE extra (x);",
    "our tables, another application id": store._SCHEMA + "PRAGMA application_id=1234;",
    "in WAL mode": "PRAGMA journal_mode=WAL; CREATE TABLE runs (name TEXT);",
}


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_another_programs_sqlite_file_is_refused_before_a_byte_is_written(tmp_path, kind, capsys, no_training):
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as raw:
        raw.executescript(FOREIGN[kind])
    raw.close()
    before = path.read_bytes()
    message = rf"{path} is not an interp results store \(another program's SQLite file: .*\); pass another --store"
    with pytest.raises(ValueError, match=message):
        Store(path)
    for read in (store.read, store.read_sweeps, store.verify, store.checkpoint_problems):
        with pytest.raises(ValueError, match=message):
            read(path)
    folder = make_sweep(tmp_path / "sweep")
    listing = sorted(os.listdir(tmp_path))
    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 2
    one_line_error(capsys, str(path), "not an interp results store")
    for command in (["runs", str(path)], ["store", "verify", str(path)],
                    ["report", str(folder), "--store", str(path), "--out", str(tmp_path / "r")]):
        assert cli.main(command) == 2
        one_line_error(capsys, str(path), "not an interp results store")
    assert path.read_bytes() == before  # not a byte written, not even SQLite's change counter
    assert sorted(os.listdir(tmp_path)) == listing  # nor a file beside it (lock, journal, report)


def _future(path: Path, *, older: bool) -> None:
    """A store of schema 7: written by this code (application id set) or shaped like an older
    store (no application id), its user_version raised as a newer interp would."""
    if older:
        with sqlite3.connect(path) as raw:
            raw.executescript(store._SCHEMA)
    else:
        with Store(path) as db:
            db.put(record("abc"))
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version=7")
    raw.close()


@pytest.mark.parametrize("older", [False, True])
def test_a_store_of_a_newer_schema_is_refused_by_every_command(tmp_path, older, capsys, no_training):
    path = tmp_path / "store.sqlite"
    _future(path, older=older)
    before = path.read_bytes()
    message = rf"{path} was written by a newer interp \(store schema 7; this one reads up to 1\); upgrade interp"
    for open_it in (Store, store.read, store.read_sweeps, store.verify, store.checkpoint_problems):
        with pytest.raises(ValueError, match=message):
            open_it(path)
    folder = make_sweep(tmp_path / "sweep")
    for command in (["runs", str(path)], ["store", "verify", str(path)], ["sweep", str(folder), "--store", str(path)],
                    ["report", str(folder), "--store", str(path), "--out", str(tmp_path / "r")],
                    ["explore", str(path), "--out", str(tmp_path / "x")],
                    ["analyze-sweep", str(path), "--out", str(tmp_path / "a")]):
        assert cli.main(command) == 2, command
        one_line_error(capsys, str(path), "written by a newer interp")
    assert path.read_bytes() == before


def test_stores_carry_the_application_id_and_older_stores_gain_it(tmp_path):
    new = tmp_path / "new.sqlite"
    with Store(new) as db:
        db.put(record("abc"))
    assert new.read_bytes()[68:72] == b"intp"  # SQLite's header: application id, big-endian
    old = tmp_path / "old.sqlite"  # an interp store from before the application id
    with sqlite3.connect(old) as raw:
        raw.executescript(store._SCHEMA.replace(",\n    cpu_seconds REAL,\n    extra_sha256 TEXT", ""))
        raw.execute("PRAGMA user_version=1")
    raw.close()
    assert old.read_bytes()[68:72] == b"\0\0\0\0"
    assert store.read(old).empty and old.read_bytes()[68:72] == b"\0\0\0\0"  # readers write nothing
    with Store(old) as db:
        db.put(record("abc"))
    assert old.read_bytes()[68:72] == b"intp"
    assert list(store.read(old)["name"]) == ["abc"]


KILLED_MID_COMMIT = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size=1")  # spill to the file before the commit: a hot journal remains
db.execute("BEGIN")
for i in range(3000):
    db.execute("INSERT INTO runs (name, sweep, config, seed, status) VALUES (?, 'x', '{}', 0, 'ok')",
               (f"junk{i}" + "x" * 400,))
os._exit(0)
"""


def test_a_store_left_with_a_hot_journal_is_still_opened_by_the_driver(tmp_path):
    """A read-only connection cannot roll back a killed writer's journal; the writer's own
    recognition (reading only) lets SQLite restore the last commit first."""
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        db.put(record("abc", accuracy=0.25))
    subprocess.run([sys.executable, "-c", KILLED_MID_COMMIT, str(path)], check=True)
    assert Path(f"{path}-journal").stat().st_size > 0
    with pytest.raises(ValueError, match=rf"{path} holds a write left unfinished by a killed driver"):
        store.read(path)  # a reader may not roll it back
    with Store(path) as db:
        assert db.statuses() == {"abc": "ok"}
    assert list(store.read(path)["accuracy"]) == [0.25]


# --------------------------------------------------------------------------- rows without a checksum


def _three_rows(path: Path, names=("r0", "r1", "r2")) -> None:
    with Store(path) as db:
        for i, name in enumerate(names):
            db.put(record(name, seed=i))


def test_a_row_whose_checksum_was_removed_is_refused_not_read_as_older(tmp_path):
    path = tmp_path / "store.sqlite"
    _three_rows(path)
    with sqlite3.connect(path) as raw:  # an edit that also drops the row's digest
        raw.execute("UPDATE runs SET row_sha256=NULL, accuracy=0.999 WHERE name='r1'")
    raw.close()
    message = r"run r1 in .* has no row_sha256 while 2 other row\(s\) have one \(edited"
    for read in (store.read, store.verify):
        with pytest.raises(ValueError, match=message):
            read(path)
    with Store(path) as db, pytest.raises(ValueError, match=message):
        db.verify()  # what the sweep driver checks before planning


def test_a_lone_row_without_its_checksum_in_a_store_of_ours_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    _three_rows(path, names=("only",))
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET row_sha256=NULL, accuracy=0.999")
    raw.close()
    with pytest.raises(ValueError, match=r"run only in .* has no row_sha256 though a driver"):
        store.verify(path)


def test_the_sweep_refuses_a_row_whose_checksum_was_removed(tmp_path, capsys, no_training):
    sw = sweeps.load(make_sweep(tmp_path))
    with Store(sw.default_store) as db:
        for c in sw.configs:
            db.put(RunRecord(name=c.name(), sweep="tiny", config=c.to_dict(), seed=c.seed,
                             status="ok", accuracy=0.5, steps=20))
    edited = sw.configs[1].name()
    with sqlite3.connect(sw.default_store) as raw:
        raw.execute("UPDATE runs SET row_sha256=NULL, accuracy=0.999 WHERE name=?", (edited,))
    raw.close()
    assert cli.main(["sweep", str(sw.root)]) == 2
    one_line_error(capsys, f"run {edited} in {sw.default_store} has no row_sha256")
    assert cli.main(["report", str(sw.root)]) == 2
    one_line_error(capsys, f"run {edited} in {sw.default_store} has no row_sha256")


def test_an_older_store_with_rows_both_with_and_without_checksums_is_refused(tmp_path):
    """What the code before this check left when it migrated a store and added rows: the old
    rows cannot be told from edited ones, so they are named for retraining."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as raw:
        raw.executescript(store._SCHEMA)
        raw.execute("INSERT INTO runs (name, sweep, config, seed, status, accuracy) VALUES "
                    "('old1', 'tiny', '{}', 0, 'ok', 0.75)")
        values = ("new1", "tiny", "{}", 1, "ok", 0.5, 20, None, None, "[]", None, None, None, store.now())
        raw.execute(f"INSERT INTO runs ({', '.join(store.RUN_COLUMNS)}, row_sha256) VALUES "
                    f"({', '.join('?' * 15)})", (*values, store.row_digest(values)))
    raw.close()
    with pytest.raises(ValueError, match=r"run old1 in .* has no row_sha256 while 1 other row\(s\) have one"):
        store.verify(path)


def test_cpu_seconds_without_its_checksum_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        rec = record("abc")
        rec.cpu_seconds = 1.5
        db.put(rec)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET extra_sha256=NULL, cpu_seconds=0.1")
    raw.close()
    with pytest.raises(ValueError, match=r"run abc in .* has cpu_seconds but no extra_sha256"):
        store.read(path)


def test_a_sweep_log_row_whose_checksum_was_removed_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        for _ in range(2):
            db.end_sweep(db.begin_sweep("tiny", 1, {"cpus": 2}), 3, 12.5)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE sweeps SET row_sha256=NULL, wall_seconds=1.0 WHERE id=2")
    raw.close()
    with pytest.raises(ValueError, match=r"sweep log row 2 in .* has no row_sha256 while 1 other"):
        store.read_sweeps(path)


def test_a_store_in_a_folder_whose_name_is_not_utf8_opens_where_it_is(tmp_path):
    """SQLite gets the path's bytes (percent-encoded in a URI), not a text it cannot encode."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9 #1?x%"))
    path = folder / "store.sqlite"
    with store.DriverLock(path), Store(path) as db:
        db.put(record("abc", accuracy=0.25))
    assert b"store.sqlite" in os.listdir(os.fsencode(folder))
    assert list(store.read(path)["accuracy"]) == [0.25]
    assert store.verify(path) == {"verified": 1, "unverified": 0, "files": 0}
