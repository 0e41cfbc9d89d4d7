"""What this machine is and how its memory and MKL are set up, for the trainer and its workers.

:func:`mkl_library` and :func:`mkl_branch` talk to torch's MKL (its conditional-numerical-
reproducibility branch, which decides whether stacked seeds get a lone seed's bits);
:func:`keep_freed_memory` asks glibc to reuse freed large blocks; :func:`cpu_model` names the
CPU (progress files record it beside the MKL branch); :func:`one_thread` runs a block on one
torch thread and one BLAS thread (``interp atlas`` measures each seed in it, the probes fit in it).
"""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager


def mkl_library():
    """torch's MKL (ctypes), or None where torch has no MKL to talk to."""
    import ctypes

    import torch

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        lib.mkl_serv_cbwr_get, lib.mkl_serv_cbwr_set  # noqa: B018 - both must exist
    except (OSError, AttributeError):
        return None
    return lib if torch.backends.mkl.is_available() else None


def mkl_branch() -> int | None:
    """This process's MKL reproducibility branch (``mkl_cbwr_get``; what ``MKL_CBWR`` set when
    MKL started, e.g. 1 = off, 2 = AUTO), or None without MKL."""
    lib = mkl_library()
    return None if lib is None else int(lib.mkl_serv_cbwr_get(1))


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for the next allocation of this process instead
    of handing it back to the kernel; True if it could (glibc), False elsewhere.

    glibc maps every block over 32 MB anew (mmap) and unmaps it on free, and gives back the
    heap's free top over 128 kB: a training step's large temporaries (220 MB each for a 5-seed
    [5, 256, 21, 2048] hidden activation) are then faulted in and zeroed page by page at every
    step. With ``M_MMAP_MAX`` 0 and ``M_TRIM_THRESHOLD`` 2 GB they come from the heap and are
    reused. Memory placement only, no value changes (tests/training/test_memory.py); the process
    keeps up to 2 GB of freed memory. ``interp``'s CLI and its sweep workers call it.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - glibc only
        M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
        return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):
        return False


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def code_version() -> str | None:
    """The git commit the imported ``interp`` package comes from, with ``+dirty`` when its
    files differ from that commit; None outside a git checkout. Recorded with every sweep so a
    stored run names the code that trained it (engine changes can change a run's bits)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "interp"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


@contextmanager
def one_thread():
    """torch on one intra-op thread and numpy's and scipy's BLAS on one thread inside the block,
    both thread counts restored after.

    A seed's measures are small tensor operations (a batch of 512 short sequences, tables of a
    few hundred rows) and small least-squares fits (the probes), too small to gain from a second
    thread; on cores shared with a sweep (whose runs train on one thread each) torch's default
    two threads wait on each other, OpenBLAS's spin, and a seed took many times its one-thread
    CPU time. The measures do not depend on it beyond float64 rounding (SVDs, probes). The BLAS
    part is threadpoolctl's ``threadpool_limits`` (it finds the loaded BLAS libraries anew on
    each entry, about a millisecond). Process-wide: not for blocks run from several threads at
    once. ``tests/training/test_machine.py`` checks both counts inside and after."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    with threadpool_limits(limits=1, user_api="blas"):
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)
