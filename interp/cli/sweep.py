"""interp sweep: train a sweep folder's configs into its results store (resumable)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from interp.sweeps.store import RunRecord
from interp.sweeps.driver import (
    BACKENDS,
    LOAD_TIMEOUT,
    LOAD_TIMEOUT_ENV,
    Summary,
    check_backend,
    load,
    parse_where,
    run_sweep,
    select,
    warm_loader,
)
from interp.sweeps.workers import describe, is_lost


def add_arguments(p) -> None:
    p.add_argument("dir", help="sweep folder holding configs.py (e.g. experiments/table1)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes (default 1: train in this process); "
                        "with --backend ray and no --address, the local Ray instance's CPUs "
                        "(refused with --address: the cluster's CPUs decide)")
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="local: a process pool (default); ray: one Ray task per group of seeds "
                        "(pip install 'interp-funceval[ray]')")
    p.add_argument("--address", default=None,
                   help="with --backend ray: the Ray cluster to join (auto, or HOST:PORT of "
                        "the head); default: start a local Ray instance")
    p.add_argument("--device", default="cpu",
                   help="where runs train: cpu (default), cuda or cuda:N (local backend); a run "
                        "trained on a GPU keeps its name and equals the CPU's to float rounding")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads per worker (default: cores / workers)")
    p.add_argument("--store", default=None,
                   help="results store, or a folder holding one (default DIR/results/store.sqlite; "
                        "checkpoints beside it)")
    p.add_argument("--limit", type=int, default=None, help="train at most this many runs now")
    p.add_argument("--where", action="append", metavar="FIELD=VALUE",
                   help="only configs with this field value (repeatable), e.g. --where case=5")
    p.add_argument("--retry-failed", action="store_true", help="rerun runs stored as failed")
    p.add_argument("--no-checkpoints", action="store_true",
                   help="store the runs' rows but not their model files (a borrowed machine whose "
                        "disk goes away; the runs count as done and cannot be loaded or analysed)")
    p.add_argument("--save-every", type=float, default=None, metavar="SECONDS",
                   help="save each training group's state to <store folder>/progress/ this often "
                        "(default 600; 0: never); the next sweep goes on from it bit for bit "
                        "(local backend; refused with --backend ray)")
    p.add_argument("--snapshots", default=None, metavar="N|N:U:M|curve",
                   help="write each run's snapshots as it trains, into <checkpoint>/timeline/ where "
                        "interp timeline reads them: N, every N steps; N:U:M, every N steps to step U, "
                        "then every M; curve, every point of the "
                        "loss curve (hence every loss milestone); step 0 and the last step always. "
                        "Rows and checkpoints are a plain sweep's, bit for bit; CPU only; groups "
                        "train from step 0 (refused with --save-every)")
    add_load_timeout(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_load_timeout(p) -> None:
    """--load-timeout, for every command that loads a sweep folder's configs.py."""
    p.add_argument("--load-timeout", type=float, default=None, metavar="SECONDS",
                   help="time configs.py may take to load, in a child process (default: "
                        f"${LOAD_TIMEOUT_ENV}, else {LOAD_TIMEOUT:g})")


def progress_callbacks(total: int, desc: str, *, disable: bool = False, initial: int = 0):
    """A tqdm bar (runs done / total, the groups training now, ETA) and the callbacks for it."""
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, desc=desc, unit="run", disable=disable,
               dynamic_ncols=True, file=sys.stderr)
    running: dict[str, int] = {}  # group label -> seeds still training

    def show(last: str = "") -> None:
        now = "; ".join(running) or "-"
        bar.set_postfix_str(f"training: {now}" + (f" | last: {last}" if last else ""))

    def on_start(group) -> None:
        running[describe(group[0])] = len(group)
        show()

    def on_run(rec: RunRecord) -> None:
        label = describe(rec.config)
        if label in running:
            running[label] -= 1
            if running[label] <= 0:
                del running[label]
        if is_lost(rec):  # not stored: the bar counts stored runs (and the warning names it)
            show()
            return
        acc = "" if rec.accuracy is None else f" {100 * rec.accuracy:.1f}%"
        bar.update()
        show(f"{label} seed {rec.seed}{acc}" + ("" if rec.ok else f" ({rec.status})"))

    return bar, on_start, on_run


