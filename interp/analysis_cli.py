"""``interp analyze-sweep DIR``: do a sweep's successful seeds recover the paper's construction?

Reads ``DIR/results/store.sqlite`` (or a store file), measures every seed of each bimodal config
(some seeds >= 99%, some near chance; ``--all`` for every config, ``--where`` to pick configs)
with :func:`interp.analysis.measure`, prints the per-seed table and the written answers, and
with ``--out`` writes ``<out>/<name>.md`` (report), ``.csv`` (per-seed table) and
``-violins.png`` (per-seed measures by outcome).
"""

from __future__ import annotations

import json


def add_arguments(p) -> None:
    p.add_argument("sweep", help="sweep folder (with results/store.sqlite) or a store file")
    p.add_argument("--where", nargs="*", metavar="FIELD=VALUE", help="only configs matching, e.g. case=2 d_token=4")
    p.add_argument("--all", action="store_true", help="every config, not only the bimodal ones")
    p.add_argument("--fail-below", type=float, default=None, help="failed if accuracy < this (default 2/n)")
    p.add_argument("--batch-size", type=int, default=1024, help="sampled inputs per measure")
    p.add_argument("--out", default=None, help="folder for the report (.md, .csv, -violins.png)")
    p.add_argument("--name", default=None, help="report file stem (default: the sweep folder name)")
    p.add_argument("--json", action="store_true", help="print JSON (groups, per-seed rows, answers)")


def _where(items) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--where {item!r}; accepted: FIELD=VALUE")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def run(args) -> int:
    from pathlib import Path

    from interp import analysis, viz

    res = analysis.analyze_sweep(
        args.sweep, where=_where(args.where), all_groups=args.all, fail_below=args.fail_below,
        batch_size=args.batch_size, progress=not args.json,
    )
    stem = args.name or Path(args.sweep).resolve().name
    title = f"Bimodal seeds in {stem}: do successful seeds recover the construction?"
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.md").write_text(res.markdown(title) + "\n", encoding="utf-8")
        res.table.to_csv(out / f"{stem}.csv", index=False)
        if len(res.table):
            fig = viz.plot_seed_measures(res.table, title=stem)
            fig.savefig(out / f"{stem}-violins.png", dpi=100)
    if args.json:
        print(json.dumps(dict(groups=res.groups.to_dict("records"),
                              seeds=res.table.to_dict("records"), answers=res.answers),
                         indent=1, default=str))
    else:
        print(res.markdown(title))
    return 0
