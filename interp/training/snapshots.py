"""Snapshots through training: a run's parameters at chosen steps, kept without changing its bits.

:func:`train_with_snapshots` trains a group of seeds with the sweep's own call,
:func:`interp.training.trainer.train_group` (the fast engine on the CPU), giving it the initial
models and a callback that copies each seed's parameters (detached clones; reading only, so
training computes the bits a plain ``train_group`` call, hence ``interp sweep``, computes).

Which steps. With ``plan=`` (:mod:`interp.training.snapshot_plans`: every N steps, every curve
point, or exactly given steps per seed, e.g. a run's loss milestones,
:func:`interp.training.milestones.plan`) every planned step is kept. Without one it copies at
step 0 (before training), at every step of a geometric candidate grid (ratio ``grid_ratio`` from
1 to ``max_steps``), and at the curve steps around the loss's plateau exit (a cheap on-line
rule: the last few curve steps before the first curve loss below 0.9 ln(n), and the few after
it); after the run it keeps at most ``keep`` per seed (:func:`choose`): log-spaced over
[0, last step] and the candidates nearest the plateau exit, the first curve step whose training
loss is below :data:`PLATEAU` ln(n) (:func:`plateau_exit`, as
``experiments/timelines/PREDICTIONS.md`` defines it). Either way step 0 and the last step are
kept; the last step's parameters are the trained model's own (a seed's parameters do not change
after its last update).

Memory: every copy is held until the run ends (about 100 per seed at 10,000 steps without a
plan; a plan's count with one: ``max_steps / N`` for every N steps, ``max_steps / curve_every``
for the curve); the models this is for (n <= 100, one or two layers) hold kilobytes to a few
megabytes each.

Files: :mod:`interp.training.snapshot_files` (``<checkpoint folder>/timeline/``, a sealed
manifest, written whole or not at all, checked on reading), whose names are re-exported here.
"""

from __future__ import annotations

import abc
import math
from collections import deque

from interp.training.milestones import PLATEAU, plateau_exit  # noqa: F401 - the plateau exit's home
from interp.training.snapshot_files import (  # noqa: F401 - the files' API, re-exported
    FOLDER, FORMAT, MANIFEST, SeedSnapshots, file_name, has_snapshots, load_snapshots, manifest_seal,
    place_timeline, save_snapshots, saved_steps, stale_temporaries, timeline_dir, timeline_files,
)

#: curve steps kept on each side of the plateau exit as the loop sees it
AROUND = 3


def candidate_steps(max_steps: int, ratio: float = 1.1) -> list[int]:
    """The geometric grid: ``round(ratio ** k)`` from 1 to ``max_steps`` (every step while they
    are closer than 1), and ``max_steps``."""
    if not ratio > 1:
        raise ValueError(f"grid_ratio={ratio!r}; accepted: a number > 1")
    steps, x = {max_steps}, 1.0
    while x <= max_steps:
        steps.add(int(round(x)))
        x *= ratio
    return sorted(s for s in steps if 1 <= s <= max_steps)


