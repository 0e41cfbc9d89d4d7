"""A training step the host does not wait on: the whole step on the device, captured once.

:class:`GraphEnsemble` trains what :class:`~interp.training.fast_ensemble.Ensemble` trains, with
the same data, stopping rule, curves and results, but its step (:meth:`GraphEnsemble._body`:
forward, backward, Adam, the stopping test) reads and writes only tensors that stay in place
(static buffers) and never reads a value back, so on CUDA it is captured once in a CUDA graph
(:class:`torch.cuda.CUDAGraph`) and replayed. On the CPU the same function runs eagerly, step by
step; that is how the tests check it (``tests/training/test_graph_step.py``).

Static buffers. Every seed is computed at every step (a seed that stopped is masked, not
dropped: the shapes never change). The trainable parameters of all seeds live in one
[seed, N] leaf ``flat`` (each model's parameters are views into its row, so the models are
always current; :class:`Unflatten` hands the step [seed, ...] copies, as ``torch.stack``
would). Adam is the plain ensemble's own fused Adam over the per-seed parameters (so each seed
gets its own Adam's bits: CPU fused Adam rounds a tensor's vectorised body and its tail
differently, so one Adam over ``flat`` would not), with gradients and state that are views
into [seed, N] buffers (and step counts into [seed, parameters]), so that masking a seed is a
few whole-buffer operations.

The stopping rule on the device. Step t's losses [seed] are written to a loss log on the
device; a seed is updated at step t iff it had not stopped and its loss is finite (otherwise
its gradient is zeroed and its parameters and Adam state are put back as they were: Adam moves
a parameter by its momentum even with a zero gradient); it stops at the first step whose loss
is non-finite or below ``stop_loss`` (compared in float64, as the host compares a Python
float), which the device records in ``stop_step``. The host reads the loss log, the flags and
the stop steps back once every ``check_every`` steps (one copy), records the curve points and
statuses exactly as :meth:`Ensemble.step` does, and ends when every seed has stopped or at
``max_steps``; steps replayed after the last seed stopped change nothing (all masked).

Data. Batches are drawn on the host, exactly as the plain ensemble draws them (the same
generators, so a seed sees the same batches as on the CPU), for ``check_every`` steps at a time
into a [steps, K, seed, B, P] block; the step reads its slot by a device-side counter. On CUDA
the next block is drawn while the device runs the current one.

Progress files (:mod:`interp.training.progress`) keep the plain ensemble's format (``opt``
is the same per-seed optimizer); after a resume its state is read back into the buffers
(:meth:`GraphEnsemble.after_resume`), and a save writes the generators' states as of the
last step run, not of a block drawn ahead.
"""

from __future__ import annotations

import contextlib
import logging

import torch
from torch import Tensor

from interp.core import tasks
from interp.training.fast_data import sample_indices
from interp.training.fast_ensemble import Ensemble
from interp.training.fast_math import seed_losses, stack_params

log = logging.getLogger(__name__)

CHECK_EVERY = 50  # steps between the host's reads of the stopping flags


class Unflatten(torch.autograd.Function):
    """The [seed, N] parameter rows as one [seed, *shape] tensor per parameter (copies laid out
    as ``torch.stack`` lays them out); the backward concatenates their gradients into one and
    notes in ``box`` which parameters the loss did not read (no gradient, as for b_K)."""

    @staticmethod
    def forward(ctx, flat, layout, box):
        ctx.layout, ctx.S, ctx.box = layout, flat.shape[0], box
        return tuple(flat[:, a:b].reshape(ctx.S, *shape).clone(memory_format=torch.contiguous_format)
                     for a, b, shape in layout)

    @staticmethod
    def backward(ctx, *grads):
        like = next(g for g in grads if g is not None)
        ctx.box[:] = [i for i, g in enumerate(grads) if g is None]
        parts = [like.new_zeros(ctx.S, b - a) if g is None else g.reshape(ctx.S, b - a)
                 for g, (a, b, _) in zip(grads, ctx.layout)]
        return torch.cat(parts, 1), None, None


