"""Where a two-layer MLP training step spends its time: torch.profiler tables, both engines.

Profiles ``--steps`` steps of the plain TransformerLens loop (``bench_train.Reference``) and of
the fast engine's ensemble of ``--seeds`` stacked seeds (``fast_train.Ensemble``) at one config
(default: the chosen reading's two-layer cell, case 5, n = 10, d_token 32, d_mlp 128, pytorch
init), one intra-op thread, and writes the top ops by self CPU time (per step, and per
seed-step for the ensemble) to a Markdown file, with the load average at the start and each
profile's wall and process CPU time beside it:

    .venv/bin/python experiments/bench/profile_mlp.py --out experiments/bench/profile-mlp.md
    .venv/bin/python experiments/bench/profile_mlp.py --cell f14 --out experiments/bench/profile-f14.md

``--cell f14``: the screen's choice (issue 28), the MLP after the last attention only. Each
also times the same step at batch 8, the part of a step that does not shrink with the batch.
Takes about a minute on a quiet machine.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads: the trainer stacks seeds then
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `interp sweep` runs (interp/cli)

import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from interp.core import tasks  # noqa: E402
from interp.training import fast_train  # noqa: E402
from interp.training.machine import cpu_model, keep_freed_memory  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flops  # noqa: E402
from bench_train import Reference  # noqa: E402  (the plain TransformerLens loop, one definition)

CELL = dict(case=5, n=10, d_token=32, n_layers=2, d_mlp=128, init="pytorch")
#: --cell: mlp-4x (the MLP after every attention) or the screen's choice f14 (issue 28,
#: experiments/readings/screen/scores.md: the MLP after the last attention only, with its fields)
CELLS = {"mlp-4x": CELL,
         "f14": dict(CELL, mlp="last", unembed_bias=False, W_O="identity", residual="embed", key_order="batch")}
FIXED_BATCH = 8  # the fixed cost of a step: the same ensemble at this batch size


def profile_runner(runner, steps: int, per: int, top: int) -> tuple[list[str], float, float]:
    """Markdown rows of the top ops by self CPU time, ms per step / per ``per`` seeds; and the
    profiled wall and CPU ms per (seed-)step."""
    runner.step()
    runner.step()  # warm-up: allocations, first-call paths
    t, c = time.perf_counter(), time.process_time()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner.step()
    wall = (time.perf_counter() - t) / steps / per * 1e3
    cpu = (time.process_time() - c) / steps / per * 1e3
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    rows = ["| op | calls / step | self CPU ms / step | share |", "|---|--:|--:|--:|"]
    for e in events[:top]:
        rows.append(f"| `{e.key}` | {e.count / steps:.0f} | "
                    f"{e.self_cpu_time_total / 1e3 / steps / per:.3f} | "
                    f"{100 * e.self_cpu_time_total / total:.1f}% |")
    rest = total - sum(e.self_cpu_time_total for e in events[:top])
    rows.append(f"| (all other ops, {max(0, len(events) - top)}) | | "
                f"{rest / 1e3 / steps / per:.3f} | {100 * rest / total:.1f}% |")
    return rows, wall, cpu


def timed(runner, steps: int, per: int) -> tuple[float, float]:
    """Unprofiled (wall, CPU) ms per step / per ``per`` seeds, after two warm-up steps."""
    runner.step()
    runner.step()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        runner.step()
    return ((time.perf_counter() - t) / steps / per * 1e3, (time.process_time() - c) / steps / per * 1e3)


def budget_lines(config: TrainConfig, seeds: int, steps: int) -> list[str]:
    """What a 10x ratio leaves per seed-step, against what the layer-0 MLP's products alone
    need and what the same step without MLPs costs (unprofiled, interleaved once)."""
    B, P, d_mlp = config.batch_size, tasks.seq_len(config.case, config.n), config.d_mlp
    R0 = config.n + P  # layer 0's pattern over token rows and positions (fast_two_layers)
    ens = lambda c: fast_train.Ensemble([c.replace(seed=s) for s in range(seeds)])  # noqa: E731
    ref_ms = timed(Reference(config), max(3, steps // 4), 1)
    ours_ms = timed(ens(config), steps, seeds)
    attn_ms = timed(ens(config.replace(d_mlp=0, mlp="every")), steps, seeds)
    fixed_ms = timed(ens(config.replace(batch_size=FIXED_BATCH)), steps, seeds)
    tl_flop = flops.counted_step(Reference(config))
    our_flop = flops.counted_step(ens(config)) / seeds
    need = ref_ms[1] / 10
    common = [
        "", "## What 10x leaves at this shape (unprofiled, CPU time)", "",
        "| quantity | value |", "|---|--:|",
        f"| plain loop, ms per step | {ref_ms[1]:.2f} |",
        f"| fast engine, ms per seed-step ({seeds} seeds) | {ours_ms[1]:.2f} (ratio {ref_ms[1] / ours_ms[1]:.1f}x) |",
        f"| the same step without MLPs (d_mlp 0), ms per seed-step | {attn_ms[1]:.2f} |",
        f"| the same step at batch {FIXED_BATCH} (its fixed cost: dispatch, Python, Adam), ms per seed-step "
        f"| {fixed_ms[1]:.2f} ({100 * fixed_ms[1] / ours_ms[1]:.0f}% of the step) |",
        f"| 10x needs, ms per seed-step | {need:.2f} |",
    ]
    if config.mlp == "last":  # no MLP in layer 0: the MLP is one [B, d_model] product pair per seed
        return common + [
            f"| matmul GFLOP per step: plain loop / fast engine per seed | {tl_flop / 1e9:.3f} / {our_flop / 1e9:.3f} |",
            "",
            "With the MLP after the last attention only, the fast engine forms it at the final "
            "position alone, so the step is the two-layer attention step plus a little: "
            f"{attn_ms[1]:.2f} ms without the MLP, {ours_ms[1]:.2f} with it. Of that, "
            f"{fixed_ms[1]:.2f} ms does not shrink with the batch (batch {FIXED_BATCH} instead of "
            f"{config.batch_size}): the dispatch and Python of the step's many small ops (the op "
            "table below) and Adam's loop over each seed's own parameters (kept apart so that a "
            "seed gets the same bits stacked as alone). 10x needs "
            + ("less than that fixed cost alone" if fixed_ms[1] > need else
               f"the batch-dependent part ({ours_ms[1] - fixed_ms[1]:.2f} ms) cut to "
               f"{max(0.0, need - fixed_ms[1]):.2f} ms") + ".",
        ]
    mlp_flop = 3 * 2 * B * P * R0 * d_mlp  # forward u = coef XVO, backward d coef and d XVO
    rate = flops.matmul_flops((seeds, B * P, R0, d_mlp), "cpu")
    return common + [
        f"| matmul GFLOP per step: plain loop / fast engine per seed | {tl_flop / 1e9:.3f} / {our_flop / 1e9:.3f} |",
        f"| of which layer 0's MLP at every position: 3 x 2 B P (V+P) d_mlp | {mlp_flop / 1e9:.3f} |",
        f"| one-thread rate at that product ([{seeds}] x [{B * P}, {R0}] x [{R0}, {d_mlp}]) | {rate / 1e9:.1f} GFLOP/s |",
        f"| those products alone at that rate, ms per seed-step | {mlp_flop / rate * 1e3:.2f} |",
        f"| matmul rate: plain loop / fast engine / what 10x needs | {tl_flop / ref_ms[1] / 1e6:.1f} / "
        f"{our_flop / ours_ms[1] / 1e6:.1f} / {our_flop / need / 1e6:.1f} GFLOP/s |",
        "",
        f"The fast engine executes {tl_flop / our_flop:.1f}x fewer matmul FLOPs per seed-step than "
        "the plain loop, so 10x needs it to run them "
        f"{our_flop / need / (tl_flop / ref_ms[1]):.1f}x as fast as the plain loop runs its own. "
        "Layer 0's MLP must run at every position (the last layer's keys and values read them "
        f"all), and here its regrouped input (V + P = {R0} coefficients per position) is no "
        f"narrower than d_model ({config.d_model}), so its three products cost about what "
        "TransformerLens's do. The same step without MLPs "
        + ("already takes more than the whole 10x budget" if attn_ms[1] > need else
           "fits the 10x budget") + ": it is many small operations (see the op tables), each "
        "microseconds of dispatch and a pass over a [seed, batch, pos, pos] tensor, not arithmetic.",
    ]


def write(lines: list[str], start: float, cpu0: float, out: str | None) -> None:
    """The Markdown lines, closed by the script's own wall and CPU time and the load at the end,
    printed and written to ``out`` (when given)."""
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    lines = lines + ["", f"Script: {wall:.0f} s wall, {cpu:.0f} s process CPU; load at the end "
                         f"{os.getloadavg()[0]:.2f}."]
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="profiled (and timed) steps per engine")
    parser.add_argument("--seeds", type=int, default=5, help="stacked seeds of the ensemble")
    parser.add_argument("--top", type=int, default=25, help="ops listed per engine")
    parser.add_argument("--cell", choices=sorted(CELLS), default="mlp-4x",
                        help="the two-layer cell's reading (default mlp-4x; f14: the screen's choice)")
    parser.add_argument("--n", type=int, default=CELL["n"])
    parser.add_argument("--out", help="write the Markdown here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    keep_freed_memory()  # glibc keeps freed large blocks, as in `interp sweep`
    load = os.getloadavg()
    cell = dict(CELLS[args.cell], n=args.n)
    config = TrainConfig(**cell, stop_loss=0.0, max_steps=10**9)
    start, cpu0 = time.perf_counter(), time.process_time()
    label = ", ".join(f"{k} {v}" for k, v in cell.items())
    lines = [
        "# Profile: a two-layer MLP training step, both engines",
        "",
        f"`.venv/bin/python experiments/bench/profile_mlp.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
        f"{label}, batch {config.batch_size}, one intra-op thread, torch.profiler (CPU), top "
        f"{args.top} ops by self CPU time. The profiler adds its own cost per op (a few "
        "microseconds), so the profiled times are above unprofiled ones; shares are what counts.",
        "",
        f"Load average at the start (1/5/15 min): {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
        f"on {os.cpu_count()} cores (timings under load are not final); torch {torch.__version__}, "
        f"{cpu_model()}, MKL_CBWR={os.environ.get('MKL_CBWR')}.",
    ]
    runners = [("plain TransformerLens loop, per step", Reference(config), 1)]
    ens = fast_train.Ensemble([config.replace(seed=s) for s in range(args.seeds)])
    runners.append((f"fast engine, {args.seeds} seeds stacked, per seed-step", ens, args.seeds))
    summary = ["", "| engine (profiled) | wall ms | CPU ms |", "|---|--:|--:|"]
    tables = []
    for title, runner, per in runners:
        rows, wall, cpu = profile_runner(runner, args.steps, per, args.top)
        summary.append(f"| {title} | {wall:.2f} | {cpu:.2f} |")
        tables += ["", f"## {title}", "", f"Profiled: {wall:.2f} ms wall, {cpu:.2f} ms process CPU.",
                   "", *rows]
        print(summary[-1], flush=True)
    lines += summary + budget_lines(config, args.seeds, args.steps) + tables
    write(lines, start, cpu0, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
