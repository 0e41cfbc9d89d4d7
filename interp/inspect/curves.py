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
"""

from __future__ import annotations

import math
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
    if stop_loss > 0:
        ax.axhline(stop_loss, ls=":", lw=0.8, color="0.4", gid="threshold", label="_threshold")
    ax.set_yscale("log")
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
