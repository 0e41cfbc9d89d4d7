"""Sweeps declared as data, run by one driver that alone writes the results store.

A sweep is a folder holding ``configs.py`` (and optionally the paper's numbers ``paper.csv``),
loaded by :func:`interp.sweeps.loader.load` (re-exported here, with :class:`TableLayout`)::

    # experiments/table1/configs.py
    from interp.sweeps import TableLayout
    from interp.training.trainer import TrainConfig

    CONFIGS = [TrainConfig(case=c, n=100, d_token=d, pos_embed=pe, seed=s) for ...]
    LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token", title="Table 1: ...",
                         paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"})

``CONFIGS`` lists every run (one :class:`~interp.training.trainer.TrainConfig` per seed); ``LAYOUT``
says how :mod:`interp.sweeps.report` arranges them into the paper's table (which config fields pick a
row, which one picks a column) and which ``paper.csv`` columns those fields correspond to.

Running. :func:`run_sweep` groups the configs that differ only in their seed and trains each group
with one ``train_group`` call (the trainer batches the seeds as an ensemble). Groups go to up to
``workers`` local processes, one per group (``workers=1`` trains in the calling process); a group
whose process dies is lost alone (:mod:`interp.sweeps.workers`) and trained by the next sweep.
Workers return plain :class:`~interp.sweeps.store.RunRecord` data, the checkpoint included as bytes;
the driver places each checkpoint atomically and then commits the run's row
(:mod:`interp.sweeps.store`), so a killed sweep leaves nothing half-written and a rerun trains only
what is missing. The same worker function serves any backend that can ship it and its
arguments to another process or machine: ``backend="ray"`` runs each group as a Ray task on a
local Ray instance or an existing cluster (:mod:`interp.sweeps.ray_backend`), and the driver commits
the returned records exactly as it does the local pool's.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from interp.training import machine, progress
from interp.training.snapshot_files import place_timeline
from interp.sweeps import orphans, store as store_mod
from interp.sweeps.folders import (  # noqa: F401 - re-exported: configs.py files import TableLayout from here
    CONFIGS_FILE, PAPER_FILE, TableLayout, Sweep, group_key, old_name_getattr,
)
from interp.sweeps.loader import LOAD_TIMEOUT, LOAD_TIMEOUT_ENV, MAX_RUNS, load, warm_loader  # noqa: F401
from interp.sweeps.planning import group_by_seed, parse_where, plan, select  # noqa: F401 - re-exported
from interp.sweeps.store import RunRecord
from interp.sweeps.local_backend import run_pool
from interp.sweeps.workers import LOST, describe, environmental_failure, is_lost, train_records

log = logging.getLogger(__name__)
__getattr__ = old_name_getattr(__name__)  # Layout, TableLayout's old name: warns (one release)

BACKENDS = ("local", "ray")

def checkpoint_dir(store_path: str | os.PathLike) -> Path:
    """Checkpoints live beside the store: ``<store folder>/checkpoints/<run name>/``."""
    return Path(store_path).parent / "checkpoints"


def environment(workers: int = 1, threads: int | None = None, backend: str = "local",
                address: str | None = None, device: str = "cpu") -> dict:
    """Facts that bear on a sweep's speed and bits, stored with each invocation.

    ``cpus`` and the rest describe the driver's machine; with ``backend="ray"`` the runs
    train on the Ray workers (``address``: the cluster, None for a local instance).
    ``load_average`` is the machine's (1, 5, 15 min) load when the invocation starts; the
    driver adds ``load_average_end`` when it ends (:func:`load_average`).
    """
    import platform

    import torch

    return {
        "backend": backend,
        "address": address,
        "cpus": os.cpu_count(),
        "workers": workers,
        "threads": threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        # the CPU and MKL's branch decide a run's summation order, hence its bits: over 10,000
        # steps two CPUs can give one config different accuracies (readings/screen/DESIGN.md, 9)
        "cpu_model": machine.cpu_model(),
        "mkl_branch": machine.mkl_branch(),
        "code": machine.code_version(),  # the commit the imported interp comes from (+dirty)
        "MKL_CBWR": os.environ.get("MKL_CBWR"),
        "device": device,
        "gpu": torch.cuda.get_device_name(device) if device != "cpu" else None,
        "load_average": load_average(),
    }


def load_average() -> list[float] | None:
    """This machine's load average over 1, 5 and 15 minutes (None where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def check_backend(backend: str, address: str | None = None, device: str = "cpu") -> str:
    """ValueError unless ``backend`` is usable here (``"ray"``: Ray must be installed) on
    ``device`` (:func:`interp.training.runs.check_device`); returns the device's name."""
    from interp.training.runs import check_device

    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; accepted: one of {BACKENDS}")
    if address is not None and backend != "ray":
        raise ValueError(f"address={address!r} needs backend='ray' (--backend ray)")
    device = check_device(device)
    if backend == "ray" and device != "cpu":
        raise ValueError(f"device={device!r} with backend='ray': Ray tasks ask for CPUs only; "
                         "accepted: --device cpu with Ray, or the local backend on a GPU")
    if backend == "ray":
        from interp.sweeps import ray_backend

        ray_backend.require_ray()
    return device


