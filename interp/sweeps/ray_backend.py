"""The Ray backend of :func:`interp.sweeps.driver.run_sweep`: each group of seeds is one Ray task.

``interp sweep DIR --backend ray [--address ADDRESS]``. Without an address a local Ray instance
of ``workers`` CPUs is started for the sweep (and shut down after); with one (``auto``, or
``HOST:PORT`` of a cluster's head started by ``ray start --head``) the driver joins that
cluster. A Ray instance this process already started (``ray.init`` before the call, as the
tests do) is used as is.

The task is the local pool's worker function, :func:`interp.sweeps.workers.train_records`, run with one
CPU (``num_cpus=1``) and ``threads`` torch threads (default 1). It returns plain
:class:`~interp.sweeps.store.RunRecord` data with the checkpoint files as bytes; the driver takes
results as they finish (``ray.wait``) and hands them to the same ``commit`` as the local pool,
so only the driver writes the store and its checkpoint folders, and resume, atomicity and
integrity are the local backend's. The driver's ``MKL_CBWR`` (and OMP/MKL thread counts equal
to ``threads``) travel to the workers in the task's ``runtime_env``, and each task also sets
the driver's MKL branch before it multiplies (:func:`interp.sweeps.workers.init_worker`), so a worker
computes the same bits as the local backend on the same kind of CPU.

Ray is an optional extra (``pip install 'interp-funceval[ray]'``) and is imported only here, only when
the Ray backend runs. Workers on other machines need the same ``interp`` (and torch) installed.
"""

from __future__ import annotations

import logging
import os
from typing import Callable

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'interp-funceval[ray]'"


def require_ray():
    """The ``ray`` module, or a ValueError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(f"--backend ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def worker_env(threads: int) -> dict[str, str]:
    """Environment variables every Ray worker gets: the driver's MKL_CBWR and
    THP_MEM_ALLOC_ENABLE (huge pages for large tensors), and thread counts."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    for name in ("MKL_CBWR", "THP_MEM_ALLOC_ENABLE"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def task_options(threads: int) -> dict:
    """Ray options of every task: one CPU, and :func:`worker_env` in its runtime_env."""
    return {"num_cpus": 1, "runtime_env": {"env_vars": worker_env(threads)}}


def _train_task(config_dicts: list[dict], sweep_name: str, threads: int, branch: int | None = None,
                presentations: tuple = (), snapshots=None):
    """What one Ray task runs: the local pool's worker set-up (threads, the driver's MKL
    branch, the presentations registered from outside interp) and worker function (with
    ``snapshots``, as the local pool's: :func:`interp.sweeps.workers.train_records`)."""
    from interp.core import tasks
    from interp.sweeps import workers

    workers.init_worker(threads, branch)
    for presentation in presentations:
        tasks.register(presentation)
    return workers.train_records(config_dicts, sweep_name, snapshots=snapshots)


def run_groups(
    groups: list[list],
    sweep_name: str,
    workers: int,
    threads: int | None,
    on_start: Callable[[list], None] | None,
    commit: Callable[[list], None],
    *,
    address: str | None = None,
    snapshots=None,
) -> None:
    """Train ``groups`` as Ray tasks and ``commit`` each group's records as it finishes.

    The same loop as the local pool (:func:`interp.sweeps.workers.schedule`): at most as many groups
    in flight as the cluster has CPUs (``workers`` for a local instance), longest first, so
    ``on_start`` marks groups that are really training. Ctrl-C (or any error) cancels the tasks
    still running; the store keeps what was committed. ``snapshots``: as the local pool's
    (:func:`interp.sweeps.workers.train_records`); the timeline files come back in the records.
    """
    from interp.core import tasks
    from interp.training.machine import mkl_branch
    from interp.sweeps.workers import schedule

    ray = require_ray()
    threads = threads or 1
    started_here = not ray.is_initialized()
    if started_here:
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    running: list = []
    try:
        slots = max(1, int(ray.cluster_resources().get("CPU", workers)))
        log.info("ray: %d CPU(s) for %d group(s)", slots, len(groups))
        task = ray.remote(_train_task).options(**task_options(threads))
        branch = mkl_branch()  # the workers match it too (see interp.sweeps.workers.init_worker)
        presentations = tuple(tasks.added().values())  # registered outside interp: the workers too

        def submit(group):
            ref = task.remote([c.to_dict() for c in group], sweep_name, threads, branch, presentations,
                              snapshots)
            running.append(ref)
            return ref

        def wait_any(refs):
            ready, _ = ray.wait(refs, num_returns=1)
            for ref in ready:
                running.remove(ref)
            return ready

        try:
            schedule(groups, slots, submit, wait_any, ray.get, on_start, commit)
        except BaseException:  # Ctrl-C, a lost worker: stop the rest, the store holds what finished
            for ref in running:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started_here:
            ray.shutdown()
