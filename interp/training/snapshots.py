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
every file, and ``seal``: the sha256 of every other field, so an edited manifest fails it),
written as one folder whole or not at all (:func:`interp.training.files.place_checkpoint`: a
temporary sibling, then renames; one a killed write leaves, ``.timeline.tmp-*``, is named by
:func:`stale_temporaries` and removed by ``interp store verify --remove-orphans``). Loading checks
the seal, every file against the manifest, and the manifest against the checkpoint it belongs to
(issue 55): its config is the checkpoint's, its last step is the run's last, its plateau exit is
the one the run's recorded curve gives, its losses are the curve's at the curve steps, and no
``step-*`` file lies there unlisted (a shortened steps list); any mismatch is a ValueError naming
the run folder and the file. A manifest written before seals is read, and cross-checked alike.
A timeline may live elsewhere than in its checkpoint folder (``into``/``timeline_dir``: ``interp
timeline --out`` for a store the user cannot write); it is checked against the same checkpoint.
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


def manifest_seal(manifest: dict) -> str:
    """The sha256 of a manifest's fields but ``seal``, as canonical JSON."""
    rest = {k: v for k, v in manifest.items() if k != "seal"}
    return _sha(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode())


def timeline_dir(folder, into=None) -> Path:
    """Where the timeline of the run folder ``folder`` lives: ``into`` when given, else
    ``folder/timeline/``."""
    return Path(into) if into is not None else Path(folder) / FOLDER


def save_snapshots(folder, snapshots: SeedSnapshots, *, into=None) -> Path:
    """Write one run's snapshots to ``folder/timeline/`` (``folder``: its checkpoint folder; or
    to ``into``), the whole folder or nothing; an existing timeline is replaced. Returns its
    path. An OSError (a full disk, a read-only folder) is a ValueError naming the folder."""
    from safetensors.torch import save

    from interp.training.files import place_checkpoint, problem

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
    manifest["seal"] = manifest_seal(manifest)
    files[MANIFEST] = json.dumps(manifest, indent=1).encode()
    target = timeline_dir(folder, into)
    try:
        place_checkpoint(files, target)
    except OSError as e:  # write() names no file: the folder being written is the one to name
        raise ValueError(problem(e.filename or target, e)) from None
    return target


def has_snapshots(folder, into=None) -> bool:
    return (timeline_dir(folder, into) / MANIFEST).is_file()


def stale_temporaries(folder) -> list[Path]:
    """Temporary timeline folders a killed write left in the run folder ``folder``
    (``.timeline.tmp-*``, ``.timeline.old-*``)."""
    try:
        return sorted(p for p in Path(folder).iterdir()
                      if p.name.startswith(f".{FOLDER}.tmp-") or p.name.startswith(f".{FOLDER}.old-"))
    except OSError:
        return []


