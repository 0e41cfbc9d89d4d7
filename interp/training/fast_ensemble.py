"""Seed ensembles: runs that differ only in seed, trained in lockstep by the fast engine.

Seeds (:class:`Ensemble`). Seeds share a Python loop and one Adam (which treats each parameter
tensor on its own), draw their own data, and stop on their own. When MKL runs reproducibly
(:func:`mkl_reproducible`), their parameters are stacked along a leading seed axis each step
(``torch.stack``: autograd hands each model's own parameters their gradients) and every product
is batched over seeds; otherwise seeds are computed one after the other, because MKL's default
kernels round by memory alignment and a seed must get the same bits in a stack as alone.

Devices. An ensemble trains on ``device`` (CPU by default, or CUDA: :class:`Ensemble`); the
data are drawn on the CPU either way (:mod:`interp.training.fast_data`), so a seed sees the
same batches on every device. The loop that trains one (:func:`interp.training.fast_train.train_ensemble`)
uses :class:`interp.training.fast_graph.GraphEnsemble`, whose step is captured, on CUDA.
"""

from __future__ import annotations

import logging
import math
import time

import torch

from interp.core import tasks
from interp.training import runs
from interp.training.fast_data import sample_indices
from interp.training.fast_math import check_model, seed_losses, stack_params
from interp.training.machine import mkl_branch

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Training an ensemble of seeds.


def accuracy(model, config) -> float:
    """Test accuracy over ``config.eval_batches`` batches of the run's test stream: the plain
    trainer's :func:`interp.training.trainer.evaluate_accuracy` (the package's one evaluation pass,
    :func:`interp.core.forward.predictions`), so both trainers count the same predictions."""
    return runs.evaluate_accuracy(model, config)


def mkl_reproducible() -> bool:
    """Whether MKL runs in a conditional-numerical-reproducibility mode (``MKL_CBWR`` set
    before the process started), in which its matrix products do not depend on memory
    alignment. Only then does a seed computed inside a stacked [seed, ...] batch get the same
    bits as the seed alone; otherwise an ensemble computes its seeds one by one.
    """
    global _MKL_CNR
    if _MKL_CNR is None:
        branch = mkl_branch()  # None without MKL; 1: CNR off
        _MKL_CNR = branch is not None and branch != 1
    return _MKL_CNR


_MKL_CNR: bool | None = None


