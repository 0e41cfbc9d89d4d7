"""Memory placement and training speed: a step with and without what ``interp``'s CLI turns on.

Three sides: ``plain`` (neither), ``huge`` (``THP_MEM_ALLOC_ENABLE=1``: torch puts tensors of
2 MB and more on transparent huge pages) and ``huge+keep`` (also
:func:`interp.training.machine.keep_freed_memory`: glibc reuses freed large blocks instead of
unmapping them), the last being what ``interp sweep`` runs with. torch reads the variable once, at
its first allocation, so the sides cannot share a process: this script runs each in a fresh
subprocess, rotating (plain, huge, huge+keep, plain, ...) so that load from elsewhere hits all
alike, and prints the ratios of the medians. Each subprocess builds the 5-seed ensemble of one
cell, takes ``--warmup`` steps, then times ``--steps`` steps (wall and process CPU time). Same
code, same bits (tests/training/test_memory.py); only where memory comes from differs.

    .venv/bin/python experiments/bench/allocator.py --out experiments/bench/allocator.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from interp.training.machine import cpu_model

# (label, TrainConfig fields, steps timed): the torch-encoder reading's two-layer cell that runs
# on the CPU, mlp-4x's largest CPU cell, and attention-only cells of Table 2 and Table 1.
CELLS = [
    ("torch-encoder n=10 L2 d16 (d_mlp 2048)",
     dict(case=5, n=10, d_token=16, n_layers=2, pos_embed="learned", d_mlp=2048), 6),
    ("mlp-4x n=20 L2 d32 (d_mlp 128)",
     dict(case=5, n=20, d_token=32, n_layers=2, pos_embed="learned", d_mlp=128), 20),
    ("attention-only n=20 L2 d32", dict(case=5, n=20, d_token=32, n_layers=2, pos_embed="learned"), 40),
    ("attention-only case 3 n=100 d32", dict(case=3, n=100, d_token=32, n_layers=1, pos_embed="none"), 40),
]

CHILD = """
import json, sys, time, torch
from interp.training import fast_train, machine
from interp.training.trainer import TrainConfig
if sys.argv[4] == "keep":
    assert machine.keep_freed_memory()
torch.set_num_threads(1)
fields, steps, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
configs = [TrainConfig(seed=s, max_steps=10**6, stop_loss=0.0, init="pytorch", **fields) for s in range(5)]
ens = fast_train.Ensemble(configs)
for _ in range(warmup):
    ens.step()
w, c = time.perf_counter(), time.process_time()
for _ in range(steps):
    ens.step()
print(json.dumps([(time.perf_counter() - w) / steps, (time.process_time() - c) / steps]))
"""


SIDES = {"plain": ("0", "plain"), "huge": ("1", "plain"), "huge+keep": ("1", "keep")}


def one(fields: dict, steps: int, warmup: int, side: str) -> tuple[float, float]:
    thp, keep = SIDES[side]
    env = {**os.environ, "MKL_CBWR": "AUTO", "THP_MEM_ALLOC_ENABLE": thp}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(fields), str(steps), str(warmup), keep],
                         env=env, capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="subprocesses per side and cell")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=None, help="also write the table here (markdown)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    rows = []
    for label, fields, steps in CELLS:
        got: dict[str, list] = {side: [] for side in SIDES}
        for _ in range(args.reps):
            for side in SIDES:
                got[side].append(one(fields, steps, args.warmup, side))
        med = {side: [statistics.median(x[i] for x in got[side]) for i in (0, 1)] for side in SIDES}
        base = med["plain"][0]
        cells = " | ".join(f"{1e3 * w:.1f} / {1e3 * c:.1f}" for w, c in med.values())
        ratios = " | ".join(f"{base / med[side][0]:.2f}x" for side in ("huge", "huge+keep"))
        rows.append(f"| {label} | {cells} | {ratios} |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "Training step of a 5-seed ensemble, ms per step, wall / process CPU (median of "
        f"{args.reps} subprocesses per side, rotating; one thread each), written by "
        "`experiments/bench/allocator.py`. plain: neither; huge: THP_MEM_ALLOC_ENABLE=1; "
        "huge+keep: also keep_freed_memory() (what `interp sweep` runs with).",
        "",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; "
        f"load {load:.2f} at the start; {time.perf_counter() - t0:.0f} s in all.",
        "",
        "| cell | plain | huge | huge+keep | plain / huge (wall) | plain / huge+keep (wall) |",
        "|---|--:|--:|--:|--:|--:|",
        *rows, ""])
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
