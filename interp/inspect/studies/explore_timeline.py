"""The explorer's timeline view (issues 46, 52): a seed's measures and labels through training.

When ``interp timeline`` has written ``timeline.csv`` for the sweep (in the sweep folder, or in
``<sweep>/timeline/``: :func:`load` looks in both), each seed section of the explorer page shows
that run's figure (:func:`interp.inspect.studies.timeline_report.seed_figure`: the loss curve the
store recorded, the graded progress measures and the labels on one step axis, the loss
milestones marked), its cell's figure (:func:`interp.inspect.studies.timeline_report.cell_figure`:
the cell's runs overlaid, coloured by outcome; :func:`cell_figures` writes one per cell) and when
its routing formed and its code settled (:func:`interp.inspect.studies.timelines.formation`).
Without a timeline the section shows nothing more (``interp timeline`` on the sweep makes one).
Nothing here measures: it draws what the CSV holds, once it checks (issues 52, 55): the table's
measures version (:data:`interp.inspect.studies.timelines.MEASURES_VERSION`, as
:func:`interp.inspect.studies.timelines.read_timeline` checks it), every row's seal (``row_sha``,
:mod:`interp.inspect.studies.atlas_cache`), and each run's rows against its store row (its final
accuracy, its last step, the plateau exit its recorded curve gives). A run whose rows fail is
left out with a note naming it and why; a table of another measures version, or written before
versions or seals, is not used (``interp timeline`` measures it again).
"""

from __future__ import annotations

import html
from pathlib import Path


def load(store_path):
    """The sweep's timeline table (a pandas DataFrame) of the runs whose rows check (module
    docstring), with ``df.attrs["notes"]``: run name -> why its rows were left out; None when
    there is no table."""
    import pandas as pd

    from interp.inspect.studies.timeline_report import CSV
    from interp.sweeps.frame import find_store

    store = find_store(store_path).resolve()  # a store file, or a folder holding one
    sweep = store.parent.parent if store.parent.name == "results" else store.parent
    for path in (sweep / CSV, sweep / "timeline" / CSV):
        if path.is_file():
            df = pd.read_csv(path, dtype={"run": str, "measures_version": str})
            if {"run", "step", "routing", "code"} <= set(df.columns):
                return checked(df, path, store)
    return None


def checked(df, path: Path, store_path):
    """``df`` (the rows of the timeline table at ``path``) less the runs whose rows fail their
    seal or disagree with the store's rows; ``attrs["notes"]`` names each left out."""
    from interp.inspect.studies.atlas_cache import SEAL, read_sealed
    from interp.sweeps import store as store_mod

    notes: dict[str, str] = {}
    stale = _stale(df, path)
    if SEAL not in df.columns or stale is not None:
        for run in df["run"].unique():
            notes[str(run)] = stale or (f"{path} was written before timeline seals (issue 55); run "
                                        "`interp timeline` again to use it")
    else:
        sealed, _ = read_sealed(path.read_text())
        for i, run in enumerate(df["run"]):
            if i not in sealed:
                notes.setdefault(str(run), f"a row of {path} fails its seal (edited or cut)")
    rows = {str(r["name"]): r for r in store_mod.read(store_path).to_dict("records")}
    for run, sub in df.groupby("run", sort=False):
        if str(run) not in notes:
            why = _disagrees(sub, rows.get(str(run)))
            if why is not None:
                notes[str(run)] = f"{path}: {why}"
    kept = df[~df["run"].astype(str).isin(set(notes))].drop(columns=[SEAL], errors="ignore")
    kept.attrs["notes"] = notes
    return kept


def _stale(df, path: Path) -> str | None:
    """Why the table at ``path`` holds measures of another version than this code's (the check
    and the words of :func:`interp.inspect.studies.timelines.read_timeline`); None: this one."""
    from interp.inspect.studies.timelines import MEASURES_VERSION, held_version

    held = held_version(df)
    if held == MEASURES_VERSION:
        return None
    return (f"{path} holds measures version {held}; this code measures version {MEASURES_VERSION} "
            f"(issue 52's progress measures); run `interp timeline RUN_OR_STORE --out {path.parent}` "
            "to measure it again")


