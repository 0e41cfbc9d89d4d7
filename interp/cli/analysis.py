"""``interp analyze-sweep DIR``: do a sweep's successful seeds recover the paper's construction?

Reads ``DIR/results/store.sqlite`` (or a store file), measures every seed of each bimodal config
(some seeds >= 99%, some below ``--well-below``, 50%; ``--all`` for every config, ``--where FIELD=VALUE``,
repeatable, to pick configs)
with :func:`interp.inspect.mechanism.measure.measure`, prints the per-seed table and the written answers, and
with ``--out`` writes ``<out>/<name>.md`` (report), ``.csv`` (per-seed table) and
``-violins.png`` (per-seed measures by outcome).
"""

from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    p.add_argument("sweep", help="sweep folder (with results/store.sqlite) or a store file")
    p.add_argument("--where", action="append", metavar="FIELD=VALUE",
                   help="only configs with this field value (repeatable), e.g. --where case=2")
    p.add_argument("--all", action="store_true", help="every config, not only the bimodal ones")
    p.add_argument("--fail-below", type=float, default=None, help="failed if accuracy < this (default max(2/n, 0.05))")
    p.add_argument("--well-below", type=float, default=0.5,
                   help="bimodal: some seed >= 99%% and some below this accuracy (default 0.5)")
    p.add_argument("--batch-size", type=int, default=512, help="sampled inputs per measure")
    p.add_argument("--out", default=None, help="folder for the report (.md, .csv, -violins.png)")
    p.add_argument("--name", default=None, help="report file stem (default: the sweep's name)")
    p.add_argument("--json", action="store_true", help="print JSON (groups, per-seed rows, answers)")


def run(args) -> int:
    import re

    from tqdm import tqdm

    from interp.inspect.studies import analysis
    from interp.sweeps import driver as sweeps

    res = analysis.analyze_sweep(
        args.sweep, where=sweeps.parse_where(args.where), all_groups=args.all,
        fail_below=args.fail_below, batch_size=args.batch_size, progress=None if args.json else tqdm,
        well_below=args.well_below,
    )
    stem = args.name or re.sub(r"[^\w.-]+", "_", res.name)  # the sweep's name, whatever the path
    title = f"Bimodal seeds in {stem}: do successful seeds recover the construction?"
    if args.out:
        analysis.write_report(res, args.out, stem, title=title)
    if args.json:
        print(json.dumps(dict(groups=res.groups.to_dict("records"), seeds=res.table.to_dict("records"),
                              answers=res.answers, skipped=res.skipped),
                         indent=1, default=str))
    else:
        print(res.markdown(title))
    for name, why in res.skipped.items():  # named in the report too; here on stderr as well
        print(f"skipped: {why}", file=sys.stderr)
    return 0
