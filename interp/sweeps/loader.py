"""Sweep folders: ``configs.py`` loaded in a guarded child process into a :class:`Sweep`.

A sweep folder holds ``configs.py`` (``CONFIGS``: one TrainConfig per run; ``LAYOUT``: a
:class:`Layout`) and optionally ``paper.csv`` (:mod:`interp.sweeps.driver` has an example).
``configs.py`` is Python, so :func:`load` never runs it in the caller: a loader process (one
per driver, :mod:`interp.sweeps.loader_process`, exiting with the driver or after 30 s idle)
forks a fresh child for each load, under a time limit, counting the runs as CONFIGS is iterated
(:data:`MAX_RUNS`), and sends back the configs and the layout. A hang, ``os._exit``, a signal,
``KeyboardInterrupt`` or an exception there becomes one ValueError naming the file; every
config is size-checked (:func:`interp.core.limits.check_trainable`) before any run starts.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from interp.sweeps import loader_process as helper
from interp.sweeps.configs_file import MAX_RUNS, check_sizes, read_configs
from interp.sweeps.loader_process import _recv, _send
from interp.sweeps.folders import CONFIGS_FILE, Layout, Sweep

log = logging.getLogger(__name__)

#: Seconds ``configs.py`` may take to load: ``load(timeout=...)``, ``--load-timeout`` of
#: ``interp sweep`` and ``interp report``, or the environment variable ``INTERP_LOAD_TIMEOUT``.
LOAD_TIMEOUT = 60.0
LOAD_TIMEOUT_ENV = "INTERP_LOAD_TIMEOUT"


def load(folder: str | os.PathLike, *, timeout: float | None = None, max_runs: int = MAX_RUNS) -> Sweep:
    """Load ``folder/configs.py``; every problem is a ValueError naming the file and the fault.

    configs.py is Python, so it runs in a child process (:class:`_Loader`) given ``timeout``
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
    if helper.IN_LOADER or not hasattr(os, "fork"):  # a configs.py loading another sweep: guarded already
        configs, layout = read_configs(path, max_runs)
    else:
        configs, layout = _LOADER.load(path, timeout, max_runs)
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


# --------------------------------------------------------------------------- the helper process

_LOADER_START = 300.0  # seconds the loader may take to import the trainer (not configs.py's time)
#: whether the helper is forked from this process (:class:`~interp.sweeps.loader_process.ForkedHelper`)
#: rather than started as a fresh interpreter that imports the trainer a second time
_FORK = helper.can_fork()


class _Gone(Exception):
    """The loader process ended before it answered (e.g. it had just exited idle)."""


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Loader:
    """Executes configs.py files in child processes, one line for whatever goes wrong there.

    A helper process (:mod:`interp.sweeps.loader_process`; started on the first load, in its own
    session so a terminal's Ctrl-C is this process's to handle) has the trainer imported --
    torch and TransformerLens, seconds -- and forks a fresh child per configs.py; later loads
    cost milliseconds, and each child starts from the same clean state. The child runs
    :func:`~interp.sweeps.configs_file.read_configs` and sends back the checked configs and
    layout, or the error's line; this process enforces the time limit and kills the child past
    it. The helper exits with this process (its stdin closes; it kills a child still loading)
    or after idling ``LOADER_IDLE`` seconds, so it never outlives the driver.
    """

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.ready = False  # the helper said it has imported the trainer
        self.owed_exit = False  # a child answered; the helper's note of its exit is still to read
        self.lock = threading.Lock()

    def load(self, path: Path, timeout: float, max_runs: int) -> tuple[tuple, Layout]:
        with self.lock:
            for attempt in range(2):
                try:
                    return self._load(path, timeout, max_runs)
                except _Gone as e:  # exited idle just as the request went: once more, fresh
                    self.close()
                    if attempt:
                        raise ValueError(f"{path}: the process loading it ended unexpectedly "
                                         f"({e}); run again") from None
                except ValueError:  # configs.py's fault, told in one line; the helper is in step
                    raise
                except BaseException:  # Ctrl-C while waiting...: never leave a child loading
                    self.close()
                    raise

    def _load(self, path: Path, timeout: float, max_runs: int):
        if self.owed_exit:
            self._recv_exit()
        self._start()
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        request = dict(path=str(path), cwd=cwd, sys_path=list(sys.path), max_runs=max_runs)
        try:
            _send(self.proc.stdin.fileno(), request)
        except OSError as e:
            raise _Gone(e) from None
        out = self.proc.stdout.fileno()
        started = _recv(out, time.monotonic() + _LOADER_START)
        if started is None:
            raise _Gone("no answer")
        pid = started[1]
        try:
            reply = _recv(out, None if timeout == math.inf else time.monotonic() + timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._recv_exit()
            raise ValueError(
                f"{path} did not finish loading within {timeout:g} s (an endless loop or "
                f"generator?); raise --load-timeout (or {LOAD_TIMEOUT_ENV}) if it is just slow"
            ) from None
        if reply is None:
            raise _Gone("it died while loading")
        if reply[0] == "exit":  # the child ended before it could answer
            raise ValueError(
                f"{path} ended the loading process ({_describe_exit(reply[1])}) while being "
                f"loaded; a {CONFIGS_FILE} must only define CONFIGS and LAYOUT"
            )
        self.owed_exit = True  # taken at the next load: the child's exit costs this one nothing
        if reply[0] == "error":
            raise ValueError(reply[1])
        return reply[1]

    def _recv_exit(self) -> None:
        """The helper's note that the child is gone, which keeps the two in step."""
        self.owed_exit = False
        try:
            note = _recv(self.proc.stdout.fileno(), time.monotonic() + 30)
        except TimeoutError:
            note = None
        if not note or note[0] != "exit":
            self.close()

    def warm(self) -> None:
        """Start a fresh helper now, without waiting for it (see :func:`warm_loader`); a
        forked one starts at the first load, once this process has the trainer imported."""
        with self.lock:
            if not _FORK and (self.proc is None or self.proc.poll() is not None):
                self._spawn()

    def _spawn(self) -> None:
        self.close()
        self.ready = False
        if _FORK:
            self.proc = helper.ForkedHelper()
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-c", helper.BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            start_new_session=True,
        )
        _send(self.proc.stdin.fileno(), list(sys.path))

    def _start(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._spawn()
        if self.ready:
            return
        # the configs' classes: imported here (while a fresh helper imports them there)
        importlib.import_module("interp.training.runs")
        ready = _recv(self.proc.stdout.fileno(), time.monotonic() + _LOADER_START)
        if ready != ("ready",):
            self.close()
            raise ValueError(f"could not start the process that loads {CONFIGS_FILE} files "
                             f"({sys.executable}); is interp importable there?")
        self.ready = True

    def close(self) -> None:
        """End the helper and any child of it (they share a process group of their own)."""
        proc, self.proc, self.ready, self.owed_exit = self.proc, None, False, False
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        if proc.poll() is None:  # not reaped yet, so its id is still its own
            for kill in (os.killpg, os.kill):  # its group; itself, if not yet its group's leader
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


_LOADER = _Loader()
atexit.register(_LOADER.close)


def warm_loader() -> None:
    """Start the process that executes configs.py files (:func:`load`) now, without waiting,
    where it is a fresh interpreter: its imports (torch, TransformerLens: seconds) then overlap
    this process's own. (On Linux it is a fork of this process, started at the first load.) A
    command that will load a sweep calls it first thing; nothing else changes."""
    if not helper.IN_LOADER and hasattr(os, "fork"):
        _LOADER.warm()
