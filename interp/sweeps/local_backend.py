"""The local backend: each group of seeds trains in a process of its own, at most ``workers``
at a time (:func:`run_pool`, an adapter for :func:`interp.sweeps.workers.schedule`).

A group's process ends with it, so one that dies (SIGKILL, the OOM killer, a crash) costs that
group alone: it comes back as :func:`~interp.sweeps.workers.lost_records` naming the process and
its signal or exit code, and the other groups train on. Processes come from a forkserver that
has imported the trainer once (:func:`_context`); each follows the driver
(:func:`~interp.sweeps.workers.exit_with_driver`), so none outlives a sweep. Only the driver
commits the records that come back, so only the driver writes the store.
"""

from __future__ import annotations

import logging
import os
import signal

from interp.core import tasks
from interp.sweeps import store as store_mod
from interp.sweeps.store import RunRecord
from interp.sweeps.workers import describe, exit_with_driver, init_worker, lost_records, schedule, train_records
from interp.training.machine import mkl_branch

log = logging.getLogger(__name__)


def run_pool(groups, sweep_name, workers, threads, on_start, commit, device: str = "cpu",
             progress_dir: str | None = None, every: float = 600.0, snapshots=None) -> None:
    """The local backend: :func:`schedule` with ``workers`` groups in flight, each in a process
    of its own (on CUDA they share the GPU, each with its own CUDA context).

    A group's process ends with it, so one that dies (SIGKILL, the OOM killer, a crash)
    costs that group alone: it comes back as :func:`lost_records` naming the process and its
    signal or exit code, and the other groups train on. Ctrl-C (SIGTERM too, through the
    CLI) or an error in ``commit`` terminates the running groups' processes and propagates.
    ``snapshots``: :func:`~interp.sweeps.workers.train_records`' (None: none).
    """
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        start_server()
    branch = mkl_branch()
    presentations = tuple(tasks.added().values())  # registered outside interp: the workers too
    running: list[_Worker] = []

    def submit(group):
        worker = _Worker(ctx, [c.to_dict() for c in group], sweep_name,
                         (threads, branch, device, progress_dir, every, presentations, snapshots))
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
    ctx.set_forkserver_preload(["interp.sweeps.local_backend", "interp.training.trainer",
                                "interp.training.checkpoints"])
    return ctx


#: the server's processes start through this shell line: SIGINT ignored before Python runs (an
#: ignored signal stays ignored across ``exec``, and Python then installs no handler for it)
_QUIET = 'trap "" INT; exec "$0" "$@"'


def start_server() -> None:
    """Start multiprocessing's forkserver (if it is not running) with SIGINT ignored in it from
    before its first Python instruction: a Ctrl-C while it imports its preload (torch,
    TransformerLens: seconds) is then this process's alone (one line, exit 130), not a
    KeyboardInterrupt traceback from the server (whose own SIG_IGN comes only after its
    imports). The server (and multiprocessing's resource tracker, started with it) is spawned
    through ``/bin/sh`` running :data:`_QUIET`, which execs Python with the signal ignored;
    this process's own handler is never touched. Without ``/bin/sh``, as multiprocessing
    starts it."""
    from multiprocessing import forkserver, util

    if not os.path.exists("/bin/sh"):
        forkserver.ensure_running()
        return
    spawn = util.spawnv_passfds

    def quiet(path, args, passfds):
        return spawn(b"/bin/sh", [b"/bin/sh", "-c", _QUIET, path, *list(args)[1:]], passfds)

    util.spawnv_passfds = quiet
    try:
        forkserver.ensure_running()
    finally:
        util.spawnv_passfds = spawn


class _Worker:
    """One group training in a process of its own; its records come back over a pipe.

    ``records`` is set once the process is done (:meth:`wait_any`): what it sent, or the
    group's :func:`lost_records` when it ended without sending them.
    """

    JOIN_SECONDS = 10.0  # for a process that has sent its records (or closed its pipe) to end

    def __init__(self, ctx, config_dicts: list[dict], sweep: str, settings: tuple):
        """Start the process: ``settings`` are :func:`_work`'s (threads, MKL branch, device,
        progress folder, seconds between saves, presentations, snapshots)."""
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
          device: str, progress_dir: str | None, every: float, presentations: tuple = (),
          snapshots=None) -> None:
    """A worker process's whole life: follow the driver, set up, train one group, send its
    records (or, for an error outside training, its one-line description) and end.
    ``presentations``: the tasks the driver registered from outside interp, registered here too
    (:func:`interp.core.tasks.added`; unpickling them already does)."""
    # Ctrl-C in a terminal reaches every process of the foreground group: the driver alone
    # decides, and terminates the workers (run_pool)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_driver()
    init_worker(threads, branch)
    for task in presentations:
        tasks.register(task)
    try:
        sent = train_records(config_dicts, sweep, device, progress_dir, every, snapshots)
    except Exception as e:  # noqa: BLE001 - outside training: the group is lost, the sweep goes on
        log.exception("worker process %d: %s", os.getpid(), describe(config_dicts[0]))
        sent = f"{type(e).__name__}: {e}"
    conn.send(sent)
    conn.close()
