"""Sweeps declared as data, run by one driver that alone writes the results store.

A sweep is a folder holding ``configs.py`` (and optionally the paper's numbers ``paper.csv``)::

    # experiments/table1/configs.py
    from interp.training.sweeps import Layout
    from interp.training.trainer import TrainConfig

    CONFIGS = [TrainConfig(case=c, n=100, d_token=d, pos_embed=pe, seed=s) for ...]
    LAYOUT = Layout(rows=("case", "pos_embed"), column="d_token",
                    paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
                    title="Table 1: ...")

``CONFIGS`` lists every run (one :class:`~interp.training.trainer.TrainConfig` per seed); ``LAYOUT``
says how :mod:`interp.training.report` arranges them into the paper's table (which config fields pick a
row, which one picks a column) and which ``paper.csv`` columns those fields correspond to.

Running. :func:`run_sweep` groups the configs that differ only in their seed and trains each group
with one ``train_group`` call (the trainer batches the seeds as an ensemble). Groups go to a
local process pool of ``workers`` processes (``workers=1`` trains in the calling process).
Workers return plain :class:`~interp.training.store.RunRecord` data, the checkpoint included as bytes;
the driver places each checkpoint atomically and then commits the run's row
(:mod:`interp.training.store`), so a killed sweep leaves nothing half-written and a rerun trains only
what is missing. The same worker function serves any backend that can ship it and its
arguments to another process or machine: ``backend="ray"`` runs each group as a Ray task on a
local Ray instance or an existing cluster (:mod:`interp.training.ray_backend`), and the driver commits
the returned records exactly as it does the local pool's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from interp.training import progress
from interp.training import store as store_mod
from interp.training.store import RunRecord
from interp.training.workers import describe, run_pool, train_records

log = logging.getLogger(__name__)

CONFIGS_FILE = "configs.py"
PAPER_FILE = "paper.csv"
BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Layout:
    """How a sweep's runs form a table.

    rows:   TrainConfig fields whose values pick a table row, in display order; rows appear in
            the order their first config appears in ``CONFIGS``.
    column: the TrainConfig field whose values pick a column group (e.g. ``"d_token"``).
    paper:  TrainConfig field -> ``paper.csv`` column, for every row field and the column
            field, to find the paper's max/avg for a cell. Other ``paper.csv`` columns
            (besides ``max`` and ``avg``) are shown as extra row labels (e.g. Table 1's Keys).
    title:  the report's heading.
    """

    rows: tuple[str, ...]
    column: str
    paper: dict = field(default_factory=dict)
    title: str = ""

    def __post_init__(self):
        if isinstance(self.rows, str) or not all(isinstance(r, str) for r in self.rows):
            raise ValueError(f"Layout.rows={self.rows!r}; accepted: a tuple of config field names")
        object.__setattr__(self, "rows", tuple(self.rows))
        if not isinstance(self.column, str):
            raise ValueError(f"Layout.column={self.column!r}; accepted: one config field name")
        unknown = set(self.paper) - set(self.rows) - {self.column}
        if unknown:
            raise ValueError(
                f"Layout.paper names {sorted(unknown)}, which are not row or column fields "
                f"({list(self.rows) + [self.column]})"
            )


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep folder."""

    name: str
    root: Path
    configs: tuple  # of TrainConfig
    layout: Layout

    @property
    def paper_csv(self) -> Path | None:
        p = self.root / PAPER_FILE
        return p if p.is_file() else None

    @property
    def default_store(self) -> Path:
        return self.root / "results" / "store.sqlite"


def checkpoint_dir(store_path: str | os.PathLike) -> Path:
    """Checkpoints live beside the store: ``<store folder>/checkpoints/<run name>/``."""
    return Path(store_path).parent / "checkpoints"


def load(folder: str | os.PathLike) -> Sweep:
    """Load ``folder/configs.py``; every problem is a ValueError naming the file and the fault.

    TrainConfig validates itself when constructed, so a bad field (n < 2, a case outside 1-5,
    ...) fails here, before anything runs, with the trainer's message naming the field.
    """
    from interp.training.trainer import TrainConfig

    root = Path(folder)
    path = root / CONFIGS_FILE
    if not root.is_dir():
        raise ValueError(f"sweep folder {root} does not exist")
    if not path.is_file():
        raise ValueError(f"{path} not found; a sweep folder needs a {CONFIGS_FILE} defining CONFIGS and LAYOUT")
    module_name = f"_interp_sweep_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error: {e.msg}") from e
    except Exception as e:  # a TrainConfig or Layout that refuses its values, a NameError...
        raise ValueError(f"{path}: {type(e).__name__}: {e}") from e
    except SystemExit as e:  # configs.py is executed as Python: an exit is a broken sweep, not success
        raise ValueError(f"{path} called sys.exit({e.code!r}) while being loaded; a {CONFIGS_FILE} "
                         "must only define CONFIGS and LAYOUT") from None
    for attr in ("CONFIGS", "LAYOUT"):
        if not hasattr(module, attr):
            raise ValueError(f"{path} defines no {attr}")
    configs = module.CONFIGS
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Iterable):
        raise ValueError(f"{path}: CONFIGS is a {type(configs).__name__}; accepted: a list of TrainConfig")
    configs = tuple(configs)
    if not configs:
        raise ValueError(f"{path}: CONFIGS is empty")
    for i, c in enumerate(configs):
        if not isinstance(c, TrainConfig):
            raise ValueError(f"{path}: CONFIGS[{i}] is a {type(c).__name__}; accepted: TrainConfig")
    names: dict[str, int] = {}
    for i, c in enumerate(configs):
        if c.name() in names:
            raise ValueError(f"{path}: CONFIGS[{i}] repeats CONFIGS[{names[c.name()]}] ({c})")
        names[c.name()] = i
    layout = module.LAYOUT
    if not isinstance(layout, Layout):
        raise ValueError(f"{path}: LAYOUT is a {type(layout).__name__}; accepted: interp.training.sweeps.Layout")
    fields = set(configs[0].to_dict())
    missing = [f for f in (*layout.rows, layout.column) if f not in fields]
    if missing:
        raise ValueError(f"{path}: LAYOUT names {missing}, not TrainConfig fields ({sorted(fields)})")
    return Sweep(name=root.resolve().name, root=root, configs=configs, layout=layout)


