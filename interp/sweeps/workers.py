"""What runs where in a sweep: the worker function, the worker set-up, one scheduler loop.

:func:`train_records` is a worker's whole job (train one group of seeds, return plain
:class:`~interp.sweeps.store.RunRecord` data with the checkpoint as bytes); :func:`init_worker` sets a
worker process up (torch threads, the driver's MKL branch). :func:`schedule` is the one loop
that keeps ``slots`` groups in flight, longest first, and commits each group's records as it
finishes; a backend is an adapter that hands back futures:
:func:`interp.sweeps.local_backend.run_pool` (one local process per group),
:func:`interp.sweeps.ray_backend.run_groups` (Ray tasks). Only the driver commits, so only the
driver writes the store.

A group whose worker produced no records for a reason outside training (its process killed or
crashed, ...) is *lost*: :func:`lost_records` gives one record per config with status
``"lost: <reason>"``, which the driver logs and does not store, so a rerun trains the group.
A local worker exits as soon as the driver does, however the driver dies
(:func:`exit_with_driver`): no process outlives a sweep.
"""

from __future__ import annotations

import builtins
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Hashable, Iterable, Sequence

from interp.sweeps import store as store_mod
from interp.training.machine import keep_freed_memory, mkl_library
from interp.training.machine import mkl_branch as mkl_branch  # noqa: F401 - tests import it here
from interp.sweeps.store import RunRecord

log = logging.getLogger(__name__)


def describe(config) -> str:
    """A short human label for a config's group (no seed); takes a config or its dict."""
    c = config if isinstance(config, dict) else config.to_dict()
    return f"case {c['case']} n={c['n']} d_token={c['d_token']} layers={c['n_layers']} pe={c['pos_embed']}"


LOST = "lost: "  # the status prefix of a lost run: not stored, trained again by a plain rerun


def is_lost(record: RunRecord) -> bool:
    """Whether ``record`` is a lost run (no result, for a reason outside training)."""
    return record.status.startswith(LOST)


def lost_records(config_dicts: Sequence[dict], sweep: str, reason: str,
                 started: str | None = None) -> list[RunRecord]:
    """One lost record per config of a group: ``status="lost: <reason>"``, no numbers."""
    return [RunRecord(name=_name(d), sweep=sweep, config=dict(d), seed=d["seed"],
                      status=f"{LOST}{reason}", started_at=started) for d in config_dicts]


def _name(config_dict: dict) -> str:
    from interp.training.trainer import TrainConfig

    return TrainConfig.from_dict(config_dict).name()


def cost(group: Sequence) -> float:
    """A rough per-step cost for scheduling the biggest groups first: seeds x positions x
    layers x the per-position multiply-adds of attention (4 d_model^2 + seq d_model) and of
    the MLP (2 d_model d_mlp)."""
    from interp.core import tasks

    c = group[0]
    d_model = c.d_model  # TrainConfig is a ModelSpec: its task decides (pair tokens: 2 d_token)
    seq = tasks.seq_len(c.case, c.n)
    return len(group) * seq * c.n_layers * d_model * (4 * d_model + seq + 2 * c.d_mlp)


#: Exception classes that mean "the machine", not "the model": every OSError (a full disk, a
#: file-size limit, a folder deleted or replaced by a file, permissions) and safetensors' error,
#: which wraps the file system's when a file cannot be written.
ENVIRONMENTAL = tuple(sorted(
    {name for name, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, OSError)}
    | {"SafetensorError"}
))


def environmental(error: BaseException) -> bool:
    """Whether ``error`` came from the environment rather than from training: an OSError, or
    a class named in :data:`ENVIRONMENTAL` (safetensors' error, which is no OSError)."""
    return isinstance(error, OSError) or type(error).__name__ in ENVIRONMENTAL


