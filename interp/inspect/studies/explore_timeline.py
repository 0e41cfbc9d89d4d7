"""The explorer's timeline view (issue 46): a seed's labels through training, where measured.

When ``interp timeline`` has written ``timeline.csv`` for the sweep (in the sweep folder, or in
``<sweep>/timeline/``: :func:`load` looks in both), each seed section of the explorer page shows
that run's figure (:func:`interp.inspect.studies.timeline_report.timeline_figure`: qk_diag, follow,
accuracy, the value code's dimension and the loss against steps, the plateau exit and each label
change marked) and when its routing formed and its code settled
(:func:`interp.inspect.studies.timelines.formation`). Without a timeline the section shows nothing more
(``interp timeline`` on the sweep makes one). Nothing here measures: it draws what the CSV holds,
once it checks (issue 55): every row's seal (``row_sha``, :mod:`interp.inspect.studies.atlas_cache`),
and each run's rows against its store row (its final accuracy, its last step, the plateau exit
its recorded curve gives). A run whose rows fail is left out with a note naming it and why; a
table written before seals is not used (``interp timeline`` writes a sealed one again).
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
            df = pd.read_csv(path, dtype={"run": str})
            if {"run", "step", "routing", "code"} <= set(df.columns):
                return checked(df, path, store)
    return None


def checked(df, path: Path, store_path):
    """``df`` (the rows of the timeline table at ``path``) less the runs whose rows fail their
    seal or disagree with the store's rows; ``attrs["notes"]`` names each left out."""
    from interp.inspect.studies.atlas_cache import SEAL, read_sealed
    from interp.sweeps import store as store_mod

    notes: dict[str, str] = {}
    if SEAL not in df.columns:
        for run in df["run"].unique():
            notes[str(run)] = (f"{path} was written before timeline seals (issue 55); run `interp timeline` "
                               "again to use it")
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


def section(timelines, name: str, folder: Path) -> str:
    """HTML of one seed's timeline (its figure written into ``folder``); "" without one."""
    from interp.inspect.studies.timeline_report import timeline_figure
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
    save_figure(timeline_figure(rows.sort_values("step"), ""), folder / "timeline.png", dpi=80, close=True)
    said = (f"routing formed at step {f['routing_forms']}" if f["routing_forms"] is not None
            else "routing never formed")
    return (f'<h3>Timeline</h3>\n<img src="seeds/{html.escape(folder.name)}/timeline.png" alt="timeline">\n'
            f"<p>{said}; the value code settled at step {f['code_settles']}; the loss left its plateau "
            f"at step {f['plateau_exit']} (last snapshot {f['last_step']}).</p>\n")
