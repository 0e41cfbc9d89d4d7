"""Sweep folders: ``configs.py`` loaded in a guarded child process into a :class:`Sweep`.

A sweep folder holds ``configs.py`` (``CONFIGS``: one TrainConfig per run; ``LAYOUT``: a
:class:`TableLayout`) and optionally ``paper.csv`` (:mod:`interp.sweeps.driver` has an example).
``configs.py`` is Python, so :func:`load` never runs it in the caller: each load is a fresh
child process of :mod:`multiprocessing`'s forkserver, the one the local backend's workers come
from (:mod:`interp.sweeps.local_backend`: it has imported the trainer once), under a time limit,
counting the runs as CONFIGS is iterated (:data:`MAX_RUNS`); it sends back the configs and the
layout. A hang, ``os._exit``, a signal, ``KeyboardInterrupt`` or an exception there becomes one
ValueError naming the file; every config is size-checked
(:func:`interp.core.limits.check_trainable`) before any run starts.

The child follows the driver (:func:`~interp.sweeps.workers.exit_with_driver`: it ends when
the driver ends, however it ends), and past its time limit it is ended twice over: the driver
kills it, and its own wall-clock alarm (SIGALRM, left at the kernel's default action) ends it a
few seconds later should the driver be gone and configs.py be stuck in C code holding the GIL,
where the watching thread cannot run (``tests/sweeps/test_sweep_load.py``). Where there is no
forkserver (Windows), configs.py runs in the caller, unguarded.

This replaced a hand-rolled helper (a fork of the driver serving loads over pickled pipes). The
price: a command that loads a sweep without training one (``interp report``) starts the server,
a second interpreter importing the trainer, overlapped with the driver's own import; a sweep
that trains needs the server for its workers anyway, and now starts one process, not two.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import signal
import sys
from pathlib import Path

from interp.sweeps.configs_file import MAX_RUNS, check_sizes, read_configs
from interp.sweeps.folders import CONFIGS_FILE, Sweep

#: Seconds ``configs.py`` may take to load: ``load(timeout=...)``, ``--load-timeout`` of
#: ``interp sweep`` and ``interp report``, or the environment variable ``INTERP_LOAD_TIMEOUT``.
LOAD_TIMEOUT = 60.0
LOAD_TIMEOUT_ENV = "INTERP_LOAD_TIMEOUT"
#: True in the child that executes a configs.py: a sweep it loads (experiments/readings' tables
#: load experiments/table1) is read in that child, under the same time limit.
IN_LOADER = False
#: seconds after its time limit at which a loading child's own alarm ends it (the driver's kill
#: comes first; the alarm is for a driver that is gone)
ALARM_GRACE = 5.0


def load(folder: str | os.PathLike, *, timeout: float | None = None, max_runs: int = MAX_RUNS) -> Sweep:
    """Load ``folder/configs.py``; every problem is a ValueError naming the file and the fault.

    configs.py is Python, so it runs in a child process (:func:`_load_in_child`) given ``timeout``
    seconds (default ``$INTERP_LOAD_TIMEOUT``, else :data:`LOAD_TIMEOUT`): an endless loop or
    generator, ``os._exit``, a raised KeyboardInterrupt or a crash there is one line here, and
    this process carries on. TrainConfig validates itself when constructed, so a bad field
    (n < 2, a case outside 1-5, ...) fails here, before anything runs, with the trainer's message
    naming the field. Refused too, before any run starts: more than ``max_runs`` runs
    (:data:`MAX_RUNS`), and a config whose training step (its group of seeds stacked) would not
    fit this machine's memory (:func:`interp.core.limits.check_trainable`).
    """
    root = Path(folder)
    _check_utf8(root)
    path = root / CONFIGS_FILE
    if not root.is_dir():
        raise ValueError(f"sweep folder {root} does not exist")
    if not path.is_file():
        raise ValueError(f"{path} not found; a sweep folder needs a {CONFIGS_FILE} defining CONFIGS and LAYOUT")
    timeout = _load_timeout(timeout)
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise ValueError(f"max_runs={max_runs!r}; accepted: an integer >= 1")
    ctx = None if IN_LOADER else _context()  # in the child, a configs.py loading another sweep
    if ctx is None:
        configs, layout = read_configs(path, max_runs)
    else:
        configs, layout = _load_in_child(ctx, path, timeout, max_runs)
    check_sizes(path, configs)
    return Sweep(name=root.resolve().name, root=root, configs=configs, layout=layout)


def _check_utf8(root: Path) -> None:
    """The store, the sweeps log and the report record a sweep's folder as text: a name that is
    not UTF-8 would fail at the first write, naming nothing."""
    for p in (os.path.abspath(root), str(root.resolve())):
        try:
            p.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"sweep folder {os.fsencode(p)!r}: its path is not valid UTF-8; accepted: UTF-8 "
                "names (rename the folder, e.g. with mv, and run again)"
            ) from None


def _load_timeout(timeout) -> float:
    where = "timeout"
    if timeout is None:
        where, timeout = LOAD_TIMEOUT_ENV, os.environ.get(LOAD_TIMEOUT_ENV, LOAD_TIMEOUT)
        try:
            timeout = float(timeout)
        except ValueError:
            pass
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"{where}={timeout!r}; accepted: seconds > 0 for configs.py to load "
                         f"(default {LOAD_TIMEOUT:g}; inf: no limit)")
    return float(timeout)


# --------------------------------------------------------------------------- the child process


def _context():
    """The local backend's forkserver context (the trainer preloaded), or None without one."""
    from interp.sweeps.local_backend import _context as pool_context

    ctx = pool_context()
    return ctx if ctx.get_start_method() == "forkserver" else None


