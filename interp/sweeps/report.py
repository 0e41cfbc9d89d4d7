"""Turn a sweep's results store into the paper's table (Markdown) and per-seed violins (PNG).

:func:`cells` is the data: one row per table cell (a layout row x a column value) with our
max/avg accuracy over the seeds that are in the store, the paper's max/avg from the sweep's
``paper.csv`` (if any) and the differences. :func:`markdown` and :func:`violins` render it;
:func:`write` does both into the sweep folder (``report.md``, ``violins.png``). Partial sweeps
render too: missing cells read "—" and the header says how many runs are in. Failed runs
(``failed: ...``) are counted and listed by name with their reason; one without numbers (no
accuracy or steps) is left out of the max/avg and step means, never read as a number.

Accuracies are in percent here, as in the paper; the store keeps fractions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from interp.sweeps import store as store_mod
from interp.training.files import save_figure, write_file
from interp.sweeps.driver import Sweep

REPORT_FILE = "report.md"
VIOLINS_FILE = "violins.png"


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
    return df[df["name"].isin(names)].reset_index(drop=True)


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


# --------------------------------------------------------------------------- Markdown


def _fmt(x, signed: bool = False) -> str:
    if x is None or _isnan(x):
        return "—"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def _cell(ours, paper, diff, partial: bool, has_paper: bool) -> str:
    mark = "*" if partial and ours is not None else ""
    if not has_paper:
        return _fmt(ours) + mark
    if paper is None:
        return f"{_fmt(ours)}{mark} / —"
    if ours is None:
        return f"— / {_fmt(paper)}"
    return f"{_fmt(ours)}{mark} / {_fmt(paper)} ({_fmt(diff, signed=True)})"


def markdown(sweep: Sweep, table, *, sweeps_log=None, store: Path | None = None) -> str:
    """The report: the paper's layout with ours / paper (difference), then per-cell detail.
    ``store``: the results store read, named in the regenerate line when not the default."""
    layout = sweep.layout
    has_paper = "paper_max" in table and table["paper_max"].notna().any()
    declared = int(table["declared"].sum()) if not table.empty else 0
    n_in = int(table["runs"].sum()) if not table.empty else 0
    n_failed = int(table["failed"].sum()) if not table.empty else 0
    label_cols = [*layout.rows] + [c for c in table.columns if c in _extra_cols(table, layout)]
    col_keys = _ordered_unique(table[layout.column]) if not table.empty else []

    lines = [f"# {layout.title or sweep.name}", ""]
    status = f"**{n_in} of {declared} runs are in the store**"
    if n_in < declared:
        status += f" ({declared - n_in} missing: cells marked * have only some seeds, — have none)"
    if n_failed:
        status += (f"; {n_failed} failed (listed below; counted with their final accuracy "
                   "where they have one)")
    lines += [status + ".", ""]
    how = ("Accuracy in %, max and mean (avg) over seeds. "
           + ("Each cell reads `ours / paper (ours − paper)`, the paper's numbers from "
              "`paper.csv` (Strobl, Angluin & Frank, Section 4)." if has_paper else
              "The paper has no numbers for these settings."))
    lines += [how, ""]

    head = label_cols + [f"{layout.column}={ck} {stat}" for ck in col_keys for stat in ("max", "avg")]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] * len(label_cols) + ["--:"] * (len(head) - len(label_cols))) + "|")
    for rk, group in _rows(table, layout):
        first = group.iloc[0]
        vals = [str(first[c]) if first[c] is not None else "" for c in label_cols]
        byc = {r[layout.column]: r for _, r in group.iterrows()}
        for ck in col_keys:
            r = byc.get(ck)
            if r is None:
                vals += ["", ""]
                continue
            partial = 0 < r["runs"] < r["declared"]
            for stat in ("max", "avg"):
                vals.append(_cell(_none(r[stat]), _none(r[f"paper_{stat}"]),
                                  _none(r[f"diff_{stat}"]), partial, has_paper))
        lines.append("| " + " | ".join(vals) + " |")
    lines.append("")

    if has_paper:
        both = table.dropna(subset=["diff_max", "diff_avg"]) if not table.empty else table
        if not both.empty:
            lines += [
                f"Over the {len(both)} cells with results: mean |ours − paper| is "
                f"{both['diff_max'].abs().mean():.2f} points for max and "
                f"{both['diff_avg'].abs().mean():.2f} for avg; "
                f"{int((both['diff_max'].abs() <= 5).sum())} of {len(both)} maxima and "
                f"{int((both['diff_avg'].abs() <= 5).sum())} of {len(both)} averages are within 5 points. "
                f"Largest differences (avg): " + "; ".join(
                    f"{_label(r, label_cols, layout)}: {r['diff_avg']:+.1f}"
                    for _, r in both.reindex(both["diff_avg"].abs().sort_values(ascending=False).index)
                    .head(5).iterrows()
                ) + ".",
                "",
            ]

    lines += ["## Per cell", "",
              "Per-seed accuracy (%), chance = 100/n, mean optimiser steps (the run stops at loss < "
              "its `stop_loss` or at `max_steps`), mean seconds per run: wall / process CPU "
              "(— where not recorded; CPU well below wall means the run waited for a core).", ""]
    detail = label_cols + [layout.column, "runs", "per-seed accuracy (seed: %)", "chance", "mean steps",
                           "s/run wall / CPU"]
    lines.append("| " + " | ".join(detail) + " |")
    lines.append("|" + "|".join(["---"] * (len(label_cols) + 1) + ["--:", "---", "--:", "--:", "--:"]) + "|")
    for _, r in table.iterrows():
        seeds = ", ".join(f"{s}: {a:.2f}" for s, a in zip(r["seeds"], r["accuracies"])) or "—"
        failed = f" ({r['failed']} failed)" if r["failed"] else ""
        lines.append("| " + " | ".join(
            [str(r[c]) if r[c] is not None else "" for c in label_cols]
            + [str(r[layout.column]), f"{r['runs']}/{r['declared']}{failed}", seeds,
               f"{r['chance']:.2f}", "—" if _none(r["steps"]) is None else f"{r['steps']:.0f}",
               f"{_fmt_s(r.get('seconds'))} / {_fmt_s(r.get('cpu_seconds'))}"]
        ) + " |")
    lines.append("")

    if sweeps_log is not None and not sweeps_log.empty:
        done = sweeps_log[sweeps_log["runs_done"] > 0]
        if not done.empty:
            lines += ["## Sweep wall time", "",
                      "Each `interp sweep` invocation that trained runs (from the store's `sweeps` table):", "",
                      "| started (UTC) | workers | runs trained | wall (s) | outcome | environment |",
                      "|---|--:|--:|--:|---|---|"]
            for _, s in done.iterrows():
                killed = _none(s["wall_seconds"]) is None
                wall = "?" if killed else f"{s['wall_seconds']:.0f}"
                outcome = "killed (no end recorded)" if killed else (_none(s.get("outcome")) or "")
                lines.append(f"| {s['started_at']} | {s['workers']} | {s['runs_done']} | {wall} | "
                             f"{outcome} | {_env(s.get('environment'))} |")
            total = done["wall_seconds"].dropna().sum()
            lines += ["", f"Total wall time: {total:.0f} s ({total / 60:.1f} min) for "
                      f"{int(done['runs_done'].sum())} runs"
                      + (" (plus invocations killed before they could record their time)"
                         if done["wall_seconds"].isna().any() else "") + ".", ""]
    lines += _failed_lines(table)
    other = store is not None and Path(store).resolve() != sweep.default_store.resolve()
    lines += ["Regenerate with `interp report " + _rel(sweep.root)
              + (f" --store {_rel(store)}" if other else "") + "`.", ""]
    return "\n".join(lines)


def _failed_lines(table) -> list[str]:
    """The failed runs, each with the reason the store keeps for it."""
    failures = [f for fs in table.get("failures", []) for f in fs]
    if not failures:
        return []
    return ["## Failed runs", "",
            f"{len(failures)} run(s) failed; `interp sweep --retry-failed` on this folder trains them "
            "again:", "", *(f"- `{name}` (seed {seed}): {status}" for seed, name, status in failures), ""]


def _fmt_s(x) -> str:
    return "—" if _none(x) is None else f"{x:.1f}"


def _env(text) -> str:
    """The environment JSON of a sweep invocation, short."""
    import json

    if not isinstance(text, str) or not text:
        return ""
    env = json.loads(text)
    parts = [f"{env.get('cpus')} cpus", f"torch {env.get('torch')}"]
    if env.get("MKL_CBWR"):
        parts.append(f"MKL_CBWR={env['MKL_CBWR']}")
    if env.get("device") not in (None, "cpu"):
        parts.append(f"device {env['device']}" + (f" ({env['gpu']})" if env.get("gpu") else ""))
    if env.get("load_average"):
        parts.append(f"load at start {env['load_average'][0]}")
    if env.get("load_average_end"):
        parts.append(f"at end {env['load_average_end'][0]}")
    return ", ".join(parts)


def _rel(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


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


def _label(r, label_cols, layout) -> str:
    parts = [f"{c} {r[c]}" for c in label_cols if r[c] is not None]
    return ", ".join(parts) + f", {layout.column} {r[layout.column]}"


# --------------------------------------------------------------------------- violins


def violins(sweep: Sweep, table, path: str | os.PathLike) -> Path:
    """Per-seed accuracy violins, one panel per table row, like the paper's Appendix figure.

    Violet violins show the distribution over seeds, black dots the runs, green lines the mean;
    orange ticks mark the paper's mean where known, the dotted line chance (100/n).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    layout = sweep.layout
    rows = _rows(table, layout)
    ncols = 2 if len(rows) > 1 else 1
    nrows = max(1, math.ceil(len(rows) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 3.2 * nrows), squeeze=False)
    label_cols = [*layout.rows] + _extra_cols(table, layout)
    rng = np.random.default_rng(0)  # jitter only
    col_keys = _ordered_unique(table[layout.column]) if not table.empty else []
    where = {ck: i for i, ck in enumerate(col_keys)}  # every panel shares the x positions
    for ax, (rk, group) in zip(axes.flat, rows):
        for _, r in group.iterrows():
            x = where[r[layout.column]]
            accs = np.asarray(r["accuracies"], dtype=float)
            if len(accs) >= 2 and np.ptp(accs) > 1e-9:
                parts = ax.violinplot([accs], positions=[x], widths=0.8, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor("#8a2be2")
                    body.set_edgecolor("#4b0082")
                    body.set_alpha(0.45)
            if len(accs):
                ax.scatter(x + rng.uniform(-0.06, 0.06, len(accs)), accs, s=14, c="black", zorder=3)
                ax.hlines(accs.mean(), x - 0.3, x + 0.3, colors="green", linewidth=2, zorder=4)
            else:
                ax.text(x, 50, f"{r['failed']} failed" if r["failed"] else "no runs",
                        ha="center", va="center", fontsize=8, color="grey")
            if _none(r.get("paper_avg")) is not None:
                ax.hlines(r["paper_avg"], x - 0.3, x + 0.3, colors="orange", linestyles="--",
                          linewidth=1.5, zorder=2)
        chance = group["chance"].unique()
        if len(chance) == 1:
            ax.axhline(chance[0], color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(col_keys)), [str(v) for v in col_keys])
        ax.set_xlim(-0.6, len(col_keys) - 0.4)
        ax.set_xlabel(layout.column)
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-3, 103)
        first = group.iloc[0]
        ax.set_title(", ".join(f"{c} {first[c]}" for c in label_cols if first[c] is not None),
                     fontsize=10)
    for ax in list(axes.flat)[len(rows):]:
        ax.set_visible(False)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="#8a2be2", linewidth=6, alpha=0.45, label="ours: seeds"),
        Line2D([], [], marker="o", color="black", linestyle="", markersize=4, label="ours: one run"),
        Line2D([], [], color="green", linewidth=2, label="ours: mean"),
        Line2D([], [], color="orange", linestyle="--", label="paper: mean"),
        Line2D([], [], color="grey", linestyle=":", label="chance (100/n)"),
    ]
    if "paper_avg" not in table or table["paper_avg"].isna().all():
        handles = [h for h in handles if not h.get_label().startswith("paper")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(layout.title or sweep.name, fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return save_figure(fig, path, dpi=110, close=True)


# --------------------------------------------------------------------------- all together


@dataclass(frozen=True)
class Written:
    markdown: Path
    violins: Path
    runs: int
    declared: int
    damaged: dict = field(default_factory=dict)  # run name -> what is wrong with its checkpoint


def write(sweep: Sweep, *, store: str | os.PathLike | None = None,
          out: str | os.PathLike | None = None) -> Written:
    """Render ``report.md`` and ``violins.png`` for ``sweep`` into ``out`` (default: its folder).

    Each file is replaced whole or left as it was (:mod:`interp.training.files`); the figure is
    written first, so a write that fails (a full disk: a ValueError naming the file) leaves
    both files as they were."""
    store_path = Path(store) if store is not None else sweep.default_store
    out = Path(out) if out is not None else sweep.root
    table = cells(sweep, runs(sweep, store_path), paper_table(sweep))
    log = store_mod.read_sweeps(store_path) if store_path.is_file() else None
    damaged = store_mod.checkpoint_problems(store_path) if store_path.is_file() else {}
    text = markdown(sweep, table, sweeps_log=log, store=store_path) + _damaged_note(damaged)
    png = violins(sweep, table, out / VIOLINS_FILE)
    md = write_file(out / REPORT_FILE, text)
    return Written(markdown=md, violins=png, runs=int(table["runs"].sum()),
                   declared=int(table["declared"].sum()), damaged=damaged)


def _damaged_note(damaged: dict[str, str]) -> str:
    """A flag at the end of the report for runs whose checkpoint is missing or corrupt (their
    numbers are in the table; their models cannot be analysed until retrained)."""
    if not damaged:
        return ""
    lines = ["", f"**Warning: {len(damaged)} run(s) have a missing or corrupt checkpoint** "
             "(`interp sweep` on this folder retrains them):", ""]
    lines += [f"- `{name}`: {why}" for name, why in sorted(damaged.items())]
    return "\n".join(lines) + "\n"
