"""interp precision: the least bits p at which each construction stays exact, vs n."""

from __future__ import annotations

import json
import sys

from interp.core import tasks
from interp.core.limits import with_construction
from interp.theory.precision import KINDS, fit_law, measure


def add_arguments(parser) -> None:
    parser.add_argument("--case", type=int, nargs="+", default=None,
                        help="cases (default: every presentation with a construction)")
    parser.add_argument("--n", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64], help="table sizes")
    parser.add_argument("--kind", nargs="+", default=["fixed"], choices=KINDS, help="number formats")
    parser.add_argument("--which", default="paper", choices=["paper", "theorem35"],
                        help="paper: the hard-attention constructions; theorem35: the explicit Theorem 3.5 model (case 5)")
    parser.add_argument("--random", type=int, default=64, help="random probe inputs besides the structured ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    for n in args.n:
        tasks.check_n(n, 2)
    cases, skipped = with_construction(args.case)  # a bad case refused here, by name
    for line in skipped:
        print(line, file=sys.stderr)
    rows, hints = [], {}
    for case in cases:
        for kind in args.kind:
            for n in sorted(args.n):
                row = measure(case, n, kind, which=args.which, hint=hints.get((case, kind)),
                              n_random=args.random, seed=args.seed)
                hints[(case, kind)] = row["bits"]
                rows.append(row)
    fits = fit_law(rows)
    if args.json:
        print(json.dumps(dict(rows=rows, fits=fits), indent=2))
        return 0
    print(f"{'case':>4} {'which':>9} {'n':>6} {'kind':>5} {'p':>4} {'I':>3} {'h*d*p':>7} {'nlog2n/3':>9} {'inputs':>7} {'s':>6}")
    for r in rows:
        bound = "" if r["bound_3_4"] is None else f"{r['bound_3_4']:.1f}"
        print(f"{r['case']:>4} {r['which']:>9} {r['n']:>6} {r['kind']:>5} {str(r['bits']):>4} {r['int_bits']:>3} "
              f"{str(r['c_size']):>7} {bound:>9} {r['inputs']:>7} {r['seconds']:>6}")
    for key, f in fits.items():
        print(f"fit {key}: p = {f['slope']:.2f} log2 n + {f['intercept']:.2f} (max residual {f['max_residual']:.2f}, {f['points']} points)")
    return 0
