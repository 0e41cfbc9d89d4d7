"""Largest n at which each construction stays exact, per dtype (issue: precision of `build`).

For every construction and dtype, walk a geometric grid of n (ratio 2^(1/4)) and check the
construction on the covering inputs of `interp.core.verify` (every target key under three functions,
so every attention comparison and every output value is exercised) plus random inputs, with
hard attention's tie tolerance at TWICE its default (`interp.core.attention.TIE_ULPS`): a model exact
there keeps a margin of one default tolerance between its smallest score gap and what the
default merges, so rounding that differs between CPUs (an ulp or two) cannot change an answer.
The limit is the largest grid n such that every grid n' <= n was exact. Writes
`interp/core/precision_limits.json` (read by `interp.core.constructions.build`, which refuses every n
beyond the limit), the one source: it prints the table (`interp.core.limits.limits_table`) that
`docs/constructions.md` quotes, which a test holds to the JSON.

    .venv/bin/python experiments/precision/measure.py   # about an hour on 2 cores; resumable
"""

import json
import pathlib
import sys
import time

import torch

from interp.core import attention, limits, tasks, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = ROOT / "experiments" / "precision" / "partial.json"  # resumable: finished rows


def top(case: int, dtype: torch.dtype) -> int:
    """The grid's top for a construction, from its task. Pair tokens (cases 2-3) have n*n + n
    of them: TransformerLens allocates that W_E before the two tables replace it, so their grid
    stops at 2^13 (67M rows; 2^12 in float64); two layers (case 5) attend from every position,
    2^12. float64 separates angles down to ~1e-16: no failure is expected on a grid we can
    afford, and the table says "none up to the grid top" (build refuses beyond it all the same)."""
    task = tasks.get(case)
    if task.paper.layers > 1:
        return 2**12
    if task.same_position:
        return 2**13 if dtype == torch.float32 else 2**12
    return 2**14


def grid(top: int) -> list[int]:
    ns = sorted({round(2 ** (k / 4)) for k in range(4, 4 * top.bit_length())})
    return [n for n in ns if n <= top]


def exact(case: int, n: int, dtype: torch.dtype) -> bool:
    rtol, atol = attention.tie_tolerance(dtype)
    kw = dict(dtype=dtype, check_precision=False, tie_rtol=2 * rtol, tie_atol=2 * atol)
    rows = [verify.verify(case, n, plan="covering", **kw),
            verify.verify(case, n, plan="random", inputs=256, function="any", **kw)]
    return all(r.correct == r.inputs for r in rows)


def main() -> None:
    results = json.loads(CACHE.read_text()) if CACHE.exists() else []
    for dtype in (torch.float32, torch.float64):
        cases, skipped = limits.with_construction()  # every registered one that has a construction
        for line in skipped:
            print(line, file=sys.stderr, flush=True)
        for case in cases:
            if any(r["case"] == case and r["dtype"] == str(dtype)[6:] for r in results):
                continue
            start, last_ok, first_bad = time.perf_counter(), None, None
            grid_top = top(case, dtype)
            for n in grid(grid_top):
                if exact(case, n, dtype):
                    last_ok = n
                else:
                    first_bad = n
                    break
            row = dict(case=case, layers=limits.default_layers(case), dtype=str(dtype)[6:],
                       exact_up_to=last_ok, first_failure=first_bad, grid_top=grid_top,
                       seconds=round(time.perf_counter() - start, 1))
            print(row, file=sys.stderr, flush=True)
            results.append(row)
            CACHE.write_text(json.dumps(results, indent=1))
    (ROOT / "interp" / "core" / "precision_limits.json").write_text(json.dumps(results, indent=1) + "\n")
    CACHE.unlink()
    print(limits.limits_table(results))  # paste into docs/constructions.md (a test compares)


if __name__ == "__main__":
    main()
