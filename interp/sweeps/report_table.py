"""A sweep's results as the paper's table, as data: :func:`cells` gives one row per table cell
(a layout row x a column value) with our max/avg accuracy over the seeds that are in the store,
the paper's max/avg from the sweep's ``paper.csv`` (:func:`paper_table`) and the differences;
:func:`runs` reads the sweep's rows from its store. :mod:`interp.sweeps.report` renders it.

Accuracies are in percent here, as in the paper; the store keeps fractions. A run without
numbers (a failed one with no accuracy or steps) is left out of the max/avg and step means,
never read as a number.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from interp.sweeps import store as store_mod
from interp.sweeps.folders import Sweep


def paper_table(sweep: Sweep):
    """The sweep's ``paper.csv`` as a DataFrame (key columns as strings), or None."""
    import pandas as pd

    if sweep.paper_csv is None:
        return None
    try:
        df = pd.read_csv(sweep.paper_csv, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{sweep.paper_csv} is not a readable CSV: {e}") from e
    for col in ("max", "avg"):
        if col not in df.columns:
            raise ValueError(f"{sweep.paper_csv} has no {col!r} column; columns: {list(df.columns)}")
        try:
            df[col] = df[col].astype(float)
        except ValueError as e:
            raise ValueError(f"{sweep.paper_csv}: column {col!r} holds a non-number ({e})") from e
    missing = [c for c in sweep.layout.paper.values() if c not in df.columns]
    if missing:
        raise ValueError(f"{sweep.paper_csv} lacks the columns {missing} that LAYOUT.paper names")
    from interp.sweeps.paper_check import paper_successes

    for i, (mx, avg) in enumerate(zip(df["max"], df["avg"])):
        try:  # the numbers the test reads must be a max and a mean of 5 seeds (percent)
            paper_successes(mx, avg)
        except ValueError as e:
            raise ValueError(f"{sweep.paper_csv}, data row {i + 1}: {e}") from None
    return df


def runs(sweep: Sweep, store: str | os.PathLike | None = None):
    """The store's rows for this sweep's configs (an empty DataFrame if there is no store)."""
    import pandas as pd

    path = Path(store) if store is not None else sweep.default_store
    if not path.is_file():
        return pd.DataFrame(columns=[*store_mod.RUN_COLUMNS, *store_mod.EXTRA_COLUMNS])
    df = store_mod.read(path)
    if df.empty:
        return df
    names = {c.name() for c in sweep.configs}
    df = df[df["name"].isin(names)].reset_index(drop=True)
    return _cross_checked(path, df)


def _cross_checked(path: Path, df):
    """``df`` with every run whose checkpoint's ``config.json`` disagrees with its row (an
    accuracy edited in the row, a swapped model: :func:`interp.sweeps.store_evidence.cross_check`,
    files only) turned into a named failure: status ``evidence disagrees: ...``, no accuracy.
    A forged row is never a score in the table (issue 55)."""
    from interp.sweeps.store_evidence import cross_check

    bad = cross_check(path, names=list(df["name"]), measure=False) if len(df) else {}
    if not bad:
        return df
    df = df.copy()
    hit = df["name"].astype(str).isin(set(bad))
    df.loc[hit, "status"] = [f"evidence disagrees: {bad[str(n)]}" for n in df.loc[hit, "name"]]
    df.loc[hit, "accuracy"] = float("nan")
    return df


def _ordered_unique(values):
    seen = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def cells(sweep: Sweep, df, paper=None):
    """One row per table cell, in the layout's order.

    Columns: the row fields, the paper's extra label columns, the column field, ``declared``
    (runs in CONFIGS), ``runs`` (runs in the store), ``failed``, ``seeds`` and ``accuracies``
    (per seed, %), ``max``/``avg`` (ours, %), ``paper_max``/``paper_avg``, ``diff_max``/
    ``diff_avg`` (ours - paper, percentage points), ``steps`` (mean), ``chance`` (100/n),
    ``seconds`` and ``cpu_seconds`` (mean wall and process CPU seconds per run, over the runs
    that recorded them; None if none did), ``failures`` ((seed, run name, status) of the runs
    that failed).
    """
    import pandas as pd

    layout = sweep.layout
    by_name = {} if df is None or df.empty else {r["name"]: r for _, r in df.iterrows()}
    dicts = [(c, c.to_dict()) for c in sweep.configs]
    row_keys = _ordered_unique(tuple(d[f] for f in layout.rows) for _, d in dicts)
    col_keys = _ordered_unique(d[layout.column] for _, d in dicts)
    extra = [] if paper is None else [
        c for c in paper.columns if c not in ("max", "avg") and c not in layout.paper.values()
    ]
    out = []
    for rk in row_keys:
        for ck in col_keys:
            members = [(c, d) for c, d in dicts
                       if tuple(d[f] for f in layout.rows) == rk and d[layout.column] == ck]
            if not members:
                continue
            stored = [by_name[c.name()] for c, _ in members if c.name() in by_name]
            scored = sorted((int(r["seed"]), 100 * float(r["accuracy"])) for r in stored
                            if _number(r["accuracy"]) is not None)
            accs = [a for _, a in scored]
            row = dict(zip(layout.rows, rk))
            row[layout.column] = ck
            p = _paper_row(paper, layout, {**row})
            for e in extra:
                row[e] = None if p is None else p[e]
            row.update(
                declared=len(members),
                runs=len(stored),
                failed=sum(1 for r in stored if r["status"] != "ok"),
                failures=sorted((int(r["seed"]), r["name"], r["status"]) for r in stored
                                if r["status"] != "ok"),
                seeds=[s for s, _ in scored],
                accuracies=accs,
                max=max(accs) if accs else None,
                avg=sum(accs) / len(accs) if accs else None,
                paper_max=None if p is None else float(p["max"]),
                paper_avg=None if p is None else float(p["avg"]),
                steps=_mean(r["steps"] for r in stored),  # a failed run may have none
                chance=100.0 / members[0][1]["n"],
                seconds=_mean(r.get("seconds") for r in stored),
                cpu_seconds=_mean(r.get("cpu_seconds") for r in stored),
            )
            row["diff_max"] = _diff(row["max"], row["paper_max"])
            row["diff_avg"] = _diff(row["avg"], row["paper_avg"])
            out.append(row)
    return pd.DataFrame(out)


def _mean(values):
    """The mean of the values that are numbers (not None or NaN), or None."""
    xs = [x for x in map(_number, values) if x is not None]
    return sum(xs) / len(xs) if xs else None


def _number(x) -> float | None:
    """``x`` as a float, or None where the store has no number (NULL, read as None or NaN)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _isnan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _diff(a, b):
    return None if a is None or b is None else a - b


def _paper_row(paper, layout, row: dict):
    if paper is None:
        return None
    mask = None
    for name, col in layout.paper.items():
        m = paper[col] == str(row[name])
        mask = m if mask is None else mask & m
    hits = paper[mask] if mask is not None else paper.iloc[0:0]
    return None if hits.empty else hits.iloc[0]


def _none(x):
    return None if x is None or _isnan(x) else x


def _extra_cols(table, layout) -> list[str]:
    known = {*layout.rows, layout.column, "declared", "runs", "failed", "seeds", "accuracies",
             "max", "avg", "paper_max", "paper_avg", "diff_max", "diff_avg", "steps", "chance",
             "seconds", "cpu_seconds", "failures"}
    return [c for c in table.columns if c not in known]


def _rows(table, layout):
    if table.empty:
        return []
    keys = _ordered_unique(tuple(r[f] for f in layout.rows) for _, r in table.iterrows())
    out = []
    for k in keys:
        mask = None
        for f, v in zip(layout.rows, k):
            m = table[f] == v
            mask = m if mask is None else mask & m
        out.append((k, table[mask]))
    return out
