"""interp temperature: the least softmax inverse temperature at which each construction is exact."""

from __future__ import annotations

import json

from interp.core import tasks
from interp.theory.temperature import FAMILIES, VARIANTS, default_variant, fit_power, measure


def add_arguments(parser) -> None:
    parser.add_argument("--case", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--n", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--family", nargs="+", default=["random", "perpendicular"], choices=FAMILIES)
    parser.add_argument("--variant", default=None, choices=VARIANTS,
                        help="case 5: 'paper' (never exact under softmax) or 'tiebroken' (default for case 5)")
    parser.add_argument("--targets", type=int, default=256, help="target keys per adversarial family (spread evenly)")
    parser.add_argument("--random", type=int, default=256, help="inputs in the random family")
    parser.add_argument("--beta-max", type=float, default=1e15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    rows = []
    for case in args.case:
        tasks.check_case(case)
        variant = args.variant or default_variant(case)
        for family in args.family:
            for n in sorted(args.n):
                tasks.check_n(n, 2)
                rows.append(measure(case, n, family, variant=variant, targets=args.targets,
                                    n_random=args.random, seed=args.seed, beta_max=args.beta_max))
    fits = fit_power(rows)
    if args.json:
        print(json.dumps(dict(rows=rows, fits=fits), indent=2))
        return 0
    fmt = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
    print(f"{'case':>4} {'variant':>9} {'n':>6} {'family':>13} {'beta_min':>10} {'sufficient':>10} {'crude':>10} {'inputs':>6}")
    for r in rows:
        print(f"{r['case']:>4} {r['variant']:>9} {r['n']:>6} {r['family']:>13} {fmt(r['beta']):>10} "
              f"{fmt(r.get('beta_sufficient')):>10} {fmt(r.get('beta_crude')):>10} {r['inputs']:>6}")
    for key, f in fits.items():
        print(f"fit {key}: beta ~ n^{f['exponent']:.2f}")
    return 0