@dataclass
class Summary:
    """What one invocation of :func:`run_sweep` did."""

    sweep: str
    store: Path
    total: int  # runs declared (after ``where``)
    skipped: int  # already in the store
    trained: int  # rows written now
    failed: int  # of those, status != "ok"
    workers: int
    wall_seconds: float
    backend: str = "local"
    repaired: tuple[str, ...] = ()  # retrained: their checkpoint was missing or corrupt
    lost: int = 0  # runs whose group produced no result (e.g. its worker died): not stored
    lost_groups: tuple[str, ...] = ()  # "<group>: <reason>", one per lost group

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "store": str(self.store)}


def run_sweep(
    sweep: Sweep,
    *,
    store: str | os.PathLike | None = None,
    workers: int = 1,
    threads: int | None = None,
    limit: int | None = None,
    where: dict[str, str] | None = None,
    retry_failed: bool = False,
    backend: str = "local",
    address: str | None = None,
    device: str = "cpu",
    checkpoints: bool = True,
    save_every: float | None = 600.0,
    snapshots: int | str | None = None,
    on_start: Callable[[list], None] | None = None,
    on_run: Callable[[RunRecord], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> Summary:
    """Train every run of ``sweep`` that the store does not have yet.

    backend: ``"local"`` (a process pool, or this process) or ``"ray"`` (one Ray task per
             group, :mod:`interp.sweeps.ray_backend`; needs the ``ray`` extra).
    address: with ``backend="ray"``, the cluster to join (``"auto"``, ``"HOST:PORT"``); None
             starts a local Ray instance of ``workers`` CPUs.
    workers: processes in the local pool (1: train in this process); CPUs of a local Ray
             instance.
    threads: torch threads per worker (default: the cores divided among the workers; 1 on Ray).
    device:  where the runs train (``"cpu"``, ``"cuda"``, ``"cuda:N"``; local backend only);
             not part of a run's identity, recorded in the sweeps log's environment.
    limit, where: train at most ``limit`` runs / only configs matching ``where``.
    checkpoints: False stores each run's row without its model files (checkpoint NULL): the
             run counts as done, its numbers are kept, it cannot be loaded or analysed.
    save_every: seconds between saves of each training group's state to
             ``<store folder>/progress/`` (local backend; None: never), from which the next
             sweep goes on bit for bit (:mod:`interp.training.progress`).
    snapshots: N, ``"N:U:M"`` or ``"curve"``: each run's snapshots written as it trains (every N
             steps; every N to step U, then every M; or every curve point), into ``<checkpoint>/timeline/`` for ``interp timeline``; rows
             and checkpoints stay a plain sweep's, bit for bit (:mod:`interp.training.snapshot_plans`;
             CPU only, needs ``checkpoints``, groups train from step 0 without progress files).
    on_plan(runs_to_train) is called once the store's lock is held and the plan made,
    on_start(configs) when a group starts, on_run(record) after each row commits, or for a
    lost run once it is logged (the CLI drives its progress bar with them). Nothing opens
    the store before the lock is held.

    A group that comes back lost (``"lost: <reason>"``: its worker process died, ...) is not
    stored: one warning names the group and the reason, :attr:`Summary.lost` counts its runs
    and the invocation's outcome says so; with no row, the next sweep trains it again (from
    its progress file, if one was saved).
    """
    device = _check_run(workers, threads, save_every, backend, address, device)  # before any write
    configs = select(sweep.configs, where)
    snapshots = _check_snapshots(snapshots, device, checkpoints, configs)
    # resolved once, here: a --store given as a symbolic link is its real file, and the lock,
    # the checkpoints and the progress files are the real folder's, as every reader sees them
    store_path = store_mod.real_path(store if store is not None else sweep.default_store)
    saves = None if save_every is None or backend != "local" else progress.folder(store_path)
    start = time.perf_counter()
    # the driver's one transaction scope: every write to the store happens inside this block,
    # under the driver lock, through ``db`` (the sweep log) and ``commit`` (the run rows)
    with store_mod.DriverLock(store_path), store_mod.Store(store_path) as db:
        store_mod.clean_partial(checkpoint_dir(store_path))
        db.verify()  # an edited or corrupt row stops the sweep, naming the run
        done, repaired = _finished(db, configs)
        if saves is not None:
            _clean_progress(saves, configs, done)
        orphans.warn(store_path, sweep.configs, done)
        groups = plan(configs, done, retry_failed=retry_failed, limit=limit)
        if on_plan is not None:
            on_plan(sum(len(g) for g in groups))
        pooled = backend == "local" and workers > 1 and len(groups) > 1
        if pooled:
            threads = threads or max(1, (os.cpu_count() or 1) // workers)
        elif backend == "ray":
            threads = threads or 1
        skipped = sum(1 for c in configs if c.name() in done and (done[c.name()] == "ok" or not retry_failed))
        env = environment(workers, threads, backend, address, device)
        sweep_id = db.begin_sweep(sweep.name, workers, {**env, "snapshots": snapshots} if snapshots else env)
        commit = _Commit(db, checkpoint_dir(store_path) if checkpoints else None, saves, on_run)
        outcome = "interrupted"
        try:
            _train(groups, sweep.name, backend, pooled, workers, threads, address, device,
                   None if snapshots is not None else saves, save_every, on_start, commit, snapshots)
            outcome = f"done: {commit.lost} run(s) lost" if commit.lost else "done"
        except BaseException as e:
            outcome = f"interrupted: {type(e).__name__}"
            raise
        finally:
            wall = time.perf_counter() - start
            db.end_sweep(sweep_id, commit.trained, wall, outcome, {"load_average_end": load_average()})
    return Summary(sweep=sweep.name, store=store_path, total=len(configs), skipped=skipped,
                   trained=commit.trained, failed=commit.failed, workers=workers,
                   wall_seconds=round(wall, 3), backend=backend, repaired=tuple(repaired),
                   lost=commit.lost, lost_groups=tuple(commit.lost_groups))


def _check_run(workers, threads, save_every, backend: str, address, device: str) -> str:
    """ValueError for a bad :func:`run_sweep` argument, before anything is written; returns
    the device's name (:func:`check_backend`)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r}; accepted: an integer >= 1")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads={threads!r}; accepted: an integer >= 1")
    device = check_backend(backend, address, device)
    if save_every is not None and (isinstance(save_every, bool) or not isinstance(save_every, (int, float))
                                   or not save_every > 0):
        raise ValueError(f"save_every={save_every!r}; accepted: seconds > 0, or None (never)")
    return device


def _check_snapshots(value, device: str, checkpoints: bool, configs) -> int | str | None:
    """``run_sweep``'s ``snapshots`` as the workers take it (N or ``"curve"``; None: none),
    checked against the device, ``checkpoints`` and every run of ``configs``; a ValueError
    naming the value otherwise, before anything is written."""
    from interp.training import snapshot_plans

    plan = snapshot_plans.parse(value)
    if plan is None:
        return None
    shown = plan.value()
    if device != "cpu":
        raise ValueError(f"--snapshots {shown} with device={device!r}: snapshots are taken on the CPU "
                         "(a CUDA step is read back in blocks); accepted: --device cpu")
    if not checkpoints:
        raise ValueError(f"--snapshots {shown} with --no-checkpoints: snapshots live in each run's "
                         "checkpoint folder; drop one of them")
    plan.check(configs)
    for group in group_by_seed(configs):
        snapshot_plans.check_memory(plan, group)
    return shown


class _Commit:
    """The one writer of run rows: called with each group's records as the group finishes, it
    places each run's checkpoint (``checkpoints``: their folder; None stores rows without
    files; and its snapshots' ``timeline/`` inside it, when the record has them) and then
    commits its row, one transaction per run. :func:`run_sweep` makes it
    inside its ``with`` block, with ``db`` open under the driver lock, so nothing writes the
    store outside the lock. Lost records (:func:`~interp.sweeps.workers.is_lost`) are logged,
    counted and never stored; a group committed whole has its progress file removed."""

    def __init__(self, db, checkpoints: Path | None, saves: Path | None,
                 on_run: Callable[[RunRecord], None] | None):
        self.db, self.checkpoints, self.saves, self.on_run = db, checkpoints, saves, on_run
        self.trained = self.failed = self.lost = 0
        self.lost_groups: list[str] = []  # "<group>: <reason>", one per lost group

    def __call__(self, records: list[RunRecord]) -> None:
        gone = [rec for rec in records if is_lost(rec)]
        for reason in dict.fromkeys(rec.status[len(LOST):] for rec in gone):  # one line a group
            runs = [rec for rec in gone if rec.status == LOST + reason]
            self.lost_groups.append(f"{describe(runs[0].config)}: {reason}")
            log.warning("%s: %d run(s) lost: %s; not stored, the next sweep trains them",
                        describe(runs[0].config), len(runs), reason)
        self.lost += len(gone)
        for rec in records:
            if not is_lost(rec):
                ckpt = sums = None
                if rec.files and self.checkpoints is not None:
                    ckpt = self.checkpoints / rec.name
                    sums = store_mod.place_checkpoint(rec.files, ckpt)
                    if rec.timeline:  # whole, inside the new folder, before the row says it is done
                        place_timeline(ckpt, rec.timeline)
                self.db.put(rec, ckpt, sums)
                self.trained += 1
                self.failed += not rec.ok
                if not rec.ok:
                    log.warning("%s seed %s: %s", describe(rec.config), rec.seed, rec.status)
            if self.on_run is not None:
                self.on_run(rec)
        if self.saves is not None and records and not gone:  # a lost group resumes from its file
            progress.remove(self.saves, [rec.name for rec in records])


def _train(groups, sweep_name: str, backend: str, pooled: bool, workers: int, threads,
           address, device: str, saves: Path | None, save_every, on_start, commit,
           snapshots=None) -> None:
    """Train ``groups`` on the chosen backend, handing each group's records to ``commit``:
    Ray tasks, local processes (``pooled``), or this process one group after another."""
    if backend == "ray":
        from interp.sweeps import ray_backend

        ray_backend.run_groups(groups, sweep_name, workers, threads, on_start, commit, address=address,
                               snapshots=snapshots)
    elif pooled:
        run_pool(groups, sweep_name, min(workers, len(groups)), threads, on_start, commit,
                 device, saves and str(saves), save_every or 0.0, snapshots)
    else:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        for g in groups:
            if on_start is not None:
                on_start(g)
            commit(train_records([c.to_dict() for c in g], sweep_name, device,
                                 saves and str(saves), save_every or 0.0, snapshots))


def _clean_progress(saves: Path, configs, done: dict[str, str]) -> None:
    """Remove temporary files, and progress files of groups whose rows are all stored."""
    progress.clean(saves)
    for group in group_by_seed(configs):
        names = [c.name() for c in group]
        if all(name in done for name in names):
            progress.remove(saves, names)


def _finished(db, configs) -> tuple[dict[str, str], list[str]]:
    """The stored statuses the plan may trust, and the runs to retrain because their
    checkpoint folder or files are missing or do not hash as the store recorded.

    Rows whose status records a fault of the machine, not a training outcome
    (:func:`~interp.sweeps.workers.environmental_failure`; older interp versions stored a
    failed progress save as ``failed: OSError: ...``), are left out too: they are trained
    again by a plain rerun, and their new rows replace them. One warning line says how many."""
    names = {c.name() for c in configs}
    damaged = {k: why for k, why in db.checkpoint_problems().items() if k in names}
    for name, why in damaged.items():
        log.warning("run %s: %s; it is trained again", name, why)
    statuses = db.statuses()
    machine = sorted(k for k in names if environmental_failure(statuses.get(k, "ok")))
    if machine:
        log.warning("%d run(s) stored as failed by a fault of the machine, not of training "
                    "(e.g. run %s: %s); they are trained again", len(machine), machine[0],
                    statuses[machine[0]])
    done = {k: v for k, v in statuses.items() if k not in damaged and not environmental_failure(v)}
    return done, sorted(damaged)

