"""The atlas's learned (DAS) dimension of every successful lookup, beside the principal-axes bound.

``value_dim`` and ``query_dim`` (:mod:`interp.inspect.mechanism.codes`) are the least k whose
interchange along the code table's top-k principal axes carries the variable: an upper bound on
the code's dimension. ``value_das_dim`` and ``query_das_dim`` are the least k a learned rotation
needs (:func:`interp.inspect.mechanism.das.learned_dim`: k searched upward to at most
``min(MAX_K, bound - 1)``, the bound itself when no smaller k reaches ``iia_min``), computed by
its batched form (:func:`interp.inspect.mechanism.das_batch.learned_dims`) for every successful
seed whose routing is a lookup (``lookup``, or ``mirror``: the lookup read at the key position,
measured there as ``at`` says), the seeds of one cell stacked. Other rows have NaN.

The inputs are the code measure's: ``min(batch_size, 256)`` inputs and seed 0, as
:func:`interp.inspect.mechanism.codes.summary` draws them, so the search's bound is the row's own
``value_dim`` / ``query_dim``. ``das_with`` records how (:func:`das_with`); a cached row whose
``das_with`` is this one keeps its columns, any other successful lookup is searched again.
"""

from __future__ import annotations

import logging
import math

from interp.sweeps.store import CheckpointMismatch, checked_model

log = logging.getLogger(__name__)

COLUMNS = ("value_das_dim", "query_das_dim")
KEY = "das_with"
#: the routings whose seeds are lookups (:func:`interp.inspect.mechanism.levels.routing`)
LOOKUPS = ("lookup", "mirror")
STEPS, MAX_K, SEED = 300, 3, 0
#: seeds stacked at most in one search (memory: the query's keys are [seeds, batch, pos, d])
CHUNK = 16
#: the fields that make a cell: seeds of one cell have one shape and are stacked
CELL = ("case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "mlp", "function", "architecture")


def code_batch(batch_size: int) -> int:
    """The inputs the code measure draws (:func:`interp.inspect.mechanism.measure.measure`)."""
    return min(batch_size, 256)


def das_with(batch_size: int) -> str:
    """How the columns were computed: the search's settings and the threshold it used."""
    from interp.inspect.mechanism.calibration import THRESHOLDS

    return (f"batch={code_batch(batch_size)};seed={SEED};steps={STEPS};max_k={MAX_K};"
            f"iia_min={THRESHOLDS['iia_min']}")


def wanted(row: dict) -> bool:
    """A successful lookup: the rows that carry the learned dimension."""
    return row.get("outcome") == "success" and row.get("routing") in LOOKUPS


def _dim(x) -> float:
    return math.nan if x.dim is None else float(x.dim)


def _search(models: list, ats: list[str], batch_size: int) -> list[dict]:
    """Both variables' learned dimensions of models of one cell, in chunks of :data:`CHUNK`."""
    from interp.inspect.mechanism import das_batch

    out = [{} for _ in models]
    for start in range(0, len(models), CHUNK):
        part, where = models[start:start + CHUNK], ats[start:start + CHUNK]
        for variable in ("value", "query"):
            got = das_batch.learned_dims(part, variable, at=where, batch_size=code_batch(batch_size),
                                         seed=SEED, steps=STEPS, max_k=MAX_K)
            for i, g in enumerate(got):
                out[start + i][f"{variable}_das_dim"] = _dim(g)
    return out


def _load(rows: list[dict], store_path, stored: dict) -> list[tuple[dict, object]]:
    """(row, model) for each row whose checkpoint passes the store's checks and whose attention
    has a gradient (softmax: a hard mode has none to learn through); others logged, left NaN."""
    from interp.core import attention

    loaded = []
    for row in rows:
        try:
            model = checked_model(store_path, stored[row["name"]])
        except (CheckpointMismatch, KeyError) as e:
            log.warning("learned dimension skipped: run %s: %s", row["name"], e)
            continue
        hard = [m.mode for m in attention.modes(model) if m.mode != "softmax"]
        if hard:
            log.warning("learned dimension skipped: run %s: attention modes %s (accepted: softmax)",
                        row["name"], hard)
            continue
        loaded.append((row, model))
    return loaded


def add_das(rows: list[dict], store_path, stored: dict, *, batch_size: int, progress=None) -> dict:
    """In place: :data:`COLUMNS` and :data:`KEY` on every successful lookup of ``rows`` (atlas
    rows, labelled) that lacks this search's columns, NaN on the other rows; ``stored``: the
    store's rows by name. Returns ``{"searched": ..., "cached": ...}`` (rows)."""
    from interp.training.machine import one_thread

    key = das_with(batch_size)
    cells: dict[tuple, list[dict]] = {}
    cached = 0
    for row in rows:
        if not wanted(row):
            row.update({c: math.nan for c in COLUMNS}, **{KEY: ""})
        elif str(row.get(KEY)) == key and all(c in row for c in COLUMNS):
            cached += 1
        else:
            cells.setdefault(tuple(str(row[c]) for c in CELL), []).append(row)
    groups = list(cells.values())
    it = groups if progress is None else progress(groups, total=len(groups), desc="learned dimension, cells")
    searched = 0
    with one_thread():
        for group in it:
            loaded = _load(group, store_path, stored)
            by_shape: dict[tuple, list] = {}
            for row, model in loaded:
                by_shape.setdefault(_shape(model), []).append((row, model))
            for pairs in by_shape.values():
                got = _search([m for _, m in pairs], [str(r.get("at", "value")) for r, _ in pairs], batch_size)
                for (row, _), cols in zip(pairs, got):
                    row.update(cols, **{KEY: key})
                    searched += 1
            for row in group:
                if row.get(KEY) != key:
                    row.update({c: math.nan for c in COLUMNS}, **{KEY: ""})
    return {"searched": searched, "cached": cached}


def _shape(model) -> tuple:
    """What must agree for models to be stacked (:data:`das_batch.SHAPE`, and the task)."""
    from interp.inspect.mechanism import das_batch
    from interp.inspect.tools import hooks

    task, n = hooks.check_model(model)
    return (task.case, n, *(getattr(model.cfg, f) for f in das_batch.SHAPE))
