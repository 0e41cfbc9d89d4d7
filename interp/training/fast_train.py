"""Exact fast training: the HookedTransformer's final-position logits, regrouped, for seed ensembles.

The arithmetic (final-position logits of one and two layers, with or without MLPs, regrouped
over table rows, with custom autograd for layer 0's pattern and hidden activations) is
:mod:`interp.training.fast_math`; this module draws the data as table rows, stacks the seeds'
parameters and runs the ensemble loop.

Seeds (:class:`Ensemble`). Seeds share a Python loop and one Adam (which treats each parameter
tensor on its own), draw their own data, and stop on their own. When MKL runs reproducibly
(:func:`mkl_reproducible`), their parameters are stacked along a leading seed axis each step
(``torch.stack``: autograd hands each model's own parameters their gradients) and every product
is batched over seeds; otherwise seeds are computed one after the other, because MKL's default
kernels round by memory alignment and a seed must get the same bits in a stack as alone.

Devices. An ensemble trains on ``device`` (CPU by default, or CUDA: :class:`Ensemble`); the
data are drawn on the CPU either way, so a seed sees the same batches on every device.

Data. :func:`sample_indices` draws exactly what :func:`interp.core.tasks.sample` draws (same
generator calls, same permutations, ties included, with a faster argsort) and returns table
rows instead of tokens.
"""

from __future__ import annotations

import logging
import math
import os
import time

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import attention, models, tasks
from interp.training import runs
from interp.training.machine import mkl_branch
from interp.training.fast_math import final_logits, seed_losses

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Data: tasks.sample, exactly, with a faster argsort.


def _argsort_rows(r: Float[Tensor, "batch n"]) -> Int[Tensor, "batch n"]:
    """``r.argsort(dim=1)`` for ``torch.rand`` float32 output, bit for bit.

    torch.rand's float32 values are k / 2**24 with integer k < 2**24, so
    ``key = k << b | column`` (b bits for the column) is an integer with no ties whose order is
    k's order with ties broken by column. numpy sorts integer rows fast (SIMD), and the sorted
    keys carry the permutation in their low bits. Rows where k ties (about 3e-4 per row of
    100) are redone with ``torch.argsort`` itself, whose tie order is its own (and row by row
    the same as in a batch).
    """
    batch, n = r.shape
    bits = max(1, (n - 1).bit_length())
    dtype = np.int32 if 24 + bits <= 31 else np.int64
    key = (r.numpy() * np.float32(2**24)).astype(dtype) << dtype(bits)
    key |= np.arange(n, dtype=dtype)
    key.sort(axis=1)
    out = torch.from_numpy((key & dtype((1 << bits) - 1)).astype(np.int64))
    k = key >> dtype(bits)
    ties = (k[:, 1:] == k[:, :-1]).any(axis=1)
    if ties.any():
        rows = torch.from_numpy(np.nonzero(ties)[0])
        out[rows] = r[rows].argsort(dim=1)
    return out


def _argsort_np(r: Tensor) -> np.ndarray:
    return _argsort_rows(r).numpy()