def load_snapshots(folder, timeline=None) -> SeedSnapshots:
    """The snapshots saved in ``folder/timeline/`` (or ``timeline``), every file checked against
    the manifest (its sha256), the manifest against its seal and against the checkpoint in
    ``folder`` (module docstring); a ValueError naming ``folder`` and the file otherwise."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    folder = Path(folder)
    where = timeline_dir(folder, timeline)
    config, manifest = _read_manifest(folder, where)
    steps, sums, losses = manifest["steps"], manifest["sha256"], manifest.get("losses") or {}
    out = SeedSnapshots(config=config, plateau_exit=manifest.get("plateau_exit"),
                        losses={k: losses.get(str(k)) for k in steps})
    for k in steps:
        name = file_name(k)
        path = where / name
        data = path.read_bytes() if path.is_file() else None
        if data is None or _sha(data) != sums.get(name):
            what = "is missing" if data is None else "does not match the sha256 in its manifest (altered or truncated)"
            raise ValueError(f"run {folder}: snapshot {_shown(folder, where)}/{name} {what}; delete "
                             f"{where} to train the run again with snapshots")
        try:
            out[k] = load(data)
        except SafetensorError as e:
            raise ValueError(f"run {folder}: snapshot {_shown(folder, where)}/{name} is not a safetensors "
                             f"file ({e})") from None
    return out


def _shown(folder: Path, where: Path) -> str:
    """The timeline folder as messages name it: ``timeline`` inside its run folder, else whole."""
    return FOLDER if where == folder / FOLDER else str(where)


def _read_manifest(folder: Path, where: Path):
    """(config, manifest) of the timeline at ``where``, sealed and cross-checked."""
    from interp.training.runs import TrainConfig

    manifest = _manifest(folder, where)
    named = f"run {folder}: {_shown(folder, where)}/{MANIFEST}"
    if "seal" in manifest and manifest["seal"] != manifest_seal(manifest):
        raise ValueError(f"{named} does not match its seal (edited or corrupt); delete {where} "
                         "to train the run again with snapshots")
    try:
        config = TrainConfig.from_dict(manifest["config"])
        steps = [int(k) for k in manifest["steps"]]
        if not isinstance(manifest["sha256"], dict) or not isinstance(manifest.get("losses") or {}, dict):
            raise TypeError("sha256 and losses must be objects")
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{named} is not a timeline manifest ({e})") from None
    manifest["steps"] = steps
    problem = _config_problem(folder, config) or _steps_problem(where, manifest)
    problem = problem or _result_problem(folder, config, manifest)
    if problem is not None:
        raise ValueError(f"{named} {problem}; delete {where} to train the run again with snapshots")
    return config, manifest


def _manifest(folder: Path, where: Path) -> dict:
    path = where / MANIFEST
    if not path.is_file():
        raise ValueError(f"run {folder}: no {_shown(folder, where)}/{MANIFEST} (no snapshots saved)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"run {folder}: {_shown(folder, where)}/{MANIFEST} is truncated or corrupt ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"run {folder}: {_shown(folder, where)}/{MANIFEST} is not an {FORMAT} file")
    return manifest


def _config_problem(folder: Path, config) -> str | None:
    """The manifest's config is the checkpoint's (where ``folder`` holds a checkpoint with one)."""
    from interp.training.runs import TrainConfig

    stored = _meta(folder).get("train_config")
    if stored is not None and TrainConfig.from_dict(stored) != config:
        return f"holds the snapshots of another run ({config.label()}), not this checkpoint's"
    return None


def _meta(folder: Path) -> dict:
    from interp.training import checkpoints

    return checkpoints.read_meta(folder) if (folder / checkpoints.CONFIG).is_file() else {}


def _steps_problem(where: Path, manifest: dict) -> str | None:
    """Steps sorted, unique, from 0, each with its file; no ``step-*`` file left unlisted."""
    steps = manifest["steps"]
    if not steps or steps != sorted(set(steps)) or steps[0] != 0:
        return f"lists steps {steps[:6]}...: accepted: sorted, distinct, from step 0"
    listed = {file_name(k) for k in steps}
    unlisted = sorted(p.name for p in where.glob("step-*.safetensors") if p.name not in listed)
    if unlisted:
        return f"does not list {unlisted[0]}, which lies beside it (a shortened steps list)"
    return None


def _result_problem(folder: Path, config, manifest: dict) -> str | None:
    """The manifest against the run's recorded result (``config.json``'s ``result``: its steps
    and curve): the last step, the plateau exit, the losses at the curve steps."""
    result = _meta(folder).get("result")
    if not isinstance(result, dict):
        return None
    steps = manifest["steps"]
    if result.get("steps") is not None and steps[-1] != int(result["steps"]):
        return f"ends at step {steps[-1]}, the run at step {int(result['steps'])}"
    curve = [(int(s), v) for s, v in result.get("curve") or []]
    if not curve:
        return None
    exit_step = plateau_exit(curve, config.n)
    if manifest.get("plateau_exit") != exit_step:
        return f"says plateau exit {manifest.get('plateau_exit')!r}, the run's curve {exit_step!r}"
    at = dict(curve)
    losses = manifest.get("losses") or {}
    for k in steps:
        mine, theirs = losses.get(str(k)), at.get(1 if k == 0 else k)
        if mine is None or theirs is None:
            continue
        if not isinstance(mine, (int, float)) or not math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-12):
            return f"says loss {mine!r} at step {k}, the run's curve {theirs!r}"
    return None
