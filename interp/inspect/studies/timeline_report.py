"""Timelines written for a reader: figures per run and per cell, ``timeline.csv`` and ``timeline.md``.

:func:`seed_figure` draws one run on one time axis in steps (symlog, step 0 included; never a
fraction of the run): its recorded loss curve, the graded progress measures of :data:`DRAWN`
(:mod:`interp.inspect.mechanism.progress`) with the accuracy, the routing and value-code labels
as bands, and the loss milestones (:func:`interp.training.milestones.milestones` on the curve:
plateau exit, half-loss, steepest drop, low loss) as named vertical lines. :func:`cell_figure`
overlays a cell's runs: loss and ``match_mass`` against the step, one line per run, coloured by
outcome (success or not). :func:`timeline_markdown` is one table row per run: when the routing
forms, when the code settles, the plateau exit and the outcome
(:func:`interp.inspect.studies.timelines.formation`), and links every figure.
:func:`write_timeline` measures a source (:func:`interp.inspect.studies.timelines.timeline`) and
writes all of it as one set (:func:`interp.training.files.write_files`); it returns, beside the
paths, each snapshot's graded measures (``snapshots``, what ``interp timeline --json`` prints),
the measures version the rows hold and the version of the ``timeline.csv`` it replaced, when
another (``replaced_version``).
"""

from __future__ import annotations

import math
from pathlib import Path

CSV, MARKDOWN = "timeline.csv", "timeline.md"


#: the graded measures a seed's figure draws (issue 52; ``match_margin`` is unbounded, drawn nowhere)
DRAWN = ("match_mass", "match_pos", "readout_acc", "value_iia_code", "query_iia_code", "answer_share")
#: what a cell is: the columns a timeline row carries that name its configuration
CELL = ("case", "n", "d_token", "n_layers", "pos_embed", "d_mlp")
#: the cell figure's colours: a successful run's, and any other outcome's
SUCCESS, OTHER = "C0", "C3"


def figure_name(run: str, seed) -> str:
    return f"timeline-{run}-seed{int(seed)}.png"


def cell_name(row) -> str:
    """``timeline-cell-case3-n5-d4-L1-none-mlp0.png`` for a row (dict or Series) of a cell."""
    return (f"timeline-cell-case{row['case']}-n{row['n']}-d{row['d_token']}-L{row['n_layers']}-"
            f"{row['pos_embed']}-mlp{_int(row.get('d_mlp'))}.png")


def _int(x) -> int:
    return 0 if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def _value(x):
    return math.nan if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _records(rows) -> list[dict]:
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)
    return sorted(rows, key=lambda r: r["step"])


def _steps_axis(ax) -> None:
    """One time axis for every figure here: steps (symlog, so step 0 and the log-spaced early
    snapshots show), never a fraction of the run."""
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(left=0)


def _loss_points(rows, curve):
    """(steps, losses) of the run's recorded curve, or of its snapshots where it has none."""
    finite = [(int(s), float(v)) for s, v in (curve or []) if v is not None]
    if finite:
        return [s for s, _ in finite], [v for _, v in finite]
    return [r["step"] for r in rows], [_value(r.get("loss")) for r in rows]


