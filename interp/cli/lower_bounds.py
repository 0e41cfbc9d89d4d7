"""interp lower-bounds: trained one-layer case-5 models beside Theorems 3.4 and 3.7."""

from __future__ import annotations

import json

from interp.core import tasks
from interp.theory import precision as P
from interp.theory.lower_bounds import report, train_and_report


def add_arguments(parser) -> None:
    parser.add_argument("checkpoints", nargs="*", help="checkpoint directories of one-layer case-5 models")
    parser.add_argument("--train", action="store_true", help="train small models first (short runs)")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="table sizes to train (with --train; default 4 8)")
    parser.add_argument("--d-token", type=int, nargs="+", default=None, help="widths to train (with --train; default 2 8)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds to train (with --train; default 0)")
    parser.add_argument("--steps", type=int, default=None, help="max training steps per model (with --train; default 2000)")
    parser.add_argument("--kind", nargs="+", default=["fixed", "float"], choices=P.KINDS)
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    if not args.checkpoints and not args.train:
        raise ValueError("give checkpoint paths or --train")
    given = [f"--{k.replace('_', '-')}" for k in ("n", "d_token", "seeds", "steps") if getattr(args, k) is not None]
    if given and not args.train:
        raise ValueError(f"{given[0]} sets what --train trains; without --train it would be ignored: "
                         "add --train or drop it")
    n_list, d_list = args.n or [4, 8], args.d_token or [2, 8]
    seeds, steps = args.seeds or [0], 2000 if args.steps is None else args.steps
    rows = []
    if args.checkpoints:
        from interp.training import checkpoints

        for path in args.checkpoints:
            rows.append(dict(source=str(path), **report(checkpoints.load(path), kinds=tuple(args.kind))))
    if args.train:
        for n in n_list:
            tasks.check_n(n, 2)
            for d in d_list:
                for seed in seeds:
                    rows.append(train_and_report(n, d, seed=seed, max_steps=steps, kinds=tuple(args.kind)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'n':>4} {'h':>2} {'d':>4} {'kind':>5} {'p':>4} {'hdp':>6} {'nlog2n/3':>8} {'R':>8} "
          f"{'bound3.7':>8} {'err(perm)':>9} {'err(3.7)':>8}  source")
    for r in rows:
        for kind in args.kind:
            p = r.get(f"p_{kind}")
            R = r.get(f"R_{kind}")
            print(f"{r['n']:>4} {r['h']:>2} {r['d']:>4} {kind:>5} {str(p):>4} {str(r.get(f'c_size_{kind}')):>6} "
                  f"{r['bound_3_4']:>8.1f} {('-' if R is None else f'{R:.1f}'):>8} "
                  f"{r.get(f'bound_3_7_{kind}', float('nan')):>8.3f} {r['error_permutation']:>9.3f} "
                  f"{r['error_theorem37']:>8.3f}  {r['source']}")
    return 0
