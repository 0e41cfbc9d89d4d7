"""Verification speed: TransformerLens's full forward vs interp.core.forward.final_logits, side by side.

For each construction at n = 1000, time both paths on the same random inputs in one process,
check they give the same predictions, and print ms per input, the ratio, and the wall time of
`interp.core.verify.verify` on 10,000 inputs (the issue's target: under 10 s on 2 cores).
The TransformerLens baseline materialises [batch, pos, pos] scores, so it runs on a subset.

    .venv/bin/python experiments/bench/bench_verify.py [--out experiments/bench/verify_results.md]
"""

import argparse
import os
import pathlib
import time

import torch

from interp.core import constructions, tasks, verify
from interp.core.forward import final_logits


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--baseline-inputs", type=int, default=50)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    n = args.n
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"torch threads: {torch.get_num_threads()}, n = {n}, load average before: {load} "
             f"(on {os.cpu_count()} cores; other work slows both paths alike)", "",
             "| case | TL forward ms/input | final_logits ms/input | ratio | same predictions | verify 10,000 inputs (s) | accuracy |",
             "|---|---|---|---|---|---|---|"]
    for case in tasks.CASES:
        model = constructions.build(case, n)
        tokens, _ = tasks.sample(case, n, args.baseline_inputs, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            model(tokens[:2]), final_logits(model, tokens[:2])  # warm up
            ref, t_ref = timed(lambda t: model(t)[:, -1], tokens)
            ours, t_ours = timed(final_logits, model, tokens)
        same = bool(torch.equal(ref.argmax(-1), ours.argmax(-1)))
        count = 10_000 if case != 5 else 200
        row = verify.verify(case, n, inputs=count)
        per_ref, per_ours = 1e3 * t_ref / len(tokens), 1e3 * t_ours / len(tokens)
        total = f"{row.seconds:.2f}" if case != 5 else f"{row.seconds:.2f} (200 inputs)"
        lines.append(f"| {case} | {per_ref:.2f} | {per_ours:.3f} | {per_ref / per_ours:.0f}x | {same} | {total} | {row.accuracy:.4f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
