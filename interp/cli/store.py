"""interp store verify STORE: check a results store and its checkpoints, naming what is wrong.
interp store rows STORE DEST: write DEST, STORE's rows without checkpoints, to commit or carry.

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
    if args.json:
        print(json.dumps(dict(counts, damaged=damaged, store=str(path)), indent=1))
    else:
        print(f"{path}: {counts['verified']} row(s) verified, {counts['unverified']} without a "
              f"checksum (older store), {len(damaged)} with a missing or corrupt checkpoint")
        for name, why in sorted(damaged.items()):
            print(f"  {name}: {why}", file=sys.stderr)
        if damaged:
            print("`interp sweep` on the sweep's folder retrains them", file=sys.stderr)
    return 1 if damaged else 0
