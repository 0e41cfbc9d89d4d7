"""What snapshots cost (issue 46): a group trained with and without them, in one process.

Times ``interp.training.trainer.train_group`` (no snapshots) against
``interp.training.snapshots.train_with_snapshots`` (the geometric candidate grid, the curve
steps around the plateau exit, at most ``--keep`` kept per seed) on the same configs, in
interleaved repeats so that load from other processes falls on both alike, and prints the
median wall time of each and their difference in percent, the time spent inside the snapshot
callback (the cost itself; the issue's target: <= 10% of a run), the snapshots
kept per seed and the bytes they take on disk (``timeline/`` as ``save_snapshots`` writes it).
Also checks that both give the same parameters (the bits the snapshots must not change).

    .venv/bin/python experiments/bench/bench_snapshots.py
    .venv/bin/python experiments/bench/bench_snapshots.py --case 2 --n 10 --d-token 4 --steps 2000
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads, as the interp command does

import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from interp.training import snapshots, trainer  # noqa: E402
from interp.training.runs import TrainConfig  # noqa: E402


def _timed_recorder() -> list[float]:
    """Time spent inside the snapshot callback (the copies and the bookkeeping), summed: the
    cost itself, which load from other processes blurs less than a difference of wall times."""
    spent: list[float] = []
    call = snapshots._Recorder.__call__

    def timed(self, step, losses):
        t = time.perf_counter()
        call(self, step, losses)
        spent.append(time.perf_counter() - t)

    snapshots._Recorder.__call__ = timed
    return spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", type=int, default=1)
    p.add_argument("--n", type=int, default=5)
    p.add_argument("--d-token", type=int, default=8)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000, help="steps per run (no early stop)")
    p.add_argument("--keep", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    configs = [TrainConfig(case=args.case, n=args.n, d_token=args.d_token, n_layers=args.layers,
                           init="pytorch", seed=s, max_steps=args.steps, stop_loss=0.0)
               for s in range(args.seeds)]
    plain, snap, inside = [], [], []
    spent = _timed_recorder()
    for _ in range(args.repeats):
        t = time.perf_counter()
        ref = trainer.train_group(configs)
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        spent.clear()
        results, kept = snapshots.train_with_snapshots(configs, keep=args.keep)
        snap.append(time.perf_counter() - t)
        inside.append(sum(spent))
    same = all(torch.equal(a, b) for r, q in zip(results, ref)
               for a, b in zip(r.model.state_dict().values(), q.model.state_dict().values()))
    with tempfile.TemporaryDirectory() as tmp:
        folder = snapshots.save_snapshots(Path(tmp) / "run", kept[0])
        disk = sum(f.stat().st_size for f in folder.iterdir())
    a, b = statistics.median(plain), statistics.median(snap)
    print(f"{configs[0].label().rsplit(' seed', 1)[0]}, {args.seeds} seeds x {args.steps} steps, "
          f"{args.repeats} interleaved repeats, MKL_CBWR={os.environ.get('MKL_CBWR')}")
    print(f"train_group:          median {a:.2f} s  ({', '.join(f'{x:.2f}' for x in plain)})")
    print(f"train_with_snapshots: median {b:.2f} s  ({', '.join(f'{x:.2f}' for x in snap)})")
    c = statistics.median(inside)
    print(f"inside the snapshot callback: median {c:.3f} s, {100 * c / b:.1f}% of a run with snapshots")
    print(f"wall-time difference: {100 * (b - a) / a:+.1f}%; snapshots kept per seed: "
          f"{sorted(len(k) for k in kept.values())}; seed 0's timeline/: {disk / 1024:.1f} KiB; "
          f"same parameters: {same}")


if __name__ == "__main__":
    main()
