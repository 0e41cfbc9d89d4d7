"""The results store: one SQLite file per sweep, one row per training run, readable with pandas.

Layout on disk (``DIR/results/`` by default, see :mod:`interp.training.sweeps`)::

    store.sqlite                 the table ``runs`` (below) and the table ``sweeps`` (invocations)
    checkpoints/<run name>/      model.safetensors + config.json (interp.training.checkpoints format)

``runs`` has one row per run, keyed by the run's name (``TrainConfig.name()``, a hash of the
config including its seed, so a sweep can tell what it has already done):

============== ======= ==========================================================================
column         type    meaning
============== ======= ==========================================================================
name           TEXT    primary key, ``TrainConfig.name()``
sweep          TEXT    the sweep that produced the run (its folder name)
config         TEXT    ``TrainConfig.to_dict()`` as JSON
seed           INTEGER the config's seed (also inside ``config``)
status         TEXT    ``"ok"`` or ``"failed: <reason>"``
accuracy       REAL    test accuracy, a fraction in [0, 1]
steps          INTEGER optimiser steps used
final_loss     REAL    last training-batch loss
seconds        REAL    training wall time reported by the trainer
curve          TEXT    JSON list of [step, loss]
checkpoint     TEXT    checkpoint folder, relative to the store's folder (NULL if none)
checksums      TEXT    JSON {file name: sha256 hex} of the checkpoint's files
started_at     TEXT    ISO 8601 UTC, when training of the run's group began
finished_at    TEXT    ISO 8601 UTC, when the row was written
row_sha256     TEXT    sha256 of the columns above as canonical JSON (:func:`row_digest`)
cpu_seconds    REAL    the training process's CPU seconds (user + system) for the run, beside
                       ``seconds``; NULL in rows written before the column existed
extra_sha256   TEXT    sha256 of ``name`` and the columns added since the first schema
                       (``cpu_seconds``), :func:`extra_digest`; NULL where those are absent
============== ======= ==========================================================================

For a group of seeds trained together (one ensemble) ``seconds`` and ``cpu_seconds`` are the
group's divided among its seeds. Their ratio says how much of the wall time the run had a
core for: well below 1 on a loaded machine (the sweeps log records the load average).

``sweeps`` logs each ``interp sweep`` invocation (sweep, started_at, finished_at, workers,
runs_done, wall_seconds, outcome: ``done`` or ``interrupted: <why>``, a driver killed outright
leaves finished_at NULL; environment: JSON of the machine facts that bear on speed and bits,
see :func:`interp.training.sweeps.environment`, including the device and the load average at
the start, and ``load_average_end`` once the invocation ends), so sweep wall times are recorded
beside the results.

Integrity. :meth:`Store.put` writes ``row_sha256`` with every row; :func:`read` (hence
``interp report`` and ``interp analyze-sweep``) and the sweep driver recompute it and refuse a
row whose content no longer matches with a ValueError naming the run and the store, so an
edited or corrupted row is never used silently. Rows written before the column existed (older
stores) have ``row_sha256`` NULL and are read *unverified*; :func:`verify` counts them.
``row_sha256`` covers the first schema's columns only, so it means the same in every store and
every version of this code; columns added since (``cpu_seconds``) are sealed by
``extra_sha256``. An older store gains the new columns, NULL in its old rows, when a driver
opens it (:func:`read` of a store not yet opened by one gives them as NaN); code older than the
columns still reads and writes a store that has them.
:func:`verify` with ``files=True`` also hashes each checkpoint's files against ``checksums``
(``interp.training.checkpoints.load`` checks the weights against ``config.json`` on every load anyway).

Atomicity. Only the sweep driver writes the store, one run per transaction, and only after the
run's checkpoint folder is complete and renamed into place (:func:`place_checkpoint`). A driver
killed at any point leaves either no row (the run reruns next time; a stray checkpoint folder
without a row is overwritten) or a complete row whose checkpoint is complete. The rollback
journal (not WAL) keeps the store a single file that can be committed or copied as is.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sqlite3
import uuid
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    name        TEXT PRIMARY KEY,
    sweep       TEXT NOT NULL,
    config      TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    status      TEXT NOT NULL,
    accuracy    REAL,
    steps       INTEGER,
    final_loss  REAL,
    seconds     REAL,
    curve       TEXT,
    checkpoint  TEXT,
    checksums   TEXT,
    started_at  TEXT,
    finished_at TEXT,
    row_sha256  TEXT,
    cpu_seconds REAL,
    extra_sha256 TEXT
);
CREATE TABLE IF NOT EXISTS sweeps (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep        TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT,
    workers      INTEGER,
    runs_done    INTEGER,
    wall_seconds REAL,
    outcome      TEXT,
    environment  TEXT
);
"""

