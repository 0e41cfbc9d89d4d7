"""Loss curves drawn: one run, or every cell of a results store as small multiples.

A run's curve is what training stored (``RunResult.curve``: the training-batch loss at step 1,
every ``curve_every`` steps, and at the step it stopped). :func:`curves_figure` draws:

* a run folder (a checkpoint whose ``config.json`` holds the run's metrics, e.g. what
  ``interp train`` writes): its curve, the stop loss as a dotted line, and a marker at the step
  training stopped (``steps``);
* a store (a store file, a sweep folder or an ``interp train`` folder:
  :func:`interp.sweeps.frame.read_runs`): one panel per cell (the configs that differ only in
  seed), sorted by their fields' values (numbers as numbers), the seeds overlaid, each seed's
  stop step marked.

Markers: a dot where the loss went below the stop loss (the early stop), a cross where the run
ran out of steps or failed. Every seed's line is labelled ``seed S (accuracy)``; markers carry
``gid="stop"`` and the stop-loss line ``gid="threshold"``, so a test can find them.
:func:`write_curves` saves the figure through :func:`interp.training.files.save_figure`.

The same drawing serves ``interp report`` (:func:`report_figure`, :func:`report_curves`: one
panel per cell of the report's table, laid out as that table) and the explorer's seed view
(:func:`curve_svg`: one run's curve as an inline SVG). A run that stored no curve (a store
written before curves were kept) is left out and named, never an error.
"""

from __future__ import annotations

import html
import math
import textwrap
from pathlib import Path

#: panels per row of the small multiples, at most
COLUMNS = 4


def _plain(v):
    """A numpy scalar as the Python value (TrainConfig's checks want ``int``, not ``int64``)."""
    return v.item() if hasattr(v, "item") else v


def load_runs(source, where: dict | None = None) -> tuple[str, list[dict], bool]:
    """``(name, runs, single)``: the runs at ``source`` as dicts (``config``, ``seed``,
    ``accuracy``, ``steps``, ``status``, ``curve``), and whether ``source`` is one run folder.
    ``where``: field -> value strings, to pick a store's configs."""
    from interp.sweeps import frame
    from interp.training import checkpoints

    p = Path(source)
    if p.is_dir() and (p / checkpoints.CONFIG).is_file() and where is None:
        meta = checkpoints.read_meta(p)
        result, config = meta.get("result") or {}, meta.get("train_config")
        if not config or not result.get("curve"):
            raise ValueError(f"{p} stores no loss curve (a checkpoint of a bare model); "
                             "accepted: a run folder of interp train or a sweep, or a store")
        return p.name, [dict(config=config, seed=config["seed"], accuracy=result.get("accuracy"),
                             steps=result.get("steps"), status=result.get("status", "ok"),
                             curve=result["curve"])], True
    df = frame.read_runs(p)
    fields = frame.config_fields()
    for k, v in (where or {}).items():
        if k not in fields:
            raise ValueError(f"where names {k!r}; accepted: one of {fields}")
        df = df[df[k].astype(str) == str(v)]
    if df.empty:
        raise ValueError(f"no runs in {frame.find_store(p)}" + (f" match {where}" if where else ""))
    store = frame.find_store(p)
    name = store.parent.parent.name if store.parent.name == "results" else store.parent.name
    runs = [dict(config={f: _plain(r[f]) for f in fields}, seed=_plain(r["seed"]),
                 accuracy=_plain(r["accuracy"]), steps=_plain(r["steps"]), status=r["status"],
                 curve=list(r["curve"] or []))
            for _, r in df.iterrows()]
    return name, runs, False


def stop_point(curve, steps) -> tuple[int, float] | None:
    """Where a run's stop is marked: ``(steps, the last finite loss recorded at or before it)``;
    None when there is none (a run that failed at its first step)."""
    if steps is None or (isinstance(steps, float) and math.isnan(steps)):
        return None
    before = [(s, v) for s, v in curve if s <= steps and math.isfinite(v)]
    return (int(steps), float(before[-1][1])) if before else None


