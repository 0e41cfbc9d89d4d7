"""The store's formats, which its writer (:mod:`interp.sweeps.store`) and its readers
(:mod:`interp.sweeps.store_read`) must agree on bit for bit: the schema, the row checksums and
what a store file is.

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

Integrity. :meth:`interp.sweeps.store.Store.put` writes ``row_sha256`` with every row; ``read`` (hence
``interp report`` and ``interp analyze-sweep``) and the sweep driver recompute it and refuse a
row whose content no longer matches with a ValueError naming the run and the store, so an
edited or corrupted row is never used silently. Rows written before the column existed (older
stores) have ``row_sha256`` NULL and are read *unverified* (``verify`` counts them) until a
driver opens the store and seals them as they are; a row without it beside rows with one, or
in a store this code has opened, is an edit and refused (the ``sweeps`` log likewise).
``row_sha256`` covers the first schema's columns only, so it means the same in every store and
every version of this code; columns added since (``cpu_seconds``) are sealed by
``extra_sha256``. An older store gains the new columns, NULL in its old rows, when a driver
opens it (a reader of a store not yet opened by one gives them as NaN); code older than the
columns still reads and writes a store that has them. ``verify(files=True)`` also hashes each
checkpoint's files against ``checksums`` (``interp.training.checkpoints.load`` checks the
weights against ``config.json`` on every load anyway).

Identity. A store carries ``PRAGMA application_id`` :data:`APPLICATION_ID` from the first time
this code opens it for writing. Every reader and the writer first :func:`recognise` the file,
writing nothing (:func:`identify`): another program's SQLite file (with or without a table
called ``runs``) or a store of a newer schema is refused with one line naming it, before a row
is read or a byte written.
"""

from __future__ import annotations

import json
import math
import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from interp.sweeps.store_files import sha256, sqlite_quiet, sqlite_uri

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
    until the driver places them; it is empty when the run produced no model. ``timeline``
    likewise holds its snapshots' files (``interp sweep --snapshots``:
    :func:`interp.training.snapshot_files.timeline_files`), placed in the checkpoint's
    ``timeline/`` folder before the row commits; empty without snapshots.
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
    timeline: dict[str, bytes] = field(default_factory=dict, repr=False)

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