RUN_COLUMNS = (
    "name", "sweep", "config", "seed", "status", "accuracy", "steps", "final_loss", "seconds",
    "curve", "checkpoint", "checksums", "started_at", "finished_at",
)  # fmt: skip
DIGEST_COLUMN = "row_sha256"
#: ``runs`` columns added after the first schema, with their SQL types: NULL in older rows,
#: sealed by :data:`EXTRA_DIGEST` instead of ``row_sha256`` (:func:`extra_digest`)
EXTRA_COLUMNS = {"cpu_seconds": "REAL"}
EXTRA_DIGEST = "extra_sha256"
#: the ``sweeps`` log's columns under its own ``row_sha256`` (rows of older stores: NULL)
SWEEP_COLUMNS = ("id", "sweep", "started_at", "finished_at", "workers", "runs_done",
                 "wall_seconds", "outcome", "environment")


def now() -> str:
    """The current time as ISO 8601 UTC (seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunRecord:
    """One finished run as the driver stores it (plain data: it crosses process boundaries).

    ``files`` holds the checkpoint's files as bytes (``{"model.safetensors": b"...", ...}``)
    until the driver places them; it is empty when the run produced no model.
    """

    name: str
    sweep: str
    config: dict
    seed: int
    status: str
    accuracy: float | None = None
    steps: int | None = None
    final_loss: float | None = None
    seconds: float | None = None
    curve: list = field(default_factory=list)
    started_at: str | None = None
    files: dict[str, bytes] = field(default_factory=dict, repr=False)
    cpu_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def row_digest(values, columns: tuple[str, ...] | None = None) -> str:
    """sha256 of one ``runs`` row (its :data:`RUN_COLUMNS` values, as stored) as canonical JSON.

    Canonical: a JSON object keyed by column name, keys sorted, no spaces, NaN as null.
    :meth:`Store.put` hashes the row as SQLite read it back (after type affinity), and floats
    are written by ``repr``, which round-trips a double exactly, so a reader that recomputes
    the digest from the stored values gets the same hex unless the row changed.
    """
    columns = RUN_COLUMNS if columns is None else columns
    values = list(values)
    if len(values) != len(columns):
        raise ValueError(f"a row of {columns} has {len(columns)} values; got {len(values)}")
    canon = {
        k: None if isinstance(v, float) and math.isnan(v) else v
        for k, v in zip(columns, values, strict=True)
    }
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return sha256(text.encode())


def extra_digest(name: str, values) -> str:
    """sha256 of one row's ``name`` and its :data:`EXTRA_COLUMNS` values, canonical JSON as in
    :func:`row_digest`, NULLs left out: a column added later leaves earlier digests valid."""
    values = list(values)
    if len(values) != len(EXTRA_COLUMNS):
        raise ValueError(f"extra columns {tuple(EXTRA_COLUMNS)}: {len(EXTRA_COLUMNS)} values; got {len(values)}")
    canon = {"name": name}
    canon.update((k, v) for k, v in zip(EXTRA_COLUMNS, values) if v is not None
                 and not (isinstance(v, float) and math.isnan(v)))
    return sha256(json.dumps(canon, sort_keys=True, separators=(",", ":")).encode())


def place_checkpoint(files: dict[str, bytes], target: Path) -> dict[str, str]:
    """Write a checkpoint folder atomically: into a temporary sibling, fsync, then rename.

    An existing ``target`` (left by a run that was killed before its row was committed) is
    replaced. Returns ``{file name: sha256}``.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for fname, data in files.items():
            if "/" in fname or fname.startswith("."):
                raise ValueError(f"checkpoint file name {fname!r}; accepted: a plain file name")
            write_synced(tmp / fname, data)
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {fname: sha256(data) for fname, data in sorted(files.items())}


