"""Is ``torch.compile`` on the CPU a lever for the two-layer MLP step? Measured, side by side.

Issue 27 asks for the chosen reading's two-layer cell (case 5, n = 10, d_token 32, d_mlp 128,
pytorch init) at >= 10x the plain TransformerLens loop, and names ``torch.compile`` on the CPU as
a lever. The fast engine's step cannot be compiled as it is: its custom autograd functions hand
gradient factors to each other through a shared Python list (``fast_autograd``), which Dynamo
does not trace. So this script compiles what Inductor can take: the same model written densely
(every product in [seed, batch, pos, d] form, the last layer at the final query only; Inductor
fuses the elementwise work and AOTAutograd derives the backward) and runs, in one process, one
intra-op thread, on one fixed batch per seed:

* ``plain``: TransformerLens's forward and backward, one seed at a time (the baseline);
* ``fast``: the fast engine's loss (``fast_math.seed_losses``) and backward, 5 seeds stacked;
* ``dense``: the dense formulation, eager, 5 seeds stacked;
* ``dense, compiled``: the same under ``torch.compile`` (Inductor), when a C++ compiler is found.

Forward and backward only (Adam is the same fused update for every engine). Each engine's
gradients are compared with the plain loop's, parameter by parameter (max |diff|), before any
timing. Writes Markdown with the load at the start, the compile time and each engine's ms per
seed-step (median of interleaved blocks; wall and process CPU):

    .venv/bin/python experiments/bench/compile_cpu.py --out experiments/bench/compile-cpu.md

About 2 minutes on 2 idle cores (the compile takes most of it).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads: the trainer stacks seeds then
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `interp sweep` runs (interp/cli)
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")  # a cold compile, as a new cell pays

import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from interp.training.fast_data import sample_indices  # noqa: E402
from interp.training.fast_ensemble import Ensemble  # noqa: E402
from interp.training.fast_math import seed_losses, stack_params  # noqa: E402
from interp.training.machine import cpu_model, keep_freed_memory  # noqa: E402
from interp.training.runs import generator  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402

CELL = dict(case=5, n=10, d_token=32, n_layers=2, d_mlp=128, init="pytorch")
LAYER = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O", "W_in", "b_in", "W_out", "b_out")


def dense_losses(T, pos, layers, W_U, b_U, tokens, answers, scale0: float, scale1: float):
    """Per-seed mean cross-entropy of the two-layer model with an MLP after each attention,
    written densely: tokens [seed, batch, pos], every weight [seed, ...] (one head: d_head axis
    only). Layer 0 at every position, the last layer at the final query (what the loss reads)."""
    S, B, P = tokens.shape
    d = T.shape[-1]
    x = torch.gather(T, 1, tokens.reshape(S, B * P, 1).expand(S, B * P, d)).view(S, B, P, d)
    x = x + pos[:, None, :P]  # [S, B, P, d]
    W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, W_in, b_in, W_out, b_out = layers[0]
    q = torch.einsum("sbpd,sde->sbpe", x, W_Q) + b_Q[:, None, None]
    k = torch.einsum("sbpd,sde->sbpe", x, W_K) + b_K[:, None, None]
    v = torch.einsum("sbpd,sde->sbpe", x, W_V) + b_V[:, None, None]
    A = torch.softmax(q @ k.transpose(-1, -2) / scale0, dim=-1)  # [S, B, qpos, kpos]
    x = x + torch.einsum("sbpe,sed->sbpd", A @ v, W_O) + b_O[:, None, None]
    h = torch.relu(torch.einsum("sbpd,sdm->sbpm", x, W_in) + b_in[:, None, None])
    x = x + torch.einsum("sbpm,smd->sbpd", h, W_out) + b_out[:, None, None]
    W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, W_in, b_in, W_out, b_out = layers[1]
    last = x[:, :, -1]  # [S, B, d]
    q = torch.einsum("sbd,sde->sbe", last, W_Q) + b_Q[:, None]
    k = torch.einsum("sbpd,sde->sbpe", x, W_K) + b_K[:, None, None]
    v = torch.einsum("sbpd,sde->sbpe", x, W_V) + b_V[:, None, None]
    a = torch.softmax(torch.einsum("sbe,sbpe->sbp", q, k) / scale1, dim=-1)  # [S, B, kpos]
    last = last + torch.einsum("sbe,sed->sbd", torch.einsum("sbp,sbpe->sbe", a, v), W_O) + b_O[:, None]
    hidden = torch.relu(torch.einsum("sbd,sdm->sbm", last, W_in) + b_in[:, None])
    last = last + torch.einsum("sbm,smd->sbd", hidden, W_out) + b_out[:, None]
    logits = torch.einsum("sbd,sdn->sbn", last, W_U) + b_U[:, None]  # [S, B, n]
    ce = F.cross_entropy(logits.reshape(S * B, -1), answers.reshape(S * B), reduction="none")
    return ce.view(S, B).mean(-1)  # [seed]


class Engines:
    """The four engines' forward + backward on one fixed batch per seed."""

    def __init__(self, seeds: int, batch_size: int = 256):
        configs = [TrainConfig(**CELL, stop_loss=0.0, max_steps=10**9, seed=s, batch_size=batch_size)
                   for s in range(seeds)]
        self.cfg = configs[0]
        assert self.cfg.mlp == "every" and self.cfg.residual == "stream" and self.cfg.pos_embed == "learned"
        self.models = Ensemble(configs).models
        S, B, P = seeds, self.cfg.batch_size, self.models[0].cfg.n_ctx
        J = torch.empty(1, S, B, P, dtype=torch.int64)
        self.answers = torch.empty(S, B, dtype=torch.int64)
        for s in range(S):  # each seed's first training batch, as the trainer draws it
            sample_indices(self.cfg.case, self.cfg.n, B, generator=generator(s, "train"),
                           out=(J.numpy()[:, s], self.answers.numpy()[s]))
        self.J, self.tokens = J, J[0]  # case 5: one index per position, the token itself
        self.params = [[p for p in m.parameters() if p.requires_grad] for m in self.models]
        self.compiled = None

    def plain(self):
        for s, m in enumerate(self.models):
            F.cross_entropy(m(self.tokens[s])[:, -1], self.answers[s]).backward()

    def fast(self):
        seed_losses(stack_params(self.models), self.J, self.answers).sum().backward()

    def _dense(self, fn):
        p = stack_params(self.models)
        layers = [[w[k] for k in LAYER] for w in p["layers"]]
        fn(p["T"], p["pos"], layers, p["W_U"], p["b_U"], self.tokens, self.answers,
           p["scale"][0], p["scale"][1]).sum().backward()

    def dense(self):
        self._dense(dense_losses)

    def dense_compiled(self):
        self._dense(self.compiled)

    def grads(self, run) -> list[torch.Tensor]:
        for ps in self.params:
            for p in ps:
                p.grad = None
        run()
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for ps in self.params for p in ps]