# --------------------------------------------------------------------------- planning


def group_key(config):
    """Configs with equal keys differ only in their seed and train as one ensemble."""
    return dataclasses.replace(config, seed=0)


def group_by_seed(configs: Sequence) -> list[list]:
    """Group configs that differ only in seed, keeping first-appearance order."""
    groups: dict = {}
    for c in configs:
        groups.setdefault(group_key(c), []).append(c)
    return list(groups.values())


def parse_where(items: Sequence[str] | None) -> dict[str, str]:
    """``["case=5", "d_token=16"]`` -> ``{"case": "5", "d_token": "16"}``."""
    where = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--where {item!r}; accepted: FIELD=VALUE, e.g. case=5")
        key, value = key.strip(), value.strip()
        if where.get(key, value) != value:
            raise ValueError(
                f"--where gives {key} two values ({where[key]!r}, {value!r}); accepted: one "
                "value per field (run the sweep once per value)"
            )
        where[key] = value
    return where


def select(configs: Sequence, where: dict[str, str] | None = None) -> list:
    """The configs whose fields equal every ``where`` value (compared as strings)."""
    if not where:
        return list(configs)
    fields = configs[0].to_dict() if configs else {}
    unknown = [k for k in where if k not in fields]
    if unknown:
        raise ValueError(f"--where field {unknown[0]!r} is not a TrainConfig field; accepted: {sorted(fields)}")
    return [c for c in configs if all(str(c.to_dict()[k]) == v for k, v in where.items())]


