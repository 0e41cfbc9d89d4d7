"""Reading a results store, writing nothing: :func:`read` (the ``runs`` table as a DataFrame,
every row verified), :func:`read_sweeps` (the ``sweeps`` log), :func:`verify` (the row
checksums, and with ``files=True`` the checkpoint files), :func:`checkpoint_problems`, and
:func:`checked_checkpoint` (one run's checkpoint folder against its row, before a reader
measures it).

Each first recognises the file (:func:`interp.sweeps.store_schema.identify`), then reads in one
snapshot; the formats are :mod:`interp.sweeps.store_schema`'s.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from interp.sweeps.store_files import check_header, sha256, sqlite_uri
from interp.sweeps.store_schema import (
    APPLICATION_ID, DIGEST_COLUMN, EXTRA_COLUMNS, EXTRA_DIGEST, RUN_COLUMNS, SWEEP_COLUMNS,
    _not_a_store, extra_digest, identify, row_digest,
)


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


class CheckpointMismatch(ValueError):
    """A run's checkpoint folder does not hold that run's model (:func:`checked_checkpoint`):
    the message names the run, the folder and what did not match. A ValueError, so every
    command's one-line handler reports it."""

    def __init__(self, run: str, folder, what: str):
        self.run, self.folder, self.what = run, folder, what
        super().__init__(f"run {run}: checkpoint folder {folder}: {what}")


def checked_checkpoint(store_path: str | os.PathLike, row) -> Path:
    """The checkpoint folder of the stored run ``row``, checked against that row; raises
    :class:`CheckpointMismatch` (a ValueError naming the run, the folder and what did not
    match) before anyone loads or measures it.

    ``store_path``: the store file the row was read from (a link is followed; a relative
    ``checkpoint`` is taken from the store's real folder). ``row``: one run of
    :func:`read` (a pandas row or a dict) with at least ``name``, ``checkpoint`` (the folder,
    absolute as :func:`read` gives it, or relative to the store's folder as stored),
    ``checksums`` (the ``{file name: sha256}`` the store recorded, as a dict or its JSON; None in
    rows of stores older than checksums) and ``config`` (the run's TrainConfig as JSON, as the
    store holds it; or a dict). Checked, in order:

    1. the row has a checkpoint and the folder exists (a run stored without checkpoints, or one
       whose folder was deleted, is refused);
    2. every file the row's ``checksums`` names exists and hashes as recorded: a folder swapped
       with another run's, a retrained or replaced model (``interp train --force`` into it), a
       flipped byte, are all refused here. A row without checksums skips this check;
    3. the checkpoint's ``config.json`` is an interp checkpoint whose ``sha256`` is that of
       its ``model.safetensors``, and whose ``train_config`` (where it stored one) is this run's:
       the same ``case``, ``n``, ``d_token``, ``n_layers``, ``pos_embed`` and ``d_mlp`` as the
       row's config (a checkpoint of another case or shape is refused naming the field), then
       the same whole config (seed and protocol included, compared as canonical
       ``TrainConfig`` objects), even when the store's checksums were recomputed over it;
    4. the run's metrics that ``config.json`` recorded when the run was saved (``result``: its
       status, steps and test accuracy) are the row's: a row whose accuracy was edited, its
       checksums recomputed, is refused here (issue 55);
    5. the model ``config.json`` describes (its ``hooked_config``: layers, widths, vocabulary,
       context) is the one the row's config builds: a checkpoint of another shape whose
       ``train_config`` was edited to match the row is refused here (its weights must fit what
       ``config.json`` describes to load at all, so the chain weights, ``config.json``, row holds).

    Returns the folder (a ``Path``); it does not load the weights (``checkpoints.load`` then
    checks that they are finite and fit the model described;
    :func:`interp.sweeps.store_evidence.checked_model` does that and measures the accuracy
    again). Reads only.
    """
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    name = str(get("name"))
    ckpt = get("checkpoint")
    if not isinstance(ckpt, str) or not ckpt:
        raise CheckpointMismatch(name, None, "the store row has no checkpoint (stored without one)")
    folder = Path(os.path.realpath(store_path)).parent / ckpt  # an absolute ckpt stays as it is
    if not folder.is_dir():
        raise CheckpointMismatch(name, folder, "the folder is missing")
    _check_files(name, folder, get("checksums"))
    _check_config(name, folder, get)
    return folder


def _check_files(name: str, folder: Path, sums) -> None:
    """:func:`checked_checkpoint`'s step 2: the files against the row's checksums."""
    if isinstance(sums, str):
        sums = json.loads(sums) if sums else None
    if isinstance(sums, dict):
        for fname, expected in sums.items():
            f = folder / fname
            if not f.is_file():
                raise CheckpointMismatch(name, folder, f"{fname} is missing")
            if sha256(f.read_bytes()) != expected:
                raise CheckpointMismatch(name, folder, f"{fname} does not hash as the store recorded "
                                                       "(replaced, swapped with another run's, or corrupt)")


