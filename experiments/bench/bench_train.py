"""Plain TransformerLens training loop vs interp's trainer, side by side in one process.

For each config it times, in interleaved blocks (so load from other processes hits both alike):

* ``reference``: the plain loop, ``tasks.sample`` -> ``model(tokens)[:, -1]`` ->
  cross-entropy -> Adam, on one HookedTransformer;
* ``ours x1``: :class:`interp.training.fast_train.Ensemble` with one seed (what ``interp.train`` does);
* ``ours x5``: the 5 seeds of a table cell as one ensemble (what ``interp.train_group`` does),
  reported per seed-step; stacked over seeds when MKL runs reproducibly (``MKL_CBWR``, set
  here before torch loads), else one seed at a time (see ``fast_train.mkl_reproducible``).

Every engine runs on one intra-op thread (as the trainer does). ``--parallel`` also measures
how to use both cores: one process with 2 threads vs 2 processes with 1 thread each.
``--mlp`` times only the two-layer models with an MLP (Table 2's two-layer cells with d_mlp =
4 d_model): after each attention, where the fast engine forms layer 0's MLP at every position,
and after the last attention only (``mlp="last"``). ``--device cuda`` runs both engines on the GPU (data still drawn on the CPU).

    .venv/bin/python experiments/bench/bench_train.py --out experiments/bench/results.md
    .venv/bin/python experiments/bench/bench_train.py --mlp
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads: alignment-independent MKL
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `interp sweep` runs (interp/cli)

import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from interp.core import tasks  # noqa: E402
from interp.training import fast_train  # noqa: E402
from interp.training.machine import cpu_model, keep_freed_memory  # noqa: E402
from interp.training.trainer import TrainConfig, generator, init_model, trainable  # noqa: E402

#: (label, config): the paper's Table 1 and Table 2 settings.
CONFIGS = [
    ("case 3, n=100, d_token 32, no PE", dict(case=3, n=100, d_token=32, pos_embed="none")),
    ("case 4, n=100, d_token 32, learned PE", dict(case=4, n=100, d_token=32)),
    ("case 5, n=20, d_token 200, 2 layers", dict(case=5, n=20, d_token=200, n_layers=2)),
    ("case 1, n=100, d_token 32, learned PE", dict(case=1, n=100, d_token=32)),
    ("case 2, n=100, d_token 8, no PE", dict(case=2, n=100, d_token=8, pos_embed="none")),
    ("case 5, n=20, d_token 32, 1 layer", dict(case=5, n=20, d_token=32)),
    ("case 5, n=20, d_token 200, 2 layers + MLP 800",
     dict(case=5, n=20, d_token=200, n_layers=2, d_mlp=800, init="pytorch")),
    ("case 5, n=20, d_token 32, 2 layers + MLP 128",
     dict(case=5, n=20, d_token=32, n_layers=2, d_mlp=128, init="pytorch")),
    ("case 5, n=10, d_token 32, 2 layers + MLP 128 (mlp-4x, issue 27)",
     dict(case=5, n=10, d_token=32, n_layers=2, d_mlp=128, init="pytorch")),
    # the screen's last-4d (issue 28): the MLP after the last attention only. The plain loop runs
    # layer 0's MLP too, its weights fixed at zero (TransformerLens has no per-block MLP switch);
    # the fast engine leaves it out and forms the last MLP at the final position only
    ("case 5, n=10, d_token 32, 2 layers + MLP 128 after the last only (last-4d)",
     dict(case=5, n=10, d_token=32, n_layers=2, d_mlp=128, mlp="last", init="pytorch")),
    # the screen's choice, f14 (experiments/readings/screen/scores.md): last-4d with the
    # unembedding bias off, W_O identity, residual "embed" and one key order per batch
    ("case 5, n=10, d_token 32, 2 layers + MLP 128 after the last only, f14's fields (screen choice)",
     dict(case=5, n=10, d_token=32, n_layers=2, d_mlp=128, mlp="last", init="pytorch", unembed_bias=False,
          W_O="identity", residual="embed", key_order="batch")),
]
#: indices of the two-layer MLP configs (``--mlp``)
MLP_CONFIGS = [i for i, (_, kw) in enumerate(CONFIGS) if kw.get("d_mlp") and kw.get("n_layers") == 2]


class Reference:
    """The plain TransformerLens loop, one step at a time."""

    def __init__(self, config: TrainConfig, device: str = "cpu"):
        self.config, self.device = config, device
        self.model = init_model(config).to(device, print_details=False)
        self.opt = torch.optim.Adam(trainable(self.model), lr=config.lr)
        self.g = generator(config.seed, "train")

    def step(self):
        c = self.config
        tokens, answers = tasks.sample(c.case, c.n, c.batch_size, generator=self.g)
        tokens, answers = tokens.to(self.device), answers.to(self.device)
        loss = F.cross_entropy(self.model(tokens)[:, -1], answers)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def _ensemble(config: TrainConfig, seeds: int, device: str = "cpu"):
    return fast_train.Ensemble([config.replace(seed=s) for s in range(seeds)], device=device)


class Graph:
    """The captured-step ensemble (``fast_graph.GraphEnsemble``; eager on the CPU): ``run(n)``
    runs n steps with one read-back at the end, as training does every ``check_every`` steps."""

    def __init__(self, config: TrainConfig, seeds: int, device: str, steps: int):
        from interp.training.fast_graph import GraphEnsemble

        self.ens = GraphEnsemble([config.replace(seed=s) for s in range(seeds)], device=device,
                                 check_every=steps)

    def step(self):
        self.run(1)

    def run(self, steps: int):
        self.ens.k, done = steps, 0  # a block of `steps` steps (the buffers hold check_every)
        while done < steps:
            done += len(self.ens.advance())


def _time_block(runner, steps: int) -> tuple[float, float]:
    """(wall, CPU) milliseconds per step; CPU time leaves out time spent descheduled."""
    t, c = time.perf_counter(), time.process_time()
    if isinstance(runner, Graph):
        runner.run(steps)
    for _ in range(0 if isinstance(runner, Graph) else steps):
        runner.step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # the plain loop's last step may still be queued on a GPU
    return (time.perf_counter() - t) / steps * 1e3, (time.process_time() - c) / steps * 1e3


def bench_config(kwargs: dict, steps: int, repeats: int, device: str = "cpu", graph: bool = False) -> dict:
    # stop_loss 0: nothing stops early, every step is a full step
    config = TrainConfig(**kwargs, stop_loss=0.0, max_steps=10**9)
    runners = {
        "reference": (Reference(config, device), 1, max(3, steps // 5)),
        "ours x1": (_ensemble(config, 1, device), 1, steps),
        "ours x5": (_ensemble(config, 5, device), 5, steps),
    }
    if graph:
        runners["graph x5"] = (Graph(config, 5, device, steps), 5, steps)
    for runner, _, _ in runners.values():  # warm-up (a graph is captured here)
        runner.step()
        runner.step()
    wall: dict[str, list[float]] = {k: [] for k in runners}
    cpu: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(repeats):
        for name, (runner, seeds, n_steps) in runners.items():
            w, c = _time_block(runner, n_steps)
            wall[name].append(w / seeds)
            cpu[name].append(c / seeds)
    return (
        {k: statistics.median(v) for k, v in wall.items()},
        {k: statistics.median(v) for k, v in cpu.items()},
    )


def _worker(kwargs, steps, threads, barrier, results):
    torch.set_num_threads(threads)
    ens = _ensemble(TrainConfig(**kwargs, stop_loss=0.0, max_steps=10**9), 5)
    ens.step()
    barrier.wait()  # every process is built and warm: time the steps only, together
    t = time.perf_counter()
    for _ in range(steps):
        ens.step()
    results.put(time.perf_counter() - t)


def _run_processes(kwargs, steps, threads, processes) -> float:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(kwargs, steps, threads, barrier, results))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    walls = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return processes * 5 * steps / max(walls)  # seed-steps per second, all processes


def bench_parallel(kwargs: dict, steps: int) -> dict:
    """Seed-steps per second: 1 process x 1 or 2 threads vs 2 processes x 1 thread."""
    return {
        "1 process x 1 thread": _run_processes(kwargs, steps, 1, 1),
        "1 process x 2 threads": _run_processes(kwargs, steps, 2, 1),
        "2 processes x 1 thread": _run_processes(kwargs, steps, 1, 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per block (ours)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved blocks per engine")
    parser.add_argument("--only", type=int, nargs="*", help="indices into CONFIGS")
    parser.add_argument("--mlp", action="store_true",
                        help=f"only the two-layer MLP configs (CONFIGS {MLP_CONFIGS})")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--graph", action="store_true",
                        help="also the captured-step ensemble (fast_graph; eager on the CPU)")
    parser.add_argument("--parallel", action="store_true", help="also threads vs processes")
    parser.add_argument("--out", help="also write the Markdown report here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    keep_freed_memory()  # glibc keeps freed large blocks, as in `interp sweep`
    from interp.training.runs import check_device

    device = check_device(args.device)
    indices = args.only or (MLP_CONFIGS if args.mlp else range(len(CONFIGS)))
    chosen = [CONFIGS[i] for i in indices]
    start, cpu_start, load_before = time.perf_counter(), time.process_time(), os.getloadavg()
    ours = ["ours x1", "ours x5"] + (["graph x5"] if args.graph else [])
    header = [
        "| config | reference ms/step | " + " | ".join(
            f"{k} ms/{'seed-' if 'x5' in k else ''}step" for k in ours) + " | "
        + " | ".join(f"ratio {k.removeprefix('ours ')}" for k in ours) + " |",
        "|---|" + "---:|" * (1 + 2 * len(ours)),
    ]
    top = [f"Load average at the start (1 / 5 / 15 min): {load_before[0]:.2f} / "
           f"{load_before[1]:.2f} / {load_before[2]:.2f} on {os.cpu_count()} cores "
           "(timings under load are not final).", ""]
    lines, cpu_lines = top + ["Wall time:", ""] + header, ["", "CPU time of this process:", ""] + header
    print(*lines, sep="\n", flush=True)

    def row(label, r):
        return (f"| {label} | {r['reference']:.1f} | " + " | ".join(f"{r[k]:.2f}" for k in ours)
                + " | " + " | ".join(f"{r['reference'] / r[k]:.1f}x" for k in ours) + " |")

    for label, kwargs in chosen:
        wall, cpu = bench_config(kwargs, args.steps, args.repeats, device, graph=args.graph)
        lines.append(row(label, wall))
        cpu_lines.append(row(label, cpu))
        print(lines[-1], flush=True)
    print(*cpu_lines, sep="\n", flush=True)
    lines += cpu_lines
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    load_after = os.getloadavg()
    notes = [
        "",
        f"Peak memory (max RSS of this process, both engines, all configs): {peak:.2f} GiB.",
        f"Load average before/after (1 min): {load_before[0]:.1f} / {load_after[0]:.1f} on "
        f"{os.cpu_count()} cores; MKL_CBWR={os.environ.get('MKL_CBWR')}, seeds stacked: "
        f"{device != 'cpu' or fast_train.mkl_reproducible()}; torch {torch.__version__}, "
        f"{platform.machine()} ({cpu_model()}), device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device != "cpu" else "") + ".",
        f"Timing: median of {args.repeats} interleaved blocks, {args.steps} steps per block "
        f"for ours and {max(3, args.steps // 5)} for the reference; one intra-op thread.",
    ]
    if args.parallel:
        label, kwargs = chosen[0]
        par = bench_parallel(kwargs, args.steps)
        notes.append(f"\nBoth cores, {label}, ensembles of 5 seeds (seed-steps per second):\n")
        notes.append("| layout | seed-steps/s |\n|---|---:|")
        notes.extend(f"| {k} | {v:.0f} |" for k, v in par.items())
    notes.append(f"Script: {time.perf_counter() - start:.0f} s wall, "
                 f"{time.process_time() - cpu_start:.0f} s process CPU.")
    print("\n".join(notes))
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Trainer benchmark\n\nCommand: `.venv/bin/python "
                    f"experiments/bench/bench_train.py {' '.join(sys.argv[1:] if argv is None else argv)}`\n\n")
            f.write("\n".join(lines + notes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
