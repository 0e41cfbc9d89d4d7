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
to a temporary sibling, fsynced, then renamed over the old one: a kill at any moment leaves the
previous save or the new one. Loading never unpickles (safetensors and JSON only).

Exactness: a group saved at step t and resumed ends with the same bits as one that ran straight
through, when both pieces run on the same device, CPU model and MKL mode (the resumed piece
stacks its seeds exactly as the saved one did; it logs a warning if this process would have
chosen otherwise, or runs on another device or CPU: it then goes on to float rounding).
``tests/training/test_progress.py`` compares every parameter, Adam's state, curves and
accuracies with an uninterrupted run, and a sweep interrupted mid-group with one that was not.

The driver deletes a group's file once the group's rows are committed; a file whose configs do
not match the group (a changed config cannot share an id, but a damaged file can) is set aside
with a warning and the group starts from step 0.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SUFFIX = ".safetensors"


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


def restore(ens, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Put a :func:`snapshot` back into a freshly built ensemble of the same configs.

    Everything is checked before anything changes (configs, every tensor's name and shape): a
    file that does not fit raises ValueError and leaves ``ens`` as it was.
    """
    import torch

    configs = [c.to_dict() for c in ens.configs]
    if meta["configs"] != configs:
        raise ValueError("the progress file holds other configs than this group's")
    params = {f"model.{s}.{name}": p for s, model in enumerate(ens.models)
              for name, p in model.named_parameters()}
    flat = [p for group in ens.opt.param_groups for p in group["params"]]
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, i, name = key.split(".", 2)
            state.setdefault(int(i), {})[name] = value
            if name != "step" and (int(i) >= len(flat) or value.shape != flat[int(i)].shape):
                raise ValueError(f"the progress file's {key} does not fit the model")
    for key, p in params.items():
        if key not in tensors or tensors[key].shape != p.shape:
            raise ValueError(f"the progress file's {key} is missing or of another shape")
    if any(f"generator.{s}" not in tensors for s in range(len(ens.gens))):
        raise ValueError("the progress file lacks a data generator's state")
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
    ens.t, ens.steps, ens.last = meta["t"], list(meta["steps"]), list(meta["last"])
    ens.status, ens.active = list(meta["status"]), list(meta["active"])
    ens.curves = [[(int(s), float(v)) for s, v in curve] for curve in meta["curves"]]
    ens.start = time.perf_counter() - meta["wall"]
    ens.cpu_start = time.process_time() - meta["cpu"]


# ------------------------------------------------------------------ files


def save(ens, path: str | os.PathLike) -> None:
    """Write the ensemble's :func:`snapshot` to ``path`` atomically (temporary file, fsync,
    rename)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors, meta = snapshot(ens)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    save_file(tensors, str(tmp), metadata={"interp_progress": json.dumps(meta)})
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def resume(ens, path: str | os.PathLike) -> bool:
    """Load ``path`` into ``ens`` if it exists and holds this group; True if it did.

    A file that cannot be read or holds other configs is renamed to ``<file>.bad`` (kept for a
    look, never loaded again) and the group starts from step 0.
    """
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        return False
    try:
        tensors = load_file(str(path))
        with safe_open(str(path), "pt") as f:
            meta = json.loads(f.metadata()["interp_progress"])
        restore(ens, tensors, meta)
    except (SafetensorError, OSError, KeyError, ValueError, RuntimeError) as e:
        bad = path.with_name(path.name + ".bad")
        os.replace(path, bad)
        log.warning("progress file %s could not be resumed (%s); moved to %s, starting at step 0",
                    path.name, e, bad.name)
        return False
    # a warning, so that the CLI (no logging set up) shows it: a resumed group is not a fresh one
    log.warning("resumed group %s at step %d from its progress file", path.stem, ens.t)
    return True


def remove(progress_dir: str | os.PathLike, names: Sequence[str]) -> None:
    """Delete the group's progress file (its rows are committed)."""
    path_for(progress_dir, names).unlink(missing_ok=True)


def clean(progress_dir: str | os.PathLike) -> None:
    """Remove temporary files a killed worker left behind."""
    d = Path(progress_dir)
    if d.is_dir():
        for p in d.iterdir():
            if p.name.startswith(".") and ".tmp-" in p.name:
                p.unlink(missing_ok=True)