def _check_config(name: str, folder: Path, get) -> None:
    """:func:`checked_checkpoint`'s steps 3-5: config.json against its weights and the row."""
    from interp.training.checkpoints import CONFIG, WEIGHTS, read_meta
    from interp.training.runs import TrainConfig

    try:
        meta = read_meta(folder)
    except ValueError as e:
        raise CheckpointMismatch(name, folder, str(e)) from None
    if sha256((folder / WEIGHTS).read_bytes()) != meta.get("sha256"):
        raise CheckpointMismatch(name, folder, f"{WEIGHTS} does not match the sha256 in its {CONFIG}")
    own, stored = meta.get("train_config"), get("config")
    if isinstance(stored, str):
        stored = json.loads(stored)
    if isinstance(own, dict) and isinstance(stored, dict):
        for key in ("case", "n", "d_token", "n_layers", "pos_embed", "d_mlp"):
            if key in stored and own.get(key, stored[key]) != stored[key]:
                raise CheckpointMismatch(name, folder, f"its {CONFIG} is of {key}={own.get(key)!r}, the "
                                                       f"store's run of {key}={stored[key]!r}")
        try:
            theirs, ours = TrainConfig.from_dict(own), TrainConfig.from_dict(stored)
        except (ValueError, TypeError) as e:
            raise CheckpointMismatch(name, folder, f"its {CONFIG}'s train_config is not a config ({e})") from None
        if theirs != ours:  # canonical configs compared, not names: a name of an older interp stays valid
            raise CheckpointMismatch(name, folder, f"its {CONFIG} is run {theirs.name()}'s ({theirs.label()}), "
                                                   f"not this run's ({ours.label()})")
    problem = metrics_problem(meta.get("result"), get)
    if problem is None and isinstance(stored, dict):
        model = meta.get("model") or {}
        described, spec = model.get("hooked_config"), model.get("spec")
        if isinstance(described, dict):
            problem = shape_problem(described, stored, spec if isinstance(spec, dict) else None)
    if problem is not None:
        raise CheckpointMismatch(name, folder, f"{problem} ({CONFIG} and the store row disagree)")


#: the model's shape as the row's config fixes it: the HookedTransformerConfig fields that size its
#: weights, but the head's width (the paper's constructions use a narrower head than a trained
#: model of the same d_model; a model with a spec has its head compared through the spec)
SHAPE = ("n_layers", "d_model", "n_ctx", "d_vocab", "d_vocab_out", "attn_only", "d_mlp")


def shape_problem(described, config, spec=None) -> str | None:
    """How the model ``described`` (a checkpoint's ``hooked_config`` dict, or a model's
    HookedTransformerConfig) differs in shape (:data:`SHAPE`; ``d_mlp`` only with an MLP) from
    the one the run ``config`` (a TrainConfig, or its dict) builds, or how its architecture
    ``spec`` (a ModelSpec or its dict, where the model has one) differs from the config's; None
    when neither does."""
    import dataclasses

    from interp.core import models
    from interp.training.runs import TrainConfig

    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(dict(config))
    want = models.hooked_config(config.spec)
    get = described.get if isinstance(described, dict) else (lambda k, d=None: getattr(described, k, d))
    for key in SHAPE:
        if key == "d_mlp" and (want.attn_only or get("attn_only", want.attn_only)):
            continue
        have = get(key, getattr(want, key))
        if have != getattr(want, key):
            return (f"the model is of {key}={have!r}, the store's run ({config.label()}) builds "
                    f"{key}={getattr(want, key)!r}")
    if spec is not None:
        have = spec if isinstance(spec, dict) else dataclasses.asdict(spec)
        ours = dataclasses.asdict(config.spec)
        for key, value in ours.items():
            if key in have and json.dumps(have[key], default=str) != json.dumps(value, default=str):
                return (f"the model's spec is of {key}={have[key]!r}, the store's run ({config.label()}) "
                        f"has {key}={value!r}")
    return None


def metrics_problem(result, get) -> str | None:
    """How a checkpoint's recorded metrics (``config.json``'s ``result``: accuracy, steps,
    status) differ from the store row's (``get``: the row's field getter); None when they agree
    or the checkpoint recorded none (a bare model's). Both were written from the same training
    result, so the accuracy is compared exactly (to 1e-12)."""
    if not isinstance(result, dict):
        return None
    for key in ("status", "steps", "accuracy"):
        mine, theirs = get(key), result.get(key)
        if mine is None or theirs is None or _missing(mine) or _missing(theirs):
            continue
        try:
            same = str(mine) == str(theirs) if key == "status" else abs(float(mine) - float(theirs)) <= 1e-12
        except (TypeError, ValueError):
            same = False
        if same:
            continue
        shown = (lambda x: repr(str(x))) if key == "status" else (lambda x: repr(float(x)) if key == "accuracy"
                                                                   else repr(int(float(x))))
        try:
            return f"its recorded {key} is {shown(theirs)}, the store row's {shown(mine)}"
        except (TypeError, ValueError):
            return f"its recorded {key} is {theirs!r}, the store row's {mine!r}"
    return None


def _missing(x) -> bool:
    return isinstance(x, float) and math.isnan(x)
