"""What is left for 10x at the chosen reading's two-layer cell, without changing a seed's bits.

Issue 27 asks for the fast engine at >= 10x the plain TransformerLens loop at the chosen
reading's two-layer cell (since issue 28's gate: ``f14``, case 5, n = 10, d_token 32, d_mlp 128
after the last attention only); ``profile-f14.md`` has where it stands and what 10x needs
(``claims.py`` bench-f14). Every change to the trainer so far kept each seed's bits (the
trainer's tests compare stacked seeds with lone ones, and resumed runs with straight ones, bit
for bit), so this script measures the two things that bound what such a change can gain, in one
process, one intra-op thread:

1. **The levers that keep the bits**, side by side with today's ensemble: the models'
   parameters kept stacked (each model's parameter a view into one [seed, ...] tensor per
   parameter, so the forward copies nothing; the backward hands each seed its rows of the
   gradient, as ``torch.stack``'s does) and Adam called as its fused kernel directly
   (``torch._fused_adam_`` on the same per-seed tensors, without ``Optimizer.step``'s Python).
   Both ensembles train the same seeds, steps interleaved in alternating order, in several
   blocks (median and range reported); every parameter and Adam state tensor is compared bit
   for bit (as integers) after the warm-up and at the end.
2. **The kernels that fix the bits**: the step's passes over its [seed, batch, pos, pos]
   tensors that no bit-identical rewrite can replace (the softmax over the keys, the
   scatter-add backward of the score gathers, the pattern's backward), each timed alone at the
   cell's shapes.

    .venv/bin/python experiments/bench/step_levers.py --out experiments/bench/step-levers.md

Seconds on idle cores. Not kept in the trainer (``README.md``, "Tried ... not kept").
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MKL_CBWR", "AUTO")  # before torch loads: the trainer stacks seeds then
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `interp sweep` runs (interp/cli)

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from unittest import mock  # noqa: E402

import torch  # noqa: E402

from interp.core import tasks  # noqa: E402
from interp.training import fast_ensemble  # noqa: E402
from interp.training.fast_ensemble import Ensemble  # noqa: E402
from interp.training.fast_math import stack_params  # noqa: E402
from interp.training.machine import cpu_model, keep_freed_memory  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_mlp import CELLS, write  # noqa: E402  (the cells profiled there; the file's closing line)


class _Alias(torch.autograd.Function):
    """The stacked [seed, ...] tensor itself (no copy); its gradient's rows go to each seed's
    parameter, as ``torch.stack``'s backward hands them (the same ``unbind``)."""

    @staticmethod
    def forward(ctx, stacked, *params):
        return stacked.view_as(stacked)

    @staticmethod
    def backward(ctx, g):
        return (None, *g.unbind(0))


