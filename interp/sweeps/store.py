"""The results store: one SQLite file per sweep, one row per training run, readable with pandas.

Layout on disk (``DIR/results/`` by default, see :mod:`interp.sweeps.driver`)::

    store.sqlite                 the table ``runs`` (below) and the table ``sweeps`` (invocations)
    checkpoints/<run name>/      model.safetensors + config.json (interp.training.checkpoints format)

The store's formats (the schema of ``runs`` and ``sweeps``, the row checksums, what a store
file is) are in :mod:`interp.sweeps.store_schema`, its readers (:func:`read`, :func:`verify`,
:func:`read_sweeps`, :func:`checkpoint_problems`) in :mod:`interp.sweeps.store_read`, the
cross-checks of a run's evidence (:func:`checked_model`, :func:`cross_check`) in
:mod:`interp.sweeps.store_evidence`; this
module holds the writer, :class:`Store`, with its in-place migration of older stores, and
names all of them, so ``from interp.sweeps import store`` gives the whole store.

Atomicity. Only the sweep driver writes the store, one run per transaction, and only after the
run's checkpoint folder is complete and renamed into place (:func:`place_checkpoint`). A driver
killed at any point leaves either no row (the run reruns next time; a stray checkpoint folder
without a row is overwritten) or a complete row whose checkpoint is complete. The rollback
journal (not WAL) keeps the store a single file that can be committed or copied as is.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

# the files beside the store, re-exported: the driver's lock and the checkpoint folders
from interp.sweeps.store_files import DriverLock as DriverLock
from interp.sweeps.store_files import check_header, sqlite_uri
from interp.sweeps.store_files import real_path as real_path
from interp.training.files import _create_beside
from interp.sweeps.store_files import clean_partial as clean_partial
from interp.sweeps.store_files import place_checkpoint as place_checkpoint
from interp.sweeps.store_files import replace_folder as replace_folder
from interp.sweeps.store_files import write_synced as write_synced
# the readers and the formats, re-exported: every caller imports them from here
from interp.sweeps.store_read import _checkpoint_problems, _verify_rows
from interp.sweeps.store_read import CheckpointMismatch as CheckpointMismatch
from interp.sweeps.store_read import checked_checkpoint as checked_checkpoint
from interp.sweeps.store_read import checkpoint_problems as checkpoint_problems
from interp.sweeps.store_read import read as read
from interp.sweeps.store_read import read_sweeps as read_sweeps
from interp.sweeps.store_read import verify as verify
from interp.sweeps.store_read import metrics_problem as metrics_problem
from interp.sweeps.store_read import shape_problem as shape_problem
# the cross-checks of a run's evidence (issue 55), re-exported likewise
from interp.sweeps.store_evidence import checked_model as checked_model
from interp.sweeps.store_evidence import cross_check as cross_check
from interp.sweeps.store_evidence import store_of_folder as store_of_folder
from interp.sweeps.store_evidence import timeline_problems as timeline_problems
from interp.sweeps.store_schema import (  # noqa: F401 - re-exported
    _LATER, _SCHEMA, APPLICATION_ID, DIGEST_COLUMN, EXTRA_COLUMNS, EXTRA_DIGEST, RUN_COLUMNS,
    SCHEMA_VERSION, SWEEP_COLUMNS, RunRecord, extra_digest, identify, now, recognise,
    row_digest, sqlite_problem,
)


class Store:
    """Read-write access to a store file (the sweep driver's; everyone else uses :func:`read`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = real_path(path)  # a link: its real file, whose folder holds the checkpoints
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
        rel = None if checkpoint is None else os.path.relpath(os.path.realpath(checkpoint), self.root)
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

    def drop_checkpoints(self) -> int:
        """Every run's ``checkpoint`` and ``checksums`` set to NULL and its digests recomputed, in
        one transaction: each run then reads as one stored by ``interp sweep --no-checkpoints``
        (trained, its row intact, no model to load). Only :func:`copy_rows` calls it, on a copy.
        Returns the number of runs."""
        columns = (*RUN_COLUMNS, *EXTRA_COLUMNS)
        with self._transaction():
            self._db.execute("UPDATE runs SET checkpoint=NULL, checksums=NULL")
            rows = self._db.execute(f"SELECT {', '.join(columns)} FROM runs").fetchall()
            for stored in rows:
                base, extra = stored[: len(RUN_COLUMNS)], stored[len(RUN_COLUMNS):]
                self._db.execute(f"UPDATE runs SET {DIGEST_COLUMN}=?, {EXTRA_DIGEST}=? WHERE name=?",
                                 (row_digest(base), extra_digest(base[0], extra), base[0]))
        return len(rows)

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


def copy_rows(src: str | os.PathLike, dest: str | os.PathLike) -> int:
    """Write ``dest``: the store ``src`` with every run's and every sweep's row but no
    checkpoint (:meth:`Store.drop_checkpoints`), the form to commit to git or carry to a machine
    without the checkpoint folders, where its runs count as trained (``interp sweep`` trains
    none of them again) and cannot be loaded. ``src`` is verified first (an edited row raises
    before a byte is written) and copied with SQLite's backup API (consistent while a sweep
    writes it); ``dest`` is written through a new temporary file beside it and a rename, so an
    interrupted copy leaves an earlier ``dest`` whole. Both paths are resolved first (a link is
    followed to its file). An existing ``dest`` is replaced only if it is an earlier rows-only
    copy of ``src`` (:func:`earlier_copy_problem`); anything else there (another store, a
    user's file, another program's SQLite file) is refused, untouched. Returns the number of
    runs."""
    src, dest = real_path(src, "store"), real_path(dest, "dest")
    if dest.is_dir():
        raise ValueError(f"dest {dest} is a folder; accepted: an SQLite file path")
    if dest.exists() and dest == src:
        raise ValueError(f"dest {dest} is the store itself; accepted: another path")
    verify(src)
    if dest.exists() or dest.is_symlink():
        why = earlier_copy_problem(src, dest)
        if why is not None:
            raise ValueError(f"dest {dest} exists and is not an earlier `interp store rows` copy of "
                             f"{src} ({why}); it is left as it is: move it away or pass another dest")
    fd, tmp_name = _create_beside(dest)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()  # SQLite's backup writes a fresh file there; the name was reserved above
        with closing(sqlite3.connect(sqlite_uri(src, "ro"), uri=True)) as a, closing(sqlite3.connect(tmp)) as b:
            a.backup(b)
        with Store(tmp) as db:
            runs = db.drop_checkpoints()
        verify(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return runs


def earlier_copy_problem(src: str | os.PathLike, dest: str | os.PathLike) -> str | None:
    """Why the existing file ``dest`` may not be replaced by a rows-only copy of the store
    ``src`` (None: it may). The rule ("an earlier rows-only copy of the same store"), from what
    both stores record:

    * ``dest`` is a results store (recognised, :func:`identify`; a user's file or another
      program's SQLite file is not) whose rows verify;
    * it holds no checkpoint: every row's ``checkpoint`` and ``checksums`` are NULL (what
      :func:`copy_rows` writes; a live store, with its checkpoints beside it, is never replaced);
    * its runs are a subset of ``src``'s run names, each with the same ``sweep`` name (a store
      only gains runs; a run of another sweep or another store's run is not ``src``'s);
    * its sweeps log is a prefix of ``src``'s: every ``(id, sweep, started_at)`` it holds is in
      ``src``'s log (the log is append-only, and two stores' invocations never start at the
      same second with the same id by chance: another store of the same sweep folder differs).
    """
    src, dest = Path(src), Path(dest)
    if dest.is_symlink() or not dest.is_file():
        return "not a plain file"
    try:
        check_header(dest)
        kind = identify(dest)
        if kind is None:
            return "a write left unfinished there"
        verify(dest)
        with closing(sqlite3.connect(sqlite_uri(dest, "ro"), uri=True)) as d, \
                closing(sqlite3.connect(sqlite_uri(src, "ro"), uri=True)) as s:
            if kind == "new":  # an SQLite file without tables: an empty store, nothing to lose
                return None
            kept = d.execute("SELECT count(*) FROM runs WHERE checkpoint IS NOT NULL OR checksums IS NOT NULL")
            if kept.fetchone()[0]:
                return "a store with checkpoints, not a rows-only copy"
            ours = dict(s.execute("SELECT name, sweep FROM runs"))
            for name, sweep in d.execute("SELECT name, sweep FROM runs ORDER BY rowid"):
                if ours.get(name, None) != sweep:
                    return f"its run {name} of sweep {sweep!r} is not a run of that store"
            log = set(s.execute("SELECT id, sweep, started_at FROM sweeps"))
            for row in d.execute("SELECT id, sweep, started_at FROM sweeps ORDER BY id"):
                if tuple(row) not in log:
                    return f"its sweep log row {row[0]} ({row[1]!r} started {row[2]}) is not in that store's log"
    except (ValueError, sqlite3.Error) as e:
        text = str(e)
        return text.replace(str(dest), "it") if isinstance(e, ValueError) else f"unreadable: {text}"
    return None

