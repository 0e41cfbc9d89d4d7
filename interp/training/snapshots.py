"""Snapshots through training: a run's parameters at chosen steps, kept without changing its bits.

:func:`train_with_snapshots` trains a group of seeds with the fast engine
(:func:`interp.training.fast_train.train_ensemble`) and, from the loop's per-step callback,
copies each seed's parameters (detached clones; reading only, so training computes the same
bits as :func:`interp.training.trainer.train_group`) at step 0 (before training), at every step
of a geometric candidate grid (ratio ``grid_ratio`` from 1 to ``max_steps``), and at the curve
steps around the loss's plateau exit (a cheap on-line rule: the last few curve steps before the
first curve loss below 0.9 ln(n), and the few after it). The last step's parameters are the
trained model's own (a seed's parameters do not change after its last update). After the run it
keeps at most ``keep`` per seed (:func:`choose`): log-spaced over [0, last step] and the
candidates nearest the plateau exit, the first curve step whose training loss is below
:data:`PLATEAU` ln(n) (:func:`plateau_exit`, as ``experiments/timelines/PREDICTIONS.md`` defines it).

Memory: every candidate is held until the run ends (about 100 per seed at 10,000 steps); the
models this is for (n <= 100, one or two layers) hold kilobytes to a few megabytes each.

Files (:func:`save_snapshots`, :func:`load_snapshots`): ``<checkpoint folder>/timeline/`` holds
``step-<k>.safetensors`` per kept step and ``manifest.json`` (format tag, the run's config and
name, the steps, the training-batch loss recorded at each, the plateau exit, and the sha256 of
every file), written as one folder whole or not at all
(:func:`interp.training.files.place_checkpoint`: a temporary sibling, then renames). Loading
checks every file against the manifest and the manifest's config against the checkpoint's, and
refuses any mismatch by a ValueError naming the run folder and the file.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import deque
from pathlib import Path


#: the plateau exit: the first curve step whose loss is below this fraction of ln(n)
PLATEAU = 0.9
FOLDER = "timeline"
MANIFEST = "manifest.json"
FORMAT = "interp-timeline/1"
#: curve steps kept on each side of the plateau exit as the loop sees it
AROUND = 3


class SeedSnapshots(dict):
    """One seed's snapshots, ``{step: state_dict}`` (step 0: before training; a state at step k
    is the parameters after k updates), with ``config`` (its TrainConfig), ``losses`` (``{step:
    training-batch loss}``: the loss the loop recorded at step k, computed before the k-th
    update; step 0 takes step 1's, the initial parameters' own; None where not finite) and
    ``plateau_exit`` (:func:`plateau_exit` of its curve, None when the loss never left it)."""

    def __init__(self, states=(), *, config=None, losses=None, plateau_exit=None):
        super().__init__(states)
        self.config, self.losses, self.plateau_exit = config, dict(losses or {}), plateau_exit


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


def plateau_exit(curve, n: int) -> int | None:
    """The first step of ``curve`` (``[(step, loss), ...]``) whose loss is below
    :data:`PLATEAU` ln(n); None when there is none."""
    bound = PLATEAU * math.log(n)
    return next((int(s) for s, v in curve if v is not None and math.isfinite(v) and v < bound), None)


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


class _Recorder:
    """The loop's ``on_step``: copies each seed's state at the grid's steps and around the
    plateau exit as it sees it; records every step's losses; reads only."""

    def __init__(self, configs, models, grid):
        self.models, self.grid, self.n = models, set(grid), configs[0].n
        cfg = configs[0]
        self.every, self.stop, self.max = cfg.curve_every, cfg.stop_loss, cfg.max_steps
        self.bound = PLATEAU * math.log(self.n)
        self.states = [{0: _clone(m)} for m in models]
        self.losses = [{} for _ in models]
        self.before = [deque(maxlen=AROUND) for _ in models]  # the last curve steps' states
        self.after = [None] * len(models)  # curve steps still to keep after the exit

    def __call__(self, step: int, losses: dict) -> None:
        for s, v in losses.items():
            finite = math.isfinite(v)
            self.losses[s][step] = v if finite else None
            if not finite:
                continue  # no update was made from a non-finite loss
            curve = step == 1 or step % self.every == 0 or v < self.stop or step == self.max
            state = _clone(self.models[s]) if step in self.grid or (curve and self.after[s] != 0) else None
            if step in self.grid:
                self.states[s][step] = state
            if not curve or self.after[s] == 0:
                continue
            if self.after[s] is None and v < self.bound:  # the exit, as the loop sees it
                for k, old in self.before[s]:
                    self.states[s][k] = old
                self.states[s][step], self.after[s] = state, AROUND
            elif self.after[s] is None:
                self.before[s].append((step, state))
            else:
                self.states[s][step] = state
                self.after[s] -= 1


