"""interp report: a sweep's table beside the paper's, the paper's numbers tested cell by cell
(:mod:`interp.sweeps.report_check`, where the folder has a ``paper.csv``), per-seed lines,
violins, and the loss curves per cell (drawn by :func:`interp.inspect.tools.curves.report_curves`, linked by the report)."""

from __future__ import annotations

from interp.cli.sweep import add_load_timeout
from interp.inspect.tools.curves import report_curves
from interp.sweeps.report import cells, paper_table, runs, write
from interp.sweeps.driver import load


def add_arguments(p) -> None:
    p.add_argument("dir", help="sweep folder holding configs.py (e.g. experiments/table1)")
    p.add_argument("--store", default=None,
                   help="results store or its sweep folder (default DIR/results/store.sqlite)")
    p.add_argument("--out", default=None, help="folder for report.md, violins.png and loss-curves.png (default DIR)")
    p.add_argument("--json", action="store_true", help="print the cells as JSON")
    add_load_timeout(p)


def run(args) -> int:
    import sys

    from interp.sweeps.frame import find_store

    sweep = load(args.dir, timeout=args.load_timeout)
    store = None
    if args.store is not None:  # a typo, not an empty report
        try:
            store = find_store(args.store)
        except ValueError:
            raise ValueError(f"--store {args.store}: no such store file; accepted: a results store "
                             f"written by interp sweep or its sweep folder (e.g. {sweep.default_store})"
                             ) from None
    written = write(sweep, store=store, out=args.out, curves=report_curves)
    if args.json:
        store_path = store or sweep.default_store
        table = cells(sweep, runs(sweep, store_path), paper_table(sweep))
        print(table.to_json(orient="records", indent=1))
    else:
        print(written.markdown.read_text())
        figures = [written.violins] + ([written.curves.path] if written.curves.path else [])
        print(f"wrote {written.markdown}, {' and '.join(map(str, figures))} "
              f"({written.runs} of {written.declared} runs in)")
    for name, why in sorted(written.damaged.items()):
        print(f"interp report: warning: run {name}: {why}; `interp sweep {args.dir}` retrains it",
              file=sys.stderr)
    return 0
