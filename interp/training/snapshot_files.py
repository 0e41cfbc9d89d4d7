"""A run's snapshots on disk: ``<checkpoint folder>/timeline/``, sealed, checked on reading.

``timeline/`` holds ``step-<k>.safetensors`` per kept step and ``manifest.json`` (format tag,
the run's config and name, the steps, the training-batch loss recorded at each, the plateau
exit, how the steps were chosen (``plan``), the sha256 of every file, and ``seal``: the sha256
of every other field, so an edited manifest fails it). :func:`timeline_files` gives those files
as bytes (a sweep's worker ships them to the driver, as it ships the checkpoint);
:func:`place_timeline` writes them as one folder whole or not at all
(:func:`interp.training.files.place_checkpoint`: a temporary sibling, then renames; one a
killed write leaves, ``.timeline.tmp-*``, is named by :func:`stale_temporaries` and removed by
``interp store verify --remove-orphans``); :func:`save_snapshots` is the two together. Loading
(:func:`load_snapshots`) checks the seal, every file against the manifest, and the manifest
against the checkpoint it belongs to (issue 55): its config is the checkpoint's, its last step
is the run's last, its plateau exit is the one the run's recorded curve gives, its losses are
the curve's at the curve steps, and no ``step-*`` file lies there unlisted (a shortened steps
list); any mismatch is a ValueError naming the run folder and the file. A manifest written
before seals is read, and cross-checked alike. A timeline may live elsewhere than in its
checkpoint folder (``into``/``timeline_dir``: ``interp timeline --out`` for a store the user
cannot write); it is checked against the same checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from interp.training.milestones import plateau_exit

FOLDER = "timeline"
MANIFEST = "manifest.json"
FORMAT = "interp-timeline/1"


class SeedSnapshots(dict):
    """One seed's snapshots, ``{step: state_dict}`` (step 0: before training; a state at step k
    is the parameters after k updates), with ``config`` (its TrainConfig), ``losses`` (``{step:
    training-batch loss}``: the loss the loop recorded at step k, computed before the k-th
    update; step 0 takes step 1's, the initial parameters' own; None where not finite) and
    ``plateau_exit`` (:func:`plateau_exit` of its curve, None when the loss never left it) and
    ``plan`` (how the steps were chosen, in words; None for a manifest that does not say)."""

    def __init__(self, states=(), *, config=None, losses=None, plateau_exit=None, plan=None):
        super().__init__(states)
        self.config, self.losses, self.plateau_exit = config, dict(losses or {}), plateau_exit
        self.plan = plan


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


def timeline_files(snapshots: SeedSnapshots) -> dict[str, bytes]:
    """One run's snapshots as the files of its ``timeline/`` folder, ``{file name: bytes}``:
    ``step-<k>.safetensors`` per step and the sealed ``manifest.json``."""
    from safetensors.torch import save

    if not isinstance(snapshots, SeedSnapshots) or snapshots.config is None:
        raise ValueError("a timeline needs one seed's SeedSnapshots (train_with_snapshots' value)")
    files = {file_name(k): save({n: t.contiguous() for n, t in snapshots[k].items()})
             for k in sorted(snapshots)}
    manifest = dict(
        format=FORMAT, run=snapshots.config.name(), config=snapshots.config.to_dict(),
        steps=sorted(int(k) for k in snapshots), plateau_exit=snapshots.plateau_exit,
        losses={str(k): snapshots.losses.get(k) for k in sorted(snapshots)},
        sha256={name: _sha(data) for name, data in files.items()},
    )
    if snapshots.plan is not None:
        manifest["plan"] = snapshots.plan
    manifest["seal"] = manifest_seal(manifest)
    files[MANIFEST] = json.dumps(manifest, indent=1).encode()
    return files


def place_timeline(folder, files: dict[str, bytes], *, into=None) -> Path:
    """Write :func:`timeline_files`' ``files`` to ``folder/timeline/`` (or ``into``), the whole
    folder or nothing; an existing timeline is replaced. Returns its path. An OSError (a full
    disk, a read-only folder) is a ValueError naming the folder."""
    from interp.training.files import place_checkpoint, problem

    target = timeline_dir(folder, into)
    try:
        place_checkpoint(files, target)
    except OSError as e:  # write() names no file: the folder being written is the one to name
        raise ValueError(problem(e.filename or target, e)) from None
    return target


def save_snapshots(folder, snapshots: SeedSnapshots, *, into=None) -> Path:
    """Write one run's snapshots to ``folder/timeline/`` (``folder``: its checkpoint folder; or
    to ``into``): :func:`place_timeline` of :func:`timeline_files`. Returns its path."""
    return place_timeline(folder, timeline_files(snapshots), into=into)


def has_snapshots(folder, into=None) -> bool:
    return (timeline_dir(folder, into) / MANIFEST).is_file()


def saved_steps(folder, into=None) -> list[int]:
    """The steps of the timeline saved for the run folder ``folder`` (or in ``into``), from its
    manifest, sealed and cross-checked against the checkpoint as :func:`load_snapshots` does,
    without reading a snapshot; a ValueError naming the folder and the file otherwise."""
    folder = Path(folder)
    return list(_read_manifest(folder, timeline_dir(folder, into))[1]["steps"])


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
                        losses={k: losses.get(str(k)) for k in steps}, plan=manifest.get("plan"))
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
