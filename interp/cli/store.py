"""interp store verify STORE: check a results store and its checkpoints, naming what is wrong.
interp store rows STORE DEST: write DEST, STORE's rows without checkpoints, to commit or carry.

``store verify`` also compares every run's row with its checkpoint's ``config.json`` (its
config, recorded metrics and shape; ``--measure``: the model loaded and its accuracy measured
again, :mod:`interp.sweeps.store_evidence`), checks every saved timeline (its seal, snapshots
and manifest against the run), and reports orphaned progress files (``<store folder>/progress/``:
runs no longer in configs.py, runs all stored, files set aside as damaged;
:mod:`interp.sweeps.orphans`) and temporary timeline folders a killed ``interp timeline`` left;
``--remove-orphans`` deletes those.

STORE: a store file, a sweep folder or an ``interp train`` folder
(:func:`interp.sweeps.frame.find_store`)."""

from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    v = sub.add_parser("verify", help="every row against its checksum, every checkpoint file against the row's sha256")
    v.add_argument("store", help="a results store or its sweep folder (e.g. experiments/table1)")
    v.add_argument("--json", action="store_true", help="print the counts and problems as JSON")
    v.add_argument("--sweep", default=None, metavar="DIR",
                   help="the sweep folder whose configs.py the store's progress files are checked against "
                        "(default: DIR when the store is DIR/results/<store>)")
    v.add_argument("--remove-orphans", action="store_true",
                   help="delete the orphaned progress files it reports (runs no longer in configs.py, runs "
                        "all stored, files set aside as damaged) and the temporary timeline folders a killed "
                        "`interp timeline` left in run folders; a resumable group's file is never removed")
    v.add_argument("--measure", action="store_true",
                   help="also load every run's model and measure its test accuracy again against the row's "
                        "(slower: a model per run); without it the row is compared with config.json only")
    r = sub.add_parser("rows", help="write DEST: the store's rows without checkpoints (its runs count as trained, "
                       "cannot be loaded); a consistent copy while a sweep writes, e.g. to commit to git")
    r.add_argument("store", help="a results store or its sweep folder")
    r.add_argument("dest", help="the SQLite file to write; an existing one is replaced whole only if it is an "
                   "earlier rows-only copy of the same store (its runs and sweep log a part of STORE's), "
                   "anything else there is refused and left as it is")


def run(args) -> int:
    from interp.sweeps import store
    from interp.sweeps.frame import find_store

    path = find_store(args.store)
    if args.action == "rows":
        from interp.training.files import check_name_length

        check_name_length(store.real_path(args.dest, "dest"), "dest", sqlite_file="")
        runs = store.copy_rows(path, args.dest)
        print(f"{args.dest}: {runs} run(s) of {path}, without checkpoints")
        return 0
    counts = store.verify(path)  # rows: an edited or corrupt row raises, naming the run
    damaged = store.checkpoint_problems(path)
    disagree = {k: v for k, v in store.cross_check(path, measure=args.measure).items() if k not in damaged}
    timelines, stale = store.timeline_problems(path)
    found = orphaned(path, args.sweep)
    removed = remove(found) if args.remove_orphans else []
    removed += remove_folders(stale) if args.remove_orphans else []
    if args.json:
        print(json.dumps(dict(counts, damaged=damaged, disagree=disagree, timelines=timelines, store=str(path),
                              orphans={str(p): why for p, why in found.items()}, stale=[str(p) for p in stale],
                              removed=[str(p) for p in removed]), indent=1))
    else:
        say(path, args, counts, damaged, disagree, timelines, found, stale, removed)
    return 1 if damaged or disagree or timelines else 0


def say(path, args, counts, damaged, disagree, timelines, found, stale, removed) -> None:
    """``store verify``'s summary line on stdout, a line per problem on stderr."""
    print(f"{path}: {counts['verified']} row(s) verified, {counts['unverified']} without a "
          f"checksum (older store), {len(damaged)} with a missing or corrupt checkpoint, "
          f"{len(disagree)} whose checkpoint disagrees with the row"
          f"{' (accuracies measured again)' if args.measure else ''}, {len(timelines)} with a bad timeline"
          + (f", {len(found)} orphaned progress file(s)" if found else "")
          + (f", {len(stale)} temporary timeline folder(s) left by a killed write" if stale else ""))
    for name, why in sorted(damaged.items()):
        print(f"  {name}: {why}", file=sys.stderr)
    for name, why in sorted(disagree.items()):
        print(f"  {name}: {why}", file=sys.stderr)
    if damaged or disagree:
        print("`interp sweep` on the sweep's folder retrains runs with a missing or corrupt checkpoint; "
              "a checkpoint that disagrees with its row is skipped by every reader", file=sys.stderr)
    for name, why in sorted(timelines.items()):
        print(f"  {name}: {why}", file=sys.stderr)
    for p, why in found.items():
        print(f"  {'removed ' if p in removed else ''}progress file {p}: {why}", file=sys.stderr)
    for p in stale:
        print(f"  {'removed ' if p in removed else ''}temporary timeline folder {p} (a killed `interp timeline`)",
              file=sys.stderr)
    if (found or stale) and not args.remove_orphans:
        print(f"`interp store verify {args.store} --remove-orphans` removes them", file=sys.stderr)


def orphaned(path, sweep_dir=None) -> dict:
    """The orphaned progress files beside the store ``path`` (:mod:`interp.sweeps.orphans`),
    checked against ``sweep_dir``'s configs.py (default: the sweep folder the store is in)."""
    from interp.sweeps import orphans, store

    if not orphans.progress.folder(path).is_dir():
        return {}
    sweep_dir = sweep_dir if sweep_dir is not None else orphans.sweep_folder_of(path)
    stored = set(store.read(path, expand=False)["name"])
    return orphans.orphans(path, orphans.declared_runs(sweep_dir), stored)


def remove(found: dict) -> list:
    """Delete the files of ``found``; those removed (one that cannot be: a ValueError naming it)."""
    from interp.training.files import problem

    removed = []
    for p in found:
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        except OSError as e:
            raise ValueError(problem(p, e)) from None
        removed.append(p)
    return removed


def remove_folders(folders) -> list:
    """Delete the folders ``folders`` (temporary timeline folders); those removed."""
    import shutil

    from interp.training.files import problem

    removed = []
    for p in folders:
        try:
            shutil.rmtree(p)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise ValueError(problem(getattr(e, "filename", None) or p, e)) from None
        removed.append(p)
    return removed
