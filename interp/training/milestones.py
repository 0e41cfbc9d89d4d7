"""Loss milestones: the steps of a run's recorded curve where its loss passes a landmark.

A run's curve (``[(step, loss), ...]``: step 1, every ``curve_every`` steps, the last step;
the training-batch loss recorded before that step's update, as :class:`interp.training.runs.RunResult`
keeps it) is read against ``ln(n)``, the loss of a uniform guess over the n answers (a fresh
model's loss is close to it). Every milestone is a curve step, so a sweep trained with
``--snapshots curve`` already holds a snapshot at each; otherwise :func:`plan` gives the steps
to train a run again at (:func:`interp.training.snapshots.train_with_snapshots` with ``plan=``),
and :func:`interp.training.snapshots.has_milestones` says whether a saved timeline has them.

=================  ================================================================================
``plateau_exit``   the first curve step whose loss is below :data:`PLATEAU` ln(n) (0.9: as
                   ``experiments/timelines/PREDICTIONS.md`` defines the plateau exit, and as
                   every timeline records it: :func:`plateau_exit`, which
                   :mod:`interp.training.snapshots` re-exports)
``half_loss``      the first curve step whose loss is below :data:`HALF` ln(n) (0.5)
``low_loss``       the first curve step whose loss is below :data:`LOW` ln(n) (0.1)
``steepest_drop``  the end of the steepest fall: the *regular* curve points (steps that are
                   multiples of ``curve_every``, so neither step 1, the initial model's loss,
                   nor a last step the stopping rule picked for its low loss) are smoothed by a
                   running median of three (each point with its two neighbours: one noisy
                   training batch moves no point; the first and last regular points drop out),
                   and the milestone is the later step of the consecutive pair whose smoothed
                   loss falls the most; reached only when that fall is at least :data:`DROP`
                   ln(n) (0.05), else the curve has no drop to name (the earliest pair on ties)
=================  ================================================================================

A non-finite loss never passes a landmark. A milestone the curve never reaches is None in
:func:`milestones`; :func:`plan` refuses it by name (the run, the milestone, what its curve
reached), before any training.
"""

from __future__ import annotations

import math

#: the plateau exit: the first curve step whose loss is below this fraction of ln(n)
PLATEAU = 0.9
#: half-loss: ... below this fraction of ln(n)
HALF = 0.5
#: low loss: ... below this fraction of ln(n)
LOW = 0.1
#: the least fall (a fraction of ln(n)) between two regular curve points that counts as a drop
DROP = 0.05
#: the milestones, in the order they are reported
NAMES = ("plateau_exit", "half_loss", "steepest_drop", "low_loss")
_BELOW = {"plateau_exit": PLATEAU, "half_loss": HALF, "low_loss": LOW}


def _finite(curve):
    return [(int(s), float(v)) for s, v in curve if v is not None and math.isfinite(v)]


def first_below(curve, n: int, fraction: float) -> int | None:
    """The first step of ``curve`` whose loss is below ``fraction`` ln(n); None when none is."""
    bound = fraction * math.log(n)
    return next((s for s, v in _finite(curve) if v < bound), None)


def plateau_exit(curve, n: int) -> int | None:
    """The first step of ``curve`` (``[(step, loss), ...]``) whose loss is below
    :data:`PLATEAU` ln(n); None when there is none."""
    return first_below(curve, n, PLATEAU)


def steepest_drop(curve, n: int, curve_every: int) -> int | None:
    """The later step of the consecutive regular curve points (multiples of ``curve_every``,
    each smoothed by the median of itself and its two neighbours) whose smoothed loss falls
    the most, when it falls by at least :data:`DROP` ln(n); else None."""
    regular = [(s, v) for s, v in _finite(curve) if s % curve_every == 0]
    smooth = [(s, sorted((a, v, b))[1]) for (_, a), (s, v), (_, b) in zip(regular, regular[1:], regular[2:])]
    best, fall = None, DROP * math.log(n)
    for (s0, v0), (s1, v1) in zip(smooth, smooth[1:]):
        if s1 - s0 == curve_every and v0 - v1 >= fall:
            best, fall = s1, v0 - v1
    return best


def milestones(curve, config) -> dict[str, int | None]:
    """``{name: step or None}`` for every milestone of :data:`NAMES` on ``curve``, the curve of
    a run of ``config`` (its ``n`` and ``curve_every``)."""
    out = {name: first_below(curve, config.n, f) for name, f in _BELOW.items()}
    out["steepest_drop"] = steepest_drop(curve, config.n, config.curve_every)
    return {name: out[name] for name in NAMES}


def check_names(names) -> tuple[str, ...]:
    """``names`` (an iterable, or one comma-separated string; ``all``: every milestone) as a
    tuple of known milestones; a ValueError naming an unknown one and the accepted ones."""
    if isinstance(names, str):
        names = [x.strip() for x in names.split(",") if x.strip()]
    names = list(names)
    if names == ["all"]:
        return NAMES
    for name in names:
        if name not in NAMES:
            raise ValueError(f"milestone {name!r}; accepted: one or more of {', '.join(NAMES)}, or all")
    if not names:
        raise ValueError(f"no milestone named; accepted: one or more of {', '.join(NAMES)}, or all")
    return tuple(dict.fromkeys(names))


def steps_for(config, curve, names) -> list[int]:
    """The steps of milestones ``names`` on the curve of the run of ``config``, sorted; a
    ValueError naming the run and the first milestone its curve never reaches."""
    names = check_names(names)
    found = milestones(curve, config)
    for name in names:
        if found[name] is None:
            raise ValueError(f"run {config.name()} ({config.label()}): milestone {name} is never "
                             f"reached by its curve ({_what(name, curve, config)}); accepted: the "
                             f"milestones it reaches: {[k for k, v in found.items() if v is not None]}")
    return sorted({found[name] for name in names})


def _what(name: str, curve, config) -> str:
    finite = _finite(curve)
    if not finite:
        return "no finite loss"
    ln = math.log(config.n)
    if name == "steepest_drop":
        return f"no fall of {DROP} ln n = {DROP * ln:.4g} between regular points {config.curve_every} steps apart"
    low_step, low = min(finite, key=lambda p: (p[1], p[0]))
    return f"loss < {_BELOW[name]} ln n = {_BELOW[name] * ln:.4g} needed, lowest {low:.4g} at step {low_step}"


def plan(runs, names):
    """The snapshot plan that trains a group of runs again with snapshots at exactly their
    milestones ``names``: ``runs`` is ``[(config, curve), ...]`` (the seeds of one group, each
    with its recorded curve); returns an :class:`interp.training.snapshot_plans.At`. Every run
    is checked before it returns (:func:`steps_for`), so nothing trains for a plan that cannot
    apply."""
    from interp.training.snapshot_plans import At

    return At({config.seed: tuple(steps_for(config, curve, names)) for config, curve in runs})
