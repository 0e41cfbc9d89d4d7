"""The atlas's two levels (issue 42): per panel, how the successful seeds route and how the ones
that route like the construction write their values and target keys.

:func:`levels_markdown` is the ``## Two levels`` section of ``atlas.md``
(:func:`interp.inspect.studies.atlas.markdown`): one row per panel with the successful seeds by
:func:`interp.inspect.mechanism.levels.routing`, then, among those routed ``lookup``, by the value's and
the target key's :func:`~interp.inspect.mechanism.levels.code` and the median interchange dimension of the
value code (:mod:`interp.inspect.mechanism.codes`). An atlas written before issue 42 has no code columns:
its codes read ``unmeasured``.

:func:`add_formation` (issue 46) gives each run that ``interp timeline`` measured (the sweep's
``timeline.csv``, :func:`interp.inspect.studies.explore_timeline.load`) its formation steps, and
:func:`formation_markdown` is ``atlas.md``'s per-cell table of them.
"""

from __future__ import annotations

import logging
import math

from interp.inspect.studies.atlas_figures import panels

ROUTES = ("lookup", "mirror", "inverted", "mlp-lookup", "other", "none", "untestable", "unmeasured")
CODE_KINDS = ("circle", "uneven-circle", "low-dim", "codebook", "unread", "untestable", "unmeasured")


def _counts(values, kinds) -> str:
    got = {k: int((values == k).sum()) for k in kinds}
    rest = int(len(values) - sum(got.values()))
    return " | ".join(str(got[k]) for k in kinds) + f" | {rest}"


def levels_markdown(df) -> list[str]:
    """The section's lines (module docstring); rows with neither level say so."""
    if "routing" not in df:
        return ["This atlas has no routing or code columns (written before issue 42)."]
    head = ["| panel | successful | " + " | ".join(ROUTES) + " | other labels |",
            "|---|--:|" + "--:|" * (len(ROUTES) + 1)]
    code_head = ["| panel | lookup seeds | values: " + " | ".join(CODE_KINDS) + " | other | "
                 "keys: circle | keys: not circle | value dimension (median) |",
                 "|---|--:|" + "--:|" * (len(CODE_KINDS) + 1) + "--:|--:|--:|"]
    rows, code_rows = [], []
    for title, sub in panels(df):
        ok = sub[sub["outcome"] == "success"]
        if not len(ok):
            continue
        rows.append(f"| {title} | {len(ok)} | {_counts(ok['routing'], ROUTES)} |")
        look = ok[ok["routing"] == "lookup"]
        if len(look):
            keys = look.get("key_code")
            circle_keys = int((keys == "circle").sum()) if keys is not None else 0
            dims = look["value_dim"].astype(float).dropna() if "value_dim" in look else []
            median = f"{float(dims.median()):g}" if len(dims) else "n/a"
            code_rows.append(f"| {title} | {len(look)} | {_counts(look['code'], CODE_KINDS)} | "
                             f"{circle_keys} | {len(look) - circle_keys} | {median} |")
    lines = ["Successful seeds by routing (`interp.inspect.mechanism.levels.routing`):", "", *head, *rows, "",
             "Successful seeds routed `lookup`, by code (`interp.inspect.mechanism.levels.code`; "
             "`experiments/calibration/calibration.md` gives each label's rates on nulls and "
             "controls; uneven-circle and low-dim are not told apart reliably at n <= 10):", "",
             *code_head, *code_rows]
    return lines


def code_shares(df) -> dict:
    """Among successful seeds routed ``lookup`` with a measured code: how many, and the share of
    each value code (for claims and tests)."""
    if "code" not in df:
        return {"lookup": 0}
    look = df[(df["outcome"] == "success") & (df["routing"] == "lookup") & (df["code"] != "unmeasured")]
    out = {"lookup": int(len(look))}
    for k in CODE_KINDS:
        out[k] = float((look["code"] == k).mean()) if len(look) else math.nan
    return out


FORMATION = ("routing_forms", "code_settles", "plateau_exit")


def add_formation(df, store_path):
    """``df`` with the columns :data:`FORMATION` for the runs the sweep's timelines cover
    (:func:`interp.inspect.studies.timelines.formation`); ``df`` itself when there is no timeline."""
    import pandas as pd

    from interp.inspect.studies.explore_timeline import load
    from interp.inspect.studies.timelines import formation

    tl = load(store_path)
    if tl is None:
        return df
    for run, why in tl.attrs.get("notes", {}).items():  # a timeline that does not check (issue 55)
        logging.getLogger(__name__).warning("timeline of run %s not used: %s", run, why)
    if tl.empty:
        return df
    found = pd.DataFrame([{k: v for k, v in formation(rows).items() if k in ("run", *FORMATION)}
                          for _, rows in tl.groupby("run")]).rename(columns={"run": "name"})
    return df.drop(columns=[c for c in FORMATION if c in df]).merge(found, on="name", how="left")


def formation_markdown(df) -> list[str]:
    """Per cell with timelines: seeds with one, and the median step at which the routing formed
    (over the seeds where it formed), the value code settled and the loss left its plateau."""
    if "code_settles" not in df or not df["code_settles"].notna().any():
        return ["No run has a timeline (`interp timeline STORE` makes them)."]
    cell = ["case", "n", "d_token", "n_layers", "architecture", "function"]
    lines = ["| cell | seeds with a timeline | routing formed in | median routing forms | "
             "median code settles | median plateau exit |", "|---|--:|--:|--:|--:|--:|"]
    timed = df[df["code_settles"].notna()]
    for key, sub in timed.groupby(cell):
        med = lambda c: f"{float(sub[c].dropna().median()):g}" if sub[c].notna().any() else "n/a"
        lines.append(f"| {', '.join(str(k) for k in key)} | {len(sub)} | {int(sub.routing_forms.notna().sum())} | "
                     f"{med('routing_forms')} | {med('code_settles')} | {med('plateau_exit')} |")
    return lines
