"""Timelines written for a reader: a figure per run, ``timeline.csv`` and ``timeline.md``.

:func:`timeline_figure` draws one run's snapshots against their steps (symlog axis, step 0
included): the routing's measures ``qk_diag`` and ``follow`` with the accuracy and the graded
``match_mass`` and ``readout_acc`` (:mod:`interp.inspect.mechanism.progress`), the value code's
dimension, and the training-batch loss; the plateau exit is a dashed line (``gid="plateau-exit"``)
and each label change a dotted one, named (``gid="label-change"``). :func:`timeline_markdown`
is one table row per run: when the routing forms, when the code settles, the plateau exit and
the outcome (:func:`interp.inspect.studies.timelines.formation`). :func:`write_timeline` measures a
source (:func:`interp.inspect.studies.timelines.timeline`) and writes all of it as one set
(:func:`interp.training.files.write_files`); it returns, beside the paths, each snapshot's graded
measures (``snapshots``, what ``interp timeline --json`` prints), the measures version the rows
hold and the version of the ``timeline.csv`` it replaced, when another (``replaced_version``).
"""

from __future__ import annotations

import math
from pathlib import Path

CSV, MARKDOWN = "timeline.csv", "timeline.md"


def figure_name(run: str, seed) -> str:
    return f"timeline-{run}-seed{int(seed)}.png"


def _value(x):
    return math.nan if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def timeline_figure(rows, title: str = ""):
    """One run's timeline (rows of :func:`interp.inspect.studies.timelines.timeline`), a matplotlib
    ``Figure`` (not registered with pyplot)."""
    from matplotlib.figure import Figure

    from interp.inspect.studies.timelines import changes

    rows = sorted(rows.to_dict("records") if hasattr(rows, "to_dict") else rows, key=lambda r: r["step"])
    steps = [r["step"] for r in rows]
    fig = Figure(figsize=(7, 7), layout="constrained")  # not registered with pyplot
    axes = fig.subplots(3, 1, sharex=True)
    for key, style in (("qk_diag", "o-"), ("follow", "s-"), ("acc", "^-"), ("match_mass", "v--"),
                       ("readout_acc", "d--")):  # the last two: issue 52's graded measures
        axes[0].plot(steps, [_value(r.get(key)) for r in rows], style, ms=3, label=key)
    axes[0].set_ylim(-0.05, 1.05)
    axes[0].set_ylabel("routing, accuracy")
    axes[0].legend(loc="upper left", fontsize=8)
    dims = [_value(r.get("value_dim")) for r in rows]
    axes[1].plot(steps, dims, "o-", ms=3, color="C3")
    unread = [s for s, d in zip(steps, dims) if math.isnan(d)]
    if unread:  # no dimension: interchanging the whole vector does not carry the value
        axes[1].plot(unread, [0] * len(unread), "x", color="C3", label="unread (no dimension)")
        axes[1].legend(loc="upper left", fontsize=8)
    axes[1].set_ylabel("value code dimension")
    axes[2].plot(steps, [_value(r.get("loss")) for r in rows], "o-", ms=3, color="C4")
    axes[2].set_ylabel("training-batch loss")
    axes[2].set_xlabel("step (symlog; dashed: plateau exit, dotted: a label changes)")
    axes[2].set_xscale("symlog", linthresh=1)
    exit_step = rows[-1].get("plateau_exit") if rows else None
    for ax in axes:
        if exit_step is not None and not (isinstance(exit_step, float) and math.isnan(exit_step)):
            ax.axvline(exit_step, ls="--", color="k", lw=1, gid="plateau-exit")
        for step, _ in changes(rows):
            ax.axvline(step, ls=":", color="C2", lw=1, gid="label-change")
    for i, (step, text) in enumerate(changes(rows)):
        axes[0].annotate(text, (step, 1.0 - 0.12 * (i % 4)), fontsize=7, color="C2", rotation=0,
                         xytext=(3, -8), textcoords="offset points")
    fig.suptitle(title, fontsize=9)
    return fig