def write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it (a folder is renamed into place only after)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def replace_folder(tmp: Path, target: Path) -> None:
    """Put the finished folder ``tmp`` at ``target`` by renames: an existing ``target`` is moved
    aside first and removed after, so a reader sees the old folder or the new, never a mix."""
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def clean_partial(checkpoints: Path) -> list[Path]:
    """Remove temporary folders that an interrupted driver left under ``checkpoints``."""
    removed = []
    if Path(checkpoints).is_dir():
        for p in Path(checkpoints).iterdir():
            if p.name.startswith(".") and (".tmp-" in p.name or ".old-" in p.name):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


class DriverLock:
    """An exclusive lock on ``<store>.lock`` held by the one driver writing a store.

    A second ``interp sweep`` on the same store fails at once instead of training the same
    runs twice. The lock is an ``flock`` on an open file, so it vanishes with the process,
    however it dies; the file itself may stay and holds the last holder's pid.
    """

    def __init__(self, store_path: str | os.PathLike):
        self.path = Path(str(store_path) + ".lock")
        self._fd: int | None = None

    def __enter__(self) -> "DriverLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ValueError(
                f"another driver (pid {holder}) is writing {self.path.with_suffix('')}; "
                "wait for it or stop it (one driver per store)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None


class Store:
    """Read-write access to a store file (the sweep driver's; everyone else uses :func:`read`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"store path {self.path} is a folder; accepted: an SQLite file path")
        _check_header(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)  # explicit transactions
        except sqlite3.Error as e:
            raise ValueError(sqlite_problem(self.path, e)) from None
        try:
            self._open()
        except sqlite3.Error as e:  # not SQLite at all, a foreign schema, locked, read-only
            self._db.close()
            raise ValueError(sqlite_problem(self.path, e)) from None

    def _open(self) -> None:
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute("PRAGMA synchronous=FULL")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise ValueError(
                f"{self.path} has store schema version {version}; accepted: {SCHEMA_VERSION}"
            )
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sweeps)")}
        for column in ("outcome", "environment", DIGEST_COLUMN):  # stores older than the column
            if column not in columns:
                self._db.execute(f"ALTER TABLE sweeps ADD COLUMN {column} TEXT")
        present = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
        added = {DIGEST_COLUMN: "TEXT", **EXTRA_COLUMNS, EXTRA_DIGEST: "TEXT"}
        for column, kind in added.items():  # an older store: its rows keep NULL there
            if column not in present:
                self._db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @property
    def root(self) -> Path:
        """The folder that checkpoint paths are relative to."""
        return self.path.parent

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- runs
    def statuses(self) -> dict[str, str]:
        """``{run name: status}`` for every stored run."""
        return dict(self._db.execute("SELECT name, status FROM runs"))

    def verify(self, *, files: bool = False) -> dict[str, int]:
        """Check every row's ``row_sha256`` (see :func:`verify`)."""
        return _verify_rows(self._db, self.path, files=files)

    def checkpoint_problems(self) -> dict[str, str]:
        """See :func:`checkpoint_problems`."""
        return _checkpoint_problems(self._db, self.path)

    def put(self, record: RunRecord, checkpoint: Path | None = None,
            checksums: dict[str, str] | None = None) -> None:
        """Insert (or replace) one run's row in a single transaction."""
        rel = None if checkpoint is None else os.path.relpath(checkpoint, self.root)
        row = (
            record.name, record.sweep, json.dumps(record.config, sort_keys=True), record.seed,
            record.status, record.accuracy, record.steps, record.final_loss, record.seconds,
            json.dumps([list(p) for p in record.curve]), rel,
            None if checksums is None else json.dumps(checksums, sort_keys=True),
            record.started_at, now(), record.cpu_seconds,
        )  # fmt: skip
        columns = (*RUN_COLUMNS, *EXTRA_COLUMNS)
        with self._transaction():
            self._db.execute(
                f"INSERT OR REPLACE INTO runs ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})",
                row,
            )
            # the digests of the row as SQLite stored it (after its type affinities: an int
            # accuracy reads back as a REAL, a NaN as NULL), so a reader recomputes them exactly
            stored = self._db.execute(
                f"SELECT {', '.join(columns)} FROM runs WHERE name=?", (record.name,)
            ).fetchone()
            base, extra = stored[: len(RUN_COLUMNS)], stored[len(RUN_COLUMNS):]
            self._db.execute(
                f"UPDATE runs SET {DIGEST_COLUMN}=?, {EXTRA_DIGEST}=? WHERE name=?",
                (row_digest(base), extra_digest(record.name, extra), record.name),
            )

    # -- sweep invocations
    def begin_sweep(self, sweep: str, workers: int, environment: dict | None = None) -> int:
        with self._transaction():
            cur = self._db.execute(
                "INSERT INTO sweeps (sweep, started_at, workers, runs_done, environment) "
                "VALUES (?, ?, ?, 0, ?)",
                (sweep, now(), workers, json.dumps(environment or {}, sort_keys=True)),
            )
            self._seal_sweep(int(cur.lastrowid))
        return int(cur.lastrowid)

    def _seal_sweep(self, sweep_id: int) -> None:
        """Store the digest of one ``sweeps`` row as SQLite stored it (inside a transaction)."""
        stored = self._db.execute(
            f"SELECT {', '.join(SWEEP_COLUMNS)} FROM sweeps WHERE id=?", (sweep_id,)
        ).fetchone()
        self._db.execute(f"UPDATE sweeps SET {DIGEST_COLUMN}=? WHERE id=?",
                         (row_digest(stored, SWEEP_COLUMNS), sweep_id))

    def end_sweep(self, sweep_id: int, runs_done: int, wall_seconds: float,
                  outcome: str = "done", environment: dict | None = None) -> None:
        """Record an invocation's end; ``environment`` adds keys to its environment JSON (the
        driver adds ``load_average_end``)."""
        with self._transaction():
            self._db.execute(
                "UPDATE sweeps SET finished_at=?, runs_done=?, wall_seconds=?, outcome=? WHERE id=?",
                (now(), runs_done, round(wall_seconds, 3), outcome, sweep_id),
            )
            if environment:
                (text,) = self._db.execute("SELECT environment FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
                merged = {**json.loads(text or "{}"), **environment}
                self._db.execute("UPDATE sweeps SET environment=? WHERE id=?",
                                 (json.dumps(merged, sort_keys=True), sweep_id))
            self._seal_sweep(sweep_id)

    def _transaction(self):
        db = self._db

        class _Tx:
            def __enter__(self):
                # a signal (Ctrl-C, SIGTERM) raised between an earlier BEGIN and its with-block
                # leaves that transaction open with nothing to close it: roll it back first, so
                # the write that follows (the sweep logged as interrupted) can start
                if db.in_transaction:
                    db.execute("ROLLBACK")
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, *_):
                db.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()