def draw_run(ax, run: dict, color, *, label: str | None = None) -> None:
    """One run's curve on ``ax`` and its stop marker (a dot: below the stop loss; a cross:
    out of steps or failed)."""
    points = [(s, v) for s, v in run["curve"] if math.isfinite(v)]
    if not points:
        return
    acc = run["accuracy"]
    acc_text = "" if acc is None or (isinstance(acc, float) and math.isnan(acc)) else f" ({100 * acc:.0f}%)"
    ax.plot([s for s, _ in points], [v for _, v in points], color=color, lw=1.2,
            label=label or f"seed {run['seed']}{acc_text}")
    stop = stop_point(run["curve"], run["steps"])
    if stop is not None:
        ax.plot([stop[0]], [stop[1]], marker="o" if _early(run) else "x", ms=6, ls="none",
                color=color, gid="stop", label="_stop")


def _early(run: dict) -> bool:
    """Whether the run stopped because its loss went below the stop loss."""
    stop = stop_point(run["curve"], run["steps"])
    return run["status"] == "ok" and stop is not None and stop[1] < run["config"].get("stop_loss", 0.01)


def _axes_labels(ax, stop_loss: float) -> None:
    from matplotlib.ticker import FuncFormatter, LogFormatter

    if stop_loss > 0:
        ax.axhline(stop_loss, ls=":", lw=0.8, color="0.4", gid="threshold", label="_threshold")
    ax.set_yscale("log")  # ticks read 0.01 and 1.4, not 10^-2 and 1.4 x 10^0
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))  # thinned when many decades
    ax.set_xlabel("step")
    ax.set_ylabel("training-batch loss")


def _group_label(config: dict) -> str:
    from interp.training.runs import TrainConfig

    try:
        return TrainConfig.from_dict(config).label().rsplit(" seed", 1)[0]
    except (TypeError, ValueError):  # a config this version no longer accepts: its fields
        return ", ".join(f"{k}={v}" for k, v in config.items() if k != "seed")