def format_summary(s: Summary) -> str:
    repaired = (f"\nretrained {len(s.repaired)} run(s) whose checkpoint was missing or corrupt: "
                f"{', '.join(s.repaired)}") if s.repaired else ""
    return (
        f"sweep {s.sweep}: {s.total} runs declared, {s.skipped} already stored, "
        f"{s.trained} trained now ({s.failed} failed) with "
        f"{'Ray' if s.backend == 'ray' else s.workers} worker(s) "
        f"in {s.wall_seconds:.1f} s\nstore: {s.store}{repaired}{format_lost(s)}"
    )


def format_lost(s: Summary) -> str:
    """The runs this invocation lost (not stored) and what to do; empty when none."""
    if not s.lost:
        return ""
    return (f"\n{s.lost} run(s) lost: {'; '.join(s.lost_groups)}; rerun the same command to "
            "train them")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def check_flags(args) -> None:
    """Refuse, by name, flags that the other flags given would make do nothing."""
    if args.save_every is not None and args.backend != "local":
        raise ValueError(f"--save-every {args.save_every:g} saves the local backend's groups; with "
                         f"--backend {args.backend} nothing would be saved: drop --save-every")
    if args.snapshots is not None and args.save_every is not None:
        raise ValueError(f"--save-every {args.save_every:g} with --snapshots {args.snapshots}: a group "
                         "with snapshots trains from step 0 (a resumed group would lack the snapshots "
                         "before its save) and saves no progress; drop --save-every")
    if args.workers is not None and args.address is not None:
        raise ValueError(f"--workers {args.workers} with --address {args.address}: the Ray "
                         "cluster's CPUs set how many groups train at once; drop --workers")


def parse_snapshots(value):
    """``--snapshots``' value as :func:`~interp.sweeps.driver.run_sweep` takes it (N or
    ``"curve"``; None); a ValueError naming the value and what is accepted otherwise."""
    from interp.training import snapshot_plans

    plan = snapshot_plans.parse(value)
    return None if plan is None else plan.value()


def store_of(args, sweep) -> Path:
    """``--store`` (a store file, or a folder holding one: :func:`interp.sweeps.frame.find_store`),
    else the sweep folder's default store."""
    from interp.sweeps.frame import find_store

    if not args.store:
        return sweep.default_store
    path = Path(args.store)
    if path.is_dir():
        try:
            return find_store(path)
        except ValueError:
            pass  # a folder without a store: the driver refuses it, naming the folder
    return path


def run(args) -> int:
    import json

    check_flags(args)
    snapshots = parse_snapshots(args.snapshots)  # its own words, before anything is loaded
    warm_loader()  # configs.py's loader imports the trainer while this process does
    device = check_backend(args.backend, args.address, args.device)  # before anything is read
    sweep = load(args.dir, timeout=args.load_timeout)
    where = parse_where(args.where)
    store_path = store_of(args, sweep)
    from interp.sweeps.store import real_path
    from interp.training.files import check_name_length

    check_name_length(real_path(store_path), "--store" if args.store else "store", sqlite_file="")
    configs = select(sweep.configs, where)
    if not configs:
        raise ValueError(f"--where {args.where} matches none of the {len(sweep.configs)} configs")
    # the bar appears once the driver holds the store's lock and has planned (on_plan): a
    # refused second driver must not open the store at all, and an error prints alone
    progress: dict = {}

    def on_plan(todo: int) -> None:
        progress["bar"], progress["start"], progress["run"] = progress_callbacks(todo, f"sweep {sweep.name}")

    # SIGTERM (`timeout`, a job scheduler, `kill`) stops like Ctrl-C: the pool's workers are
    # terminated and the invocation is logged as interrupted, instead of the driver dying alone
    # and leaving its workers training on
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        summary = run_sweep(sweep, store=store_path, workers=args.workers or 1,
                            threads=args.threads, limit=args.limit, where=where,
                            retry_failed=args.retry_failed, backend=args.backend,
                            address=args.address, device=device, on_plan=on_plan,
                            checkpoints=not args.no_checkpoints, snapshots=snapshots,
                            save_every=600.0 if args.save_every is None else args.save_every or None,
                            on_start=lambda group: progress["start"](group),
                            on_run=lambda record: progress["run"](record))
    except KeyboardInterrupt:
        done = progress["bar"].n if progress else 0
        print(f"interrupted: {done} run(s) stored in {store_path}; rerun the same command to "
              "resume", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if progress:
            progress["bar"].close()
    print(json.dumps(summary.to_dict(), indent=1) if args.json else format_summary(summary))
    return 1 if summary.lost else 0  # a script must not take a sweep with lost runs for complete