def sqlite_problem(path: Path, e: sqlite3.Error) -> str:
    """One line naming ``path``, what happened and what to do, for an SQLite error: a store
    that is locked, read-only or on a full disk is healthy and must not be called corrupt."""
    text = str(e).lower()
    if "locked" in text or "busy" in text:
        return (f"{path} is locked by another process (another interp sweep, or an open "
                "sqlite3 shell); wait for it to finish, then rerun")
    if "readonly" in text or "read-only" in text:
        return (f"{path} is read-only: it cannot be written here; make it and its folder writable, "
                "or copy it elsewhere and pass --store")
    if "full" in text or "disk i/o" in text:  # "database or disk is full"; EFBIG reads as I/O error
        return (f"{path}: the disk is full or failing ({e}); free space and rerun the same "
                "command (every committed run is kept)")
    if "unable to open" in text:
        return f"{path} cannot be opened ({e}); check that its folder exists and is readable"
    return f"{path} is not a results store (corrupt, or another program's file): {e}"


@contextmanager
def _not_a_store(path: Path):
    """Turn SQLite's complaints into a ValueError naming the file and what happened."""
    try:
        yield
    except sqlite3.DatabaseError as e:  # "file is not a database", "no such table: runs", ...
        raise ValueError(sqlite_problem(path, e)) from None


