"""Sweep folders: ``configs.py`` loaded in a guarded child process into a :class:`Sweep`.

A sweep folder holds ``configs.py`` (``CONFIGS``: one TrainConfig per run; ``LAYOUT``: a
:class:`Layout`) and optionally ``paper.csv`` (:mod:`interp.sweeps.driver` has an example).
``configs.py`` is Python, so :func:`load` never runs it in the caller: a loader process (one
per driver, started by :func:`warm_loader`, exiting with the driver or after 30 s idle) forks
a fresh child for each load, under a time limit, counting the runs as CONFIGS is iterated
(:data:`MAX_RUNS`), and sends back the configs and the layout. A hang, ``os._exit``, a signal,
``KeyboardInterrupt`` or an exception there becomes one ValueError naming the file; every
config is size-checked (:func:`interp.core.limits.check_trainable`) before any run starts.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib
import importlib.util
import logging
import math
import os
import pickle
import select as io_select  # the module (sweeps.select picks configs)
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Sequence


from interp.sweeps.folders import CONFIGS_FILE, Layout, Sweep, group_key

log = logging.getLogger(__name__)

#: The most runs one sweep folder may declare. Every stage holds a sweep's configs whole
#: (planning names each run and reads its row, the report lays them all out; 10**6 runs took
#: 224 s and 0.9 GB just to plan), and 10**5 runs of the paper's protocol are already months of
#: CPU time, so a larger sweep is refused rather than streamed: split it into several sweep
#: folders (one per case, per d_token...), each with its own store and report. It is counted
#: while CONFIGS is iterated, so an endless generator stops here too.
MAX_RUNS = 100_000
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
    if _IN_LOADER or not hasattr(os, "fork"):  # a configs.py loading another sweep: guarded already
        configs, layout = _read_configs(path, max_runs)
    else:
        configs, layout = _LOADER.load(path, timeout, max_runs)
    _check_sizes(path, configs)
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


def _moved(e: Exception) -> str:
    """A hint for a configs.py written before the sweep machinery left ``interp.training``."""
    if isinstance(e, ModuleNotFoundError) and (e.name or "").startswith("interp.training."):
        return " (the sweep machinery moved to interp.sweeps: write `from interp.sweeps import Layout`)"
    return ""


def _read_configs(path: Path, max_runs: int) -> tuple[tuple, Layout]:
    """Execute ``path`` here and check what it declares (the body of :func:`load`, run in the
    loading child)."""
    from interp.training.trainer import TrainConfig

    module_name = f"_interp_sweep_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error: {e.msg}") from e
    except Exception as e:  # a TrainConfig or Layout that refuses its values, a NameError...
        raise ValueError(f"{path}: {type(e).__name__}: {e}{_moved(e)}") from e
    except SystemExit as e:  # configs.py is executed as Python: an exit is a broken sweep, not success
        raise ValueError(f"{path} called sys.exit({e.code!r}) while being loaded; a {CONFIGS_FILE} "
                         "must only define CONFIGS and LAYOUT") from None
    for attr in ("CONFIGS", "LAYOUT"):
        if not hasattr(module, attr):
            raise ValueError(f"{path} defines no {attr}")
    declared = module.CONFIGS
    if isinstance(declared, (str, bytes)) or not isinstance(declared, Iterable):
        raise ValueError(f"{path}: CONFIGS is a {type(declared).__name__}; accepted: a list of TrainConfig")
    split = (f"accepted: at most {max_runs} per sweep folder (interp.sweeps.driver.MAX_RUNS); "
             "split the sweep into several folders (e.g. one per case or d_token), each with its "
             "own store")
    count = len(declared) if isinstance(declared, (list, tuple)) else None
    if count is not None and count > max_runs:
        raise ValueError(f"{path}: CONFIGS declares {count} runs; {split}")
    configs = []
    try:
        for c in declared:  # counted as it goes: an endless generator stops at the cap
            if not isinstance(c, TrainConfig):
                raise ValueError(f"{path}: CONFIGS[{len(configs)}] is a {type(c).__name__}; accepted: TrainConfig")
            configs.append(c)
            if len(configs) > max_runs:
                raise ValueError(f"{path}: CONFIGS yields more than {max_runs} runs (stopped at "
                                 f"run {len(configs)}: an endless generator?); {split}")
    except (ValueError, KeyboardInterrupt):
        raise
    except Exception as e:  # raised by a generator while it yields
        raise ValueError(f"{path}: {type(e).__name__} while iterating CONFIGS: {e}") from e
    if not configs:
        raise ValueError(f"{path}: CONFIGS is empty")
    names: dict[str, int] = {}
    for i, c in enumerate(configs):
        if c.name() in names:
            raise ValueError(f"{path}: CONFIGS[{i}] repeats CONFIGS[{names[c.name()]}] ({c})")
        names[c.name()] = i
    layout = module.LAYOUT
    if not isinstance(layout, Layout):
        raise ValueError(f"{path}: LAYOUT is a {type(layout).__name__}; accepted: interp.sweeps.driver.Layout")
    fields = set(configs[0].to_dict())
    missing = [f for f in (*layout.rows, layout.column) if f not in fields]
    if missing:
        raise ValueError(f"{path}: LAYOUT names {missing}, not TrainConfig fields ({sorted(fields)})")
    # what crosses to the driver is TrainConfig and Layout themselves, not subclasses defined in
    # configs.py (which the driver could not unpickle)
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    configs = tuple(c if type(c) is TrainConfig else TrainConfig(**{f: getattr(c, f) for f in fields})
                    for c in configs)
    if type(layout) is not Layout:
        layout = Layout(rows=layout.rows, column=layout.column, paper=dict(layout.paper), title=layout.title)
    return configs, layout


def _check_sizes(path: Path, configs: Sequence) -> None:
    """Each group's training step (its seeds stacked) against this machine's memory, so a sweep
    refuses a config too big to train before any run starts (and before the store opens)."""
    from interp.core import limits

    groups: dict = {}  # group key -> [index of its first config, seeds]
    for i, c in enumerate(configs):
        groups.setdefault(group_key(c), [i, 0])[1] += 1
    for i, seeds in groups.values():
        try:
            limits.check_trainable(configs[i], seeds)
        except ValueError as e:
            raise ValueError(f"{path}: CONFIGS[{i}]: {e}") from None


# --------------------------------------------------------------------------- the loading child

#: True in the child that executes a configs.py: a sweep it loads (experiments/readings' tables
#: load experiments/table1) is read in that child, under the same time limit.
_IN_LOADER = False
_LOADER_START = 300.0  # seconds the loader may take to import the trainer (not configs.py's time)
_LOADER_IDLE = 30.0  # seconds an idle loader waits for the next load before exiting
_PRELOAD = ("interp.training.trainer",)  # what every configs.py imports (torch, TransformerLens)

# The loader process's entry: take this process's sys.path (the first message), then serve.
_BOOT = """\
import os, pickle, struct, sys
def take(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
sys.path[:] = pickle.loads(take(struct.unpack(">Q", take(8))[0]))
from interp.sweeps.loader import _serve
_serve()
"""


class _Gone(Exception):
    """The loader process ended before it answered (e.g. it had just exited idle)."""


def _send(fd: int, message) -> None:
    """One length-prefixed pickle on a pipe."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack(">Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _recv(fd: int, deadline: float | None = None):
    """One message from a pipe; None at end of file; TimeoutError past ``deadline``
    (``time.monotonic()``; None: wait as long as it takes)."""
    head = _read_exact(fd, 8, deadline)
    body = None if head is None else _read_exact(fd, struct.unpack(">Q", head)[0], deadline)
    return None if body is None else pickle.loads(body)


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not io_select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Loader:
    """Executes configs.py files in child processes, one line for whatever goes wrong there.

    A helper process (started on the first load, in its own session so a terminal's Ctrl-C is
    this process's to handle) imports the trainer once -- torch and TransformerLens, seconds --
    and forks a fresh child per configs.py; later loads cost milliseconds, and each child starts
    from the same clean state. The child runs :func:`_read_configs` and sends back the checked
    configs and layout, or the error's line; this process enforces the time limit and kills the
    child past it. The helper exits with this process (its stdin closes; it kills a child still
    loading) or after idling :data:`_LOADER_IDLE` seconds, so it never outlives the driver.
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
        """Start the helper now, without waiting for it (see :func:`warm_loader`)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._spawn()

    def _spawn(self) -> None:
        self.close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self.ready = False
        _send(self.proc.stdin.fileno(), list(sys.path))

    def _start(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._spawn()
        if self.ready:
            return
        # the configs' classes: imported here while the helper imports them there
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
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()


_LOADER = _Loader()
atexit.register(_LOADER.close)


def warm_loader() -> None:
    """Start the process that executes configs.py files (:func:`load`) now, without waiting:
    its imports (torch, TransformerLens: seconds) then overlap this process's own. A command
    that will load a sweep calls it first thing; nothing else changes."""
    if not _IN_LOADER and hasattr(os, "fork"):
        _LOADER.warm()


def _serve() -> None:
    """The helper process: import the trainer, then fork one child per request."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.dup(1)
    os.dup2(2, 1)  # what configs.py prints goes to stderr, not into the replies
    for name in _PRELOAD:
        with contextlib.suppress(Exception):  # configs.py's own import then says what is wrong
            importlib.import_module(name)
    _send(out, ("ready",))
    while io_select.select([0], [], [], _LOADER_IDLE)[0]:
        request = _recv(0)
        if request is None:
            return  # the driver is gone
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(done_r)
            _child(request, out)  # never returns
        os.close(done_w)
        while True:  # until the child exits (done_r reads EOF), or the driver dies (stdin EOF)
            ready = io_select.select([0, done_r], [], [], 0.5)[0]
            if 0 in ready and not os.read(0, 1):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                break
        os.close(done_r)
        _send(out, ("exit", os.waitstatus_to_exitcode(status)))


def _child(request: dict, out: int) -> None:
    global _IN_LOADER
    _IN_LOADER = True
    try:
        _send(out, ("started", os.getpid()))
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the driver's requests are not its input
        if request["cwd"] is not None:
            os.chdir(request["cwd"])
        sys.path[:] = request["sys_path"]
        path = Path(request["path"])
        try:
            reply = ("ok", _read_configs(path, request["max_runs"]))
        except ValueError as e:
            reply = ("error", str(e))
        except KeyboardInterrupt:
            reply = ("error", f"{path} raised KeyboardInterrupt while being loaded; a "
                              f"{CONFIGS_FILE} must only define CONFIGS and LAYOUT")
        except BaseException as e:  # noqa: BLE001 - whatever it is, the driver gets one line
            reply = ("error", f"{path}: {type(e).__name__}: {e}")
        try:
            _send(out, reply)
        except Exception as e:  # e.g. a LAYOUT.paper value that cannot be pickled
            _send(out, ("error", f"{path}: CONFIGS or LAYOUT cannot be sent back to the driver "
                                 f"({type(e).__name__}: {e}); accepted: TrainConfig and Layout values"))
        with contextlib.suppress(Exception):  # what configs.py printed, before os._exit
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
    finally:
        os._exit(0)