def plan(configs: Sequence, done: dict[str, str], *, retry_failed: bool = False,
         limit: int | None = None) -> list[list]:
    """The groups still to train: stored runs are skipped (failed ones too, unless
    ``retry_failed``); at most ``limit`` runs in all."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit={limit!r}; accepted: an integer >= 0")

    def finished(c) -> bool:
        status = done.get(c.name())
        return status is not None and (status == "ok" or not retry_failed)

    todo = [c for c in configs if not finished(c)]
    if limit is not None:
        todo = todo[:limit]
    return group_by_seed(todo)


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
        from interp.training import ray_backend

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
    on_start: Callable[[list], None] | None = None,
    on_run: Callable[[RunRecord], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> Summary:
    """Train every run of ``sweep`` that the store does not have yet.

    backend: ``"local"`` (a process pool, or this process) or ``"ray"`` (one Ray task per
             group, :mod:`interp.training.ray_backend`; needs the ``ray`` extra).
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
    on_plan(runs_to_train) is called once the store's lock is held and the plan made,
    on_start(configs) when a group starts, on_run(record) after each row commits (the CLI
    drives its progress bar with them). Nothing opens the store before the lock is held.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r}; accepted: an integer >= 1")
    cores = os.cpu_count() or 1
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads={threads!r}; accepted: an integer >= 1")
    device = check_backend(backend, address, device)  # before anything is written
    if save_every is not None and (isinstance(save_every, bool) or not isinstance(save_every, (int, float))
                                   or not save_every > 0):
        raise ValueError(f"save_every={save_every!r}; accepted: seconds > 0, or None (never)")
    store_path = Path(store) if store is not None else sweep.default_store
    ckpt_root = checkpoint_dir(store_path)
    saves = None if save_every is None or backend != "local" else progress.folder(store_path)
    configs = select(sweep.configs, where)
    start = time.perf_counter()
    with store_mod.DriverLock(store_path), store_mod.Store(store_path) as db:
        store_mod.clean_partial(ckpt_root)
        db.verify()  # an edited or corrupt row stops the sweep, naming the run
        done, repaired = _finished(db, configs)
        if saves is not None:
            _clean_progress(saves, configs, done)
        groups = plan(configs, done, retry_failed=retry_failed, limit=limit)
        if on_plan is not None:
            on_plan(sum(len(g) for g in groups))
        pooled = backend == "local" and workers > 1 and len(groups) > 1
        if pooled:
            threads = threads or max(1, cores // workers)
        elif backend == "ray":
            threads = threads or 1
        skipped = sum(1 for c in configs if c.name() in done and (done[c.name()] == "ok" or not retry_failed))
        sweep_id = db.begin_sweep(sweep.name, workers,
                                  environment(workers, threads, backend, address, device))
        trained = failed = 0

        def commit(records: list[RunRecord]) -> None:
            nonlocal trained, failed
            for rec in records:
                ckpt = sums = None
                if rec.files and checkpoints:
                    ckpt = ckpt_root / rec.name
                    sums = store_mod.place_checkpoint(rec.files, ckpt)
                db.put(rec, ckpt, sums)
                trained += 1
                failed += not rec.ok
                if not rec.ok:
                    log.warning("%s seed %s: %s", describe(rec.config), rec.seed, rec.status)
                if on_run is not None:
                    on_run(rec)
            if saves is not None and records:
                progress.remove(saves, [rec.name for rec in records])

        outcome = "interrupted"
        try:
            if backend == "ray":
                from interp.training import ray_backend

                ray_backend.run_groups(groups, sweep.name, workers, threads, on_start, commit,
                                       address=address)
            elif not pooled:
                if threads is not None:
                    import torch

                    torch.set_num_threads(threads)
                for g in groups:
                    if on_start is not None:
                        on_start(g)
                    commit(train_records([c.to_dict() for c in g], sweep.name, device,
                                         saves and str(saves), save_every or 0.0))
            else:
                run_pool(groups, sweep.name, min(workers, len(groups)), threads, on_start, commit,
                         device, saves and str(saves), save_every or 0.0)
            outcome = "done"
        except BaseException as e:
            outcome = f"interrupted: {type(e).__name__}"
            raise
        finally:
            wall = time.perf_counter() - start
            db.end_sweep(sweep_id, trained, wall, outcome, {"load_average_end": load_average()})
    return Summary(sweep=sweep.name, store=store_path, total=len(configs), skipped=skipped,
                   trained=trained, failed=failed, workers=workers, wall_seconds=round(wall, 3),
                   backend=backend, repaired=tuple(repaired))


def _clean_progress(saves: Path, configs, done: dict[str, str]) -> None:
    """Remove temporary files, and progress files of groups whose rows are all stored."""
    progress.clean(saves)
    for group in group_by_seed(configs):
        names = [c.name() for c in group]
        if all(name in done for name in names):
            progress.remove(saves, names)


def _finished(db, configs) -> tuple[dict[str, str], list[str]]:
    """The stored statuses the plan may trust, and the runs to retrain because their
    checkpoint folder or files are missing or do not hash as the store recorded."""
    names = {c.name() for c in configs}
    damaged = {k: why for k, why in db.checkpoint_problems().items() if k in names}
    for name, why in damaged.items():
        log.warning("run %s: %s; it is trained again", name, why)
    done = {k: v for k, v in db.statuses().items() if k not in damaged}
    return done, sorted(damaged)