class Ensemble:
    """Runs that differ only in seed, trained in lockstep; :meth:`step` advances every live one.

    Each seed draws its own data (its own generator), keeps its own Adam state and stops on
    its own (training-batch loss below ``stop_loss``, a non-finite loss, or ``max_steps``).
    ``models_`` (optional) are trained in place instead of fresh ``init_model`` models.
    ``batched`` (default: on CUDA, or on the CPU when :func:`mkl_reproducible`) stacks the seeds
    along a leading axis. ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``): where the models
    train; data are drawn on the CPU as always (the same batches) and moved there, and
    :meth:`results` hands the models back on the CPU. On CUDA a seed is equal to the same seed
    on the CPU, or alone, to float rounding, not bit for bit (cuBLAS kernels differ from MKL's
    and by batch shape, and the gathers' backward adds with atomics).
    """

    _told = False  # the hint about MKL_CBWR is logged once per process

    def __init__(
        self, configs: list, *, models_: list | None = None, batched: bool | None = None,
        device: str = "cpu",
    ):
        from interp.training.runs import check_device, generator, init_model, trainable

        self.start, self.cpu_start = time.perf_counter(), time.process_time()
        self.device = check_device(device)  # "cpu", "cuda" or "cuda:N"
        on_cuda = self.device != "cpu"
        self.batched = (on_cuda or mkl_reproducible()) if batched is None else batched
        self.configs = list(configs)
        self.cfg = cfg0 = self.configs[0]
        self.models = [init_model(c) for c in configs] if models_ is None else list(models_)
        for m in self.models:
            check_model(m)
            m.to(self.device, print_details=False)  # in place: the parameters stay the same objects
        self.params = [trainable(m) for m in self.models]
        self.opt = torch.optim.Adam(
            [p for ps in self.params for p in ps], lr=cfg0.lr, fused=True
        )
        self.gens = [generator(c.seed, "train") for c in self.configs]
        if not self.batched and len(self.configs) > 1 and not Ensemble._told:
            Ensemble._told = True
            log.info(
                "seeds are computed one by one; set MKL_CBWR=AUTO in the environment before "
                "the process starts to stack them (about 2x faster for one-layer models)"
            )
        self.K = 2 if tasks.get(cfg0.case).same_position else 1
        self.P = tasks.seq_len(cfg0.case, cfg0.n)
        S = len(self.configs)
        self.curves: list[list[tuple[int, float]]] = [[] for _ in range(S)]
        self.steps = [0] * S
        self.last = [float("nan")] * S
        self.status = ["ok"] * S
        self.active = list(range(S))
        self.t = 0

    @property
    def done(self) -> bool:
        return not self.active or self.t >= self.cfg.max_steps

    def step(self) -> None:
        """One Adam step for every live seed (forward, backward, update, stopping rule)."""
        cfg, active = self.cfg, self.active
        self.t += 1
        step = self.t
        S = len(active)
        J = torch.empty(self.K, S, cfg.batch_size, self.P, dtype=torch.int64)
        answers = torch.empty(S, cfg.batch_size, dtype=torch.int64)
        J_np, ans_np = J.numpy(), answers.numpy()
        for j, s in enumerate(active):
            sample_indices(
                cfg.case, cfg.n, cfg.batch_size, generator=self.gens[s], function=cfg.function, key_order=cfg.key_order,
                out=(J_np[:, j], ans_np[j]),
            )
        J, answers = J.to(self.device), answers.to(self.device)
        if self.batched:
            losses = seed_losses(stack_params([self.models[s] for s in active]), J, answers)
        else:
            losses = torch.cat([
                seed_losses(stack_params([self.models[s]]), J[:, j : j + 1], answers[j : j + 1])
                for j, s in enumerate(active)
            ])  # [seed]: each seed's mean cross-entropy over its own batch
        values = losses.tolist()
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        finished = set()
        for j, s in enumerate(active):
            if self.record(s, step, values[j]):
                finished.add(s)
                if self.status[s] != "ok":  # no update from a non-finite loss
                    for p in self.params[s]:
                        p.grad = None
        self.opt.step()
        self.active = [s for s in active if s not in finished]

    def record(self, s: int, step: int, v: float) -> bool:
        """Seed s's loss v at ``step``: its last loss, curve point, step count and status, as
        both engines keep them; True when the seed stops here (loss < stop_loss, or non-finite:
        then it has failed)."""
        cfg = self.cfg
        self.last[s] = v
        if not math.isfinite(v):
            self.status[s] = f"failed: non-finite loss ({v}) at step {step}"
            self.curves[s].append((step, v))
            return True
        self.steps[s] = step
        stop = v < cfg.stop_loss
        if step == 1 or step % cfg.curve_every == 0 or stop or step == cfg.max_steps:
            self.curves[s].append((step, v))
        return stop

    def results(self) -> list:
        """Test accuracy of every seed and its RunResult, the models back on the CPU
        (``seconds``, ``cpu_seconds``: the ensemble's wall and process CPU time divided among
        its seeds)."""
        from interp.training.runs import RunResult

        out = []
        for s, c in enumerate(self.configs):
            model = self.models[s].to("cpu", print_details=False)  # evaluated and saved on the CPU
            out.append(
                RunResult(
                    config=c, model=model, accuracy=accuracy(model, c), steps=self.steps[s],
                    final_loss=self.last[s], seconds=0.0, curve=self.curves[s],
                    status=self.status[s],
                )
            )
        wall, cpu = time.perf_counter() - self.start, time.process_time() - self.cpu_start
        for r in out:
            r.seconds, r.cpu_seconds = wall / len(out), cpu / len(out)
        return out