def environmental_failure(status: str) -> bool:
    """Whether a stored ``status`` records no training outcome, only a fault of the machine, so
    that a plain rerun trains the run again (:func:`interp.sweeps.driver.plan`).

    That is every ``"lost: ..."`` status, and a ``"failed: <Class>: ..."`` one whose exception
    class is in :data:`ENVIRONMENTAL`. Older interp versions stored those as failed when saving
    progress failed (``failed: OSError: [Errno 27] File too large``, ``failed: FileNotFoundError:
    ...``, ``failed: SafetensorError: Error while serializing: I/O error: ...``); today such
    errors never fail a run (a failed save only warns; a failed checkpoint write makes the group
    lost). They are told apart from real failures by the class recorded in the status: the
    trainer's arithmetic never raises an OSError or touches safetensors, and its own failures
    read ``failed: non-finite loss ...`` or ``failed: ValueError: ...``, ``RuntimeError``... .
    A run an older interp failed by resuming a progress file with a NaN weight in it (``failed:
    non-finite loss ...``) cannot be told from a diverged run: ``--retry-failed`` retrains it.
    """
    if status.startswith(LOST):
        return True
    if not status.startswith("failed: "):
        return False
    cls = status[len("failed: "):].split(":", 1)[0].strip()
    return cls in ENVIRONMENTAL


def train_records(config_dicts: list[dict], sweep: str, device: str = "cpu",
                  progress_dir: str | None = None, every: float = 600.0,
                  snapshots: int | str | None = None) -> list[RunRecord]:
    """Train one group of seeds on ``device`` and return plain records (the worker's whole job).

    ``progress_dir``: resume the group from its progress file there and save to it every
    ``every`` seconds (:mod:`interp.training.progress`; the driver deletes it after committing;
    a save that fails only warns, the run goes on).

    ``snapshots`` (``interp sweep --snapshots``: N or ``"curve"``): train with snapshots and
    put each run's timeline files in its record (:func:`_with_snapshots`).

    Runs in a worker process (or in the driver when ``workers=1``); writes nothing but a
    temporary directory of its own. An exception in the trainer marks every run of the group
    ``"failed: <reason>"`` so the sweep goes on, unless it is :func:`environmental` (the
    machine's fault, e.g. a full disk while writing the temporary checkpoint): then the group
    is lost (:func:`lost_records`), which the driver does not store, so a plain rerun trains it.
    Each record carries the run's wall and process CPU seconds as the trainer measured them
    (the group's, divided among its seeds).
    """
    from interp.training import progress, trainer as training

    configs = [training.TrainConfig.from_dict(d) for d in config_dicts]
    started = store_mod.now()

    def lost(e: BaseException) -> list[RunRecord]:
        # info, not a warning: the driver names the lost group and the reason in one line
        log.info("training %s: %s: %s; the group is lost (a rerun trains it)",
                 describe(configs[0]), type(e).__name__, e)
        return lost_records(config_dicts, sweep, f"{type(e).__name__}: {e}", started)

    saved = None if progress_dir is None else progress.path_for(progress_dir, [c.name() for c in configs])
    timelines: dict = {}
    try:
        if snapshots is None:
            results = training.train_group(configs, device=device, state_file=saved, every=every)
        else:
            results, timelines = _with_snapshots(configs, device, saved, snapshots)
    except Exception as e:  # noqa: BLE001 - recorded in the store, reported by the driver
        if environmental(e):
            return lost(e)
        log.exception("training %s failed", describe(configs[0]))
        return [
            RunRecord(name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed,
                      status=f"failed: {type(e).__name__}: {e}", started_at=started)
            for c in configs
        ]
    try:
        return [_record(c, r, sweep, started, timelines.get(c.seed, {}))
                for c, r in zip(configs, results, strict=True)]
    except Exception as e:  # noqa: BLE001 - the temporary checkpoint could not be written
        if not environmental(e):
            raise
        return lost(e)


def _record(c, r, sweep: str, started: str, timeline: dict[str, bytes]) -> RunRecord:
    """One run's record: its numbers, its checkpoint's files as bytes (written to a temporary
    folder of its own and read back) and its ``timeline`` files."""
    from interp.training import checkpoints

    files: dict[str, bytes] = {}
    if getattr(r, "model", None) is not None:
        with tempfile.TemporaryDirectory(prefix="interp-ckpt-") as tmp:
            path = Path(checkpoints.save(r, Path(tmp) / c.name()))
            files = {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}
    return RunRecord(
        name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed, status=r.status,
        accuracy=float(r.accuracy), steps=int(r.steps), final_loss=float(r.final_loss),
        seconds=float(r.seconds), curve=[[int(s), float(l)] for s, l in r.curve],
        started_at=started, files=files,
        cpu_seconds=None if r.cpu_seconds is None else float(r.cpu_seconds), timeline=timeline,
    )


