"""Render a sweep's table (:mod:`interp.sweeps.report_table`) as the paper's table in Markdown
and per-seed violins (PNG).

:func:`markdown` and :func:`violins` render the cells; :func:`write` does both into the sweep
folder (``report.md``, ``violins.png``). Partial sweeps render too: missing cells read "—" and
the header says how many runs are in. Failed runs (``failed: ...``) are counted and listed by
name with their reason.

The loss curves per cell (``loss-curves.png``) are drawn by a later stage,
:func:`interp.inspect.tools.curves.report_curves`, which ``interp report`` hands to :func:`write`
(``curves=``); this module links the figure it returns (:class:`Curves`) and names the runs
that stored no curve.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from interp.sweeps import store as store_mod
from interp.sweeps.folders import Sweep
from interp.sweeps.report_check import check_lines, md_text
from interp.sweeps.report_table import _extra_cols, _isnan, _none, _ordered_unique, _rows
from interp.sweeps.report_table import cells as cells
from interp.sweeps.report_table import paper_table as paper_table
from interp.sweeps.report_table import runs as runs
from interp.training.files import save_figure, write_file

REPORT_FILE = "report.md"
VIOLINS_FILE = "violins.png"
CURVES_FILE = "loss-curves.png"


@dataclass(frozen=True)
class Curves:
    """The loss-curve figure drawn for a report: its file (None when no run stored a curve),
    how many runs it draws, and the names of the stored runs it leaves out for want of a curve."""

    path: Path | None
    drawn: int
    missing: tuple[str, ...] = ()


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



def markdown(sweep: Sweep, table, *, sweeps_log=None, store: Path | None = None,
             curves: Curves | None = None) -> str:
    """The report, top to bottom as a reader meets it: the header (runs in, failed), the
    paper's layout with ours / paper (difference), the within-5 counts, per-cell detail with
    seconds per run, the loss curves (``curves``, linked by file name: the figure sits beside
    the report), sweep timings, failed runs. ``store``: the results store read, named in the
    regenerate line when not the default."""
    layout = sweep.layout
    has_paper = "paper_max" in table and table["paper_max"].notna().any()
    label_cols = [*layout.rows] + [c for c in table.columns if c in _extra_cols(table, layout)]
    lines = [f"# {md_text(layout.title or sweep.name)}", ""]
    lines += _status_lines(table, has_paper)
    lines += _table_lines(table, layout, label_cols, has_paper)
    if has_paper:  # the test first (issue 53), then the within-5 count: a count, not a test
        lines += check_lines(sweep, table, [md_text(_label(r, label_cols, layout)) for _, r in table.iterrows()])
        lines += _within_lines(table, layout, label_cols)
    lines += _detail_lines(table, layout, label_cols)
    if curves is not None:
        lines += _curves_lines(curves)
    if sweeps_log is not None and not sweeps_log.empty:
        lines += _timing_lines(sweeps_log)
    lines += _failed_lines(table)
    other = store is not None and Path(store).resolve() != sweep.default_store.resolve()
    lines += ["Regenerate with `interp report " + _rel(sweep.root)
              + (f" --store {_rel(store)}" if other else "") + "`.", ""]
    return "\n".join(lines)


def _status_lines(table, has_paper: bool) -> list[str]:
    """How many runs are in the store and how many failed, then how to read a cell."""
    declared = int(table["declared"].sum()) if not table.empty else 0
    n_in = int(table["runs"].sum()) if not table.empty else 0
    n_failed = int(table["failed"].sum()) if not table.empty else 0
    status = f"**{n_in} of {declared} runs are in the store**"
    if n_in < declared:
        status += f" ({declared - n_in} missing: cells marked * have only some seeds, — have none)"
    if n_failed:
        status += (f"; {n_failed} failed (listed below; counted with their final accuracy "
                   "where they have one)")
    how = ("Accuracy in %, max and mean (avg) over seeds. "
           + ("Each cell reads `ours / paper (ours − paper)`, the paper's numbers from "
              "`paper.csv` (Strobl, Angluin & Frank, Section 4)." if has_paper else
              "The paper has no numbers for these settings."))
    return [status + ".", "", how, ""]


def _table_lines(table, layout, label_cols: list[str], has_paper: bool) -> list[str]:
    """The paper's layout: one line per layout row, max and avg per column value."""
    col_keys = _ordered_unique(table[layout.column]) if not table.empty else []
    head = label_cols + [f"{layout.column}={ck} {stat}" for ck in col_keys for stat in ("max", "avg")]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * len(label_cols) + ["--:"] * (len(head) - len(label_cols))) + "|"]
    for rk, group in _rows(table, layout):
        first = group.iloc[0]
        vals = [md_text(first[c]) if first[c] is not None else "" for c in label_cols]
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
    return lines + [""]


