"""The explorer's timeline view (issue 46): a seed's labels through training, where measured.

When ``interp timeline`` has written ``timeline.csv`` for the sweep (in the sweep folder, or in
``<sweep>/timeline/``: :func:`load` looks in both), each seed section of the explorer page shows
that run's figure (:func:`interp.inspect.studies.timeline_report.timeline_figure`: qk_diag, follow,
accuracy, the value code's dimension and the loss against steps, the plateau exit and each label
change marked) and when its routing formed and its code settled
(:func:`interp.inspect.studies.timelines.formation`). Without a timeline the section shows nothing more
(``interp timeline`` on the sweep makes one). Nothing here measures: it draws what the CSV holds.
"""

from __future__ import annotations

import html
from pathlib import Path


def load(store_path):
    """The sweep's timeline table (a pandas DataFrame), or None when there is none."""
    import pandas as pd

    from interp.inspect.studies.timeline_report import CSV

    from interp.sweeps.frame import find_store

    store = find_store(store_path).resolve()  # a store file, or a folder holding one
    sweep = store.parent.parent if store.parent.name == "results" else store.parent
    for path in (sweep / CSV, sweep / "timeline" / CSV):
        if path.is_file():
            df = pd.read_csv(path, dtype={"run": str})
            if {"run", "step", "routing", "code"} <= set(df.columns):
                return df
    return None


def section(timelines, name: str, folder: Path) -> str:
    """HTML of one seed's timeline (its figure written into ``folder``); "" without one."""
    from interp.inspect.studies.timeline_report import timeline_figure
    from interp.inspect.studies.timelines import formation
    from interp.training.files import save_figure

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