def seed_figure(rows, curve=None, config=None, title: str = ""):
    """One run's timeline on one step axis, a matplotlib ``Figure`` (not registered with
    pyplot): the loss (the recorded ``curve``, ``[(step, loss), ...]``; the snapshots' losses
    without one, ``gid="loss"``), the graded measures of :data:`DRAWN` and the accuracy (a line
    each, ``gid`` its column), the routing and value-code labels as bands (each label held from
    its snapshot to the next), and the loss milestones of :func:`interp.training.milestones.milestones`
    on ``curve`` (``config``: the run's TrainConfig, for n and ``curve_every``) as vertical lines
    in every panel, named (``gid="milestone-<name>"``)."""
    from matplotlib.figure import Figure

    from interp.training import milestones

    rows = _records(rows)
    steps = [r["step"] for r in rows]
    fig = Figure(figsize=(7.5, 7), layout="constrained")
    ax_loss, ax_m, ax_lab = fig.subplots(3, 1, sharex=True, height_ratios=(2, 3, 1))
    xs, ys = _loss_points(rows, curve)
    ax_loss.plot(xs, ys, "-", color="C4", lw=1.2, gid="loss", label="training-batch loss")
    if rows and rows[0].get("n"):
        ax_loss.axhline(math.log(int(rows[0]["n"])), ls=":", color="0.5", lw=0.8, gid="ln-n", label="ln n")
    ax_loss.set_ylabel("loss")
    ax_loss.legend(loc="lower left", fontsize=7)
    for i, key in enumerate(DRAWN):
        ax_m.plot(steps, [_value(r.get(key)) for r in rows], ".-", ms=4, lw=1, color=f"C{i}", gid=key, label=key)
    ax_m.plot(steps, [_value(r.get("acc")) for r in rows], "k:", lw=1.2, gid="acc", label="accuracy")
    ax_m.set_ylim(-0.05, 1.05)
    ax_m.set_ylabel("graded measures")
    ax_m.legend(loc="center left", fontsize=7, ncol=2)
    _label_bands(ax_lab, rows)
    found = milestones.milestones(curve, config) if curve and config is not None else {}
    marks = [(name, step) for name, step in found.items() if step is not None]
    for j, (name, step) in enumerate(marks):
        for ax in (ax_loss, ax_m, ax_lab):
            ax.axvline(step, ls="--", lw=1, color=f"C{(j + 6) % 10}", gid=f"milestone-{name}")
        ax_loss.annotate(" " + name.replace("_", " "), (step, 0.97 - 0.1 * j), xycoords=("data", "axes fraction"),
                         fontsize=7, va="top", ha="left", color=f"C{(j + 6) % 10}",
                         bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.8))
    for ax in (ax_loss, ax_m, ax_lab):
        _steps_axis(ax)
    ax_lab.set_xlabel("step (symlog; dashed: loss milestones)")
    fig.suptitle(title, fontsize=9)
    return fig