def _load_in_child(ctx, path: Path, timeout: float, max_runs: int) -> tuple:
    """Execute ``path`` in a child of the forkserver; its answer, or one ValueError."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = None
    _start_server()  # the server imports the trainer while this process imports the configs' classes
    importlib.import_module("interp.training.runs")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(send, str(path), cwd, list(sys.path), max_runs, timeout),
                          daemon=True, name=f"interp loader: {path}")
    try:
        process.start()  # the first start waits for the server to import the trainer
        send.close()  # the child's end: EOF here as soon as the child is gone
        if not receive.poll(None if timeout == math.inf else timeout):
            raise ValueError(
                f"{path} did not finish loading within {timeout:g} s (an endless loop or "
                f"generator?); raise --load-timeout (or {LOAD_TIMEOUT_ENV}) if it is just slow")
        try:
            reply = receive.recv()
        except EOFError:  # the child ended before it could answer
            process.join()
            raise ValueError(
                f"{path} ended the loading process ({_describe_exit(process.exitcode)}) while "
                f"being loaded; a {CONFIGS_FILE} must only define CONFIGS and LAYOUT") from None
    finally:  # an answer, a timeout, Ctrl-C: never leave a child loading
        send.close()
        receive.close()
        if process.pid is not None:
            if process.exitcode is None:
                process.kill()
            process.join()
            process.close()
    if reply[0] == "error":
        raise ValueError(reply[1])
    return reply[1]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _child(conn, path: str, cwd: str | None, sys_path: list, max_runs: int, timeout: float) -> None:
    """The loading child: follow the driver, execute configs.py, send ``("ok", (configs,
    layout))`` or ``("error", line)``, and end without running configs.py's exit handlers."""
    global IN_LOADER
    IN_LOADER = True
    try:
        from interp.sweeps.workers import exit_with_driver

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the driver decides
        exit_with_driver()
        if timeout != math.inf:  # the kernel ends it, GIL held or not, if nobody else does
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, timeout + ALARM_GRACE)
        os.dup2(2, 1)  # what configs.py prints goes to stderr, never to stdout
        if cwd is not None:
            os.chdir(cwd)
        sys.path[:] = sys_path
        shown = _stderr()
        try:
            with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
                _reply(conn, Path(path), max_runs)
        finally:
            with contextlib.suppress(Exception):  # before os._exit
                shown.flush()
    finally:
        os._exit(0)


def _stderr():
    """A line-buffered text stream on fd 2 (the server's stderr: the driver's), or /dev/null."""
    try:
        return open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 - flushed before os._exit
    except OSError:
        return open(os.devnull, "w")  # noqa: SIM115


def _reply(conn, path: Path, max_runs: int) -> None:
    try:
        reply = ("ok", read_configs(path, max_runs))
    except ValueError as e:
        reply = ("error", str(e))
    except KeyboardInterrupt:
        reply = ("error", f"{path} raised KeyboardInterrupt while being loaded; a "
                          f"{CONFIGS_FILE} must only define CONFIGS and LAYOUT")
    except BaseException as e:  # noqa: BLE001 - whatever it is, the driver gets one line
        reply = ("error", f"{path}: {type(e).__name__}: {e}")
    try:
        conn.send(reply)  # pickled whole before anything is written
    except Exception as e:  # e.g. a LAYOUT.paper value that cannot be pickled
        conn.send(("error", f"{path}: CONFIGS or LAYOUT cannot be sent back to the driver "
                            f"({type(e).__name__}: {e}); accepted: TrainConfig and TableLayout values"))


def warm_loader() -> None:
    """Start the forkserver that loads configs.py files (and runs the local backend's workers)
    now, without waiting: its imports (torch, TransformerLens: seconds) then overlap this
    process's own. A command that will load a sweep calls it first thing; nothing else changes."""
    if not IN_LOADER and _context() is not None:
        _start_server()


def _start_server() -> None:
    from interp.sweeps.local_backend import start_server

    start_server()  # returns once started; the server imports on its own, SIGINT ignored
