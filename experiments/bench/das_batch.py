"""The learned (DAS) dimension's cost per seed: the per-model search against the batched one.

    .venv/bin/python experiments/bench/das_batch.py                 # n 5, 10, 20 and an MLP cell
    .venv/bin/python experiments/bench/das_batch.py --seeds 1 --cells 5 10   # shorter

Trains 2 small seeds per cell (``--seeds``; case 3, d_token 16, attention-only, at n = 5, 10, 20; case 1,
d_token 16, the f14 reading with its MLP, at n = 10), keeps the successful ones (accuracy >=
0.99), then in this one process, on one torch thread, times for both variables (value, query):

* baseline: :func:`interp.inspect.mechanism.das.learned_dim` per seed (TransformerLens's pass
  through the whole model, each step);
* batched: :func:`interp.inspect.mechanism.das_batch.learned_dims` on the cell's seeds at once.

Both with the atlas's settings (:mod:`interp.inspect.studies.atlas_das`: 256 inputs, seed 0, 300
steps, k <= 3, ``iia_min``). Prints per cell the CPU seconds (``time.process_time``) and wall
seconds per seed of each, their ratio, and whether the learned dimensions and every held-out IIA
agree (where they differ: the reference's IIA nearest ``iia_min``, the only place rounding can
move a dimension). The load average at the start is printed first: on shared cores the wall
time is not the cost, the CPU time is (closer).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

CELLS = {5: (3, 5, 16, "attention-only"), 10: (3, 10, 16, "attention-only"),
         20: (3, 20, 16, "attention-only"), "10-mlp": (1, 10, 16, "f14")}
DEFAULT = ("5", "10", "20", "10-mlp")


def train(cell, seeds: int) -> list:
    from interp.training import trainer
    from interp.training.runs import TrainConfig

    case, n, d_token, reading = cell
    configs = [TrainConfig.paper(case, n, d_token, reading=reading, seed=s, max_steps=1500) for s in range(seeds)]
    return [r.model for r in trainer.train_group(configs) if r.accuracy >= 0.99]


def timed(fn):
    t, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - t, time.perf_counter() - w


def compare(ref, got, iia_min: float) -> str:
    """'same' when every dimension and IIA agrees; else where and how near the threshold."""
    diffs = []
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.dim != g.dim or r.iia != g.iia:
            gap = min((abs(a - iia_min) for _, a in r.iia), default=float("nan"))
            diffs.append(f"seed {i} {r.variable}: dim {r.dim} vs {g.dim}, IIA {r.iia} vs {g.iia} "
                         f"(reference's IIA nearest iia_min: {gap:.3f} away)")
    return "same" if not diffs else "; ".join(diffs)


def bench(name, models) -> dict:
    from interp.inspect.mechanism import das, das_batch
    from interp.inspect.mechanism.calibration import THRESHOLDS
    from interp.inspect.studies import atlas_das

    kw = dict(batch_size=atlas_das.code_batch(512), seed=atlas_das.SEED, steps=atlas_das.STEPS,
              max_k=atlas_das.MAX_K)
    row = dict(cell=name, seeds=len(models), base_cpu=0.0, base_wall=0.0, batch_cpu=0.0, batch_wall=0.0)
    notes, dims = [], []
    for variable in ("value", "query"):
        ref, c, w = timed(lambda: [das.learned_dim(m, variable, **kw) for m in models])
        row["base_cpu"] += c
        row["base_wall"] += w
        got, c, w = timed(lambda: das_batch.learned_dims(models, variable, **kw))
        row["batch_cpu"] += c
        row["batch_wall"] += w
        notes.append(compare(ref, got, THRESHOLDS["iia_min"]))
        dims.append(f"{variable} " + ",".join(str(r.dim) for r in ref))
    row["agree"] = "same" if all(x == "same" for x in notes) else "; ".join(x for x in notes if x != "same")
    row["dims"] = "; ".join(dims)
    return row


def main(argv=None) -> int:
    import torch

    from interp.training.machine import one_thread

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=2, help="seeds trained per cell (default 2)")
    p.add_argument("--cells", nargs="*", default=list(DEFAULT),
                   help=f"cells to run, of {[str(c) for c in CELLS]} (default {' '.join(DEFAULT)})")
    args = p.parse_args(argv)
    unknown = [c for c in args.cells if c not in {str(k) for k in CELLS}]
    if unknown or args.seeds < 1:
        p.error(f"--cells {unknown} / --seeds {args.seeds}; accepted: cells of {list(map(str, CELLS))}, seeds >= 1")
    print(f"load average at start: {os.getloadavg()}; torch {torch.__version__}; one torch thread", flush=True)
    rows = []
    with one_thread():
        for key, cell in CELLS.items():
            if str(key) not in args.cells:
                continue
            models = train(cell, args.seeds)
            name = f"case {cell[0]}, n {cell[1]}, d_token {cell[2]}, {cell[3]}"
            if not models:
                print(f"{name}: no successful seed, skipped", flush=True)
                continue
            rows.append(bench(name, models))
            r = rows[-1]
            print(f"{name}: {r['seeds']} seeds; per seed CPU s baseline {r['base_cpu'] / r['seeds']:.2f}, "
                  f"batched {r['batch_cpu'] / r['seeds']:.2f} (x{r['base_cpu'] / r['batch_cpu']:.1f}); wall s "
                  f"{r['base_wall'] / r['seeds']:.2f} vs {r['batch_wall'] / r['seeds']:.2f}; dims {r['dims']}; "
                  f"agree: {r['agree']}", flush=True)
    base, fast, seeds = (sum(r[k] for r in rows) for k in ("base_cpu", "batch_cpu", "seeds"))
    if seeds:
        print(f"all cells: {seeds} seeds, both variables; per seed CPU s baseline {base / seeds:.2f}, batched "
              f"{fast / seeds:.2f} (x{base / fast:.1f}); load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
