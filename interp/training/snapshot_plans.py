"""Snapshot plans: at which steps a run's parameters are copied while it trains.

:func:`interp.training.snapshots.train_with_snapshots` takes ``plan=`` one of these (None: its
own choice, at most ``keep`` snapshots around the plateau exit). Every plan also keeps step 0
(before training) and each run's last step (the trained model, so a timeline ends at its
checkpoint). A step k's snapshot is the parameters after k updates; a step whose loss is not
finite made no update and is never a snapshot.

=========================  =====================================================================
:class:`Every` ``(N)``     every N-th step (N, 2N, ...): ``interp sweep --snapshots N``
:class:`Dense` ``(N, U,    every N-th step up to step U, then every M-th (dense while a run
M)``                       forms, sparse after): ``interp sweep --snapshots N:U:M``
:class:`Curve` ``()``      every point of the loss curve (step 1, every ``curve_every`` steps, the
                           last step): ``interp sweep --snapshots curve``; it holds every
                           loss milestone (:mod:`interp.training.milestones`)
:class:`At` ``({seed:      exactly these steps, per seed (:func:`interp.training.milestones.plan`:
steps})``                  a run's milestones, to train it again at)
=========================  =====================================================================

:func:`parse` reads the command line's value; :meth:`check` refuses, by name, a plan that
cannot apply to the runs (an interval <= 0 or beyond a run's ``max_steps``, a step outside
``[1, max_steps]``, a seed the plan does not name), before any training; :func:`check_memory`
one whose copies, held until their group ends, would not fit half this machine's memory.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the command line's word for :class:`Curve`
CURVE = "curve"
ACCEPTED = (f"a whole number N >= 1 (a snapshot every N steps), N:U:M (every N steps up to step U, "
            f"then every M; N <= U, U a multiple of N) or {CURVE!r} (every point of the loss curve)")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class Every:
    """A snapshot every ``interval`` steps."""

    interval: int

    def __post_init__(self):
        if not _is_int(self.interval) or self.interval < 1:
            raise ValueError(f"snapshot interval {self.interval!r}; accepted: {ACCEPTED}")

    def wants(self, seed: int, step: int, curve_point: bool) -> bool:
        return step % self.interval == 0

    def check(self, configs) -> None:
        for c in configs:
            if self.interval > c.max_steps:
                raise ValueError(f"snapshot interval {self.interval} is beyond run {c.name()} ({c.label()}), "
                                 f"which trains at most {c.max_steps} steps; accepted: 1 to {c.max_steps}, "
                                 f"or {CURVE!r}")

    def count(self, config) -> int:
        return config.max_steps // self.interval + 2

    def label(self) -> str:
        return f"every {self.interval} steps"

    def value(self):
        return self.interval


@dataclass(frozen=True)
class Dense:
    """A snapshot every ``interval`` steps up to step ``until``, then every ``then`` steps."""

    interval: int
    until: int
    then: int

    def __post_init__(self):
        ok = all(_is_int(x) and x >= 1 for x in (self.interval, self.until, self.then))
        if not ok or self.until < self.interval or self.until % self.interval:
            raise ValueError(f"snapshots {self.interval!r}:{self.until!r}:{self.then!r}; accepted: {ACCEPTED}")

    def wants(self, seed: int, step: int, curve_point: bool) -> bool:
        return step % (self.interval if step <= self.until else self.then) == 0

    def check(self, configs) -> None:
        for c in configs:
            if self.until > c.max_steps:
                raise ValueError(f"snapshots {self.value()}: step {self.until} is beyond run {c.name()} "
                                 f"({c.label()}), which trains at most {c.max_steps} steps; accepted: "
                                 f"U from N to {c.max_steps}")

    def count(self, config) -> int:
        return self.until // self.interval + config.max_steps // self.then + 2

    def label(self) -> str:
        return f"every {self.interval} steps to step {self.until}, then every {self.then}"

    def value(self):
        return f"{self.interval}:{self.until}:{self.then}"


@dataclass(frozen=True)
class Curve:
    """A snapshot at every point of the loss curve."""

    def wants(self, seed: int, step: int, curve_point: bool) -> bool:
        return curve_point

    def check(self, configs) -> None:
        return None  # every run has a curve (step 1 at least)

    def count(self, config) -> int:
        return config.max_steps // config.curve_every + 3

    def label(self) -> str:
        return "every curve point"

    def value(self):
        return CURVE


@dataclass(frozen=True)
class At:
    """Snapshots at exactly ``steps[seed]`` (a tuple of steps >= 1 per seed)."""

    steps: dict

    def wants(self, seed: int, step: int, curve_point: bool) -> bool:
        return step in self.steps[seed]

    def check(self, configs) -> None:
        for c in configs:
            if c.seed not in self.steps:
                raise ValueError(f"snapshot steps name no steps for run {c.name()} (seed {c.seed}); "
                                 f"accepted: steps for each seed of the group {sorted(self.steps)}")
            bad = [k for k in self.steps[c.seed] if not _is_int(k) or not 1 <= k <= c.max_steps]
            if bad:
                raise ValueError(f"snapshot step {bad[0]!r} for run {c.name()} ({c.label()}); accepted: "
                                 f"whole numbers from 1 to its max_steps {c.max_steps}")

    def count(self, config) -> int:
        return len(self.steps.get(config.seed, ())) + 2

    def label(self) -> str:
        return "at chosen steps"

    def value(self):
        return {int(k): list(v) for k, v in self.steps.items()}


def parse(value) -> Every | Dense | Curve | None:
    """The plan ``interp sweep --snapshots VALUE`` asks for: an integer (or its text) N ->
    :class:`Every` (N); ``N:U:M`` -> :class:`Dense`; ``curve`` -> :class:`Curve`; None -> None
    (no snapshots). A ValueError naming the value and what is accepted otherwise."""
    if value is None or isinstance(value, (Every, Dense, Curve)):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == CURVE:
            return Curve()
        if text.count(":") == 2:
            try:
                return Dense(*(int(x) for x in text.split(":")))
            except ValueError:
                raise ValueError(f"--snapshots {value!r}; accepted: {ACCEPTED}") from None
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"--snapshots {value!r}; accepted: {ACCEPTED}") from None
    if not _is_int(value) or value < 1:
        raise ValueError(f"--snapshots {value!r}; accepted: {ACCEPTED}")
    return Every(value)


def check_memory(plan, group) -> None:
    """A ValueError, before any training, when ``plan``'s copies of the seeds of ``group`` (one
    group: configs that differ only in seed), held until the group ends and then once more as
    files, would need more than half this machine's memory; it names the need and what fits."""
    from interp.core import fields, limits, models

    c = group[0]
    spec = {f: getattr(c, f) for f in fields.infos(models.ModelSpec) if f not in ("case", "n", "d_token")}
    spec["batch_size"] = 0  # parameters only: 4 copies (weights, gradients, 2 Adam moments) of 4 bytes
    one = limits.train_step_bytes(c.case, c.n, c.d_token, **spec) // 4
    need = 2 * one * sum(plan.count(x) for x in group)
    have = limits.memory_bytes()
    if have and need > have // 2:
        fits = max(1, (have // 2) // (2 * one * len(group)))
        raise ValueError(f"--snapshots {plan.value()}: {plan.count(c)} snapshots per seed of {c.label().rsplit(' seed', 1)[0]} "
                         f"x {len(group)} seeds need ~{need / 2**30:,.1f} GiB held in memory; this machine has "
                         f"{have / 2**30:.1f} GiB; accepted: at most half of it, about {fits} snapshots per seed "
                         "(a larger interval)")