def _sortable(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def groups(runs: list[dict]) -> list[tuple[str, list[dict]]]:
    """The runs as cells (same config but the seed), sorted by the configs' values (numbers
    numerically), each labelled like ``TrainConfig.label`` without the seed, plus any other
    field whose value differs between cells."""
    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        key = tuple((k, v) for k, v in r["config"].items() if k != "seed")
        cells.setdefault(key, []).append(r)
    keys = sorted(cells, key=lambda key: tuple(_sortable(v) for _, v in key))
    varying = [k for k in dict(keys[0]) if len({dict(key).get(k) for key in keys}) > 1]
    out = []
    for key in keys:
        config = dict(key)
        label = _group_label({**config, "seed": 0})
        extra = [f"{k}={config[k]}" for k in varying if f"{config[k]}" not in label]
        out.append((" ".join([label, *extra]), sorted(cells[key], key=lambda r: r["seed"])))
    return out


def curves_figure(source, *, where: dict | None = None):
    """The figure of the module docstring for ``source`` (a run folder, a store file or a
    sweep folder); a matplotlib ``Figure`` (not registered with pyplot)."""
    from matplotlib.figure import Figure

    name, runs, single = load_runs(source, where)
    colors = [f"C{i % 10}" for i in range(10)]
    if single:
        run = runs[0]
        fig = Figure(figsize=(6.4, 4.2), layout="constrained")
        ax = fig.add_subplot()
        draw_run(ax, run, colors[0])
        _axes_labels(ax, run["config"].get("stop_loss", 0.01))
        how = run["status"] if run["status"] != "ok" else (
            f"stopped below the stop loss at step {run['steps']}" if _early(run)
            else f"ran out of steps ({run['steps']})")
        ax.set_title(f"{name}: {_group_label(run['config'])} seed {run['seed']}\n"
                     f"test accuracy {100 * run['accuracy']:.1f}%, {how}", fontsize=10)
        ax.legend(fontsize=8)
        return fig
    cells = groups(runs)
    cols = min(COLUMNS, len(cells))
    rows = math.ceil(len(cells) / cols)
    fig = Figure(figsize=(3.4 * cols, 2.8 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    seeds = sorted({r["seed"] for r in runs})
    for ax, (label, cell) in zip(axes, cells):
        for r in cell:
            draw_run(ax, r, colors[seeds.index(r["seed"]) % 10])
        _axes_labels(ax, cell[0]["config"].get("stop_loss", 0.01))
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=6)
    for ax in axes[len(cells):]:
        ax.set_visible(False)
    fig.suptitle(f"Loss curves: {name} ({len(runs)} runs in {len(cells)} cells); dot: stopped "
                 "below the stop loss (dotted), cross: out of steps or failed", fontsize=11)
    return fig


def write_curves(source, out, *, where: dict | None = None) -> Path:
    """Draw :func:`curves_figure` for ``source`` and write it to ``out`` (PNG, SVG, PDF by its
    suffix) whole or not at all; returns ``out``."""
    from interp.training.files import save_figure

    fig = curves_figure(source, where=where)
    return save_figure(fig, out, dpi=110)


# --------------------------------------------------------------------------- interp report


def _cell_runs(sweep, store_path) -> tuple[list, list, dict]:
    """``(row keys, column keys, (row key, column key) -> runs)`` of a sweep laid out as its
    report's table (rows and columns in the order their first config appears in ``CONFIGS``);
    a cell's runs are the configs in the store, as :func:`load_runs` gives them, by seed."""
    from interp.sweeps import frame

    layout = sweep.layout
    stored = {}
    if Path(store_path).is_file():
        fields = frame.config_fields()
        stored = {r["name"]: dict(name=r["name"], config={f: _plain(r[f]) for f in fields},
                                  seed=_plain(r["seed"]), accuracy=_plain(r["accuracy"]),
                                  steps=_plain(r["steps"]), status=r["status"],
                                  curve=list(r["curve"] or []))
                  for _, r in frame.read_runs(store_path).iterrows()}
    dicts = [(c.name(), c.to_dict()) for c in sweep.configs]
    rows = list(dict.fromkeys(tuple(d[f] for f in layout.rows) for _, d in dicts))
    cols = list(dict.fromkeys(d[layout.column] for _, d in dicts))
    cells: dict[tuple, list[dict]] = {}
    for name, d in dicts:
        cell = cells.setdefault((tuple(d[f] for f in layout.rows), d[layout.column]), [])
        if name in stored:
            cell.append(stored[name])
    for cell in cells.values():
        cell.sort(key=lambda r: r["seed"])
    return rows, cols, cells


def _drawable(run: dict) -> bool:
    return any(math.isfinite(v) for _, v in run["curve"])


def report_figure(sweep, store_path):
    """``(figure, runs drawn, names of the stored runs without a curve)`` for ``interp
    report``: one panel per table cell, laid out as the report's table (a row of panels per
    layout row, a column per column value) on shared axes, so cells compare at a glance and
    each is found where it sits in the table; the cell's seeds overlaid, one colour per seed
    across all panels (one legend), each stop step marked (:func:`draw_run`). The figure is
    None when no run has a curve (an empty store, or one written before curves were kept)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    layout = sweep.layout
    rows, cols, cells = _cell_runs(sweep, store_path)
    runs = [r for cell in cells.values() for r in cell]
    missing = [r["name"] for r in runs if not _drawable(r)]
    if len(missing) == len(runs):
        return None, 0, missing
    seeds = sorted({r["seed"] for r in runs})
    color = {s: f"C{i % 10}" for i, s in enumerate(seeds)}
    fig = Figure(figsize=(2.8 * len(cols) + 0.4, 2.2 * len(rows) + 1.2), layout="constrained")
    axes = fig.subplots(len(rows), len(cols), squeeze=False, sharex="all", sharey="all")
    for (i, rk), (j, ck) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        ax, cell = axes[i, j], cells.get((rk, ck))
        if cell is None:  # no config declared for this row and column
            ax.set_visible(False)
            continue
        for r in cell:
            if _drawable(r):
                draw_run(ax, r, color[r["seed"]])
        _axes_labels(ax, (cell[0]["config"].get("stop_loss", 0.01) if cell else 0))
        ax.set_title(textwrap.fill(", ".join([*(f"{f} {v}" for f, v in zip(layout.rows, rk)),
                                              f"{layout.column} {ck}"]), 36), fontsize=8)  # no overlap
        for label in (ax.xaxis.label, ax.yaxis.label):
            label.set_fontsize(7)
        ax.tick_params(which="both", labelsize=7)
        if not any(_drawable(r) for r in cell):
            ax.text(0.5, 0.5, "no loss curve stored" if cell else "no runs in the store",
                    transform=ax.transAxes, ha="center", va="center", fontsize=8, color="grey")
    handles = [Line2D([], [], color=color[s], label=f"seed {s}") for s in seeds] + [
        Line2D([], [], marker="o", ls="none", color="black", label="stopped below the stop loss"),
        Line2D([], [], marker="x", ls="none", color="black", label="out of steps or failed"),
        Line2D([], [], ls=":", color="0.4", label="stop loss")]
    width = fig.get_size_inches()[0]
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False,
               ncol=max(1, min(len(handles), int(width / 2))))
    drawn = len(runs) - len(missing)
    fig.suptitle(f"{sweep.name}: loss curves per table cell\ntraining-batch loss per seed, "
                 f"{drawn} of {len(runs)} stored runs drawn", fontsize=10)
    return fig, drawn, missing


def report_curves(sweep, store_path, path):
    """Draw :func:`report_figure` and write it to ``path`` whole or not at all; what
    :func:`interp.sweeps.report.write` links (``curves=report_curves``)."""
    from interp.sweeps.report import Curves
    from interp.training.files import save_figure

    fig, drawn, missing = report_figure(sweep, store_path)
    if fig is not None:
        path = save_figure(fig, path, dpi=100)
    return Curves(path=path if fig is not None else None, drawn=drawn, missing=tuple(missing))


# --------------------------------------------------------------------------- the explorer

#: the explorer's curve, in CSS pixels: width, height, and the plot's left, right, top, bottom
SVG_BOX = (340, 170, 52, 10, 8, 34)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """The powers of ten in ``[lo, hi]``; the two ends when fewer than two are."""
    decades = [10.0 ** k for k in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]
    return decades if len(decades) >= 2 else [lo, hi]


def stop_text(run: dict) -> str:
    """How the run stopped, in words: below the stop loss, out of steps, or its failure."""
    stop = stop_point(run["curve"], run["steps"])
    if run["status"] != "ok" or stop is None:
        return str(run["status"])
    return ("stopped below the stop loss" if _early(run) else "ran out of steps") + f" at step {stop[0]}"


def curve_svg(run: dict) -> str:
    """One run's loss curve as an inline SVG (no script, no network) for the explorer's seed
    view: the training-batch loss (log scale) against the step with labelled axes and ticks, the
    stop loss dotted, and the stop step marked as :func:`draw_run` marks it (a dot: below the
    stop loss; a cross: out of steps or failed). ``run``: a dict as :func:`load_runs` gives
    (``curve``, ``steps``, ``status``, ``config`` with ``stop_loss``). The ``<svg>`` carries
    ``data-points`` (the points drawn) and ``data-stop-step``; an HTML note instead when the run
    stored no curve (a store written before curves were kept)."""
    points = [(s, v) for s, v in run["curve"] if math.isfinite(v) and v > 0]
    if not points:
        return ('<p class="key no-curve">No loss curve stored for this run (a store written before '
                "curves were kept).</p>\n")
    width, height = SVG_BOX[:2]
    stop_loss = run["config"].get("stop_loss", 0.01)
    stop = stop_point(run["curve"], run["steps"])
    x_max = max([s for s, _ in points] + [stop[0] if stop else 0]) or 1
    losses = [v for _, v in points] + ([stop_loss] if stop_loss > 0 else [])
    lo, hi = min(losses), max(losses)
    lo, hi = (lo / 2, hi * 2) if hi / lo < 1.01 else (lo, hi)
    x, y = _svg_scales(x_max, lo, hi)
    parts = _svg_axes(x, y, x_max, lo, hi)
    if stop_loss > 0:
        parts.append(f'<line class="threshold" x1="{x(0):.1f}" y1="{y(stop_loss):.1f}" x2="{x(x_max):.1f}" '
                     f'y2="{y(stop_loss):.1f}" stroke="#666" stroke-dasharray="2 3"/>'
                     f'<text x="{x(x_max) - 2:.1f}" y="{y(stop_loss) - 3:.1f}" text-anchor="end" fill="#666">'
                     f"stop loss {stop_loss:g}</text>")
    parts.append('<polyline class="loss" fill="none" stroke="#1f77b4" stroke-width="1.5" points="'
                 + " ".join(f"{x(s):.2f},{y(v):.2f}" for s, v in points) + '"/>')
    if stop is not None:
        cx, cy = x(stop[0]), y(stop[1])
        mark = (f'<circle cx="{cx:.2f}" cy="{cy:.2f}" r="4" fill="#d62728"' if _early(run) else
                f'<path d="M{cx - 4:.2f} {cy - 4:.2f}L{cx + 4:.2f} {cy + 4:.2f}M{cx - 4:.2f} '
                f'{cy + 4:.2f}L{cx + 4:.2f} {cy - 4:.2f}" stroke="#d62728" stroke-width="2"')
        parts.append(f'{mark} class="stop" data-step="{stop[0]}"/>')
    return (f'<svg class="loss-curve" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" data-points="{len(points)}" data-stop-step="{stop[0] if stop else ""}" '
            f'font-size="10"><title>training-batch loss by step; {html.escape(stop_text(run))}</title>'
            + "".join(parts) + "</svg>\n")


def _svg_scales(x_max: float, lo: float, hi: float):
    """``(x, y)``: step -> horizontal pixel (0 at the left of the plot, ``x_max`` at its
    right); loss -> vertical pixel on a log scale (``lo`` to ``hi`` with 5% room each side)."""
    width, height, left, right, top, bottom = SVG_BOX
    span = math.log10(hi / lo)

    def x(step):
        return left + (width - left - right) * step / x_max

    def y(loss):
        frac = (math.log10(loss / lo) + 0.05 * span) / (1.1 * span)
        return height - bottom - (height - top - bottom) * frac

    return x, y


def _svg_axes(x, y, x_max, lo: float, hi: float) -> list[str]:
    """The SVG's axes: lines, ticks with their values, and the two axis labels."""
    width, height, left, right, top, bottom = SVG_BOX
    base = height - bottom
    parts = [f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="black"/>']
    for v in _log_ticks(lo, hi):
        parts.append(f'<line x1="{left - 3}" y1="{y(v):.1f}" x2="{left}" y2="{y(v):.1f}" stroke="black"/>'
                     f'<text class="ytick" x="{left - 5}" y="{y(v) + 3:.1f}" text-anchor="end">{v:.3g}</text>')
    for s in sorted({0, int(x_max) // 2, int(x_max)}):
        parts.append(f'<line x1="{x(s):.1f}" y1="{base}" x2="{x(s):.1f}" y2="{base + 3}" stroke="black"/>'
                     f'<text class="xtick" x="{x(s):.1f}" y="{base + 14}" text-anchor="middle">{s}</text>')
    parts.append(f'<text class="xlabel" x="{(left + width - right) / 2}" y="{height - 4}" '
                 'text-anchor="middle">step</text>'
                 f'<text class="ylabel" transform="translate(11 {(top + base) / 2}) rotate(-90)" '
                 'text-anchor="middle">training-batch loss (log)</text>')
    return parts