def choose(steps, last: int, exit_step: int | None, keep: int = 20) -> list[int]:
    """At most ``keep`` of the candidate ``steps`` (which hold 0 and ``last``): 0 and ``last``,
    the ``keep // 3`` nearest ``exit_step`` (when there is one), and the rest log-spaced over
    [0, last] (the candidate nearest each of the points ``(last + 1) ** (i / m) - 1``, by log
    distance); sorted."""
    if keep < 2:
        raise ValueError(f"keep={keep!r}; accepted: an integer >= 2")
    pool = sorted({int(s) for s in steps if 0 <= s <= last} | {0, last})
    chosen = {0, last}
    if exit_step is not None:
        near = sorted(pool, key=lambda s: (abs(s - exit_step), s))
        chosen.update(near[: max(0, min(keep // 3, keep - len(chosen)))])
    room = keep - len(chosen)
    for i in range(1, room + 1):
        if len(chosen) >= keep:
            break
        target = math.log1p(last) * i / (room + 1)
        free = [s for s in pool if s not in chosen]
        if not free:
            break
        chosen.add(min(free, key=lambda s: (abs(math.log1p(s) - target), s)))
    return sorted(chosen)


def _clone(model) -> dict:
    return {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}


class _Copies(abc.ABC):
    """What every recorder keeps: each seed's states (``{step: state_dict}``, step 0 now) and
    the loss of every step (None where not finite); called as ``train_group``'s callback,
    ``(step, {seed: loss})``, after the step's update. Reads only."""

    def __init__(self, configs, models):
        self.models, self.index = models, {c.seed: i for i, c in enumerate(configs)}
        cfg = configs[0]
        self.every, self.stop, self.max = cfg.curve_every, cfg.stop_loss, cfg.max_steps
        self.states = [{0: _clone(m)} for m in models]
        self.losses = [{} for _ in models]

    def __call__(self, step: int, losses: dict) -> None:
        for seed, v in losses.items():
            s = self.index[seed]
            finite = math.isfinite(v)
            self.losses[s][step] = v if finite else None
            if finite:  # no update was made from a non-finite loss
                curve = step == 1 or step % self.every == 0 or v < self.stop or step == self.max
                self.seen(s, seed, step, v, curve)

    @abc.abstractmethod
    def seen(self, s: int, seed: int, step: int, v: float, curve: bool) -> None:
        """Called for each finite step of seed ``seed`` (index ``s``): copy its state if wanted."""


class _Planned(_Copies):
    """Copies each seed's state at the steps ``plan`` wants."""

    def __init__(self, configs, models, plan):
        super().__init__(configs, models)
        self.plan = plan

    def seen(self, s, seed, step, v, curve):
        if self.plan.wants(seed, step, curve):
            self.states[s][step] = _clone(self.models[s])


class _Recorder(_Copies):
    """Copies each seed's state at the grid's steps and around the plateau exit as it sees it."""

    def __init__(self, configs, models, grid):
        super().__init__(configs, models)
        self.grid, self.bound = set(grid), PLATEAU * math.log(configs[0].n)
        self.before = [deque(maxlen=AROUND) for _ in models]  # the last curve steps' states
        self.after = [None] * len(models)  # curve steps still to keep after the exit

    def seen(self, s, seed, step, v, curve):
        state = _clone(self.models[s]) if step in self.grid or (curve and self.after[s] != 0) else None
        if step in self.grid:
            self.states[s][step] = state
        if not curve or self.after[s] == 0:
            return
        if self.after[s] is None and v < self.bound:  # the exit, as the loop sees it
            for k, old in self.before[s]:
                self.states[s][k] = old
            self.states[s][step], self.after[s] = state, AROUND
        elif self.after[s] is None:
            self.before[s].append((step, state))
        else:
            self.states[s][step] = state
            self.after[s] -= 1


def train_with_snapshots(configs, *, models_=None, grid_ratio: float = 1.1, keep: int = 20, plan=None):
    """Train ``configs`` (differing only in seed) with the fast engine on the CPU, keeping
    snapshots; ``(results, {seed: SeedSnapshots})``.

    Training is :func:`interp.training.trainer.train_group`'s (the same call a sweep makes),
    so ``results`` equal a plain ``train_group`` call's bit for bit (models, curves,
    accuracies; times aside). ``models_`` (optional): the initial models, trained in place
    (default: ``init_model`` of each config). ``plan`` (:mod:`interp.training.snapshot_plans`,
    checked against the configs before anything trains): the steps to keep, all of them; None:
    at most ``keep`` per seed (:func:`choose`). Step 0 and the last step are always kept.
    """
    from interp.core import limits
    from interp.training import trainer
    from interp.training.runs import init_model

    configs = list(configs)
    _check_group(configs)
    if plan is not None:
        from interp.training.snapshot_plans import check_memory

        plan.check(configs)
        check_memory(plan, configs)
    elif keep < 2:
        raise ValueError(f"keep={keep!r}; accepted: an integer >= 2")
    limits.check_trainable(configs[0], seeds=len(configs))
    models = [init_model(c) for c in configs] if models_ is None else list(models_)
    if len(models) != len(configs):
        raise ValueError(f"models_ holds {len(models)} models for {len(configs)} configs")
    if plan is None:
        recorder = _Recorder(configs, models, candidate_steps(configs[0].max_steps, grid_ratio))
    else:
        recorder = _Planned(configs, models, plan)
    results = trainer.train_group(configs, models_=models, callback=recorder)
    out = {}
    for s, r in enumerate(results):
        states, losses = recorder.states[s], recorder.losses[s]
        states[r.steps] = _clone(r.model)
        exit_step = plateau_exit(r.curve, r.config.n)
        steps = sorted(states) if plan is not None else choose(states, r.steps, exit_step, keep)
        kept = {k: losses.get(k) for k in steps}
        kept[0] = losses.get(1)
        label = plan.label() if plan is not None else f"at most {keep}: log-spaced, around the plateau exit"
        out[r.config.seed] = SeedSnapshots({k: states[k] for k in steps}, config=r.config,
                                           losses=kept, plateau_exit=exit_step, plan=label)
    _check_planned(plan, out)
    return results, out


def _check_planned(plan, out) -> None:
    """A plan of exact steps (:class:`interp.training.snapshot_plans.At`) must find each of
    them: a step past a run's end (its curve said it trained that far) is named."""
    from interp.training.snapshot_plans import At

    if not isinstance(plan, At):
        return
    for seed, snaps in out.items():
        missing = sorted(set(plan.steps[seed]) - set(snaps))
        if missing:
            raise ValueError(f"run {snaps.config.name()}: no snapshot at step {missing[0]} (it trained "
                             f"{max(snaps)} steps): the planned steps do not fit this run")


def has_milestones(folder, config, curve, names, into=None) -> bool:
    """Whether the timeline saved for the run folder ``folder`` (or in ``into``) holds a
    snapshot at each of milestones ``names`` of the run's ``curve``
    (:func:`interp.training.milestones.steps_for`: a ValueError, before any training, naming a
    milestone the curve never reaches); False without a saved timeline."""
    from interp.training.milestones import steps_for

    wanted = steps_for(config, curve, names)
    return has_snapshots(folder, into) and set(wanted) <= set(saved_steps(folder, into))


def _check_group(configs) -> None:
    from interp.training.runs import TrainConfig

    if not configs or not all(isinstance(c, TrainConfig) for c in configs):
        raise ValueError("configs: accepted a non-empty list of TrainConfig")
    base = configs[0].replace(seed=0)
    if any(c.replace(seed=0) != base for c in configs) or len({c.seed for c in configs}) != len(configs):
        raise ValueError("train_with_snapshots needs configs that differ only in seed, each seed once")