def _label_bands(ax, rows) -> None:
    """The routing (upper band) and value code (lower band) of each snapshot, held to the next
    snapshot, each label a colour, named where it begins."""
    if not rows:
        return
    steps = [r["step"] for r in rows]
    ends = steps[1:] + [steps[-1] + max(1, steps[-1] // 20)]
    names = sorted({str(r.get(k)) for r in rows for k in ("routing", "code")})
    colour = {name: f"C{i % 10}" for i, name in enumerate(names)}
    for y, key in ((1, "routing"), (0, "code")):
        before = None
        for r, start, end in zip(rows, steps, ends):
            label = str(r.get(key))
            ax.broken_barh([(start, end - start)], (y - 0.35, 0.7), facecolors=colour[label], alpha=0.55,
                           gid=f"{key}-band")
            if label != before:
                ax.text(start, y, f" {label}", fontsize=7, va="center", ha="left")
            before = label
    ax.set_yticks([0, 1], ["code", "routing"])
    ax.set_ylim(-0.6, 1.6)


def cell_figure(rows, curves=None, title: str = ""):
    """A cell's runs overlaid, a matplotlib ``Figure``: the loss against the step (each run's
    recorded curve from ``curves``, run name -> ``[(step, loss), ...]``; its snapshots' losses
    without one) and ``match_mass`` against the step, one line per run in each panel
    (``gid`` the run's name), coloured by its outcome (:func:`interp.inspect.studies.analysis.classify`
    of its final accuracy, as the rows hold it): :data:`SUCCESS` for a success, :data:`OTHER`
    for any other."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    curves = curves or {}
    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    ax_loss, ax_m = fig.subplots(2, 1, sharex=True)
    counts = {SUCCESS: 0, OTHER: 0}
    for run, sub in _by_run(rows):
        sub = _records(sub)
        colour = SUCCESS if sub[-1].get("outcome") == "success" else OTHER
        counts[colour] += 1
        xs, ys = _loss_points(sub, curves.get(run))
        ax_loss.plot(xs, ys, "-", lw=1, color=colour, alpha=0.8, gid=str(run))
        ax_m.plot([r["step"] for r in sub], [_value(r.get("match_mass")) for r in sub], ".-", ms=3, lw=1,
                  color=colour, alpha=0.8, gid=str(run))
    ax_loss.set_ylabel("training-batch loss")
    ax_m.set_ylabel("match_mass")
    ax_m.set_ylim(-0.05, 1.05)
    ax_loss.legend([Line2D([], [], color=SUCCESS), Line2D([], [], color=OTHER)],
                   [f"success ({counts[SUCCESS]} runs)", f"not a success ({counts[OTHER]} runs)"],
                   loc="upper right", fontsize=7)
    for ax in (ax_loss, ax_m):
        _steps_axis(ax)
    ax_m.set_xlabel("step (symlog)")
    fig.suptitle(title, fontsize=9)
    return fig


def _by_run(rows):
    if hasattr(rows, "groupby"):
        return [(str(k), v) for k, v in rows.groupby("run", sort=False)]
    runs: dict = {}
    for r in rows:
        runs.setdefault(str(r["run"]), []).append(r)
    return list(runs.items())


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
    cells = [f"- [{name}]({name})" for name in dict.fromkeys(cell_name(r) for r in df.to_dict("records"))]
    return "\n".join(lines + ["", "## Cells", "", "Each cell's runs overlaid (loss and `match_mass` against "
                               "the step; blue: success, red: not a success):", "", *cells,
                               "", "## Label changes", "", *notes, ""])


def write_timeline(source, out, *, batch_size: int = 256, keep: int = 20, snapshots_out=None,
                   milestones=None) -> dict:
    """Measure ``source`` (:func:`interp.inspect.studies.timelines.timeline`) and write into folder
    ``out`` its CSV (every row sealed: :func:`interp.inspect.studies.atlas_cache.seal`), its
    Markdown (with the runs skipped, each named) and a figure per run, as one set; ``{"csv",
    "markdown", "figures", "rows", "skipped"}`` (paths; run name -> why). ``milestones``: snapshots
    at those loss milestones (:func:`interp.inspect.studies.timelines.ensure_snapshots`)."""
    from interp.inspect.studies.atlas_cache import seal
    from interp.inspect.studies.timelines import MEASURES_VERSION, timeline
    from interp.training.files import figure_bytes, write_files

    before = _held(Path(out) / CSV)
    df = timeline(source, batch_size=batch_size, keep=keep, snapshots_out=snapshots_out, milestones=milestones)
    skipped = dict(df.attrs.get("skipped") or {})
    out = Path(out)
    text = timeline_markdown(df, Path(source).resolve().name)
    if skipped:
        text += "\n".join(["## Skipped runs", "", f"{len(skipped)} run(s) have no timeline here: their "
                           "checkpoint or saved timeline cannot be used.", "",
                           *(f"- run {k}: {v}" for k, v in skipped.items()), ""])
    contents = {out / CSV: seal(df.to_csv(index=False)), out / MARKDOWN: text}
    curves = run_curves(source)
    figures = []
    for run, rows in df.groupby("run", sort=False):
        first = rows.iloc[0]
        title = (f"run {run}: case {first['case']} n {first['n']} d {first['d_token']} "
                 f"L{first['n_layers']} seed {first['seed']} ({first['outcome']})")
        path = out / figure_name(run, first["seed"])
        curve, config = curves.get(str(run), (None, None))
        contents[path] = figure_bytes(seed_figure(rows, curve, config, title), ".png", dpi=110)
        figures.append(str(path))
    cells = []
    for key, rows in df.groupby(list(CELL), sort=False, dropna=False):
        path = out / cell_name(rows.iloc[0])
        title = "cell " + ", ".join(f"{k} {v}" for k, v in zip(CELL, key)) + f": {rows['run'].nunique()} runs"
        contents[path] = figure_bytes(cell_figure(rows, {k: c for k, (c, _) in curves.items()}, title),
                                      ".png", dpi=110)
        cells.append(str(path))
    write_files(contents)
    return {"csv": str(out / CSV), "markdown": str(out / MARKDOWN), "figures": figures,
            "cell_figures": cells, "rows": len(df),
            "skipped": skipped, "measures_version": MEASURES_VERSION,
            "replaced_version": None if before in (None, MEASURES_VERSION) else before,
            "snapshots": snapshot_records(df)}


def run_curves(source) -> dict:
    """Run name -> (its recorded loss curve, its TrainConfig) for every run at ``source`` (a run
    folder's ``config.json``, or a store's rows, which :func:`interp.sweeps.store.read` checks)."""
    import json

    from interp.sweeps import store
    from interp.sweeps.frame import find_store
    from interp.training import checkpoints
    from interp.training.runs import TrainConfig

    p = Path(source)
    if p.is_dir() and (p / checkpoints.CONFIG).is_file():
        meta = checkpoints.read_meta(p)
        config = TrainConfig.from_dict(meta["train_config"])
        return {config.name(): (list((meta.get("result") or {}).get("curve") or []), config)}
    out = {}
    for r in store.read(find_store(p)).to_dict("records"):
        config = json.loads(r["config"]) if isinstance(r["config"], str) else dict(r["config"])
        out[str(r["name"])] = (list(r["curve"] or []), TrainConfig.from_dict(config))
    return out


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