class GraphEnsemble(Ensemble):
    """:class:`Ensemble` with a step that never waits on the host (module docstring).

    ``check_every``: steps between the host's reads of the stopping flags (a seed still stops
    at its exact step; larger means fewer reads and up to that many masked steps at the end).
    ``capture``: capture the step in a CUDA graph (default: on CUDA); if capturing fails the
    same step runs eagerly, with a warning. ``draw_ahead`` (default: on CUDA): draw the next
    block of batches while the device runs the current one. Use :meth:`advance` (up to
    ``check_every`` steps) instead of :meth:`step`.
    """

    def __init__(self, configs: list, *, models_: list | None = None, device: str = "cpu",
                 check_every: int = CHECK_EVERY, capture: bool | None = None,
                 draw_ahead: bool | None = None):
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1:
            raise ValueError(f"check_every={check_every!r}; accepted: an integer >= 1")
        super().__init__(configs, models_=models_, batched=True, device=device)
        on_cuda = self.device != "cpu"
        if capture and not on_cuda:
            raise ValueError("capture=True needs a CUDA device; on the CPU the step runs eagerly")
        self.capture = on_cuda if capture is None else capture
        self.draw_ahead = on_cuda if draw_ahead is None else draw_ahead
        self.k = check_every
        cfg, S, dev = self.cfg, len(self.configs), self.device
        # Every slot holds valid indices from the start (a batch from no seed's stream): a seed
        # that stopped is no longer drawn for, but its rows are still computed (masked).
        J, ans = sample_indices(cfg.case, cfg.n, cfg.batch_size, function=cfg.function,
                                generator=torch.Generator().manual_seed(0))
        J = J[None, :, None].expand(self.k, self.K, S, cfg.batch_size, self.P).contiguous()
        ans = ans[None, None].expand(self.k, S, cfg.batch_size).contiguous()
        pin = on_cuda  # page-locked, so that the copies to the device run beside the host
        self.J_host = [J.pin_memory() if pin else J.clone() for _ in range(2)]
        self.ans_host = [ans.pin_memory() if pin else ans.clone() for _ in range(2)]
        self.J_block, self.ans_block = J.to(dev), ans.to(dev)
        self.slot = torch.zeros(1, dtype=torch.int64, device=dev)
        self.t_dev = torch.zeros((), dtype=torch.int64, device=dev)
        self.loss_log = torch.zeros(self.k, S, device=dev)
        self.stopped = torch.zeros(S, dtype=torch.bool, device=dev)
        self.stop_step = torch.zeros(S, dtype=torch.int64, device=dev)
        self.stop_loss = torch.tensor(cfg.stop_loss, dtype=torch.float64, device=dev)
        self.pos_zero = stack_params(self.models[:1])["pos"] is None  # once, on the host
        task = tasks.get(cfg.case)  # the query's position is the task's (a layout may move it)
        self.final_query = task.same_position and task.query_pos(cfg.n) == task.seq_len(cfg.n) - 1
        self.graph = None
        self._ahead = None  # (host buffer, steps) of a block drawn and not yet run
        self._buf = 0
        self._flatten()

    # ------------------------------------------------------------------ parameters

    def _flatten(self) -> None:
        """Every seed's trainable parameters as views into the rows of one [seed, N] leaf
        ``flat``, and their Adam state (the plain ensemble's fused Adam over the same
        per-seed tensors, so each seed's numbers are its own Adam's) as views into [seed, N]
        and [seed, parameters] buffers, so that masking a seed is a few whole-buffer ops."""
        self.layout, a = [], 0
        for p in self.params[0]:
            self.layout.append((a, a + p.numel(), tuple(p.shape)))
            a += p.numel()
        with torch.no_grad():
            rows = [torch.cat([p.reshape(-1) for p in ps]) for ps in self.params]
            self.flat = torch.stack(rows).requires_grad_()
        for s, ps in enumerate(self.params):
            for p, view in zip(ps, self._views(self.flat.detach(), s)):
                p.data = view
        self.unused = self._unused()
        on_cuda = self.device != "cpu"
        if on_cuda:  # capturable: Adam's step counts on the device, read by the captured step
            self.opt = torch.optim.Adam([p for ps in self.params for p in ps], lr=self.cfg.lr,
                                        fused=True, capturable=True)
        self.m, self.v = torch.zeros_like(self.flat.detach()), torch.zeros_like(self.flat.detach())
        self.n_steps = torch.zeros(len(self.params), len(self.layout), device=self.flat.device)
        self._point_state()

    def _views(self, rows: Tensor, s: int) -> list[Tensor]:
        return [rows[s, lo:hi].view(shape) for lo, hi, shape in self.layout]

    def _point_state(self) -> None:
        """Adam's state of every read parameter: views into ``m``, ``v`` and ``n_steps``."""
        self.opt.state.clear()
        for s, ps in enumerate(self.params):
            for i, (p, m, v) in enumerate(zip(ps, self._views(self.m, s), self._views(self.v, s))):
                if i not in self.unused:
                    self.opt.state[p] = {"step": self.n_steps[s, i], "exp_avg": m, "exp_avg_sq": v}

    def _unused(self) -> set[int]:
        """The parameters the loss does not read (one forward and backward, nothing kept)."""
        box: list = []
        views = Unflatten.apply(self.flat, self.layout, box)
        p = stack_params(self.models, leaves={id(q): v for q, v in zip(self.params[0], views)},
                         pos_zero=self.pos_zero)
        seed_losses(p, self.J_block[0], self.ans_block[0]).sum().backward()
        self.flat.grad = None
        return set(box)

    def before_save(self) -> None:
        """Before a progress file is written: the generators' states as of step ``t`` (the
        host may have drawn the next block already)."""
        if self._ahead is not None:
            for g, st in zip(self.gens, self._ahead_states):
                g.set_state(st)

    def after_save(self) -> None:
        if self._ahead is not None:
            for g, st in zip(self.gens, self._drawn_states):
                g.set_state(st)

    def after_resume(self) -> None:
        """After a progress file was read into ``opt`` and the models: its Adam state into the
        buffers, and the device's step counter and stopping flags."""
        with torch.no_grad():
            for s, ps in enumerate(self.params):
                for i, (p, (lo, hi, _)) in enumerate(zip(ps, self.layout)):
                    st = self.opt.state.get(p)
                    if st and i not in self.unused:
                        self.m[s, lo:hi] = st["exp_avg"].reshape(-1)
                        self.v[s, lo:hi] = st["exp_avg_sq"].reshape(-1)
                        self.n_steps[s, i] = float(st["step"])
            self._point_state()
            self.t_dev.fill_(self.t)
            live = torch.zeros(len(self.configs), dtype=torch.bool)
            live[self.active] = True
            self.stopped.copy_(~live)

    # ------------------------------------------------------------------ the step

    def _body(self) -> None:
        """One step on the device for every seed: no host reads, static buffers only."""
        box: list = []
        views = Unflatten.apply(self.flat, self.layout, box)
        p = stack_params(self.models, leaves={id(q): v for q, v in zip(self.params[0], views)},
                         pos_zero=self.pos_zero)
        p["final_query"] = self.final_query  # every batch ends in a query token (pair tables)
        J = self.J_block.index_select(0, self.slot)[0]
        answers = self.ans_block.index_select(0, self.slot)[0]
        losses = seed_losses(p, J, answers)  # [seed]
        live = ~self.stopped
        finite = torch.isfinite(losses)
        ok = live & finite
        self.flat.grad = None
        torch.where(ok, losses, torch.zeros_like(losses)).sum().backward()
        with torch.no_grad():
            keep = ok[:, None]
            grad = self.flat.grad.masked_fill_(~keep, 0.0)
            for s, ps in enumerate(self.params):
                for i, (q, g) in enumerate(zip(ps, self._views(grad, s))):
                    q.grad = None if i in self.unused else g
            old = [t.clone() for t in (self.flat, self.m, self.v, self.n_steps)]
        self.opt.step()
        with torch.no_grad():
            for t, before in zip((self.flat, self.m, self.v, self.n_steps), old):
                t.copy_(torch.where(keep, t, before))  # masked seeds: as they were
            self.loss_log.index_copy_(0, self.slot, losses[None].detach())
            stop = live & (~finite | (losses.detach().double() < self.stop_loss))
            self.t_dev += 1
            self.stop_step.copy_(torch.where(stop, self.t_dev, self.stop_step))
            self.stopped |= stop
            self.slot += 1

    def _replay(self) -> None:
        if self.graph is None and self.capture:
            self._capture()
        if self.graph is not None:
            self.graph.replay()
        else:
            self._body()

    def _capture(self) -> None:
        """Capture one step in a CUDA graph after a warm-up; on any failure, leave the state as
        it was and run eagerly from now on."""
        saved = [(t, t.clone()) for t in self._state()]
        try:
            self.warm_up()
            graph = torch.cuda.CUDAGraph()
            self.flat.grad = None
            with torch.cuda.graph(graph):
                self._body()
            self._restore(saved)
            self.graph = graph
        except Exception as e:  # noqa: BLE001 - the eager step computes the same
            log.warning("could not capture the training step in a CUDA graph (%s: %s); it runs "
                        "eagerly (same results, slower)", type(e).__name__, e)
            self.capture, self.graph = False, None
            self._restore(saved)

    def warm_up(self, steps: int = 3) -> None:
        """Run ``steps`` steps (on CUDA on a side stream, as capturing requires) on the block's
        first batch and put every tensor a step changes back as it was."""
        saved = [(t, t.clone()) for t in self._state()]
        on_cuda = self.device != "cpu"
        side = torch.cuda.Stream(self.device) if on_cuda else None
        if on_cuda:
            side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side) if on_cuda else contextlib.nullcontext():
            for _ in range(steps):
                self.slot.zero_()  # any slot with a batch in it will do: all is put back
                self._body()
        if on_cuda:
            torch.cuda.current_stream(self.device).wait_stream(side)
        self._restore(saved)

    def _state(self) -> list[Tensor]:
        """Every tensor a step changes."""
        return [self.flat.detach(), self.m, self.v, self.n_steps, self.slot, self.t_dev,
                self.loss_log, self.stopped, self.stop_step]

    @staticmethod
    def _restore(saved: list) -> None:
        with torch.no_grad():
            for t, copy in saved:
                t.copy_(copy)

    # ------------------------------------------------------------------ the host's loop

    def _draw(self) -> tuple[int, int] | None:
        """Draw the next block of batches for the live seeds into a host buffer."""
        r = min(self.k, self.cfg.max_steps - self.t - (self._ahead[1] if self._ahead else 0))
        if r <= 0 or not self.active:
            return None
        cfg, buf = self.cfg, self._buf
        self._buf ^= 1
        self._ahead_states = [g.get_state() for g in self.gens]
        J, ans = self.J_host[buf].numpy(), self.ans_host[buf].numpy()  # views: filled in place
        for i in range(r):
            for s in self.active:
                sample_indices(cfg.case, cfg.n, cfg.batch_size, generator=self.gens[s],
                               function=cfg.function, key_order=cfg.key_order, out=(J[i, :, s], ans[i, s]))
        self._drawn_states = [g.get_state() for g in self.gens]
        return buf, r

    def advance(self) -> list[tuple[int, dict[int, float]]]:
        """Run up to ``check_every`` steps, then read the flags back once; returns each step's
        ``(step, {seed index: loss})`` for the seeds that trained in it (as ``on_step`` gets
        them from the plain loop)."""
        if self.done:
            return []
        block = self._ahead or self._draw()
        self._ahead = None
        buf, r = block
        with torch.no_grad():
            self.J_block[:r].copy_(self.J_host[buf][:r], non_blocking=True)
            self.ans_block[:r].copy_(self.ans_host[buf][:r], non_blocking=True)
            self.slot.zero_()
        for _ in range(r):
            self._replay()
        if self.draw_ahead:  # the host draws the next block while the device runs
            self._ahead = self._draw_after(r)
        losses = self.loss_log[:r].cpu().tolist()  # the one read back per block
        stop_step = self.stop_step.cpu().tolist()
        return self._record(losses, r, stop_step)

    def _draw_after(self, r: int):
        self.t += r  # _draw counts from the steps already queued
        try:
            return self._draw()
        finally:
            self.t -= r

    def _record(self, losses: list, r: int, stop_step: list) -> list:
        """The host's bookkeeping for r steps, exactly as :meth:`Ensemble.step` keeps it."""
        out = []
        for i in range(r):
            step = self.t + i + 1
            seen, finished = {}, []
            for s in self.active:
                v = losses[i][s]
                seen[s] = v
                if self.record(s, step, v):
                    finished.append(s)
            for s in finished:
                if stop_step[s] != step:  # the device and the host disagree: never expected
                    raise RuntimeError(f"seed {s} stopped at step {step} on the host and at "
                                       f"{stop_step[s]} on the device")
            self.active = [s for s in self.active if s not in finished]
            out.append((step, seen))
        self.t += r
        return out

    def step(self) -> None:
        raise TypeError("GraphEnsemble runs blocks of steps: call advance()")

    def results(self) -> list:
        """As :meth:`Ensemble.results`; each model gets its own parameter storage back."""
        with torch.no_grad():
            for ps in self.params:
                for p in ps:
                    p.data = p.data.clone()
        return super().results()
