"""The atlas's code geometry of every successful lookup (issue 51, item 3).

For each successful seed whose routing is a lookup (:func:`atlas_das.wanted`), the figure its
codes draw where the last layer reads them (:func:`interp.inspect.mechanism.figures.measure_model`:
the value at the read slot through ``W_O``, the target key through ``W_K^T``, read where the
row's ``at`` says):

================== ================================================================================
column             meaning
================== ================================================================================
geometry,          :func:`figures.label` of the value's / the target key's measures (``simplex``,
key_geometry       ``orthoplex``, ``circle``, ``codebook``, ``unnamed``, ``untestable``); recomputed
                   from the measures below on every build, as the atlas's other labels are
value_fig_<m>,     the measures :data:`MEASURES` of each code (``figures.table_measures``); the
query_fig_<m>      value's also ``dual`` (self-duality with W_U) and ``margin`` (the read-out's)
geometry_with      how they were measured (:func:`geometry_with`); a cached row measured the same
                   way keeps its columns, any other successful lookup is measured again
================== ================================================================================

Other rows have NaN and an empty label. A code whose table is zero (not read there) has label
``untestable`` and NaN measures.
"""

from __future__ import annotations

import logging
import math

from interp.inspect.studies.atlas_cache import text
from interp.inspect.studies.atlas_das import wanted
from interp.sweeps.store import CheckpointMismatch, checked_model

log = logging.getLogger(__name__)

#: ``figures.table_measures``'s columns (``n`` is the row's own)
MEASURES = ("norm_cv", "cos_sd", "simplex_dev", "orthoplex_dev", "cos_max", "pr", "top2", "rcv", "gap", "collapse")
VALUE_ONLY = ("dual", "margin")
LABELS = {"value": "geometry", "query": "key_geometry"}
KEY = "geometry_with"
SEED, CONTEXTS = 0, 32


def columns(variable: str) -> list[str]:
    extra = VALUE_ONLY if variable == "value" else ()
    return [f"{variable}_fig_{m}" for m in MEASURES + extra]


COLUMNS = tuple(columns("value") + columns("query"))


def geometry_with(batch_size: int) -> str:
    """How the columns were measured: inputs, seed and contexts (the thresholds are not in it:
    the labels are recomputed from the measures)."""
    return f"batch={min(batch_size, 512)};seed={SEED};contexts={CONTEXTS}"


def _empty(row: dict) -> None:
    row.update({c: math.nan for c in COLUMNS}, **{KEY: ""})


def measured_columns(model, at: str, batch_size: int) -> dict:
    """The :data:`COLUMNS` of one model, its codes read where ``at`` says."""
    from interp.inspect.mechanism import figures

    shape = figures.measure_model(model, batch_size=min(batch_size, 512), contexts=CONTEXTS, seed=SEED, at=at)
    out = {}
    for variable in LABELS:
        m = shape[variable]
        for column in columns(variable):
            out[column] = float(m.get(column.split("_fig_")[1], math.nan))
    return out


def relabel(row: dict) -> None:
    """In place: ``geometry`` and ``key_geometry`` from the row's measures ("" where not measured)."""
    from interp.inspect.mechanism import figures

    for variable, name in LABELS.items():
        m = {k: row.get(f"{variable}_fig_{k}", math.nan) for k in MEASURES}
        if not text(row.get(KEY)):
            row[name] = ""
        elif all(isinstance(v, float) and math.isnan(v) for v in m.values()):
            row[name] = "untestable"  # a zero code table: not read there
        else:
            row[name] = figures.label({**m, "n": int(row["n"])})


def add_geometry(rows: list[dict], store_path, stored: dict, *, batch_size: int, progress=None) -> dict:
    """In place: :data:`COLUMNS`, :data:`KEY` and the two labels on every successful lookup of
    ``rows`` (atlas rows, labelled), measured unless cached with this :func:`geometry_with`;
    NaN elsewhere. ``stored``: the store's rows by name. Returns ``{"measured", "cached"}``."""
    from interp.training.machine import one_thread

    key = geometry_with(batch_size)
    todo, cached = [], 0
    for row in rows:
        if not wanted(row):
            _empty(row)
        elif text(row.get(KEY)) == key and all(c in row for c in COLUMNS):
            cached += 1
        else:
            todo.append(row)
    it = todo if progress is None else progress(todo, total=len(todo), desc="geometry")
    measured = 0
    with one_thread():
        for row in it:
            _empty(row)
            try:
                model = checked_model(store_path, stored[row["name"]])
            except (CheckpointMismatch, KeyError) as e:
                log.warning("geometry skipped: run %s: %s", row["name"], e)
                continue
            row.update(measured_columns(model, str(row.get("at", "value")), batch_size), **{KEY: key})
            measured += 1
    for row in rows:
        relabel(row)
    return {"measured": measured, "cached": cached}