def _check_header(path: Path) -> None:
    """SQLite would take a short non-empty file of any bytes for a new database and overwrite
    it, and an empty file for a new database; a store either does not exist yet or starts with
    SQLite's 16-byte header (a 0-byte store is one that lost its content, e.g. on a full disk:
    treating it as new would silently retrain everything)."""
    if not path.is_file():
        return
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): not a results store, or one that lost its "
                         "content; move it away to start a new store there")
    with open(path, "rb") as f:
        if f.read(16) != b"SQLite format 3\x00":
            raise ValueError(f"{path} is not a results store: not an SQLite file")


def _connect_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no results store at {path}; run `interp sweep` first")
    _check_header(path)
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _verify_rows(db: sqlite3.Connection, path: Path, *, files: bool) -> dict[str, int]:
    present = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    later = [c if c in present else "NULL" for c in (DIGEST_COLUMN, *EXTRA_COLUMNS, EXTRA_DIGEST)]
    counts = {"verified": 0, "unverified": 0, "files": 0}
    query = f"SELECT {', '.join(RUN_COLUMNS)}, {', '.join(later)} FROM runs ORDER BY rowid"
    n = len(RUN_COLUMNS)
    for row in db.execute(query):
        values, stored, extra, stored_extra = row[:n], row[n], row[n + 1 : -1], row[-1]
        name = values[0]
        if stored_extra is not None and extra_digest(name, extra) != stored_extra:
            raise ValueError(
                f"run {name} in {path}: the row does not match its {EXTRA_DIGEST} (edited or "
                f"corrupt); delete the row (DELETE FROM runs WHERE name='{name}') to retrain it"
            )
        if stored is None:
            counts["unverified"] += 1
        elif row_digest(values) != stored:
            raise ValueError(
                f"run {name} in {path}: the row does not match its row_sha256 (edited or "
                f"corrupt); delete the row (DELETE FROM runs WHERE name='{name}') to retrain it"
            )
        else:
            counts["verified"] += 1
        if files:
            problem = _checkpoint_problem(path, values)
            if problem is not None:
                raise ValueError(f"run {name} in {path}: {problem}")
            counts["files"] += len(json.loads(values[RUN_COLUMNS.index("checksums")] or "{}"))
    return counts


def _checkpoint_problem(path: Path, values) -> str | None:
    """What is wrong with one row's checkpoint files (None: every file hashes as stored)."""
    ckpt, sums = values[RUN_COLUMNS.index("checkpoint")], values[RUN_COLUMNS.index("checksums")]
    if not ckpt:
        return None
    folder = Path(path).resolve().parent / ckpt
    if not folder.is_dir():
        return f"checkpoint folder {folder} is missing"
    for fname, expected in json.loads(sums or "{}").items():
        f = folder / fname
        if not f.is_file():
            return f"checkpoint file {f} is missing"
        if sha256(f.read_bytes()) != expected:
            return f"checkpoint file {f} is truncated or corrupt (its sha256 differs from the store's)"
    return None


def _checkpoint_problems(db: sqlite3.Connection, path: Path) -> dict[str, str]:
    query = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY rowid"
    found = {}
    for values in db.execute(query):
        problem = _checkpoint_problem(path, values)
        if problem is not None:
            found[values[0]] = problem
    return found