def _disagrees(rows, stored) -> str | None:
    """How one run's timeline rows disagree with its store row (None: they do not)."""
    import math

    from interp.training.snapshots import plateau_exit

    if stored is None:
        return "its run is not in the store"
    last = rows.sort_values("step").iloc[-1]
    acc, theirs = stored.get("accuracy"), last.get("final_accuracy")
    number = lambda x: math.nan if x is None else float(x)  # noqa: E731
    if not (math.isnan(number(acc)) and math.isnan(number(theirs))) and not abs(number(acc) - number(theirs)) <= 1e-12:
        return f"says final accuracy {number(theirs)!r}, the store's row {number(acc)!r}"
    if stored.get("steps") is not None and not math.isnan(number(stored["steps"])) \
            and int(last["step"]) != int(stored["steps"]):
        return f"ends at step {int(last['step'])}, the run at step {int(stored['steps'])}"
    exit_step = plateau_exit(stored.get("curve") or [], int(last["n"]))
    said = last.get("plateau_exit")
    said = None if said is None or (isinstance(said, float) and math.isnan(said)) else int(said)
    if said != exit_step:
        return f"says plateau exit {said!r}, the run's recorded curve {exit_step!r}"
    return None


def _curve_config(stored):
    """(recorded curve, TrainConfig) of a store row (a dict or Series); (None, None) without one."""
    import json

    from interp.training.runs import TrainConfig

    if stored is None:
        return None, None
    config = stored.get("config")
    config = json.loads(config) if isinstance(config, str) else config
    return list(stored.get("curve") or []), (None if not config else TrainConfig.from_dict(dict(config)))


def prepare(store_path, store_rows, out: Path):
    """(:func:`load`'s table or None, :func:`cell_figures` written into ``out``) for the explorer."""
    timelines = load(store_path)
    return timelines, cell_figures(timelines, store_rows, out)


def cell_figures(timelines, store_rows, out: Path) -> dict[str, str]:
    """Write one figure per cell of ``timelines`` (its runs overlaid:
    :func:`interp.inspect.studies.timeline_report.cell_figure`, with the curves of ``store_rows``,
    the explorer's store table) into ``out/timeline-cells/``; run name -> the figure's path
    relative to ``out``. Nothing without a timeline."""
    from interp.inspect.studies.timeline_report import CELL, cell_figure, cell_name
    from interp.training.files import save_figure

    if timelines is None or timelines.empty:
        return {}
    curves = {str(r["name"]): list(r.get("curve") or []) for r in store_rows.to_dict("records")}
    shown = {}
    for key, rows in timelines.groupby(list(CELL), sort=False, dropna=False):
        name = f"timeline-cells/{cell_name(rows.iloc[0])}"
        title = "cell " + ", ".join(f"{k} {v}" for k, v in zip(CELL, key)) + f": {rows['run'].nunique()} runs"
        save_figure(cell_figure(rows, curves, title), out / name, dpi=80, close=True)
        shown.update({str(run): name for run in rows["run"].unique()})
    return shown


def section(timelines, name: str, folder: Path, stored=None, cells: dict | None = None) -> str:
    """HTML of one seed's timeline (its figure written into ``folder``; ``stored``: its store
    row, whose curve and config give the loss and the milestones; ``cells``: run name -> its
    cell's figure relative to the page, :func:`cell_figures`); "" without one."""
    from interp.inspect.studies.timeline_report import seed_figure
    from interp.inspect.studies.timelines import formation
    from interp.training.files import save_figure

    note = None if timelines is None else timelines.attrs.get("notes", {}).get(str(name))
    if note is not None:  # a timeline there that does not check: said, not drawn
        return f'<h3>Timeline</h3>\n<p class="note">Timeline not shown: {html.escape(note)}</p>\n'
    rows = None if timelines is None else timelines[timelines["run"] == str(name)]
    if rows is None or rows.empty:  # nothing to draw: the page stays a screen tall
        return ""
    f = formation(rows)
    folder.mkdir(parents=True, exist_ok=True)
    curve, config = _curve_config(stored)
    save_figure(seed_figure(rows, curve, config, ""), folder / "timeline.png", dpi=80, close=True)
    said = (f"routing formed at step {f['routing_forms']}" if f["routing_forms"] is not None
            else "routing never formed")
    cell = (cells or {}).get(str(name))
    overlay = "" if cell is None else (f'<img src="{html.escape(cell)}" alt="timelines of the cell" '
                                       'class="timeline-cell">\n<p class="key">Its cell: every run with a '
                                       "timeline, blue a success, red not a success.</p>\n")
    return (f'<h3>Timeline</h3>\n<img src="seeds/{html.escape(folder.name)}/timeline.png" alt="timeline">\n'
            f"<p>{said}; the value code settled at step {f['code_settles']}; the loss left its plateau "
            f"at step {f['plateau_exit']} (last snapshot {f['last_step']}). Dashed lines: the loss "
            f"milestones; bands: the routing and code labels.</p>\n{overlay}")
