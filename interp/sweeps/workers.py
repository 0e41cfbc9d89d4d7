"""What runs where in a sweep: the worker function, the worker set-up, one scheduler loop.

:func:`train_records` is a worker's whole job (train one group of seeds, return plain
:class:`~interp.sweeps.store.RunRecord` data with the checkpoint as bytes); :func:`init_worker` sets a
worker process up (torch threads, the driver's MKL branch). :func:`schedule` is the one loop
that keeps ``slots`` groups in flight, longest first, and commits each group's records as it
finishes; a backend is an adapter that hands back futures: :func:`run_pool` (one local process
per group) here, :func:`interp.sweeps.ray_backend.run_groups` (Ray tasks) there. Only the driver commits,
so only the driver writes the store.

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
import signal
import tempfile
import threading
from pathlib import Path
from typing import Callable, Hashable, Iterable, Sequence

from interp.sweeps import store as store_mod
from interp.training.machine import keep_freed_memory, mkl_branch, mkl_library
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
    d_model = 2 * c.d_token if c.case in tasks.SAME_POSITION else c.d_token
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
                  progress_dir: str | None = None, every: float = 600.0) -> list[RunRecord]:
    """Train one group of seeds on ``device`` and return plain records (the worker's whole job).

    ``progress_dir``: resume the group from its progress file there and save to it every
    ``every`` seconds (:mod:`interp.training.progress`; the driver deletes it after committing;
    a save that fails only warns, the run goes on).

    Runs in a worker process (or in the driver when ``workers=1``); writes nothing but a
    temporary directory of its own. An exception in the trainer marks every run of the group
    ``"failed: <reason>"`` so the sweep goes on, unless it is :func:`environmental` (the
    machine's fault, e.g. a full disk while writing the temporary checkpoint): then the group
    is lost (:func:`lost_records`), which the driver does not store, so a plain rerun trains it.
    Each record carries the run's wall and process CPU seconds as the trainer measured them
    (the group's, divided among its seeds).
    """
    from interp.training import checkpoints, progress, trainer as training

    configs = [training.TrainConfig.from_dict(d) for d in config_dicts]
    started = store_mod.now()

    def lost(e: BaseException) -> list[RunRecord]:
        # info, not a warning: the driver names the lost group and the reason in one line
        log.info("training %s: %s: %s; the group is lost (a rerun trains it)",
                 describe(configs[0]), type(e).__name__, e)
        return lost_records(config_dicts, sweep, f"{type(e).__name__}: {e}", started)

    saved = None if progress_dir is None else progress.path_for(progress_dir, [c.name() for c in configs])
    try:
        results = training.train_group(configs, device=device, progress=saved, every=every)
    except Exception as e:  # noqa: BLE001 - recorded in the store, reported by the driver
        if environmental(e):
            return lost(e)
        log.exception("training %s failed", describe(configs[0]))
        return [
            RunRecord(name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed,
                      status=f"failed: {type(e).__name__}: {e}", started_at=started)
            for c in configs
        ]
    records = []
    try:
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
    except Exception as e:  # noqa: BLE001 - the temporary checkpoint could not be written
        if not environmental(e):
            raise
        return lost(e)
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


def run_pool(groups, sweep_name, workers, threads, on_start, commit, device: str = "cpu",
             progress_dir: str | None = None, every: float = 600.0) -> None:
    """The local backend: :func:`schedule` with ``workers`` groups in flight, each in a process
    of its own (on CUDA they share the GPU, each with its own CUDA context).

    A group's process ends with it, so one that dies (SIGKILL, the OOM killer, a crash)
    costs that group alone: it comes back as :func:`lost_records` naming the process and its
    signal or exit code, and the other groups train on. Ctrl-C (SIGTERM too, through the
    CLI) or an error in ``commit`` terminates the running groups' processes and propagates.
    """
    ctx = _context()
    branch = mkl_branch()
    running: list[_Worker] = []

    def submit(group):
        worker = _Worker(ctx, [c.to_dict() for c in group], sweep_name,
                         (threads, branch, device, progress_dir, every))
        running.append(worker)
        return worker

    def wait_any(in_flight):
        done = _Worker.wait_any(in_flight)
        for worker in done:
            running.remove(worker)
        return done

    try:
        schedule(groups, workers, submit, wait_any, lambda worker: worker.records, on_start, commit)
    except BaseException:  # Ctrl-C, an error while committing: stop now, the store holds what finished
        for worker in running:
            worker.stop()
        raise


def _context():
    """forkserver: workers fork from a clean server process that has imported the trainer once
    (forking the driver itself after torch has run threads can hang; spawn re-imports
    TransformerLens in every worker, ~10 s each). The server exits by itself once the driver
    and every worker it forked have ended (it watches a pipe they all hold)."""
    import multiprocessing as mp

    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["interp.sweeps.workers", "interp.training.trainer",
                                "interp.training.checkpoints"])
    return ctx


class _Worker:
    """One group training in a process of its own; its records come back over a pipe.

    ``records`` is set once the process is done (:meth:`wait_any`): what it sent, or the
    group's :func:`lost_records` when it ended without sending them.
    """

    JOIN_SECONDS = 10.0  # for a process that has sent its records (or closed its pipe) to end

    def __init__(self, ctx, config_dicts: list[dict], sweep: str, settings: tuple):
        """Start the process: ``settings`` are :func:`_work`'s (threads, MKL branch, device,
        progress folder, seconds between saves)."""
        self.config_dicts, self.sweep = config_dicts, sweep
        self.started = store_mod.now()
        self.records: list[RunRecord] | None = None
        self.reaped = False
        receive, send = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_work, args=(send, config_dicts, sweep, *settings),
                                   daemon=True, name=f"interp worker: {describe(config_dicts[0])}")
        try:
            self.process.start()
        finally:
            send.close()  # the child's end: the driver sees EOF as soon as the child is gone
        self.conn = receive

    @staticmethod
    def wait_any(workers: list["_Worker"]) -> list["_Worker"]:
        """Block until some workers have sent their records or ended; collect those."""
        from multiprocessing.connection import wait

        ready = wait([w.conn for w in workers] + [w.process.sentinel for w in workers])
        done = [w for w in workers if w.conn in ready or w.process.sentinel in ready]
        for w in done:
            w.collect()
        return done

    def collect(self) -> None:
        """Receive the records (before joining: checkpoints are larger than a pipe's buffer),
        then reap the process; a process that sent nothing makes the group lost."""
        try:
            sent = self.conn.recv()
        except (EOFError, OSError):  # ended (or closed its pipe) before sending everything
            sent = None
        self.conn.close()
        self.process.join(self.JOIN_SECONDS)
        if self.process.exitcode is None:  # sent, or closed its pipe, yet still running
            self.process.kill()
            self.process.join()
        pid, code = self.process.pid, self.process.exitcode
        self.process.close()
        self.reaped = True
        if isinstance(sent, list):
            self.records = sent
            return
        why = f"raised {sent}" if isinstance(sent, str) else f"died ({_exit_description(code)})"
        self.records = lost_records(self.config_dicts, self.sweep, f"worker process {pid} {why}",
                                    self.started)

    def stop(self) -> None:
        """Terminate the process (its group is abandoned) and reap it."""
        if self.reaped:
            return
        if self.process.exitcode is None:
            self.process.terminate()
            self.process.join(self.JOIN_SECONDS)
            if self.process.exitcode is None:
                self.process.kill()
                self.process.join()
        self.conn.close()


def _exit_description(code: int | None) -> str:
    """``SIGKILL`` for a process killed by a signal, ``exit code N`` otherwise."""
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _work(conn, config_dicts: list[dict], sweep: str, threads: int, branch: int | None,
          device: str, progress_dir: str | None, every: float) -> None:
    """A worker process's whole life: follow the driver, set up, train one group, send its
    records (or, for an error outside training, its one-line description) and end."""
    # Ctrl-C in a terminal reaches every process of the foreground group: the driver alone
    # decides, and terminates the workers (run_pool)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_driver()
    init_worker(threads, branch)
    try:
        sent = train_records(config_dicts, sweep, device, progress_dir, every)
    except Exception as e:  # noqa: BLE001 - outside training: the group is lost, the sweep goes on
        log.exception("worker process %d: %s", os.getpid(), describe(config_dicts[0]))
        sent = f"{type(e).__name__}: {e}"
    conn.send(sent)
    conn.close()
