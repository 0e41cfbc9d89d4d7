"""The loader's other side: the helper process that executes ``configs.py`` files for
:func:`interp.sweeps.loader.load`, and the framing both sides speak (length-prefixed pickles on
pipes).

The helper (:func:`_serve`) imports the trainer once and forks a fresh child per request
(:func:`_child`), which runs :func:`~interp.sweeps.configs_file.read_configs` and sends back the
configs and layout or one line of error. The helper is started one of two ways:

* forked from the driver (:class:`ForkedHelper`, on Linux): the driver imports the trainer
  anyway, to unpickle the configs, so its fork has everything imported and serves at once; the
  fork closes every file the driver had open but its stderr (a driver's lock must not outlive
  the driver) and runs torch on one thread (a fork has none of the driver's OpenMP threads);
* a fresh interpreter (:data:`BOOT`, elsewhere): it takes the driver's ``sys.path`` and
  imports the trainer itself while the driver does.

Either way it runs in a session of its own (a terminal's Ctrl-C is the driver's to handle) and
exits when the driver's end of its request pipe closes or after idling :data:`LOADER_IDLE`
seconds.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select as io_select  # the module (sweeps.select picks configs)
import signal
import struct
import sys
import time
from pathlib import Path

from interp.sweeps.configs_file import read_configs
from interp.sweeps.folders import CONFIGS_FILE

#: True in the child that executes a configs.py: a sweep it loads (experiments/readings' tables
#: load experiments/table1) is read in that child, under the same time limit.
IN_LOADER = False
LOADER_IDLE = 30.0  # seconds an idle helper waits for the next load before exiting
PRELOAD = ("interp.training.trainer",)  # what every configs.py imports (torch, TransformerLens)

# A fresh helper's entry: take the driver's sys.path (the first message), then serve.
BOOT = """\
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
from interp.sweeps.loader_process import _serve
_serve()
"""


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



def _serve() -> None:
    """The helper process: import the trainer, then fork one child per request."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.dup(1)
    os.dup2(2, 1)  # what configs.py prints goes to stderr, not into the replies
    for name in PRELOAD:
        with contextlib.suppress(Exception):  # configs.py's own import then says what is wrong
            importlib.import_module(name)
    _send(out, ("ready",))
    while io_select.select([0], [], [], LOADER_IDLE)[0]:
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
    global IN_LOADER
    IN_LOADER = True
    try:
        _send(out, ("started", os.getpid()))
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the driver's requests are not its input
        if request["cwd"] is not None:
            os.chdir(request["cwd"])
        sys.path[:] = request["sys_path"]
        path = Path(request["path"])
        shown = _stderr()  # what configs.py prints goes to the driver's stderr, never the replies
        try:
            with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
                reply = ("ok", read_configs(path, request["max_runs"]))
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
            shown.flush()
    finally:
        os._exit(0)


def _stderr():
    """A text stream on fd 2 (the driver's stderr, inherited), or on /dev/null without one."""
    try:
        return open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 - flushed before os._exit
    except OSError:
        return open(os.devnull, "w")  # noqa: SIM115


def can_fork() -> bool:
    """Whether the helper may be a fork of this process (:class:`ForkedHelper`): on Linux, where
    forking a process that has imported torch is what its DataLoader workers do too."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class ForkedHelper:
    """The helper as a fork of this process, with the part of ``subprocess.Popen``'s interface
    the driver uses: ``stdin`` (requests), ``stdout`` (replies), ``pid``, ``poll``, ``wait``.

    The trainer is imported here first (this process needs the configs' classes anyway), so the
    fork starts with it and answers at once, instead of a fresh interpreter importing torch and
    TransformerLens a second time."""

    def __init__(self):
        for name in PRELOAD:
            with contextlib.suppress(Exception):  # configs.py's own import then says what is wrong
                importlib.import_module(name)
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        with contextlib.suppress(Exception):  # nothing buffered here is written twice
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _forked_main(requests_r, replies_w)  # never returns
        os.close(requests_r)
        os.close(replies_w)
        self.pid, self.returncode = pid, None
        self.stdin = os.fdopen(requests_w, "wb", buffering=0)
        self.stdout = os.fdopen(replies_r, "rb", buffering=0)

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        return self._reap(0)

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped by someone else (a waitpid(-1) in this process)
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _forked_main(requests: int, replies: int) -> None:
    """The forked helper: a session of its own, requests on fd 0 and replies on fd 1, every
    other file of the driver closed but its stderr, default signals, one torch thread; then
    :func:`_serve`. Never returns into the driver's code."""
    code = 1
    try:
        os.setsid()
        os.dup2(requests, 0)
        os.dup2(replies, 1)
        for fd in [int(f) for f in os.listdir("/proc/self/fd")]:  # the driver's lock, its store...
            if fd > 2:
                with contextlib.suppress(OSError):
                    os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 0)
        torch = sys.modules.get("torch")
        if torch is not None:  # the driver's OpenMP threads are not in the fork: use none
            torch.set_num_threads(1)
        _serve()
        code = 0
    finally:
        os._exit(code)