def sample_indices(
    case: int,
    n: int,
    batch_size: int,
    *,
    generator: torch.Generator,
    function: str = "permutation",
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[Int[Tensor, "K batch pos"], Int[Tensor, "batch"]]:
    """``token_indices`` of ``tasks.sample``'s batch and its answers (same draws), no tokens.

    ``out`` (optional): numpy views ``(J [K, batch, pos], answers [batch])`` to fill in place.
    """
    g = generator
    shape = (batch_size, n)
    if function == "permutation":
        values = _argsort_np(torch.rand(shape, generator=g))
    else:
        values = torch.randint(0, n, shape, generator=g).numpy()
    keys = _argsort_np(torch.rand(shape, generator=g)) if case in tasks.PERMUTED else None
    target = torch.randint(0, n, (batch_size,), generator=g).numpy()
    K = 2 if case in tasks.SAME_POSITION else 1
    P = tasks.seq_len(case, n)
    if out is None:
        J, answers = np.empty((K, batch_size, P), np.int64), np.empty(batch_size, np.int64)
    else:
        J, answers = out
    rows = np.arange(batch_size)
    if keys is None:
        answers[:] = values[rows, target]
        keys = np.broadcast_to(np.arange(n), shape)
    else:
        answers[:] = values[rows, np.argmax(keys == target[:, None], axis=1)]
    if case == 1:
        J[0, :, :n] = values
    elif case in tasks.SAME_POSITION:
        J[0, :, :n] = keys
        J[1, :, :n] = values + n
        J[1, :, n] = 2 * n
    else:
        J[0, :, 0 : 2 * n : 2] = keys
        J[0, :, 1 : 2 * n : 2] = values
    J[0, :, P - 1] = target
    if out is None:
        return torch.from_numpy(J), torch.from_numpy(answers)
    return out


def token_indices(pairs: bool, n: int, tokens: Int[Tensor, "... pos"]) -> Int[Tensor, "K ... pos"]:
    """Rows of the token table T read by each position (``pairs``: cases 2 and 3)."""
    if not pairs:
        return tokens[None]
    pair = tokens < n * n
    key = torch.where(pair, tokens // n, tokens - n * n)
    value = torch.where(pair, n + tokens % n, torch.full_like(tokens, 2 * n))
    return torch.stack([key, value])


# ---------------------------------------------------------------------------------------------
# Parameters of an ensemble, stacked along a leading seed axis.

_LAYER = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")
_MLP = ("W_in", "b_in", "W_out", "b_out")


def check_model(model) -> None:
    """The fast path computes the Section 4 architecture; refuse anything else."""
    cfg = model.cfg
    problems = []
    if cfg.n_heads != 1:
        problems.append(f"n_heads={cfg.n_heads} (accepted: 1)")
    if not cfg.attn_only and cfg.act_fn != "relu":
        problems.append(f"act_fn={cfg.act_fn!r} (accepted: relu)")
    if cfg.normalization_type is not None:
        problems.append(f"normalization_type={cfg.normalization_type!r} (accepted: None)")
    if cfg.attention_dir != "bidirectional":
        problems.append(f"attention_dir={cfg.attention_dir!r} (accepted: bidirectional)")
    if cfg.positional_embedding_type != "standard":
        problems.append(f"positional_embedding_type={cfg.positional_embedding_type!r}")
    if cfg.n_layers not in (1, 2):
        problems.append(f"n_layers={cfg.n_layers} (accepted: 1 or 2)")
    modes = [m[:2] for m in attention.modes(model)]
    if any(m != ("softmax", 1.0) for m in modes):
        problems.append(f"attention modes {modes} (accepted: plain softmax)")
    if problems:
        raise ValueError("the fast path cannot compute this model: " + "; ".join(problems))


def _pos_is_zero(model) -> bool:
    W_pos = model.pos_embed.W_pos
    return not W_pos.requires_grad and not bool(W_pos.any())


def stack_params(models_: list) -> dict:
    """The ensemble's parameters, each stacked to [seed, ...] (autograd reaches the models')."""
    m0 = models_[0]

    def st(get):
        if len(models_) == 1:
            return get(m0).unsqueeze(0)  # a view: the parameter itself
        return torch.stack([get(m) for m in models_])

    pairs = models.has_pair_embedding(m0)
    p = dict(
        T=None if pairs else st(lambda m: m.embed.W_E),
        pairs=(
            (st(lambda m: models.pair_tables(m)[0]),
             st(lambda m: models.pair_tables(m)[1]))
            if pairs else None
        ),
        W_U=st(lambda m: m.unembed.W_U),
        b_U=st(lambda m: m.unembed.b_U),
        pos=None if _pos_is_zero(m0) else st(lambda m: m.pos_embed.W_pos),
        scale=[float(b.attn.attn_scale) for b in m0.blocks],
        layers=[],
    )
    for layer in range(m0.cfg.n_layers):
        ws = {}
        for name in _LAYER:
            t = st(lambda m: getattr(m.blocks[layer].attn, name))
            ws[name] = t.squeeze(1) if name != "b_O" else t  # drop head_index (one head)
        if not m0.cfg.attn_only:
            for name in _MLP:
                ws[name] = st(lambda m: getattr(m.blocks[layer].mlp, name))
        p["layers"].append(ws)
    return p


def model_final_logits(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch n"]:
    """One model's ``model(tokens)[:, -1]`` by the fast path."""
    check_model(model)
    n = model.cfg.d_vocab_out
    J = token_indices(models.has_pair_embedding(model), n, tokens)
    return final_logits(stack_params([model]), J[:, None])[0]


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
        self.K = 2 if cfg0.case in tasks.SAME_POSITION else 1
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
                cfg.case, cfg.n, cfg.batch_size, generator=self.gens[s], function=cfg.function,
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
            v = values[j]
            self.last[s] = v
            if not math.isfinite(v):  # no update from a non-finite loss; the seed stops
                self.status[s] = f"failed: non-finite loss ({v}) at step {step}"
                self.curves[s].append((step, v))
                for p in self.params[s]:
                    p.grad = None
                finished.add(s)
                continue
            self.steps[s] = step
            stop = v < cfg.stop_loss
            if step == 1 or step % cfg.curve_every == 0 or stop or step == cfg.max_steps:
                self.curves[s].append((step, v))
            if stop:
                finished.add(s)
        self.opt.step()
        self.active = [s for s in active if s not in finished]

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


def train_ensemble(
    configs: list, *, models_: list | None = None, device: str = "cpu",
    progress: str | os.PathLike | None = None, every: float = 600.0,
) -> list:
    """Train configs that differ only in seed as one batched ensemble; list of RunResult.

    ``progress`` (a file path, optional): go on from the state saved there if it holds this
    group and passes its checks, and save the state there every ``every`` seconds of wall time
    (:mod:`interp.training.progress`; the caller deletes it once the results are safe).
    Saving is an optimisation: a save that fails (a full disk, ``progress/`` gone or not a
    folder, ...) logs one warning for the group, naming the file and the cause, and training
    goes on; later saves are still tried, silently (space may come back), and the last good
    file, if any, stays in place.
    """
    from interp.training import progress as progress_mod

    ens = Ensemble(configs, models_=models_, device=device)
    if progress is not None:
        progress_mod.resume(ens, progress)
    saved, warned = time.perf_counter(), False
    while not ens.done:
        ens.step()
        if progress is not None and time.perf_counter() - saved >= every and not ens.done:
            try:
                progress_mod.save(ens, progress)
            except Exception as e:  # noqa: BLE001 - no save must cost the run itself
                if not warned:
                    log.warning("could not save progress to %s (%s: %s); training goes on "
                                "without it", progress, type(e).__name__, e)
                    warned = True
            saved = time.perf_counter()
    return ens.results()