def train_with_snapshots(configs, *, models_=None, grid_ratio: float = 1.1, keep: int = 20):
    """Train ``configs`` (differing only in seed) with the fast engine on the CPU, keeping
    snapshots; ``(results, {seed: SeedSnapshots})``.

    ``results`` equal :func:`interp.training.trainer.train_group`'s bit for bit (models,
    curves, accuracies; times aside). ``models_`` (optional): the initial models, trained in
    place (default: ``init_model`` of each config). Per seed at most ``keep`` snapshots
    (:func:`choose`), step 0 and the last step always among them.
    """
    from interp.core import limits
    from interp.training import fast_train, trainer
    from interp.training.runs import init_model

    configs = list(configs)
    _check_group(configs)
    models = [init_model(c) for c in configs] if models_ is None else list(models_)
    if len(models) != len(configs):
        raise ValueError(f"models_ holds {len(models)} models for {len(configs)} configs")
    limits.check_trainable(configs[0], seeds=len(configs))
    recorder = _Recorder(configs, models, candidate_steps(configs[0].max_steps, grid_ratio))
    with trainer.one_thread():
        results = fast_train.train_ensemble(configs, models_=models, on_step=recorder)
    out = {}
    for s, r in enumerate(results):
        states, losses = recorder.states[s], recorder.losses[s]
        states[r.steps] = _clone(r.model)
        exit_step = plateau_exit(r.curve, r.config.n)
        steps = choose(states, r.steps, exit_step, keep)
        kept = {k: losses.get(k) for k in steps}
        kept[0] = losses.get(1)
        out[r.config.seed] = SeedSnapshots({k: states[k] for k in steps}, config=r.config,
                                           losses=kept, plateau_exit=exit_step)
    return results, out


def _check_group(configs) -> None:
    from interp.training.runs import TrainConfig

    if not configs or not all(isinstance(c, TrainConfig) for c in configs):
        raise ValueError("configs: accepted a non-empty list of TrainConfig")
    base = configs[0].replace(seed=0)
    if any(c.replace(seed=0) != base for c in configs) or len({c.seed for c in configs}) != len(configs):
        raise ValueError("train_with_snapshots needs configs that differ only in seed, each seed once")


# --------------------------------------------------------------------------------------- files


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_name(step: int) -> str:
    return f"step-{int(step)}.safetensors"


def save_snapshots(folder, snapshots: SeedSnapshots) -> Path:
    """Write one run's snapshots to ``folder/timeline/`` (``folder``: its checkpoint folder),
    the whole folder or nothing; an existing ``timeline/`` is replaced. Returns its path."""
    from safetensors.torch import save

    from interp.training.files import place_checkpoint

    if not isinstance(snapshots, SeedSnapshots) or snapshots.config is None:
        raise ValueError("save_snapshots needs one seed's SeedSnapshots (train_with_snapshots' value)")
    files = {file_name(k): save({n: t.contiguous() for n, t in snapshots[k].items()})
             for k in sorted(snapshots)}
    manifest = dict(
        format=FORMAT, run=snapshots.config.name(), config=snapshots.config.to_dict(),
        steps=sorted(int(k) for k in snapshots), plateau_exit=snapshots.plateau_exit,
        losses={str(k): snapshots.losses.get(k) for k in sorted(snapshots)},
        sha256={name: _sha(data) for name, data in files.items()},
    )
    files[MANIFEST] = json.dumps(manifest, indent=1).encode()
    target = Path(folder) / FOLDER
    place_checkpoint(files, target)
    return target


def has_snapshots(folder) -> bool:
    return (Path(folder) / FOLDER / MANIFEST).is_file()


def load_snapshots(folder) -> SeedSnapshots:
    """The snapshots saved in ``folder/timeline/``, every file checked against the manifest (its
    sha256) and the manifest's config against the checkpoint's ``config.json`` (when it has
    one); a ValueError naming ``folder`` and the file otherwise."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    from interp.training.runs import TrainConfig

    folder = Path(folder)
    manifest = _manifest(folder)
    try:
        config = TrainConfig.from_dict(manifest["config"])
        steps = [int(k) for k in manifest["steps"]]
        sums, losses = manifest["sha256"], manifest.get("losses") or {}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"run {folder}: {FOLDER}/{MANIFEST} is not a timeline manifest ({e})") from None
    _check_config(folder, config)
    out = SeedSnapshots(config=config, plateau_exit=manifest.get("plateau_exit"),
                        losses={k: losses.get(str(k)) for k in steps})
    for k in steps:
        name = file_name(k)
        path = folder / FOLDER / name
        data = path.read_bytes() if path.is_file() else None
        if data is None or _sha(data) != sums.get(name):
            what = "is missing" if data is None else "does not match the sha256 in its manifest (altered or truncated)"
            raise ValueError(f"run {folder}: snapshot {FOLDER}/{name} {what}; delete {folder / FOLDER} "
                             "to train the run again with snapshots")
        try:
            out[k] = load(data)
        except SafetensorError as e:
            raise ValueError(f"run {folder}: snapshot {FOLDER}/{name} is not a safetensors file ({e})") from None
    return out


def _manifest(folder: Path) -> dict:
    path = folder / FOLDER / MANIFEST
    if not path.is_file():
        raise ValueError(f"run {folder}: no {FOLDER}/{MANIFEST} (no snapshots saved)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"run {folder}: {FOLDER}/{MANIFEST} is truncated or corrupt ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"run {folder}: {FOLDER}/{MANIFEST} is not an {FORMAT} file")
    return manifest


def _check_config(folder: Path, config) -> None:
    """The manifest's config is the checkpoint's (where ``folder`` holds a checkpoint with one)."""
    from interp.training import checkpoints
    from interp.training.runs import TrainConfig

    if not (folder / checkpoints.CONFIG).is_file():
        return
    stored = checkpoints.read_meta(folder).get("train_config")
    if stored is not None and TrainConfig.from_dict(stored) != config:
        raise ValueError(f"run {folder}: {FOLDER}/{MANIFEST} holds the snapshots of another run "
                         f"({config.label()}), not this checkpoint's")
