"""``interp timeline RUN_OR_STORE [--out DIR] [--json]``: mechanism timelines (issue 46).

``RUN_OR_STORE``: a run folder (``interp train``'s, or a sweep's checkpoint folder) or a store
(a store file, a sweep folder). Every snapshot of each run is measured and labelled
(:func:`interp.inspect.studies.timelines.timeline`); a run without snapshots is trained again with them
first (on the CPU, checked bit for bit against its checkpoint, and saved beside it in
``timeline/``). Writes, whole or not at all, into ``--out`` (default: the run folder, or the
folder the store's sweep lives in; a folder this user cannot write is refused before any work,
naming it): ``timeline.csv`` (one row per run and snapshot, each sealed),
``timeline.md`` (per run: when the routing forms, when the code settles, the plateau exit, the
outcome), ``timeline-<run>-seed<S>.png`` per run (the loss curve, the graded measures and the
labels on one step axis, the loss milestones marked) and ``timeline-cell-<cell>.png`` per cell
(its runs overlaid, coloured by outcome) (:mod:`interp.inspect.studies.timeline_report`). A run whose checkpoint is not its store row's (a run
folder inside a store is checked against its row first), is corrupt or has NaN weights, or whose
saved timeline does not check, is skipped with a line naming it; the command fails only when no
run can be read. The snapshots of a run whose folder this user cannot write (a read-only store)
are saved under ``--out``'s ``snapshots/`` instead. ``--milestones NAMES``: a run whose timeline
lacks a snapshot at one of these loss milestones (:mod:`interp.training.milestones`) is trained
again with snapshots at step 0, those milestones and its last step; a milestone a run's curve
never reaches, or an unknown name, is refused by name before anything trains.

Every row carries the graded progress measures (:mod:`interp.inspect.mechanism.progress`, issue 52)
and the measures version (``measures_version``); ``--json`` prints the written paths with each
snapshot's graded measures (``snapshots``). The snapshots are measured every time: a
``timeline.csv`` of another version at ``--out`` is replaced, and a line says which version it held
(readers refuse such a table: :func:`interp.inspect.studies.timelines.read_timeline`).
"""

from __future__ import annotations

import json
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("source", metavar="RUN_OR_STORE",
                   help="a run folder, a sweep folder (with results/store.sqlite) or a store file")
    p.add_argument("--out", default=None,
                   help="output folder (default: the run folder, or the sweep's folder)")
    p.add_argument("--keep", type=int, default=20,
                   help="most snapshots per run trained again here (default 20; saved ones stay as they are)")
    p.add_argument("--batch-size", type=int, default=256, help="inputs per measure (default 256)")
    p.add_argument("--milestones", default=None, metavar="NAMES",
                   help="train a run again with snapshots at these loss milestones where its timeline lacks them "
                        "(comma-separated: plateau_exit, half_loss, steepest_drop, low_loss; or all)")
    p.add_argument("--json", action="store_true", help="print the written paths as JSON")


def default_out(source: Path) -> Path:
    if source.is_dir() and (source / "config.json").is_file():
        return source
    from interp.sweeps.frame import find_store

    store = find_store(source).resolve()
    return store.parent.parent if store.parent.name == "results" else store.parent


def run(args) -> int:
    import sys

    from interp.cli.atlas import writable
    from interp.inspect.studies.timeline_report import write_timeline
    from interp.training.milestones import check_names

    source = Path(args.source)
    if not source.exists():
        raise ValueError(f"{source} does not exist; accepted: a run folder, a sweep folder or a store file")
    if args.keep < 2:
        raise ValueError(f"--keep {args.keep}; accepted: an integer >= 2 (step 0 and the last step)")
    milestones = None if args.milestones is None else check_names(args.milestones)  # refused before any work
    out = Path(args.out) if args.out else default_out(source)
    writable(out, given=bool(args.out))
    # snapshots of runs whose folder this user cannot write go under --out (issue 55)
    written = write_timeline(source, out, batch_size=args.batch_size, keep=args.keep,
                             snapshots_out=out / "snapshots" if args.out else None, milestones=milestones)
    if written.get("replaced_version"):
        print(f"measured again: the earlier {written['csv']} held measures version {written['replaced_version']}, "
              f"this one holds {written['measures_version']}", file=sys.stderr)
    for name, why in written["skipped"].items():
        print(f"skipped: {why}" if name in why else f"skipped run {name}: {why}", file=sys.stderr)
    if args.json:
        print(json.dumps(written))
    else:
        skipped = len(written["skipped"])
        print(f"timelines of {len(written['figures'])} run(s), {written['rows']} snapshots"
              + (f", {skipped} run(s) skipped (named above)" if skipped else "")
              + f": {written['markdown']}, {written['csv']}, {len(written['figures'])} run figure(s), "
              f"{len(written['cell_figures'])} cell figure(s)")
    return 0
