"""How much of the machine's matmul throughput the trainer uses: FLOPs per seed-step vs FLOP/s.

Three parts, printed as Markdown tables:

1. Sustained matmul FLOP/s of this machine (``torch.matmul``, float32), on one intra-op thread
   (as the trainer runs) at the shapes the trainer multiplies and at a large square shape, and
   on every core at the square shape. The largest one-thread figure is the "peak" below.
2. FLOPs per seed-step of a TrainConfig (one optimiser step of one seed: ``batch_size``
   inputs, forward + backward, the backward counted as twice the forward), from the matmuls of
   the model, per position:

   * per layer and position: q, k, v projections ``3 * 2 d_model d_head``, scores and mixing
     ``2 * 2 pos d_head``, output projection ``2 d_head d_model``, MLP ``2 * 2 d_model d_mlp``;
   * unembedding ``2 d_model n`` per position;
   * "TransformerLens": every layer and the unembedding at every position (what the plain loop
     computes); "final position": what the loss reads, i.e. earlier layers at every position
     and the last layer's keys and values at every position, but its query, mixing, output
     projection, MLP and the unembedding at the final position only.

   Beside the count, ``torch.utils.flop_counter`` counts the matmul FLOPs each engine really
   executes in one step (forward and backward).
3. The trainer's speed (seed-steps per second of the fast engine's ensemble and of the plain
   TransformerLens loop, wall and CPU time) and the fraction of the one-thread peak it
   reaches: seed-steps/s x FLOPs per seed-step / peak FLOP/s.

    .venv/bin/python experiments/bench/flops.py                      # Table 2's 2-layer MLP cell
    .venv/bin/python experiments/bench/flops.py --case 3 --n 100 --d-token 32 --pos-embed none \\
        --n-layers 1 --d-mlp 0 --seeds 5

Defaults take well under two minutes on a quiet 2-core machine. Run it at a quiet moment: a
loaded machine lowers both the measured peak and the trainer's speed.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads: the trainer stacks seeds then

import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from interp.core import tasks  # noqa: E402
from interp.training import fast_train  # noqa: E402
from interp.training.runs import check_device  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import Reference  # noqa: E402  (the plain TransformerLens loop, one definition)


def _sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize(device)


def matmul_flops(shape: tuple, device: str, min_seconds: float = 0.5) -> float:
    """Sustained FLOP/s of ``a @ b`` for a = [*batch, m, k], b = [*batch, k, n] (float32)."""
    *batch, m, k, n = shape
    a = torch.randn(*batch, m, k, device=device)
    b = torch.randn(*batch, k, n, device=device)
    a @ b  # warm-up
    _sync(device)
    reps, start = 0, time.perf_counter()
    while reps < 3 or time.perf_counter() - start < min_seconds:
        a @ b
        reps += 1
    _sync(device)
    count = 2 * m * k * n * (int(torch.tensor(batch).prod()) if batch else 1)
    return reps * count / (time.perf_counter() - start)


def trainer_shapes(c: TrainConfig) -> dict[str, tuple]:
    """Matmul shapes the two engines run for this config ([*batch, m, k, n])."""
    B, P, d = c.batch_size, tasks.seq_len(c.case, c.n), c.d_model
    shapes = {
        f"attention projection [B*P, d] x [d, d] ({B * P}x{d}x{d})": (B * P, d, d),
        f"scores, batched [B] x [P, d] x [d, P] ({B}x{P}x{d}x{P})": (B, P, d, P),
    }
    if c.d_mlp:
        shapes[f"MLP [B*P, d] x [d, d_mlp] ({B * P}x{d}x{c.d_mlp})"] = (B * P, d, c.d_mlp)
        rows = c.n + P  # token rows + position rows read by layer 0's pattern (fast engine)
        shapes[f"fast layer-0 MLP input [B*P, V+P] x [V+P, d_mlp] ({B * P}x{rows}x{c.d_mlp})"] = (
            B * P, rows, c.d_mlp)
    return shapes


def model_flops(c: TrainConfig) -> dict[str, float]:
    """Forward FLOPs per input by component and per position, and the step totals (x 3)."""
    P, d, dh, dm, n, L = tasks.seq_len(c.case, c.n), c.d_model, c.d_model, c.d_mlp, c.n, c.n_layers
    qkv, attn, out, mlp, unembed = 3 * 2 * d * dh, 2 * 2 * P * dh, 2 * dh * d, 4 * d * dm, 2 * d * n
    layer = qkv + attn + out + mlp  # one layer at one position
    full = P * (L * layer + unembed)
    final = P * (L - 1) * layer + P * 2 * 2 * d * dh + (2 * d * dh + attn + out + mlp + unembed)
    return dict(qkv=qkv, attn=attn, out=out, mlp=mlp, unembed=unembed, layer=layer,
                full_step=3 * c.batch_size * full, final_step=3 * c.batch_size * final)


def counted_step(runner) -> float:
    """Matmul FLOPs of one ``runner.step()`` (forward and backward, ``torch.utils.flop_counter``),
    after one warm-up step."""
    runner.step()
    with FlopCounterMode(display=False) as counter:
        runner.step()
    return float(counter.get_total_flops())


def step_flops(c: TrainConfig) -> float:
    """Matmul FLOPs the fast engine executes in one optimiser step of one seed of ``c``."""
    return counted_step(fast_train.Ensemble([c.replace(stop_loss=0.0, max_steps=10**9)], device="cpu"))


def peak_from(report: str) -> float:
    """The one-thread peak FLOP/s a committed flops.md measured ('Peak used below: X GFLOP/s')."""
    for line in report.splitlines():
        if line.startswith("Peak used below:"):
            return float(line.split(":")[1].split("GFLOP/s")[0]) * 1e9
    raise ValueError("no 'Peak used below: X GFLOP/s' line; run experiments/bench/flops.py first")


def measure(runner, steps: int, seeds: int, device: str) -> tuple[float, float, float]:
    """(seed-steps/s by wall time, by CPU time, matmul FLOPs counted in one seed-step)."""
    counted = counted_step(runner) / seeds  # also the warm-up
    _sync(device)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        runner.step()
    _sync(device)
    return seeds * steps / (time.perf_counter() - t), seeds * steps / (time.process_time() - c), counted


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", type=int, default=5)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--d-token", type=int, default=200)
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--d-mlp", type=int, default=800)
    ap.add_argument("--pos-embed", default="learned")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=1, help="seeds in the fast engine's ensemble")
    ap.add_argument("--steps", type=int, default=10, help="timed steps of the fast engine")
    ap.add_argument("--reference-steps", type=int, default=3, help="timed steps of the plain loop")
    ap.add_argument("--square", type=int, default=2048, help="side of the large square matmul")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    device = check_device(args.device)
    config = TrainConfig(case=args.case, n=args.n, d_token=args.d_token, n_layers=args.n_layers,
                         d_mlp=args.d_mlp, pos_embed=args.pos_embed, batch_size=args.batch_size,
                         init="pytorch", stop_loss=0.0, max_steps=10**9)
    torch.set_num_threads(1)
    where = "one thread" if device == "cpu" else device
    print(f"# FLOPs: {config.label()}, batch {config.batch_size}, device {device}\n")
    print(f"## Sustained matmul throughput (float32, {where})\n\n| shape | GFLOP/s |\n|---|--:|")
    rates = {}
    for label, shape in {**trainer_shapes(config),
                         f"square {args.square}^3": (args.square, args.square, args.square)}.items():
        rates[label] = matmul_flops(shape, device)
        print(f"| {label} | {rates[label] / 1e9:.1f} |", flush=True)
    peak = max(rates.values())
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
        every = matmul_flops((args.square,) * 3, device)
        torch.set_num_threads(1)
        print(f"| square {args.square}^3, all {os.cpu_count()} threads | {every / 1e9:.1f} |")
    print(f"\nPeak used below: {peak / 1e9:.1f} GFLOP/s ({where}).\n")

    f = model_flops(config)
    print("## Forward FLOPs per input and position (matmuls)\n\n| part | FLOPs |\n|---|--:|")
    for key, what in [("qkv", "q, k, v projections (per layer)"), ("attn", "scores + mixing (per layer)"),
                      ("out", "output projection (per layer)"), ("mlp", "MLP (per layer)"),
                      ("unembed", "unembedding"), ("layer", "one layer, all parts")]:
        print(f"| {what} | {f[key]:,} |")
    rows = [("TransformerLens (every position)", f["full_step"]),
            ("final position (what the loss reads)", f["final_step"])]
    print("\nPer seed-step (batch x forward x 3):\n\n| count | GFLOP |\n|---|--:|")
    for label, v in rows:
        print(f"| {label} | {v / 1e9:.3f} |")

    fast = fast_train.Ensemble([config.replace(seed=s) for s in range(args.seeds)], device=device)
    engines = {f"fast engine x{args.seeds}": measure(fast, args.steps, args.seeds, device),
               "plain TransformerLens loop": measure(Reference(config, device), args.reference_steps, 1, device)}
    print("\n## The trainer against the peak\n")
    print("| engine | seed-steps/s (wall) | (CPU) | counted GFLOP/seed-step | % of peak: counted "
          "| TransformerLens count | final-position count |\n|---|--:|--:|--:|--:|--:|--:|")
    for name, (wall, cpu, counted) in engines.items():
        pct = [100 * wall * v / peak for v in (counted, f["full_step"], f["final_step"])]
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {counted / 1e9:.3f} | "
              + " | ".join(f"{x:.1f}%" for x in pct) + " |")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\nLoad average (1 min) at the end: {f'{load[0]:.1f}' if load else '?'} on {os.cpu_count()} cores; "
          f"torch {torch.__version__}; MKL_CBWR={os.environ.get('MKL_CBWR')}. "
          "'% of peak' uses wall time; with other load on the machine it understates both.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
