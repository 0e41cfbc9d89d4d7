"""What runs where in a sweep: the worker function, the worker set-up, one scheduler loop.

:func:`train_records` is a worker's whole job (train one group of seeds, return plain
:class:`~interp.training.store.RunRecord` data with the checkpoint as bytes); :func:`init_worker` sets a
worker process up (torch threads, the driver's MKL branch). :func:`schedule` is the one loop
that keeps ``slots`` groups in flight, longest first, and commits each group's records as it
finishes; a backend is an adapter that hands back futures: :func:`run_pool` (a local process
pool) here, :func:`interp.training.ray_backend.run_groups` (Ray tasks) there. Only the driver commits,
so only the driver writes the store.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Hashable, Iterable, Sequence

from interp.training import store as store_mod
from interp.training.machine import keep_freed_memory, mkl_branch, mkl_library
from interp.training.store import RunRecord

log = logging.getLogger(__name__)


def describe(config) -> str:
    """A short human label for a config's group (no seed); takes a config or its dict."""
    c = config if isinstance(config, dict) else config.to_dict()
    return f"case {c['case']} n={c['n']} d_token={c['d_token']} layers={c['n_layers']} pe={c['pos_embed']}"


def cost(group: Sequence) -> float:
    """A rough per-step cost for scheduling the biggest groups first: seeds x positions x
    layers x the per-position multiply-adds of attention (4 d_model^2 + seq d_model) and of
    the MLP (2 d_model d_mlp)."""
    from interp.core import tasks

    c = group[0]
    d_model = 2 * c.d_token if c.case in tasks.SAME_POSITION else c.d_token
    seq = tasks.seq_len(c.case, c.n)
    return len(group) * seq * c.n_layers * d_model * (4 * d_model + seq + 2 * c.d_mlp)


def train_records(config_dicts: list[dict], sweep: str, device: str = "cpu",
                  progress_dir: str | None = None, every: float = 600.0) -> list[RunRecord]:
    """Train one group of seeds on ``device`` and return plain records (the worker's whole job).

    ``progress_dir``: resume the group from its progress file there and save to it every
    ``every`` seconds (:mod:`interp.training.progress`; the driver deletes it after committing).

    Runs in a worker process (or in the driver when ``workers=1``); writes nothing but a
    temporary directory of its own. An exception in the trainer marks every run of the group
    ``"failed: <reason>"`` so the sweep goes on. Each record carries the run's wall and process
    CPU seconds as the trainer measured them (the group's, divided among its seeds).
    """
    from interp.training import checkpoints, progress, trainer as training

    configs = [training.TrainConfig.from_dict(d) for d in config_dicts]
    started = store_mod.now()
    saved = None if progress_dir is None else progress.path_for(progress_dir, [c.name() for c in configs])
    try:
        results = training.train_group(configs, device=device, progress=saved, every=every)
    except Exception as e:  # noqa: BLE001 - recorded in the store, reported by the driver
        log.exception("training %s failed", describe(configs[0]))
        return [
            RunRecord(name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed,
                      status=f"failed: {type(e).__name__}: {e}", started_at=started)
            for c in configs
        ]
    records = []
    for c, r in zip(configs, results, strict=True):
        files: dict[str, bytes] = {}
        if getattr(r, "model", None) is not None:
            with tempfile.TemporaryDirectory(prefix="interp-ckpt-") as tmp:
                path = Path(checkpoints.save(r, Path(tmp) / c.name()))
                files = {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}
        records.append(
            RunRecord(
                name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed, status=r.status,
                accuracy=float(r.accuracy), steps=int(r.steps), final_loss=float(r.final_loss),
                seconds=float(r.seconds), curve=[[int(s), float(l)] for s, l in r.curve],
                started_at=started, files=files,
                cpu_seconds=None if r.cpu_seconds is None else float(r.cpu_seconds),
            )
        )
    return records


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


def run_pool(groups, sweep_name, workers, threads, on_start, commit, device: str = "cpu",
             progress_dir: str | None = None, every: float = 600.0) -> None:
    """The local backend: :func:`schedule` over a process pool of ``workers`` processes (on
    CUDA they share the GPU, each with its own CUDA context)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    # forkserver: workers fork from a clean server process that has imported the trainer once
    # (forking the driver itself after torch has run threads can hang; spawn re-imports
    # TransformerLens in every worker, ~10 s each)
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["interp.training.workers", "interp.training.trainer", "interp.training.checkpoints"])
    else:
        ctx = mp.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=init_worker,
                               initargs=(threads, mkl_branch()))
    try:
        schedule(
            groups, workers,
            submit=lambda g: pool.submit(train_records, [c.to_dict() for c in g], sweep_name, device,
                                         progress_dir, every),
            wait_any=lambda futures: wait(futures, return_when=FIRST_COMPLETED)[0],
            result=lambda future: future.result(),
            on_start=on_start, commit=commit,
        )
    except BaseException:  # Ctrl-C, a broken worker: stop now, the store holds what finished
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:  # running groups are lost anyway: do not wait for them
            proc.terminate()
        for proc in processes:
            proc.join(timeout=10)
        raise
    pool.shutdown(wait=True)