def _cell(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return str(int(x)) if isinstance(x, (int, float)) else str(x)


def timeline_markdown(df, title: str) -> str:
    """``timeline.md``: one row per run, when each level forms (``PREDICTIONS.md``'s
    definitions), and its figure."""
    from interp.inspect.studies.timelines import changes, formation, held_version

    lines = [f"# Timelines: {title}", "", f"Measures version: `{held_version(df)}` (issue 52's graded "
             "measures are columns of `timeline.csv`: `interp.inspect.mechanism.progress`).", "",
             "Per run: the step of the first snapshot from which the routing is named (lookup, mirror "
             "or inverted) at every later snapshot (`routing forms`), the first snapshot from which "
             "the value code's label no longer changes (`code settles`), the plateau exit (the "
             "first curve step with training loss below 0.9 ln n) and the outcome (final test "
             "accuracy: success >= 99%, failed < max(2/n, 5%)).", "",
             "| cell | seed | snapshots | routing forms | code settles | plateau exit | last step "
             "| outcome | final labels | figure |", "|---|--:|--:|--:|--:|--:|--:|---|---|---|"]
    notes = []
    for run, rows in df.groupby("run", sort=False):
        f, first = formation(rows), rows.iloc[0]
        cell = f"case {first['case']} n {first['n']} d {first['d_token']} L{first['n_layers']} pe={first['pos_embed']}"
        name = figure_name(run, f["seed"])
        lines.append(f"| {cell} | {f['seed']} | {len(rows)} | {_cell(f['routing_forms'])} | "
                     f"{_cell(f['code_settles'])} | {_cell(f['plateau_exit'])} | {f['last_step']} | "
                     f"{_cell(f['outcome'])} | {f['routing']} / {f['code']} ({f['mechanism']}) | "
                     f"[{name}]({name}) |")
        moves = "; ".join(f"step {s}: {t}" for s, t in changes(rows)) or "no label changes"
        notes.append(f"- run {run} (seed {f['seed']}): {moves}")
    return "\n".join(lines + ["", "## Label changes", "", *notes, ""])


def write_timeline(source, out, *, batch_size: int = 256, keep: int = 20, snapshots_out=None) -> dict:
    """Measure ``source`` (:func:`interp.inspect.studies.timelines.timeline`) and write into folder
    ``out`` its CSV (every row sealed: :func:`interp.inspect.studies.atlas_cache.seal`), its
    Markdown (with the runs skipped, each named) and a figure per run, as one set; ``{"csv",
    "markdown", "figures", "rows", "skipped"}`` (paths; run name -> why)."""
    from interp.inspect.studies.atlas_cache import seal
    from interp.inspect.studies.timelines import MEASURES_VERSION, timeline
    from interp.training.files import figure_bytes, write_files

    before = _held(Path(out) / CSV)
    df = timeline(source, batch_size=batch_size, keep=keep, snapshots_out=snapshots_out)
    skipped = dict(df.attrs.get("skipped") or {})
    out = Path(out)
    text = timeline_markdown(df, Path(source).resolve().name)
    if skipped:
        text += "\n".join(["## Skipped runs", "", f"{len(skipped)} run(s) have no timeline here: their "
                           "checkpoint or saved timeline cannot be used.", "",
                           *(f"- run {k}: {v}" for k, v in skipped.items()), ""])
    contents = {out / CSV: seal(df.to_csv(index=False)), out / MARKDOWN: text}
    figures = []
    for run, rows in df.groupby("run", sort=False):
        first = rows.iloc[0]
        title = (f"run {run}: case {first['case']} n {first['n']} d {first['d_token']} "
                 f"L{first['n_layers']} seed {first['seed']} ({first['outcome']})")
        path = out / figure_name(run, first["seed"])
        contents[path] = figure_bytes(timeline_figure(rows, title), ".png", dpi=110)
        figures.append(str(path))
    write_files(contents)
    return {"csv": str(out / CSV), "markdown": str(out / MARKDOWN), "figures": figures, "rows": len(df),
            "skipped": skipped, "measures_version": MEASURES_VERSION,
            "replaced_version": None if before in (None, MEASURES_VERSION) else before,
            "snapshots": snapshot_records(df)}


def _held(path: Path) -> str | None:
    """The measures version an earlier ``timeline.csv`` at ``path`` holds (None: no table)."""
    import pandas as pd

    from interp.inspect.studies.timelines import held_version

    if not path.is_file():
        return None
    try:
        return held_version(pd.read_csv(path, dtype=str))
    except (ValueError, pd.errors.ParserError):  # unreadable: replaced all the same
        return "unreadable"


def snapshot_records(df) -> list[dict]:
    """Per row (run and snapshot): its identity, loss and accuracy, the graded progress measures
    and the measures version, as JSON-ready dicts (NaN and missing values are None)."""
    from interp.inspect.mechanism.progress import COLUMNS
    from interp.inspect.studies.timelines import VERSION_COLUMN

    keep = ["run", "seed", "step", "loss", "acc", "qk_diag", *COLUMNS, "routing", "code", VERSION_COLUMN]
    out = []
    for r in df.to_dict("records"):
        out.append({k: (None if r.get(k) is None or (isinstance(r.get(k), float) and math.isnan(r[k]))
                        else (r[k].item() if hasattr(r[k], "item") else r[k])) for k in keep})
    return out