def checkpoint_problems(path: str | os.PathLike) -> dict[str, str]:
    """``{run name: what is wrong}`` for every run whose checkpoint folder or files are missing,
    truncated or corrupt (hashed against the row's checksums); read-only."""
    path = Path(path)
    with closing(_connect_readonly(path)) as db, _not_a_store(path):
        return _checkpoint_problems(db, path)


def verify(path: str | os.PathLike, *, files: bool = False) -> dict[str, int]:
    """Check every run row of the store at ``path`` against its ``row_sha256``.

    Returns ``{"verified": rows checked, "unverified": rows without a digest (written before
    the column existed), "files": checkpoint files checked}``. A row whose content does not
    match raises a ValueError naming the run and the store. With ``files`` each checkpoint
    file is also hashed against the row's ``checksums`` (a missing, truncated or altered file
    raises, naming the run and the file).
    """
    path = Path(path)
    with closing(_connect_readonly(path)) as db, _not_a_store(path):
        return _verify_rows(db, path, files=files)


def read(path: str | os.PathLike, *, expand: bool = True):
    """The ``runs`` table as a pandas DataFrame, one row per run, every row verified.

    Each row's ``row_sha256`` is checked first (:func:`verify`): an edited or corrupt row
    raises a ValueError naming the run and the store. Rows of older stores without the
    digest are read unverified. With ``expand`` the config's fields become columns (``case``, ``n``, ``d_token``, ...;
    ``seed`` is already one), ``curve`` and ``checksums`` are parsed from JSON, and
    ``checkpoint`` is an absolute path (or None). Columns newer than the store
    (:data:`EXTRA_COLUMNS`) read as NaN.
    """
    import pandas as pd

    path = Path(path)
    with closing(_connect_readonly(path)) as db, _not_a_store(path):
        db.execute("BEGIN")  # one snapshot for the check and the read
        _verify_rows(db, path, files=False)
        df = pd.read_sql_query("SELECT * FROM runs ORDER BY rowid", db)
    for column in EXTRA_COLUMNS:  # a store no driver has opened since the column was added
        if column not in df.columns:
            df[column] = float("nan")
    if not expand or df.empty:
        return df
    configs = pd.DataFrame([json.loads(c) for c in df["config"]], index=df.index)
    configs = configs.drop(columns=[c for c in configs.columns if c in df.columns])
    df = pd.concat([df, configs], axis=1)
    root = path.resolve().parent

    def column(values):  # object dtype keeps None as None (pandas would make it NaN)
        return pd.Series(values, index=df.index, dtype=object)

    df["curve"] = column([json.loads(c) if _text(c) else [] for c in df["curve"]])
    df["checksums"] = column([json.loads(c) if _text(c) else None for c in df["checksums"]])
    df["checkpoint"] = column([str(root / c) if _text(c) else None for c in df["checkpoint"]])
    return df


def _text(x) -> bool:
    """A non-empty string (pandas turns SQL NULLs into None or NaN)."""
    return isinstance(x, str) and bool(x)


def read_sweeps(path: str | os.PathLike):
    """The ``sweeps`` table (one row per ``interp sweep`` invocation) as a DataFrame."""
    import pandas as pd

    with closing(_connect_readonly(path)) as db, _not_a_store(path):
        db.execute("BEGIN")  # one snapshot for the check and the read
        db.execute("SELECT id FROM sweeps LIMIT 1")  # a clear error before pandas wraps it
        has_digest = DIGEST_COLUMN in {row[1] for row in db.execute("PRAGMA table_info(sweeps)")}
        if has_digest:
            query = f"SELECT {', '.join(SWEEP_COLUMNS)}, {DIGEST_COLUMN} FROM sweeps ORDER BY id"
            for *values, stored in db.execute(query):
                if stored is not None and row_digest(values, SWEEP_COLUMNS) != stored:
                    raise ValueError(f"sweep log row {values[0]} in {path} does not match its "
                                     f"{DIGEST_COLUMN} (edited or corrupt)")
        return pd.read_sql_query("SELECT * FROM sweeps ORDER BY id", db)