def _within_lines(table, layout, label_cols: list[str]) -> list[str]:
    """Mean |ours - paper|, the cells within 5 points, the largest differences."""
    both = table.dropna(subset=["diff_max", "diff_avg"]) if not table.empty else table
    if both.empty:
        return []
    largest = both.reindex(both["diff_avg"].abs().sort_values(ascending=False).index).head(5)
    return [
        f"A count, not a test (the test is above). Over the {len(both)} cells with results: mean |ours − paper| is "
        f"{both['diff_max'].abs().mean():.2f} points for max and "
        f"{both['diff_avg'].abs().mean():.2f} for avg; "
        f"{int((both['diff_max'].abs() <= 5).sum())} of {len(both)} maxima and "
        f"{int((both['diff_avg'].abs() <= 5).sum())} of {len(both)} averages are within 5 points. "
        f"Largest differences (avg): " + "; ".join(
            f"{md_text(_label(r, label_cols, layout))}: {r['diff_avg']:+.1f}" for _, r in largest.iterrows()
        ) + ".",
        "",
    ]


def _detail_lines(table, layout, label_cols: list[str]) -> list[str]:
    """One line per cell: per-seed accuracies, chance, mean steps, seconds per run."""
    lines = ["## Per cell", "",
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
            [md_text(r[c]) if r[c] is not None else "" for c in label_cols]
            + [md_text(r[layout.column]), f"{r['runs']}/{r['declared']}{failed}", seeds,
               f"{r['chance']:.2f}", "—" if _none(r["steps"]) is None else f"{r['steps']:.0f}",
               f"{_fmt_s(r.get('seconds'))} / {_fmt_s(r.get('cpu_seconds'))}"]
        ) + " |")
    return lines + [""]


def _curves_lines(curves: Curves, listed: int = 10) -> list[str]:
    """The loss-curve figure linked, how to read it, and the runs it could not draw."""
    lines = ["## Loss curves", ""]
    if curves.path is not None:
        name = curves.path.name
        lines += [f"![training-batch loss per seed, one panel per cell]({name})", "",
                  f"[`{name}`]({name}): one panel per cell, laid out as the table above, "
                  f"{curves.drawn} run(s) drawn. Each seed's training-batch loss (log scale) "
                  "against the optimiser step, one colour per seed; the dotted line is the "
                  "`stop_loss`, a dot marks the step where the run stopped below it, a cross "
                  "where it ran out of steps or failed.", ""]
    if curves.missing:
        names = ", ".join(f"`{n}`" for n in curves.missing[:listed])
        more = f" and {len(curves.missing) - listed} more" if len(curves.missing) > listed else ""
        lines += [f"{len(curves.missing)} run(s) in the store have no loss curve (a store written "
                  "before curves were kept, or a run that failed before its first step) and are "
                  f"not drawn: {names}{more}.", ""]
    elif curves.path is None:
        lines += ["No run of this sweep is in the store yet: no loss curves to draw.", ""]
    return lines