def _with_snapshots(configs, device: str, saved, value) -> tuple[list, dict]:
    """The group trained with snapshots by ``value``'s plan (N: every N steps; ``"curve"``:
    every curve point; :func:`interp.training.snapshot_plans.parse`) and each run's timeline
    files, ``(results, {seed: files})``. :func:`interp.training.snapshots.train_with_snapshots`
    makes the plain group's ``train_group`` call (so the same bits) and copies the parameters
    as they train; on the CPU, from step 0 (a resumed group would lack the snapshots before its
    save: the driver passes no progress file with them)."""
    from interp.training import snapshot_plans, snapshots

    if device != "cpu" or saved is not None:
        raise ValueError(f"snapshots train on the CPU from step 0: device={device!r}, progress file "
                         f"{saved}; accepted: device 'cpu' and no progress file")
    results, snaps = snapshots.train_with_snapshots(configs, plan=snapshot_plans.parse(value))
    return results, {seed: snapshots.timeline_files(s) for seed, s in snaps.items()}


# --------------------------------------------------------------------------- worker set-up


def init_worker(threads: int, branch: int | None = None) -> None:
    """Set up a worker process: torch threads, and the driver's MKL branch ``branch``;
    :func:`keep_freed_memory`.

    MKL fixes its branch at its first product, from ``MKL_CBWR`` in the environment; the
    driver's may already be fixed when a test (or a caller) changes the variable, so the
    worker sets the driver's branch explicitly before it multiplies anything: pool and Ray
    workers then compute the driver's bits (interp.training.fast_train stacks seeds only under CNR).
    """
    import torch

    keep_freed_memory()
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set in this process
        pass
    lib = mkl_library() if branch is not None else None
    if lib is not None and int(lib.mkl_serv_cbwr_get(1)) != branch:
        lib.mkl_serv_cbwr_set(branch)
        if int(lib.mkl_serv_cbwr_get(1)) != branch:
            log.warning("worker %d could not take the driver's MKL branch %d (it has %d): "
                        "its bits may differ from the driver's", os.getpid(), branch,
                        lib.mkl_serv_cbwr_get(1))


def exit_with_driver() -> None:
    """End this worker process as soon as the process that started it ends, however it ends
    (SIGKILL included), so no worker trains on, or sits idle holding its memory, for nobody.

    multiprocessing gives each child the read end of a pipe whose only write end the parent
    holds for the child's life (``multiprocessing.parent_process().sentinel``); the kernel
    closes it when the parent dies, and the sentinel turns readable. A daemon thread waits on
    it and calls ``os._exit``. (PR_SET_PDEATHSIG would not do: a forkserver child's parent
    is the server, not the driver.) Nothing to watch in a process not started by
    multiprocessing (the driver itself, a Ray task).
    """
    import multiprocessing
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="interp-exit-with-driver", daemon=True).start()


# --------------------------------------------------------------------------- scheduling


def schedule(
    groups: list[list],
    slots: int,
    submit: Callable[[list], Hashable],
    wait_any: Callable[[list], Iterable],
    result: Callable[[Hashable], list[RunRecord]],
    on_start: Callable[[list], None] | None,
    commit: Callable[[list[RunRecord]], None],
) -> None:
    """Keep up to ``slots`` groups in flight, longest first (:func:`cost`), and ``commit``
    each group's records as soon as its future is done.

    ``submit(group)`` starts a group and returns its future, ``wait_any(futures)`` blocks until
    some are done and returns those, ``result(future)`` gives its records. ``on_start`` marks
    groups that really start (progress bars). Errors propagate; the caller's adapter cancels
    what is still running.
    """
    queue = sorted(groups, key=cost, reverse=True)
    running: dict = {}
    while queue or running:
        while queue and len(running) < slots:
            group = queue.pop(0)
            if on_start is not None:
                on_start(group)
            running[submit(group)] = group
        for future in wait_any(list(running)):
            running.pop(future)
            commit(result(future))