class StackedEnsemble(Ensemble):
    """:class:`Ensemble` with both levers (module docstring). Every seed must stay live (the
    benchmark's stop loss is 0): the stacks hold all seeds."""

    def __init__(self, configs):
        super().__init__(configs, batched=True)
        self.stacks = {}
        with torch.no_grad():
            for i, first in enumerate(self.params[0]):
                stacked = torch.stack([ps[i].detach() for ps in self.params])
                for s, ps in enumerate(self.params):
                    ps[i].data = stacked[s]  # a view: Adam's in-place update writes the stack
                self.stacks[id(first)] = (stacked, [ps[i] for ps in self.params])
        self.opt.step = self._fused_adam

    def _stack(self, models_):
        if len(models_) != len(self.models):
            raise RuntimeError("a seed stopped: StackedEnsemble stacks every seed (stop_loss=0)")
        leaves = {k: _Alias.apply(stacked, *ps) for k, (stacked, ps) in self.stacks.items()}
        return stack_params(models_, leaves=leaves)

    def step(self) -> None:
        with mock.patch.object(fast_ensemble, "stack_params", self._stack):
            super().step()

    def _fused_adam(self) -> None:
        """``torch.optim.Adam(fused=True).step()``'s kernel calls, on the same state."""
        group = self.opt.param_groups[0]
        assert not (group["amsgrad"] or group["maximize"] or group["decoupled_weight_decay"])
        ps, grads, m, v, steps = [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.opt.state[p]
            if not state:  # as Adam._init_group
                state["step"] = torch.tensor(0.0, dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            ps.append(p), grads.append(p.grad), m.append(state["exp_avg"])
            v.append(state["exp_avg_sq"]), steps.append(state["step"])
        torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(ps, grads, m, v, [], steps, amsgrad=False, lr=group["lr"], beta1=beta1,
                           beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                           maximize=False, grad_scale=None, found_inf=None)


def _bits(t) -> torch.Tensor:
    """A tensor's bits as integers of its width (so -0.0 != 0.0 and equal NaNs are equal)."""
    t = torch.as_tensor(t).detach().contiguous()
    return t.view({4: torch.int32, 8: torch.int64, 2: torch.int16}[t.element_size()])


def same_bits(a: Ensemble, b: Ensemble) -> bool:
    """Every parameter and every Adam state tensor of the two ensembles equal bit for bit."""
    if [len(ps) for ps in a.params] != [len(ps) for ps in b.params]:
        return False
    for pa, pb in zip(a.params, b.params):
        for p, q in zip(pa, pb):
            sa, sb = a.opt.state.get(p, {}), b.opt.state.get(q, {})
            if p.dtype != q.dtype or p.shape != q.shape or not torch.equal(_bits(p), _bits(q)):
                return False
            if sa.keys() != sb.keys():
                return False
            for k in sa:
                x, y = torch.as_tensor(sa[k]), torch.as_tensor(sb[k])
                if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(_bits(x), _bits(y)):
                    return False
    return True


def levers(config, seeds: int, steps: int, warm: int, blocks: int) -> tuple[list[str], bool]:
    """Today's ensemble and :class:`StackedEnsemble`: ``blocks`` blocks of ``steps`` steps each,
    the two interleaved step by step, which goes first alternating; ms per seed-step, median
    and range over the blocks."""
    configs = [config.replace(seed=s) for s in range(seeds)]
    rows, ok = [], True
    for batch in (config.batch_size, 8):
        cs = [c.replace(batch_size=batch) for c in configs]
        today, stacked = Ensemble(cs, batched=True), StackedEnsemble(cs)
        for _ in range(warm):
            today.step(), stacked.step()
        ok &= same_bits(today, stacked)
        ms: list[list[float]] = [[], []]
        for _ in range(blocks):
            cpu = [0.0, 0.0]
            for i in range(steps):
                for j in ((0, 1) if i % 2 == 0 else (1, 0)):
                    c = time.process_time()
                    (today, stacked)[j].step()
                    cpu[j] += time.process_time() - c
            for j in (0, 1):
                ms[j].append(1e3 * cpu[j] / steps / seeds)
        ok &= same_bits(today, stacked)
        a, b = (statistics.median(m) for m in ms)
        rows.append(f"| {batch} | {a:.3f} ({min(ms[0]):.3f}-{max(ms[0]):.3f}) | {b:.3f} "
                    f"({min(ms[1]):.3f}-{max(ms[1]):.3f}) | {a - b:.3f} ({100 * (a - b) / a:.0f}%) |")
    return rows, ok


def timed(f, reps: int) -> float:
    """CPU ms of one call of ``f`` (after one warm-up call)."""
    f()
    c = time.process_time()
    for _ in range(reps):
        f()
    return 1e3 * (time.process_time() - c) / reps


def fixed_kernels(config, seeds: int, reps: int) -> tuple[list[str], float]:
    """Each bits-fixed pass over the layer-0 pattern alone, at the cell's shapes."""
    S, B, P = seeds, config.batch_size, tasks.seq_len(config.case, config.n)
    V = Ensemble([config], batched=True).models[0].cfg.d_vocab  # token-table rows
    g = torch.Generator().manual_seed(0)
    x = torch.randn(S, B, P, P, generator=g)
    t = torch.randint(0, V, (S, B, P), generator=g)
    row = (t * P + torch.arange(P) + torch.arange(S)[:, None, None] * (V * P)).reshape(-1)
    U, W = torch.randn(S, B, P, 3, generator=g), torch.randn(S, B, P, 3, generator=g)
    corr = torch.randn(S, B, P, generator=g)
    kernels = [  # (what, the step's call it stands for)
        ("softmax over the keys (layer 0's pattern)", lambda: torch.softmax(x, -1)),
        ("gather backward of the token scores (scatter_add)",
         lambda: x.new_zeros(S, B, P, V).scatter_add_(-1, t[:, :, None, :].expand(S, B, P, P), x)),
        ("index_select backward of the token-score rows (index_add)",
         lambda: x.new_zeros(S * V * P, V).index_add_(0, row, x[..., :V].reshape(-1, V))),
        ("index_select backward of the position-score rows (index_add)",
         lambda: x.new_zeros(S * V * P, P).index_add_(0, row, x.view(-1, P))),
        ("pattern backward: the uses' rank-3 dA (bmm)", lambda: U @ W.transpose(-1, -2)),
        ("pattern backward: the softmax correction (sub_, mul_)",
         lambda: x.clone().sub_(corr[..., None]).mul_(x)),
    ]
    rows, total = [], 0.0
    for what, f in kernels:
        ms = timed(f, reps) / seeds
        total += ms
        rows.append(f"| {what} | {ms:.3f} |")
    return rows, total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", choices=sorted(CELLS), default="f14")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per ensemble and block")
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks (median and range)")
    parser.add_argument("--warm", type=int, default=20, help="untimed steps before the first bit check")
    parser.add_argument("--out", help="write the Markdown here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    keep_freed_memory()
    load = os.getloadavg()
    start, cpu0 = time.perf_counter(), time.process_time()
    config = TrainConfig(**CELLS[args.cell], stop_loss=0.0, max_steps=10**9)
    lever_rows, same = levers(config, args.seeds, args.steps, args.warm, args.blocks)
    kernel_rows, fixed = fixed_kernels(config, args.seeds, 4 * args.steps // 10 or 1)
    cell = ", ".join(f"{k} {v}" for k, v in CELLS[args.cell].items())
    lines = [
        "# What is left for 10x without changing a seed's bits",
        "",
        f"`.venv/bin/python experiments/bench/step_levers.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
        f"{cell}, {args.seeds} seeds stacked, one intra-op thread, process CPU time.",
        "",
        f"Load average at the start (1/5/15 min): {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
        f"on {os.cpu_count()} cores (timings under load are not final); torch {torch.__version__}, "
        f"{cpu_model()}, MKL_CBWR={os.environ.get('MKL_CBWR')}.",
        "",
        "## The levers that keep the bits",
        "",
        "Today's ensemble against the same seeds with their parameters kept stacked and Adam's "
        f"fused kernel called directly; {args.warm} warm-up steps, then {args.blocks} blocks of "
        f"{args.steps} steps, interleaved one by one in alternating order: median (range) over "
        "the blocks. Every parameter and Adam state tensor equal bit for bit after the warm-up "
        f"and at the end: **{'yes' if same else 'NO'}**.",
        "",
        "| batch | today, ms per seed-step | both levers | saved (medians) |",
        "|--:|--:|--:|--:|",
        *lever_rows,
        "",
        "## The kernels that fix the bits",
        "",
        "Each pass alone at the cell's shapes (batch "
        f"{config.batch_size}, {tasks.seq_len(config.case, config.n)} positions), per seed-step. "
        "A rewrite that keeps each seed's bits must call these kernels as the step does (a "
        "softmax or a scatter-add written another way sums or rounds in another order).",
        "",
        "| pass | ms per seed-step |",
        "|---|--:|",
        *kernel_rows,
        f"| together | {fixed:.3f} |",
    ]
    write(lines, start, cpu0, args.out)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
