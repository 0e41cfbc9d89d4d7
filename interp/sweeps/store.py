"""The results store: one SQLite file per sweep, one row per training run, readable with pandas.

Layout on disk (``DIR/results/`` by default, see :mod:`interp.sweeps.driver`)::

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
runs_done, wall_seconds, outcome: ``done``, ``done: N run(s) lost`` or ``interrupted: <why>``, a driver killed outright
leaves finished_at NULL; environment: JSON of the machine facts that bear on speed and bits,
see :func:`interp.sweeps.driver.environment`, including the device and the load average at
the start, and ``load_average_end`` once the invocation ends), so sweep wall times are recorded
beside the results.

Integrity. :meth:`Store.put` writes ``row_sha256`` with every row; :func:`read` (hence
``interp report`` and ``interp analyze-sweep``) and the sweep driver recompute it and refuse a
row whose content no longer matches with a ValueError naming the run and the store, so an
edited or corrupted row is never used silently. Rows written before the column existed (older
stores) have ``row_sha256`` NULL and are read *unverified* (:func:`verify` counts them) until a
driver opens the store and seals them as they are; a row without it beside rows with one, or
in a store this code has opened, is an edit and refused (the ``sweeps`` log likewise).
``row_sha256`` covers the first schema's columns only, so it means the same in every store and
every version of this code; columns added since (``cpu_seconds``) are sealed by
``extra_sha256``. An older store gains the new columns, NULL in its old rows, when a driver
opens it (:func:`read` of a store not yet opened by one gives them as NaN); code older than the
columns still reads and writes a store that has them.
:func:`verify` with ``files=True`` also hashes each checkpoint's files against ``checksums``
(``interp.training.checkpoints.load`` checks the weights against ``config.json`` on every load anyway).

Identity. A store carries ``PRAGMA application_id`` :data:`APPLICATION_ID` from the first time
this code opens it for writing. Every reader and the writer first :func:`recognise` the file,
writing nothing (:func:`identify`): another program's SQLite file (with or without a table
called ``runs``) or a store of a newer schema is refused with one line naming it, before a row
is read or a byte written.

Atomicity. Only the sweep driver writes the store, one run per transaction, and only after the
run's checkpoint folder is complete and renamed into place (:func:`place_checkpoint`). A driver
killed at any point leaves either no row (the run reruns next time; a stray checkpoint folder
without a row is overwritten) or a complete row whose checkpoint is complete. The rollback
journal (not WAL) keeps the store a single file that can be committed or copied as is.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

# the files beside the store, re-exported: the driver's lock and the checkpoint folders
from interp.sweeps.store_files import DriverLock as DriverLock
from interp.sweeps.store_files import check_header, sha256, sqlite_quiet, sqlite_uri
from interp.sweeps.store_files import clean_partial as clean_partial
from interp.sweeps.store_files import place_checkpoint as place_checkpoint
from interp.sweeps.store_files import replace_folder as replace_folder
from interp.sweeps.store_files import write_synced as write_synced

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
#: ``PRAGMA application_id`` of every store this code creates or opens for writing ("intp")
APPLICATION_ID = int.from_bytes(b"intp", "big")
#: columns that stores older than the application id gained after their first schema, in order
_LATER = {"runs": (DIGEST_COLUMN, *EXTRA_COLUMNS, EXTRA_DIGEST),
          "sweeps": ("outcome", "environment", DIGEST_COLUMN)}
_FIRST = {"runs": RUN_COLUMNS, "sweeps": SWEEP_COLUMNS[:7]}


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


class Store:
    """Read-write access to a store file (the sweep driver's; everyone else uses :func:`read`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"store path {self.path} is a folder; accepted: an SQLite file path")
        check_header(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        if not created:  # recognised before a single byte is written
            identify(self.path)
        try:
            self._db = sqlite3.connect(sqlite_uri(self.path, "rwc"), uri=True, isolation_level=None)
        except sqlite3.Error as e:
            raise ValueError(sqlite_problem(self.path, e)) from None
        try:
            self._open()
        except BaseException as e:  # corrupt, foreign, locked, read-only, full
            self._db.close()
            if created and self.path.is_file() and self.path.stat().st_size == 0:
                self.path.unlink()  # a store that could not be created (a full disk) is none
            if isinstance(e, sqlite3.Error):
                raise ValueError(sqlite_problem(self.path, e)) from None
            raise

    def _open(self) -> None:
        db = self._db
        kind = recognise(db, self.path)  # again: SQLite has rolled back a killed writer's journal
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("PRAGMA synchronous=FULL")
        with self._transaction():  # all or nothing: a driver killed here leaves the store as it was
            for statement in _SCHEMA.split(";")[:-1]:
                db.execute(statement)
            for table, later in _LATER.items():  # an older store: its rows get NULL there
                present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                for column in (c for c in later if c not in present):
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {EXTRA_COLUMNS.get(column, 'TEXT')}")
            if kind != "ours":
                self._seal_older_rows()
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _seal_older_rows(self) -> None:
        """Give the rows of an older store, written before checksums existed, their digests as
        they are when a driver first opens it: from then on a row without one is an edit
        (:func:`verify`). Only a table where no row has a digest: one where some rows have one
        is left for :func:`verify` to refuse."""
        for table, columns in (("runs", RUN_COLUMNS), ("sweeps", SWEEP_COLUMNS)):
            if self._db.execute(f"SELECT count({DIGEST_COLUMN}) FROM {table}").fetchone()[0]:
                continue
            for values in self._db.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall():
                self._db.execute(f"UPDATE {table} SET {DIGEST_COLUMN}=? WHERE {columns[0]}=?",
                                 (row_digest(values, columns), values[0]))

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


def recognise(db: sqlite3.Connection, path: Path) -> str:
    """What the SQLite file open on ``db`` is, by reading only: ``"new"`` (no tables yet),
    ``"ours"`` (this code's application id), ``"older"`` (no application id, and exactly the
    tables and columns an interp store had before it got one). Anything else is refused with a
    ValueError naming the file: another program's SQLite file (with or without a ``runs``
    table), or a store of a newer schema than :data:`SCHEMA_VERSION`."""
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    objects = sorted((kind, name) for kind, name in db.execute("SELECT type, name FROM sqlite_master")
                     if not name.startswith("sqlite_"))  # sqlite_sequence, primary-key indexes
    if app == 0 and not objects and version == 0:
        return "new"
    if app != APPLICATION_ID and not (app == 0 and _older_shape(db, objects)):
        what = f"application id {app}" if app else f"tables {[name for _, name in objects]}"
        raise ValueError(f"{path} is not an interp results store (another program's SQLite file: "
                         f"{what}); pass another --store")
    if version > SCHEMA_VERSION:
        raise ValueError(f"{path} was written by a newer interp (store schema {version}; this one "
                         f"reads up to {SCHEMA_VERSION}); upgrade interp")
    if version < 0:
        raise ValueError(f"{path} has store schema {version}; accepted: 0 to {SCHEMA_VERSION}")
    return "ours" if app else "older"


def _older_shape(db: sqlite3.Connection, objects: list[tuple[str, str]]) -> bool:
    """Whether a file without an application id has exactly the tables ``runs`` and ``sweeps``
    with the first schema's columns followed by those added since, in the order they came."""
    if objects != [("table", "runs"), ("table", "sweeps")]:
        return False
    for table, first in _FIRST.items():
        columns = tuple(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
        added = columns[len(first):]
        if columns[: len(first)] != first or added != _LATER[table][: len(added)]:
            return False
    return True


def identify(path: Path) -> str | None:
    """:func:`recognise` the file at ``path`` writing nothing, not even SQLite's files beside
    it (a read-only connection to a WAL-mode file would leave ``-wal`` and ``-shm`` there).
    None: a killed writer left a hot journal, which only a writer may roll back (a read-only
    connection is refused); the writer recognises the file again once SQLite has done so."""
    try:
        uri = sqlite_uri(path, "ro", immutable=sqlite_quiet(path))
        with closing(sqlite3.connect(uri, uri=True)) as db:
            return recognise(db, path)
    except sqlite3.Error as e:
        if getattr(e, "sqlite_errorcode", None) == 776:  # SQLITE_READONLY_ROLLBACK
            return None
        raise ValueError(sqlite_problem(path, e)) from None


def _connect_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection to the store at ``path``, recognised (:func:`identify`) first."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no results store at {path}; run `interp sweep` first")
    check_header(path)
    kind = identify(path)
    if kind is None:
        raise ValueError(f"{path} holds a write left unfinished by a killed driver ({path}-journal); "
                         "rerun `interp sweep` on it, which rolls it back, then read it")
    if kind == "new":
        raise ValueError(f"{path} is not a results store yet: an SQLite file without tables")
    return sqlite3.connect(sqlite_uri(path, "ro"), uri=True)


def _verify_rows(db: sqlite3.Connection, path: Path, *, files: bool) -> dict[str, int]:
    present = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    later = [c if c in present else "NULL" for c in (DIGEST_COLUMN, *EXTRA_COLUMNS, EXTRA_DIGEST)]
    counts = {"verified": 0, "unverified": 0, "files": 0}
    sealed, strict = _sealed(db, "runs", present)
    query = f"SELECT {', '.join(RUN_COLUMNS)}, {', '.join(later)} FROM runs ORDER BY rowid"
    n = len(RUN_COLUMNS)
    for row in db.execute(query):
        values, stored, extra, stored_extra = row[:n], row[n], row[n + 1 : -1], row[-1]
        name = values[0]
        retrain = f"delete the row (DELETE FROM runs WHERE name='{name}') to retrain it"
        if stored_extra is None and any(v is not None for v in extra):
            raise ValueError(f"run {name} in {path} has {', '.join(EXTRA_COLUMNS)} but no "
                             f"{EXTRA_DIGEST} (edited: this code writes both); {retrain}")
        if stored_extra is not None and extra_digest(name, extra) != stored_extra:
            raise ValueError(
                f"run {name} in {path}: the row does not match its {EXTRA_DIGEST} (edited or "
                f"corrupt); {retrain}"
            )
        if stored is None and (sealed or strict):
            raise ValueError(f"run {name} in {path} has no {DIGEST_COLUMN} "
                             f"{_others(sealed)} (edited: a row written by this code "
                             f"always has one); {retrain}")
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


def _sealed(db: sqlite3.Connection, table: str, present: set[str]) -> tuple[int, bool]:
    """How many rows of ``table`` have a digest, and whether every row must have one (a store
    that this code has opened for writing: it sealed any older rows then)."""
    sealed = db.execute(f"SELECT count({DIGEST_COLUMN}) FROM {table}").fetchone()[0] \
        if DIGEST_COLUMN in present else 0
    return sealed, db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def _others(sealed: int) -> str:
    return (f"while {sealed} other row(s) have one" if sealed
            else "though a driver of this interp, which seals every row, has opened the store")


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
        db.execute("BEGIN")  # one snapshot for the count of digests and the rows
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
        present = {row[1] for row in db.execute("PRAGMA table_info(sweeps)")}
        sealed, strict = _sealed(db, "sweeps", present)
        if DIGEST_COLUMN in present:
            query = f"SELECT {', '.join(SWEEP_COLUMNS)}, {DIGEST_COLUMN} FROM sweeps ORDER BY id"
            for *values, stored in db.execute(query):
                if stored is None and (sealed or strict):
                    raise ValueError(f"sweep log row {values[0]} in {path} has no {DIGEST_COLUMN} "
                                     f"{_others(sealed)} (edited)")
                if stored is not None and row_digest(values, SWEEP_COLUMNS) != stored:
                    raise ValueError(f"sweep log row {values[0]} in {path} does not match its "
                                     f"{DIGEST_COLUMN} (edited or corrupt)")
        return pd.read_sql_query("SELECT * FROM sweeps ORDER BY id", db)
