"""interp verify: check every construction against the plain-Python reference evaluator."""

from __future__ import annotations

import json
import sys

import torch

from interp.core import tasks
from interp.core.limits import with_construction
from interp.core.verify import EXHAUSTIVE_LIMIT, PLANS, VerifyRow, default_plan, verify


def add_arguments(p) -> None:
    p.add_argument("--case", type=int, nargs="*", help="cases to check (default: the plan's)")
    p.add_argument("--n", type=int, nargs="*", help="table sizes (with --case)")
    p.add_argument("--plan", default=None, choices=PLANS, help="with --case/--n (default random)")
    p.add_argument("--inputs", type=int, default=None, help="random inputs per row (with --case/--n; default 10000)")
    p.add_argument("--function", default=None, choices=tasks.FUNCTIONS,
                   help="with --case/--n (default permutation)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--attention", default="leftmost")
    p.add_argument("--quick", action="store_true", help="a small default plan (seconds; not with --case/--n)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")


def plan_from_args(args) -> list[dict]:
    """The rows to verify: the default plan, or ``--case`` x ``--n``; a flag the chosen plan would
    ignore is refused by name."""
    rows_flags = [f"--{k} {v}" for k, v in (("plan", args.plan), ("inputs", args.inputs),
                                             ("function", args.function)) if v is not None]
    if not args.case and not args.n:
        if rows_flags:
            raise ValueError(f"{rows_flags[0]} applies to --case/--n rows; the default plan sets its "
                             "own: add --case/--n or drop it")
        plan = default_plan(quick=args.quick)
    else:
        if args.quick:
            raise ValueError("--quick picks the small default plan; with --case/--n it would be "
                             "ignored: drop one")
        cases = with_construction(args.case or None)[0]  # the others: a line each, in run()
        ns = args.n or [100]
        plan = [
            dict(case=c, n=n, plan=args.plan or "random",
                 inputs=10_000 if args.inputs is None else args.inputs,
                 function=args.function or "permutation")
            for c in cases
            for n in ns
        ]
    from interp.core.limits import check_buildable

    for row in plan:  # every refusal before the first row runs
        row.update(dtype=getattr(torch, args.dtype), attention=args.attention)
        check_buildable(row["case"], row["n"], row["dtype"])
        total = tasks.count_inputs(row["case"], row["n"], row["function"])
        if row["plan"] == "exhaustive" and total > EXHAUSTIVE_LIMIT:
            raise ValueError(
                f"exhaustive case {row['case']} n={row['n']} has {total} inputs; accepted: at "
                f"most {EXHAUSTIVE_LIMIT} (use --plan random)"
            )
    return plan


def format_table(rows: list[VerifyRow]) -> str:
    head = f"{'case':>4} {'layers':>6} {'n':>6} {'dtype':>8} {'attention':>9} {'function':>11} " \
           f"{'plan':>10} {'inputs':>8} {'accuracy':>9} {'seconds':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.case:>4} {r.layers:>6} {r.n:>6} {r.dtype:>8} {r.attention:>9} {r.function:>11} "
            f"{r.plan:>10} {r.inputs:>8} {100 * r.accuracy:>8.2f}% {r.seconds:>8.2f}"
        )
    return "\n".join(lines)


def run(args) -> int:
    from tqdm import tqdm

    plan = plan_from_args(args)
    for line in with_construction(args.case or None)[1]:  # after plan_from_args's refusals
        print(line, file=sys.stderr)
    rows = []
    with tqdm(total=len(plan), unit="row", desc="verify", disable=args.json) as bar:
        for spec in plan:
            bar.set_postfix_str(f"case {spec['case']} n={spec['n']} {spec['plan']}")
            rows.append(verify(**spec))
            bar.update()
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
    else:
        print(format_table(rows))
    bad = [r for r in rows if r.correct != r.inputs]
    return 1 if bad else 0
