"""interp theorem35: Theorem 3.5's explicit model, exactness and parameter counts vs n."""

from __future__ import annotations

import json
import time

import torch

from interp.core import tasks
from interp.theory.softmax_construction import accuracy, build, parameter_counts


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, nargs="+", default=[2, 3, 4, 8, 16, 32])
    parser.add_argument("--dtype", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    parser.add_argument("--random", type=int, default=4096, help="random inputs per n (function='any' and 'permutation')")
    parser.add_argument("--exhaustive-up-to", type=int, default=3, help="check every input for n up to this")
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    rows = []
    for n in args.n:
        tasks.check_n(n, 2)
        for dt in args.dtype:
            t0 = time.perf_counter()
            model = build(n, dtype=getattr(torch, dt))
            row = dict(n=n, dtype=dt, **parameter_counts(model))
            for function in ("any", "permutation"):
                plan = "exhaustive" if n <= args.exhaustive_up_to else "random"
                r = accuracy(model, inputs=plan, count=args.random, function=function)
                row[f"{function}_{plan}"] = r
            row["seconds"] = round(time.perf_counter() - t0, 2)
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'n':>4} {'dtype':>8} {'d_model':>7} {'d_mlp':>6} {'params':>8} {'nonzero':>8} {'mlp':>8} {'mlp_nz':>7}  accuracy (any / permutation)")
    for r in rows:
        acc = [v for k, v in r.items() if isinstance(v, dict)]
        accs = " / ".join(f"{a['correct']}/{a['inputs']}" for a in acc)
        print(f"{r['n']:>4} {r['dtype']:>8} {r['d_model']:>7} {r['d_mlp']:>6} {r['total']:>8} {r['nonzero']:>8} "
              f"{r['mlp']:>8} {r['mlp_nonzero']:>7}  {accs}")
    return 0
