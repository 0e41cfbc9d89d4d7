"""Progress files: a group of seeds saved mid-training, so that a stopped sweep goes on from there.

A sweep writes a group's rows only when the whole group has trained. A group that trains for
hours (the ``torch-encoder`` reading's two-layer cells on a CPU, anything inside a time-boxed
accelerator call) lost everything when its process ended. With progress saving on, the worker
saves the ensemble's whole state every ``every`` seconds of wall time, and the next run of the
same group (``interp sweep`` again, any later day) starts from the last save:

    <store folder>/progress/<group id>.safetensors

``<group id>`` hashes the group's run names (:func:`group_id`), so a file belongs to exactly one
set of configs. The file is one safetensors file: the tensors are each seed's parameters
(``model.<seed index>.<parameter name>``), Adam's state (``adam.<parameter index>.<key>``) and
each seed's data generator (``generator.<seed index>``); the header's metadata holds, as JSON,
the configs, the step counter, each seed's steps, last loss, status, curve, which seeds are
still live, whether seeds were stacked, the device, the CPU model and MKL branch, and the wall
and CPU seconds so far (a resumed run's ``seconds`` and ``cpu_seconds`` are the totals over all
its pieces; its row's ``started_at`` is when the last piece started). It is written
to a fresh temporary sibling (``O_EXCL | O_NOFOLLOW``: never through a link), fsynced, then
renamed over the old one: a kill at any moment leaves the previous save or the new one.
Loading never unpickles (safetensors and JSON only).

Verified before use. A resumed group's rows are stored as ``ok`` like any other, so a file that
lies (a flipped bit in a weight, an edited step counter or live-seed list) would give runs with
wrong numbers and nothing to tell. So, as checkpoints do, every file carries a sha256
(:func:`digest`: over each tensor's name, dtype, shape and bytes in name order, then the
metadata JSON), stored in the header beside the metadata. :func:`resume` recomputes it, then
validates the metadata against the group (:func:`check`: the configs, the seed count, ``t``
within ``[0, max_steps]``, each seed's steps within ``[0, t]`` and equal to ``t`` for a live
seed, the live-seed list, statuses, curves and seconds of the right types and ranges) and the
tensors against the ensemble (every name, shape and dtype; Adam's step counts equal to their
seed's steps; every value finite), all before a single parameter changes. A file that fails any
check is renamed ``<file>.bad`` (kept for a look, never loaded again) with one warning line
naming it and the reason, and the group starts from step 0 (one file per group is kept, not a
fallback chain: a file that fails costs at most the training done since the group started).
A file without a checksum (written before checksums existed) is refused the same way: metadata
and shape checks cannot see a flipped bit in a weight, so such a file cannot be trusted.

Saving is an optimisation. :func:`save` may fail for reasons of the machine (a full disk, a
file-size limit, ``progress/`` deleted or replaced by a file, permissions); the trainer
(:func:`interp.training.fast_train.train_ensemble`) catches that, warns once per group naming
the file and the cause, and trains on, so the run's result is stored as usual.

Exactness: a group saved at step t and resumed ends with the same bits as one that ran straight
through, when both pieces run on the same device, CPU model and MKL mode (the resumed piece
stacks its seeds exactly as the saved one did; it logs a warning if this process would have
chosen otherwise, or runs on another device or CPU: it then goes on to float rounding).
``tests/training/test_progress.py`` compares every parameter, Adam's state, curves and
accuracies with an uninterrupted run, and a sweep interrupted mid-group with one that was not.

The driver deletes a group's file once the group's rows are committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from interp.training import files

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SUFFIX = ".safetensors"
META_KEY = "interp_progress"  # the header metadata key of the state's JSON
SUM_KEY = "interp_progress_sha256"  # ... and of its sha256 (:func:`digest`)
ADAM_KEYS = ("exp_avg", "exp_avg_sq", "step")


def folder(store_path: str | os.PathLike) -> Path:
    """Progress files live beside the store: ``<store folder>/progress/``."""
    return Path(store_path).parent / "progress"


def group_id(names: Sequence[str]) -> str:
    """A 12-hex-digit id of a group: the hash of its run names (order does not matter)."""
    return hashlib.sha256("-".join(sorted(names)).encode()).hexdigest()[:12]


def path_for(progress_dir: str | os.PathLike, names: Sequence[str]) -> Path:
    return Path(progress_dir) / f"{group_id(names)}{SUFFIX}"


# ------------------------------------------------------------------ an ensemble's state


def snapshot(ens) -> tuple[dict[str, torch.Tensor], dict]:
    """Everything :meth:`Ensemble.step <interp.training.fast_train.Ensemble.step>` depends on:
    tensors (parameters, Adam's state, generators; on the CPU) and JSON-able metadata."""
    import torch

    tensors = {}
    for s, model in enumerate(ens.models):
        for name, p in model.named_parameters():
            tensors[f"model.{s}.{name}"] = p.detach().cpu().contiguous()
    for i, state in ens.opt.state_dict()["state"].items():
        for key, value in state.items():
            tensors[f"adam.{i}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    for s, g in enumerate(ens.gens):
        tensors[f"generator.{s}"] = g.get_state()
    meta = dict(
        configs=[c.to_dict() for c in ens.configs], t=ens.t, steps=ens.steps, last=ens.last,
        status=ens.status, active=ens.active, curves=ens.curves, batched=ens.batched,
        device=ens.device, wall=time.perf_counter() - ens.start,
        cpu=time.process_time() - ens.cpu_start, machine=_machine(),
    )
    return tensors, meta


def _machine() -> dict:
    """What else decides the bits: the CPU model and MKL's reproducibility branch."""
    from interp.training.machine import cpu_model, mkl_branch

    return {"cpu": cpu_model(), "mkl_branch": mkl_branch()}


def digest(tensors: dict[str, torch.Tensor], meta_json: str) -> str:
    """The sha256 a progress file carries: every tensor (name, dtype, shape, bytes; in name
    order), then the metadata JSON exactly as stored. Each piece is length-prefixed, so no two
    different contents hash alike by shifting bytes from one field into the next."""
    import torch

    h = hashlib.sha256()

    def piece(b: bytes) -> None:
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)

    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        piece(name.encode())
        piece(str(t.dtype).encode())
        piece(json.dumps(list(t.shape)).encode())
        piece(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    piece(meta_json.encode())
    return h.hexdigest()


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def check(ens, tensors: dict[str, torch.Tensor], meta) -> None:
    """ValueError naming the first thing in a progress file that does not fit ``ens``'s group.

    The metadata first (configs, seed count, step counters, live seeds, statuses, curves,
    seconds), then every tensor (names, shapes, dtypes, Adam's step counts, finite values):
    a file that passes can be restored without any step failing halfway.
    """
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is a {type(meta).__name__}, not an object")
    missing = {"configs", "t", "steps", "last", "status", "active", "curves", "batched",
               "device", "wall", "cpu"} - set(meta)
    if missing:
        raise ValueError(f"its metadata lacks {sorted(missing)}")
    configs = [c.to_dict() for c in ens.configs]
    S = len(configs)
    if not isinstance(meta["configs"], list) or len(meta["configs"]) != S:
        raise ValueError(f"it holds {_len(meta['configs'])} seeds' configs; this group has {S}")
    if [_filled(c) for c in meta["configs"]] != configs:  # a file from before a field existed still fits
        raise ValueError("it holds other configs than this group's")
    t, max_steps = meta["t"], ens.cfg.max_steps
    if not _int(t) or not 0 <= t <= max_steps:
        raise ValueError(f"its step counter t={t!r} is not an integer in [0, max_steps={max_steps}]")
    for key in ("steps", "last", "status", "curves"):
        if not isinstance(meta[key], list) or len(meta[key]) != S:
            raise ValueError(f"its {key!r} is not a list of {S} (one per seed): {meta[key]!r:.80}")
    steps, status, active = meta["steps"], meta["status"], meta["active"]
    if not all(_int(n) and 0 <= n <= t for n in steps):
        raise ValueError(f"its per-seed steps {steps} are not integers in [0, t={t}]")
    if not all(_number(v) for v in meta["last"]):
        raise ValueError(f"its last losses {meta['last']!r:.80} are not numbers")
    if not all(isinstance(x, str) and (x == "ok" or x.startswith("failed: ")) for x in status):
        raise ValueError(f"its statuses {status!r:.80} are not 'ok' or 'failed: ...'")
    if (not isinstance(active, list) or not all(_int(s) and 0 <= s < S for s in active)
            or active != sorted(set(active))):
        raise ValueError(f"its live seeds {active!r:.80} are not distinct seed indices in [0, {S}) in order")
    stop_loss, last = ens.cfg.stop_loss, meta["last"]
    for s in range(S):  # how each seed stands must be how the training loop leaves it
        if s in active:
            if (status[s] != "ok" or steps[s] != t or last[s] < stop_loss
                    or (t > 0 and not math.isfinite(last[s]))):
                raise ValueError(f"seed {s} is live but has status {status[s]!r}, {steps[s]} steps "
                                 f"at t={t} and last loss {last[s]} (a live seed has trained "
                                 f"every step, its loss finite and >= stop_loss={stop_loss})")
        elif status[s] == "ok" and not last[s] < stop_loss:
            raise ValueError(f"seed {s} is not live, yet its status is 'ok' and its last loss "
                             f"{last[s]} did not reach stop_loss={stop_loss}")
        elif status[s] != "ok" and math.isfinite(last[s]):
            raise ValueError(f"seed {s} failed, yet its last loss {last[s]} is finite")
    for s, curve in enumerate(meta["curves"]):
        points = curve if isinstance(curve, list) else [None]  # JSON's lists (a snapshot's tuples)
        if not all(isinstance(p, (list, tuple)) and len(p) == 2 and _int(p[0]) and 1 <= p[0] <= t
                   and _number(p[1]) for p in points) or any(
                a[0] >= b[0] for a, b in zip(points, points[1:])):
            raise ValueError(f"seed {s}'s curve {curve!r:.80} is not [step, loss] pairs with "
                             f"increasing steps in [1, t={t}]")
    if not isinstance(meta["batched"], bool) or not isinstance(meta["device"], str):
        raise ValueError(f"its batched={meta['batched']!r} / device={meta['device']!r} are not a bool / a name")
    for key in ("wall", "cpu"):
        if not _number(meta[key]) or not math.isfinite(meta[key]) or meta[key] < 0:
            raise ValueError(f"its {key} seconds {meta[key]!r} are not a finite number >= 0")
    if not isinstance(meta.get("machine"), (dict, type(None))):
        raise ValueError(f"its machine {meta['machine']!r:.80} is not an object")
    _check_tensors(ens, tensors, steps)


def _check_tensors(ens, tensors: dict[str, torch.Tensor], steps: list[int]) -> None:
    """The tensor half of :func:`check`: names, shapes, dtypes, Adam's step counts (one per
    seed's trained steps), generator states, finite values."""
    import torch

    S = len(ens.configs)
    params = {f"model.{s}.{name}": p for s, model in enumerate(ens.models)
              for name, p in model.named_parameters()}
    flat = [p for group in ens.opt.param_groups for p in group["params"]]
    seed_of = [s for s, ps in enumerate(ens.params) for _ in ps]
    adam: dict[int, set] = {}
    for key, value in tensors.items():
        if key in params:
            p = params[key]
            if value.shape != p.shape or value.dtype != p.dtype:
                raise ValueError(f"its {key} is of another shape or dtype ({tuple(value.shape)} "
                                 f"{value.dtype}; the model's: {tuple(p.shape)} {p.dtype})")
        elif key.startswith("adam."):
            _, i, name = (key.split(".", 2) + ["", ""])[:3]
            if not i.isdigit() or int(i) >= len(flat) or name not in ADAM_KEYS:
                raise ValueError(f"its {key} is not Adam state of this ensemble")
            i = int(i)
            adam.setdefault(i, set()).add(name)
            if name == "step":
                n = seed_of[i]  # Adam counts the updates of seed n's parameters: its steps
                if value.shape != () or not value.is_floating_point() or float(value) != steps[n]:
                    raise ValueError(f"its {key} = {value.tolist()!r:.40} is not seed {n}'s "
                                     f"{steps[n]} steps")
            elif value.shape != flat[i].shape or value.dtype != flat[i].dtype:
                raise ValueError(f"its {key} does not fit the model (shape {tuple(value.shape)}, "
                                 f"expected {tuple(flat[i].shape)})")
        elif key.startswith("generator."):
            s = key.split(".", 1)[1]
            expected = ens.gens[int(s)].get_state() if s.isdigit() and int(s) < S else None
            if expected is None or value.dtype != expected.dtype or value.shape != expected.shape:
                raise ValueError(f"its {key} is not the state of one of this group's generators")
        else:
            raise ValueError(f"it holds a tensor {key!r} this ensemble does not have")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(f"its {key} holds non-finite values (NaN or inf)")
    for key, p in params.items():
        if key not in tensors:
            raise ValueError(f"its {key} is missing or of another shape")
    for i, names in adam.items():
        if names != set(ADAM_KEYS):
            raise ValueError(f"its Adam state of parameter {i} has {sorted(names)}; expected {list(ADAM_KEYS)}")
    if any(f"generator.{s}" not in tensors for s in range(S)):
        raise ValueError("it lacks a data generator's state")


def _filled(config) -> dict | None:
    """A stored config dict with the fields added since it was written at their defaults."""
    from interp.training.runs import TrainConfig

    try:
        return TrainConfig.from_dict(config).to_dict()
    except (TypeError, ValueError):
        return None


def _len(x) -> str:
    return str(len(x)) if isinstance(x, list) else "no list of"


def restore(ens, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Put a :func:`snapshot` back into a freshly built ensemble of the same configs.

    Everything is checked first (:func:`check`): a file that does not fit raises ValueError
    and leaves ``ens`` as it was.
    """
    import torch

    check(ens, tensors, meta)
    params = {f"model.{s}.{name}": p for s, model in enumerate(ens.models)
              for name, p in model.named_parameters()}
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, i, name = key.split(".", 2)
            state.setdefault(int(i), {})[name] = value
    with torch.no_grad():
        for key, p in params.items():
            p.copy_(tensors[key])
    ens.opt.load_state_dict({"state": state, "param_groups": ens.opt.state_dict()["param_groups"]})
    for s, g in enumerate(ens.gens):
        g.set_state(tensors[f"generator.{s}"])
    then = (meta["batched"], meta["device"], meta.get("machine"))
    now = (ens.batched, ens.device, _machine())
    if then != now:
        log.warning("resuming a group saved with (batched, device, machine) = %s here with %s: "
                    "it goes on to float rounding, not with an uninterrupted run's bits", then, now)
    ens.batched = meta["batched"]
    ens.t, ens.steps, ens.last = meta["t"], list(meta["steps"]), [float(v) for v in meta["last"]]
    ens.status, ens.active = list(meta["status"]), list(meta["active"])
    ens.curves = [[(int(s), float(v)) for s, v in curve] for curve in meta["curves"]]
    ens.start = time.perf_counter() - meta["wall"]
    ens.cpu_start = time.process_time() - meta["cpu"]


# ------------------------------------------------------------------ files


def save(ens, path: str | os.PathLike) -> None:
    """Write the ensemble's :func:`snapshot` and its :func:`digest` to ``path`` atomically
    (:func:`interp.training.files.write_file`); a file-system error is a ValueError naming the
    path, the temporary file is removed, and a previous save at ``path`` is left as it was."""
    from safetensors.torch import save as to_bytes

    path = Path(path)
    tensors, meta = snapshot(ens)
    meta_json = json.dumps(meta)
    data = to_bytes(tensors, metadata={META_KEY: meta_json, SUM_KEY: digest(tensors, meta_json)})
    files.write_file(path, data)  # temp file beside it (O_EXCL|O_NOFOLLOW), fsync, rename


def read(ens, path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and metadata in ``path``, verified (checksum, then :func:`check` against
    ``ens``'s group); ValueError (or the reader's error) saying why the file cannot be used."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        header = f.metadata() or {}
        if META_KEY not in header:
            raise ValueError("it is not a progress file (no interp_progress metadata)")
        if SUM_KEY not in header:
            raise ValueError("it carries no checksum (written by an older interp), so it "
                             "cannot be trusted")
        tensors = {key: f.get_tensor(key) for key in f.keys()}
    if digest(tensors, header[META_KEY]) != header[SUM_KEY]:
        raise ValueError("its sha256 does not match its content (damaged or edited)")
    meta = json.loads(header[META_KEY])
    check(ens, tensors, meta)
    return tensors, meta


def resume(ens, path: str | os.PathLike) -> bool:
    """Load ``path`` into ``ens`` if it exists and passes every check (:func:`read`); True if
    it did. Never raises for the file's sake: a file that cannot be read, fails its checksum
    or does not fit the group is set aside as ``<file>.bad`` with one warning line naming it
    and the reason, and the group starts from step 0 (so it does too when setting it aside
    fails)."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
    except OSError:  # e.g. the progress folder is not readable: nothing to resume
        return False
    try:
        tensors, meta = read(ens, path)
        restore(ens, tensors, meta)
    except Exception as e:  # noqa: BLE001 - whatever is wrong with the file, it is not used
        reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        bad = path.with_name(path.name + ".bad")
        try:
            os.replace(path, bad)
            aside = f"moved to {bad.name}"
        except OSError as moved:
            aside = f"could not be moved aside ({moved.strerror or moved})"
        log.warning("progress file %s not used: %s; %s, group starts at step 0", path, reason, aside)
        return False
    # a warning, so that the CLI (no logging set up) shows it: a resumed group is not a fresh one
    log.warning("resumed group %s at step %d from its progress file", path.stem, ens.t)
    return True


def remove(progress_dir: str | os.PathLike, names: Sequence[str]) -> None:
    """Delete the group's progress file (its rows are committed). A file that cannot be
    deleted only logs a warning: it holds a true state of a finished group, and the next
    sweep tries again."""
    path = path_for(progress_dir, names)
    try:
        path.unlink()
    except (FileNotFoundError, NotADirectoryError):  # no file, or no progress folder at all
        pass
    except OSError as e:
        log.warning("could not delete progress file %s (%s)", path, e.strerror or e)


def clean(progress_dir: str | os.PathLike) -> None:
    """Remove temporary files a killed worker left behind (a folder that cannot be read is
    left alone with a warning: saving progress is an optimisation)."""
    d = Path(progress_dir)
    try:
        if d.is_dir():
            for p in d.iterdir():
                if p.name.startswith(".") and (p.name.endswith(".tmp") or ".tmp-" in p.name):
                    p.unlink(missing_ok=True)
    except OSError as e:
        log.warning("could not clean progress folder %s (%s)", d, e.strerror or e)
