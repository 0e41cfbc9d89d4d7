"""What ``interp sweep --snapshots`` costs (issue 52, item 2): a small sweep trained plainly and
with dense snapshots, side by side in one process.

Each repeat trains the same sweep (``--groups`` cells x ``--seeds`` seeds, case 3, n = 5,
``--steps`` steps each, no early stop, test accuracy on 10 batches) into fresh stores, once plainly and once per snapshot
setting (default: every curve point, and every 10 steps), in turn, so that load from other
processes falls on all alike; one worker, in this process, so ``time.process_time`` counts the
training. Per seed it prints the median wall and CPU seconds of the whole ``run_sweep`` call
(training, checkpoints, snapshots written), the CPU seconds spent inside the snapshot recorder
(the copies themselves: less blurred by load than a difference of totals), the disk a run takes (checkpoint folder; its
``timeline/`` apart) and the ratios to the plain sweep; the load average at the start and the
end (a shared machine: these are not clean benchmarks), and checks that every model file is
the plain sweep's, byte for byte.

    .venv/bin/python experiments/bench/snapshots.py
    .venv/bin/python experiments/bench/snapshots.py --steps 2000 --snapshots curve 1
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads, as the interp command does

import statistics  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

CONFIGS = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=3, n=5, d_token=d, pos_embed="none", init="pytorch", seed=s,
                       max_steps={steps}, stop_loss=0.0, eval_batches=10)
           for d in {d_tokens} for s in range({seeds})]
LAYOUT = TableLayout(rows=("case",), column="d_token", title="snapshot bench")
"""


def _disk(folder: Path) -> tuple[int, int]:
    """Bytes of a checkpoint folder's own files and of its ``timeline/``."""
    own = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    timeline = folder / "timeline"
    return own, sum(p.stat().st_size for p in timeline.iterdir()) if timeline.is_dir() else 0


def _timed_callback() -> list[float]:
    """CPU seconds spent inside the snapshot recorder (its copies and bookkeeping), summed: the
    cost itself, which load from other processes blurs less than a difference of totals."""
    from interp.training import snapshots

    spent: list[float] = []
    call = snapshots._Copies.__call__

    def timed(self, step, losses):
        t = time.process_time()
        call(self, step, losses)
        spent.append(time.process_time() - t)

    snapshots._Copies.__call__ = timed
    return spent


def _one(sw, store: Path, snapshots, spent: list[float]):
    from interp.sweeps import driver

    spent.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    s = driver.run_sweep(sw, store=store, snapshots=snapshots, save_every=None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ckpts = sorted((store.parent / "checkpoints").iterdir())
    disk = [_disk(c) for c in ckpts]
    return dict(wall=wall / s.trained, cpu=cpu / s.trained, inside=sum(spent) / s.trained, ckpt=statistics.mean(d[0] for d in disk),
                timeline=statistics.mean(d[1] for d in disk),
                models={c.name: (c / "model.safetensors").read_bytes() for c in ckpts})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=2, help="cells (d_token 4, 8, ...)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--snapshots", nargs="+", default=["curve", "10"], help="settings to time")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    start_load = os.getloadavg()

    from interp.sweeps import driver

    with tempfile.TemporaryDirectory(prefix="bench-snapshots-") as tmp:
        root = Path(tmp) / "sweep"
        root.mkdir()
        (root / "configs.py").write_text(textwrap.dedent(CONFIGS.format(
            steps=args.steps, seeds=args.seeds, d_tokens=tuple(4 * (i + 1) for i in range(args.groups)))))
        sw = driver.load(root)
        spent = _timed_callback()
        settings = [None, *args.snapshots]
        seen: dict = {str(k): [] for k in settings}
        for r in range(args.repeats):
            for k in settings:
                seen[str(k)].append(_one(sw, Path(tmp) / f"{k}-{r}" / "store.sqlite", k, spent))
    plain = seen["None"]
    same = all(x["models"] == plain[0]["models"] for runs in seen.values() for x in runs)
    med = {k: {m: statistics.median(x[m] for x in runs) for m in ("wall", "cpu", "inside", "ckpt", "timeline")}
           for k, runs in seen.items()}
    print(f"{len(sw.configs)} runs ({args.groups} groups x {args.seeds} seeds), case 3 n 5, 10 test batches, "
          f"{args.steps} steps each, {args.repeats} repeats, medians; load average at the start "
          f"{tuple(round(x, 2) for x in start_load)}, at the end {tuple(round(x, 2) for x in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs")
    print("| snapshots | wall s/seed | CPU s/seed | CPU s/seed in the recorder | checkpoint KiB/seed "
          "| timeline KiB/seed | wall ratio | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|")
    base = med["None"]
    for k, m in med.items():
        print(f"| {'none' if k == 'None' else k} | {m['wall']:.3f} | {m['cpu']:.3f} | {m['inside']:.3f} | "
              f"{m['ckpt'] / 1024:.1f} | "
              f"{m['timeline'] / 1024:.1f} | {m['wall'] / base['wall']:.2f} | {m['cpu'] / base['cpu']:.2f} |")
    print(f"every model file equals the plain sweep's, byte for byte: {same}")


if __name__ == "__main__":
    main()