def _timing_lines(sweeps_log) -> list[str]:
    """Each invocation that trained runs (the store's ``sweeps`` log), and the total."""
    done = sweeps_log[sweeps_log["runs_done"] > 0]
    if done.empty:
        return []
    lines = ["## Sweep wall time", "",
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
    return lines + ["", f"Total wall time: {total:.0f} s ({total / 60:.1f} min) for "
                    f"{int(done['runs_done'].sum())} runs"
                    + (" (plus invocations killed before they could record their time)"
                       if done["wall_seconds"].isna().any() else "") + ".", ""]


def _failed_lines(table) -> list[str]:
    """The failed runs, each with the reason the store keeps for it."""
    failures = [f for fs in table.get("failures", []) for f in fs]
    if not failures:
        return []
    return ["## Failed runs", "",
            f"{len(failures)} run(s) failed; `interp sweep --retry-failed` on this folder trains them "
            "again:", "", *(f"- `{name}` (seed {seed}): {md_text(status)}" for seed, name, status in failures), ""]


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
    # what decides a run's bits besides the config (readings/screen/DESIGN.md, section 9)
    if env.get("cpu_model"):
        parts.append(env["cpu_model"] + (f" (MKL branch {env['mkl_branch']})" if env.get("mkl_branch") else ""))
    if env.get("code"):
        parts.append(f"code {env['code'][:12]}" + ("+dirty" if env["code"].endswith("+dirty") else ""))
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
    fig.suptitle(layout.title or f"{sweep.name}: accuracy (%) per seed by {layout.column}", fontsize=11)
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
    curves: Curves | None = None  # the loss curves, where write was given a way to draw them


def write(sweep: Sweep, *, store: str | os.PathLike | None = None,
          out: str | os.PathLike | None = None,
          curves: Callable[[Sweep, Path, Path], Curves] | None = None) -> Written:
    """Render ``report.md`` and ``violins.png`` for ``sweep`` into ``out`` (default: its folder).

    ``curves``: a function ``curves(sweep, store_path, figure_path) -> Curves`` that draws the
    loss curves per cell into ``out/loss-curves.png`` (``interp report`` passes
    :func:`interp.inspect.tools.curves.report_curves`, a later stage than this one); the report links
    the figure and names the runs without a curve. None: no curves.

    Each file is replaced whole or left as it was (:mod:`interp.training.files`); the figures
    are written first, so a write that fails (a full disk: a ValueError naming the file) leaves
    that file and report.md as they were."""
    store_path = Path(store) if store is not None else sweep.default_store
    out = Path(out) if out is not None else sweep.root
    table = cells(sweep, runs(sweep, store_path), paper_table(sweep))
    log = store_mod.read_sweeps(store_path) if store_path.is_file() else None
    if log is not None and not log.empty:  # a store shared by several sweep folders: this one's
        log = log[log["sweep"] == sweep.name]
    damaged = store_mod.checkpoint_problems(store_path) if store_path.is_file() else {}
    png = violins(sweep, table, out / VIOLINS_FILE)
    drawn = curves(sweep, store_path, out / CURVES_FILE) if curves is not None else None
    text = (markdown(sweep, table, sweeps_log=log, store=store_path, curves=drawn)
            + _damaged_note(damaged))
    md = write_file(out / REPORT_FILE, text)
    return Written(markdown=md, violins=png, runs=int(table["runs"].sum()),
                   declared=int(table["declared"].sum()), damaged=damaged, curves=drawn)


def _damaged_note(damaged: dict[str, str]) -> str:
    """A flag at the end of the report for runs whose checkpoint is missing or corrupt (their
    numbers are in the table; their models cannot be analysed until retrained)."""
    if not damaged:
        return ""
    lines = ["", f"**Warning: {len(damaged)} run(s) have a missing or corrupt checkpoint** "
             "(`interp sweep` on this folder retrains them):", ""]
    lines += [f"- `{name}`: {why}" for name, why in sorted(damaged.items())]
    return "\n".join(lines) + "\n"
