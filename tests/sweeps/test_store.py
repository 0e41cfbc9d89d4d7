"""The results store: rows round-trip through SQLite into pandas, writes are atomic.

References: the values put in (hand-written records), hashlib for checksums, and sqlite3 itself
for what is on disk.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3

import pytest

from interp.sweeps import store
from interp.sweeps.store import RunRecord, Store


def record(name="abc123", seed=0, accuracy=0.5, status="ok", **kw) -> RunRecord:
    config = dict(case=3, n=10, d_token=8, n_layers=1, pos_embed="none", seed=seed, lr=1e-3)
    return RunRecord(name=name, sweep="demo", config=config, seed=seed, status=status,
                     accuracy=accuracy, steps=120, final_loss=0.25, seconds=1.5,
                     curve=[(1, 2.3), (50, 0.7), (120, 0.25)], started_at="2025-01-01T00:00:00+00:00",
                     **kw)


def test_put_and_read_round_trip(tmp_path):
    path = tmp_path / "r" / "store.sqlite"
    ckpt = tmp_path / "r" / "checkpoints" / "abc123"
    with Store(path) as db:
        db.put(record(cpu_seconds=1.25), ckpt, {"model.safetensors": "ff" * 32})
        db.put(record("def456", seed=1, accuracy=None, status="failed: nan"))
        assert db.statuses() == {"abc123": "ok", "def456": "failed: nan"}
    df = store.read(path)
    assert list(df["name"]) == ["abc123", "def456"]
    a = df.iloc[0]
    assert (a["case"], a["n"], a["d_token"], a["pos_embed"], a["seed"], a["lr"]) == (3, 10, 8, "none", 0, 1e-3)
    assert (a["accuracy"], a["steps"], a["final_loss"], a["seconds"]) == (0.5, 120, 0.25, 1.5)
    assert a["cpu_seconds"] == 1.25 and math.isnan(df.iloc[1]["cpu_seconds"])  # not measured: NULL
    assert a["curve"] == [[1, 2.3], [50, 0.7], [120, 0.25]]
    assert a["checkpoint"] == str(ckpt.resolve()) and a["checksums"] == {"model.safetensors": "ff" * 32}
    assert a["started_at"] == "2025-01-01T00:00:00+00:00" and a["finished_at"] >= a["started_at"]
    b = df.iloc[1]
    assert b["status"] == "failed: nan" and b["checkpoint"] is None and b["checksums"] is None
    # on disk: the checkpoint path is relative to the store's folder (the store can move)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT checkpoint FROM runs WHERE name='abc123'").fetchone() == (
            "checkpoints/abc123",)
        assert json.loads(raw.execute("SELECT config FROM runs").fetchone()[0])["d_token"] == 8
    assert not list(path.parent.glob("*-journal")) and not list(path.parent.glob("*-wal"))


def test_put_replaces_a_row_and_a_failed_insert_leaves_none(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        db.put(record(accuracy=0.1, status="failed: nan"))
        db.put(record(accuracy=0.9))
        bad = record("zzz")
        bad.config = {"not json": object()}
        with pytest.raises(TypeError):
            db.put(bad)
    df = store.read(path)
    assert list(df["name"]) == ["abc123"] and df.iloc[0]["accuracy"] == 0.9


def test_place_checkpoint_is_atomic_and_replaces(tmp_path):
    target = tmp_path / "ck" / "run1"
    files = {"model.safetensors": b"\x00weights", "config.json": b"{}"}
    sums = store.place_checkpoint(files, target)
    assert sums == {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
    assert {p.name: p.read_bytes() for p in target.iterdir()} == files
    store.place_checkpoint({"model.safetensors": b"new"}, target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {"model.safetensors": b"new"}
    with pytest.raises(ValueError, match="plain file name"):  # fails midway: nothing changes
        store.place_checkpoint({"a": b"1", "../evil": b"2"}, target)
    assert {p.name for p in target.parent.iterdir()} == {"run1"}
    assert (target / "model.safetensors").read_bytes() == b"new"


def test_clean_partial_removes_only_temporaries(tmp_path):
    for name in (".run1.tmp-1234abcd", ".run2.old-deadbeef", "run3"):
        (tmp_path / name).mkdir()
    removed = store.clean_partial(tmp_path)
    assert sorted(p.name for p in removed) == [".run1.tmp-1234abcd", ".run2.old-deadbeef"]
    assert [p.name for p in tmp_path.iterdir()] == ["run3"]


def test_sweep_log_and_errors(tmp_path):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        i = db.begin_sweep("demo", workers=2, environment={"cpus": 2, "MKL_CBWR": "AUTO"})
        db.end_sweep(i, runs_done=5, wall_seconds=12.3456, environment={"load_average_end": [3.5, 2, 1]})
        db.begin_sweep("demo", workers=1)  # never ended: a killed invocation
    log = store.read_sweeps(path)  # (its checksum covers the environment added at the end)
    assert list(log["runs_done"]) == [5, 0] and log.iloc[0]["wall_seconds"] == 12.346
    assert log["finished_at"].isna().tolist() == [False, True]
    assert log.iloc[0]["outcome"] == "done"
    assert json.loads(log.iloc[0]["environment"]) == {
        "cpus": 2, "MKL_CBWR": "AUTO", "load_average_end": [3.5, 2, 1]}
    with pytest.raises(ValueError, match="no results store"):
        store.read(tmp_path / "missing.sqlite")
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version=99")
    with pytest.raises(ValueError, match=r"written by a newer interp \(store schema 99; this one reads up to 1\)"):
        Store(path)


def test_one_driver_per_store(tmp_path):
    path = tmp_path / "store.sqlite"
    with store.DriverLock(path):
        with pytest.raises(ValueError, match=r"another driver \(pid \d+\) is writing"):
            with store.DriverLock(path):
                pass
    with store.DriverLock(path):  # released on exit
        pass


# --------------------------------------------------------------------------- integrity


def test_row_digest_is_sha256_of_the_stored_row_as_canonical_json(tmp_path):
    path = tmp_path / "store.sqlite"
    rec = record(accuracy=1, cpu_seconds=2)
    rec.final_loss = float("nan")
    with Store(path) as db:  # an int accuracy and a NaN loss: SQLite stores 1.0 and NULL
        db.put(rec)
    with sqlite3.connect(path) as raw:
        raw.row_factory = sqlite3.Row
        row = dict(raw.execute("SELECT * FROM runs").fetchone())
    digest = row.pop("row_sha256")
    # columns added after the first schema are sealed apart, with the run's name
    extra = {"name": row["name"], "cpu_seconds": row.pop("cpu_seconds")}
    assert extra["cpu_seconds"] == 2.0 and isinstance(extra["cpu_seconds"], float)
    text = json.dumps(extra, sort_keys=True, separators=(",", ":"))
    assert row.pop("extra_sha256") == hashlib.sha256(text.encode()).hexdigest()
    assert row["accuracy"] == 1.0 and isinstance(row["accuracy"], float) and row["final_loss"] is None
    text = json.dumps(row, sort_keys=True, separators=(",", ":"))
    assert digest == hashlib.sha256(text.encode()).hexdigest()
    assert store.verify(path) == {"verified": 1, "unverified": 0, "files": 0}
    assert store.read(path).iloc[0]["accuracy"] == 1.0  # no false alarm after type affinity


@pytest.mark.parametrize("column, value", [
    ("accuracy", 0.99), ("status", "ok "), ("curve", "[[1, 2.3]]"), ("seed", 7),
    ("checksums", '{"model.safetensors": "00"}'), ("row_sha256", "0" * 64),
])
def test_a_tampered_row_is_refused_naming_the_run_and_the_store(tmp_path, column, value):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        db.put(record("abc123"), tmp_path / "checkpoints" / "abc123", {"model.safetensors": "ff" * 32})
        db.put(record("def456", seed=1))
    with sqlite3.connect(path) as raw:
        raw.execute(f"UPDATE runs SET {column}=? WHERE name='def456'", (value,))
    message = rf"run def456 in {path}: the row does not match its row_sha256"
    with pytest.raises(ValueError, match=message):
        store.read(path)
    with pytest.raises(ValueError, match=message):
        store.verify(path)
    with Store(path) as db, pytest.raises(ValueError, match=message):
        db.verify()  # what the sweep driver checks before planning


#: the runs table as the first schema had it (before cpu_seconds and extra_sha256)
FIRST_SCHEMA = store._SCHEMA.replace(",\n    cpu_seconds REAL,\n    extra_sha256 TEXT", "")


def test_an_older_store_without_digests_reads_unverified_and_migrates(tmp_path):
    path = tmp_path / "old.sqlite"
    old_schema = FIRST_SCHEMA.replace(",\n    row_sha256  TEXT", "")
    assert "row_sha256" not in old_schema and "cpu_seconds" not in old_schema
    with sqlite3.connect(path) as raw:
        raw.executescript(old_schema)
        raw.execute("INSERT INTO runs (name, sweep, config, seed, status, accuracy) VALUES "
                    "('old1', 'demo', ?, 0, 'ok', 0.75)", (json.dumps(record().config),))
    assert store.verify(path) == {"verified": 0, "unverified": 1, "files": 0}
    assert list(store.read(path)["accuracy"]) == [0.75]
    with Store(path) as db:  # the writer adds the column and seals the old rows as they are
        db.put(record("new1"))
    assert store.verify(path) == {"verified": 2, "unverified": 0, "files": 0}
    assert list(store.read(path)["name"]) == ["old1", "new1"]
    with sqlite3.connect(path) as raw:  # from now on an edit of the old row is caught too
        raw.execute("UPDATE runs SET accuracy=0.999 WHERE name='old1'")
    with pytest.raises(ValueError, match=r"run old1 in .*does not match its row_sha256"):
        store.read(path)


def _put_as_the_first_schema_did(raw, rec):
    """A row as the code before cpu_seconds wrote it: RUN_COLUMNS and their row_sha256 only."""
    values = (rec.name, rec.sweep, json.dumps(rec.config, sort_keys=True), rec.seed, rec.status,
              rec.accuracy, rec.steps, rec.final_loss, rec.seconds,
              json.dumps([list(p) for p in rec.curve]), None, None, rec.started_at, store.now())
    raw.execute(f"INSERT OR REPLACE INTO runs ({', '.join(store.RUN_COLUMNS)}, row_sha256) "
                f"VALUES ({', '.join('?' * 15)})", (*values, store.row_digest(values)))


def test_a_store_from_before_cpu_seconds_reads_as_nan_gains_the_column_and_stays_verified(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as raw:
        raw.executescript(FIRST_SCHEMA)
        _put_as_the_first_schema_did(raw, record("old1"))
    assert store.verify(path) == {"verified": 1, "unverified": 0, "files": 0}
    df = store.read(path)  # read-only: the column is missing on disk and reads as NaN
    assert "cpu_seconds" in df.columns and math.isnan(df.iloc[0]["cpu_seconds"])
    with sqlite3.connect(path) as raw:
        assert "cpu_seconds" not in {r[1] for r in raw.execute("PRAGMA table_info(runs)")}
    with Store(path) as db:  # a driver migrates in place by adding columns
        db.put(record("new1", seed=1, cpu_seconds=0.75))
    with sqlite3.connect(path) as raw:
        columns = [r[1] for r in raw.execute("PRAGMA table_info(runs)")]
        assert columns[-2:] == ["cpu_seconds", "extra_sha256"]
        _put_as_the_first_schema_did(raw, record("old2", seed=2))  # older code still writes it
    assert store.verify(path) == {"verified": 3, "unverified": 0, "files": 0}
    df = store.read(path).set_index("name")
    assert df.loc["new1", "cpu_seconds"] == 0.75
    assert df.loc[["old1", "old2"], "cpu_seconds"].isna().all()


@pytest.mark.parametrize("value", [9.0, None])
def test_a_tampered_cpu_seconds_is_refused(tmp_path, value):
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        db.put(record("abc123", cpu_seconds=1.5))
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE runs SET cpu_seconds=? WHERE name='abc123'", (value,))
    with pytest.raises(ValueError, match=r"run abc123 in .*: the row does not match its extra_sha256"):
        store.read(path)


def test_verify_files_finds_a_truncated_checkpoint_naming_the_run_and_file(tmp_path):
    path = tmp_path / "store.sqlite"
    files = {"model.safetensors": b"\x01" * 100, "config.json": b"{}"}
    ckpt = tmp_path / "checkpoints" / "abc123"
    sums = store.place_checkpoint(files, ckpt)
    with Store(path) as db:
        db.put(record("abc123"), ckpt, sums)
    assert store.verify(path, files=True) == {"verified": 1, "unverified": 0, "files": 2}
    (ckpt / "model.safetensors").write_bytes(b"\x01" * 50)
    assert store.verify(path)["verified"] == 1  # rows alone are intact
    with pytest.raises(ValueError, match=r"run abc123 in .*model\.safetensors is truncated or corrupt"):
        store.verify(path, files=True)
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"run abc123 in .*model\.safetensors is missing"):
        store.verify(path, files=True)


@pytest.mark.parametrize("content", [b"\x00", b"not a database at all" * 10, b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_a_store_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "store.sqlite"
    path.write_bytes(content)
    for open_it in (Store, store.read, store.read_sweeps, store.verify):
        with pytest.raises(ValueError, match=rf"{path} is not a results store"):
            open_it(path)
    assert path.read_bytes() == content  # untouched (SQLite would have made a short file a database)
    with pytest.raises(ValueError, match="is a folder"):
        Store(tmp_path)


def test_the_sweeps_log_is_checksummed(tmp_path):
    """A flipped value in the sweeps log (wall seconds, say) is caught when the log is read."""
    path = tmp_path / "store.sqlite"
    with store.Store(path) as db:
        sid = db.begin_sweep("tiny", 2, {"cpus": 2})
        db.end_sweep(sid, 3, 12.5)
    assert store.read_sweeps(path)["wall_seconds"].tolist() == [12.5]
    con = sqlite3.connect(path)
    con.execute("UPDATE sweeps SET wall_seconds=1.0 WHERE id=?", (sid,))
    con.commit()
    con.close()
    with pytest.raises(ValueError, match=f"sweep log row {sid} in .* does not match its row_sha256"):
        store.read_sweeps(path)


def test_an_empty_store_file_is_refused_not_taken_as_new(tmp_path):
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"is empty \(0 bytes\).*move it away"):
        store.Store(path)
    assert path.read_bytes() == b""


class _SignalAfterBegin:
    """A connection that raises KeyboardInterrupt right after its first BEGIN has run: a signal
    that lands between a transaction's start and the block that would close it."""

    def __init__(self, db: sqlite3.Connection):
        self.db, self.fired = db, False

    def __getattr__(self, name):
        return getattr(self.db, name)

    def execute(self, sql, *args):
        cursor = self.db.execute(sql, *args)
        if sql.startswith("BEGIN") and not self.fired:
            self.fired = True
            raise KeyboardInterrupt("signal 15")
        return cursor


def test_a_signal_inside_begin_leaves_no_transaction_open(tmp_path):
    """The sweep that was interrupted is still logged as such (the CLI's SIGTERM path), and the
    interrupted write left nothing behind."""
    path = tmp_path / "store.sqlite"
    with Store(path) as db:
        sid = db.begin_sweep("demo", workers=2)
        real, db._db = db._db, _SignalAfterBegin(db._db)
        with pytest.raises(KeyboardInterrupt):
            db.put(record())
        assert db._db.fired and real.in_transaction  # the state the CLI met
        db._db = real
        db.end_sweep(sid, 0, 1.5, outcome="interrupted: KeyboardInterrupt")
    assert store.read(path).empty
    assert list(store.read_sweeps(path)["outcome"]) == ["interrupted: KeyboardInterrupt"]