def timed(fn, steps: int) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t) / steps, (time.process_time() - c) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="stacked seeds")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block (plain: a fifth)")
    parser.add_argument("--blocks", type=int, default=3, help="interleaved blocks (median)")
    parser.add_argument("--out", help="write the Markdown here")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.steps < 1 or args.blocks < 1:
        parser.error(f"--seeds {args.seeds}, --steps {args.steps}, --blocks {args.blocks}: each must be >= 1")
    torch.set_num_threads(1)
    keep_freed_memory()
    load = os.getloadavg()
    start, cpu0 = time.perf_counter(), time.process_time()
    eng = Engines(args.seeds)
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    compile_s, compile_note = None, "no C++ compiler found: not compiled"
    ref = eng.grads(eng.plain)
    runs = {"plain": eng.plain, "fast": eng.fast, "dense": eng.dense}
    if compiler:
        eng.compiled = torch.compile(dense_losses, dynamic=False)
        t = time.perf_counter()
        try:
            eng.grads(eng.dense_compiled)
            compile_s, compile_note = time.perf_counter() - t, f"compiled with Inductor ({compiler})"
            runs["dense, compiled"] = eng.dense_compiled
        except Exception as e:  # never fail: say what happened and measure the rest
            compile_note = f"torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:120]}); not timed"
    diffs = {name: max((a - b).abs().max().item() for a, b in zip(eng.grads(fn), ref))
             for name, fn in runs.items() if name != "plain"}
    per = {name: [] for name in runs}
    for _ in range(args.blocks):  # interleaved: every engine sees the same machine state
        for name, fn in runs.items():
            steps = max(1, args.steps // 5) if name == "plain" else args.steps
            fn()  # warm
            wall, cpu = timed(fn, steps)
            per[name].append((wall * 1e3 / args.seeds, cpu * 1e3 / args.seeds))  # a call: every seed once
    med = {name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for name, v in per.items()}
    base = med["plain"]
    lines = [
        "# torch.compile on the CPU, for the two-layer MLP step (issue 27)",
        "",
        f"`.venv/bin/python experiments/bench/compile_cpu.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
        + ", ".join(f"{k} {v}" for k, v in CELL.items())
        + f", batch {eng.cfg.batch_size}, {args.seeds} seeds; forward + backward on one fixed batch per seed "
        f"(no Adam); one intra-op thread; median of {args.blocks} interleaved blocks.",
        "",
        f"Load average at the start (1/5/15 min): {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on "
        f"{os.cpu_count()} cores; torch {torch.__version__}, {cpu_model()}, MKL_CBWR={os.environ.get('MKL_CBWR')}.",
        f"Compile: {compile_note}" + (f", {compile_s:.1f} s wall for the first call." if compile_s else "."),
        "",
        "| engine | ms per seed-step, wall | CPU | x plain (wall) | max abs grad diff vs plain |",
        "|---|--:|--:|--:|--:|",
    ]
    for name, (w, c) in med.items():
        diff = "-" if name == "plain" else f"{diffs[name]:.1e}"
        lines.append(f"| {name} | {w:.2f} | {c:.2f} | {base[0] / w:.1f}x | {diff} |")
    lines += ["", f"Script: {time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu0:.0f} s process "
              f"CPU (the compile's worker processes not counted); load at the end {os.getloadavg()[0]:.2f}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
