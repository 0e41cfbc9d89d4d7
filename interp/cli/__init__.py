"""The ``interp`` command line (also ``python -m interp``): the only place that prints.

Each subcommand is a module here defining ``add_arguments(parser)`` and ``run(args) -> int``;
:data:`COMMANDS` maps the subcommand name to its module and a one-line help. Modules are imported
only when their subcommand runs, so ``interp --help`` stays quick. Library code (core, training,
inspect, theory) logs and returns data; these modules parse, call it and print.

* :mod:`interp.cli.pipeline` - ``interp run``, the main job (verify, demo sweep, report, analysis).
* :mod:`interp.cli.verify` - ``interp verify``.
* :mod:`interp.cli.sweep`, :mod:`interp.cli.report`, :mod:`interp.cli.store`,
  :mod:`interp.cli.runs` - ``interp sweep``, ``interp report``, ``interp store verify``/``rows``,
  ``interp runs``.
* :mod:`interp.cli.probe`, :mod:`interp.cli.viz`, :mod:`interp.cli.analysis` - ``interp probe``,
  ``interp viz``, ``interp analyze-sweep``.
* :mod:`interp.cli.explore` - ``interp explore``, the sweep explorer page.
* :mod:`interp.cli.atlas` - ``interp atlas``, the mechanism atlas of a store (issue 29).
* :mod:`interp.cli.timeline` - ``interp timeline``, mechanism timelines through training (issue 46).
* :mod:`interp.cli.train`, :mod:`interp.cli.curves` - ``interp train`` (one run from the shell)
  and ``interp curves`` (loss curves drawn); :mod:`interp.cli.bars` - the tqdm bar the library's
  ``progress=`` takes, and ``interp.train``/``interp.train_group`` with ``progress=True``.
* :mod:`interp.cli.precision`, :mod:`interp.cli.temperature`, :mod:`interp.cli.counterexample`,
  :mod:`interp.cli.theorem35`, :mod:`interp.cli.lower_bounds` - the theory studies' commands.
* :mod:`interp.cli.reference` - ``docs/cli.md``, generated from these parsers.

Presentations registered outside the package (``interp.tasks.register``) reach every command
through the environment: ``INTERP_TASKS=mymodule[,other]`` names modules (on ``PYTHONPATH``)
imported before the command's flags are read, so ``--case 6`` is accepted and a checkpoint of
case 6 loads (:func:`import_user_tasks`). ``interp sweep`` also imports them from a sweep's
``configs.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sqlite3
import sys
from pathlib import Path

#: name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("interp.cli.verify", "check every construction against a plain-Python evaluator"),
    "precision": ("interp.cli.precision", "least bits p at which each construction stays exact, vs n (fit, c-size, Thm 3.4)"),
    "temperature": ("interp.cli.temperature", "least softmax inverse temperature at which each construction is exact, vs n"),
    "counterexample": ("interp.cli.counterexample", "Theorem 3.6: an input a one-layer hard-attention case-5 model gets wrong"),
    "theorem35": ("interp.cli.theorem35", "Theorem 3.5 with an explicit MLP: exactness and parameter counts vs n"),
    "lower-bounds": ("interp.cli.lower_bounds", "trained one-layer case-5 models: h, d, measured p, error vs Theorems 3.4/3.7"),
    "train": ("interp.cli.train", "train one run from the shell into a folder (checkpoint + one-run store), with a bar"),
    "curves": ("interp.cli.curves", "draw the loss curves of a run folder or a results store (stop steps marked)"),
    "sweep": ("interp.cli.sweep", "train a sweep folder's configs into its results store (resumable)"),
    "report": ("interp.cli.report", "render a sweep's table beside the paper's, its violin plots and its loss curves"),
    "runs": ("interp.cli.runs", "list a results store's runs by config, with their checkpoints (--where, --json)"),
    "store": ("interp.cli.store", "store verify STORE: rows against their checksums, checkpoints against their sha256; "
              "store rows STORE DEST: the rows without checkpoints, to commit"),
    "run": ("interp.cli.pipeline", "the main job: verify, train the demo sweep (--full: Tables 1, 2), report"),
    "probe": ("interp.cli.probe", "measure one model (checkpoint or --construction): attention, probes, circuits"),
    "viz": ("interp.cli.viz", "write a model's attention HTML (offline) and circle/QK/OV/spectrum PNGs"),
    "analyze-sweep": ("interp.cli.analysis", "per-seed measures of a sweep's bimodal configs, with written answers"),
    "explore": ("interp.cli.explore", "one offline HTML page of a sweep's seeds: table, violins, attention, QK/OV, probes"),
    "atlas": ("interp.cli.atlas", "the mechanism atlas of a store: per-seed labels, atlas.md with the predictions, phase diagrams"),
    "timeline": ("interp.cli.timeline", "mechanism timelines of a run or store: each snapshot's measures and labels, a figure per run"),
}


def _parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        if name == chosen:  # import only the module of the subcommand that runs
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Ctrl-C anywhere (importing, parsing, working) is one line
    on stderr and exit code 130, the shell's 128 + SIGINT: ``train`` and ``sweep`` say what they
    kept themselves; every other command writes its outputs whole or not at all
    (:mod:`interp.training.files`), so what it had not finished is as it was."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        with _ctrl_c_between_imports():
            return _main(argv)
    except Exception as e:  # a library that turned Ctrl-C into another error (transformers' lazy
        if not _interrupted(e):  # imports raise ModuleNotFoundError from it): still Ctrl-C
            raise
    except KeyboardInterrupt:
        pass
    chosen = next((a for a in argv if not a.startswith("-")), None)
    name = f"interp {chosen}" if chosen in COMMANDS else "interp"
    print(f"{name}: interrupted (Ctrl-C); files written whole so far are kept, the rest are as "
          "they were", file=sys.stderr)
    return 130


@contextlib.contextmanager
def _ctrl_c_between_imports():
    """Ctrl-C raised only outside an import: one that lands while a module executes (torch's C++
    initialisation aborts the process, transformers turns it into ModuleNotFoundError, an
    interrupted import can leave a lock held) is sent again 50 ms later, until it lands
    between imports. Only in the main thread where SIGINT has Python's own handler (so never
    where it is ignored); the handler before it is restored on the way out."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def handler(signum, frame):
        f = frame
        while f is not None:
            if f.f_code.co_filename.startswith("<frozen importlib"):
                timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
                timer.daemon = True
                timer.start()
                return
            f = f.f_back
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted(e: BaseException) -> bool:
    """Whether ``e`` was raised by a Ctrl-C: a KeyboardInterrupt in its cause or context chain."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


#: the environment variable naming the modules that register a user's presentations
TASKS_ENV = "INTERP_TASKS"


def import_user_tasks() -> list[str]:
    """Import the modules :data:`TASKS_ENV` names (comma-separated), whose import registers
    presentations (``interp.tasks.register``); the names imported. ValueError naming the value
    and the module that failed, before any command works."""
    value = os.environ.get(TASKS_ENV, "")
    names = [m.strip() for m in value.split(",") if m.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # an import error or the module's own: said, not a traceback
            raise ValueError(f"{TASKS_ENV}={value!r}: module {name!r} did not import "
                             f"({type(e).__name__}: {e}); accepted: comma-separated importable module "
                             "names (on PYTHONPATH) whose import calls interp.tasks.register") from None
    return names


def _main(argv: list[str]) -> int:
    # MKL reads MKL_CBWR when torch first multiplies: set before anything imports torch, it
    # makes products independent of memory alignment, so a sweep's seeds train stacked with
    # the same bits as alone (interp.training.fast_train.mkl_reproducible). An explicit value wins.
    os.environ.setdefault("MKL_CBWR", "AUTO")
    # torch's CPU allocator puts tensors of 2 MB and more on transparent huge pages when this
    # is set before its first allocation: a fresh [5, 256, 21, 2048] hidden-activation tensor
    # then costs a few hundred page faults instead of ~56,000 (glibc maps every block over
    # 32 MB anew). Memory placement only: no value changes (tests/training/test_memory.py).
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    # ... and freed large tensors are kept for the next step instead of unmapped (glibc)
    from interp.training.machine import keep_freed_memory

    keep_freed_memory()
    chosen = next((a for a in argv if not a.startswith("-")), None)
    try:
        import_user_tasks()  # before the parsers: they list the registered cases
    except ValueError as e:
        print(f"interp: error: {e}", file=sys.stderr)
        return 2
    args = _parser(chosen if chosen in COMMANDS else None).parse_args(argv)
    try:
        if getattr(args, "out", None):  # every command's --out: a name too long for the file
            from interp.training.files import check_name_length  # system, refused before work

            check_name_length(args.out)
        batch = getattr(args, "batch_size", None)  # every command's --batch-size, before any work
        if batch is not None and batch < 1:
            raise ValueError(f"--batch-size {batch}; accepted: an integer >= 1")
        return int(importlib.import_module(args._module).run(args) or 0)
    except ValueError as e:  # bad input: a clear message, not a traceback
        print(f"interp {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # permissions, a full disk, a missing folder: one line, what to do
        print(f"interp {args.command}: error: {os_problem(e, _written_by(args))}", file=sys.stderr)
        return 2
    except sqlite3.Error as e:  # the store failed mid-write (e.g. the disk filled up)
        from interp.sweeps.store import sqlite_problem

        print(f"interp {args.command}: error: {sqlite_problem(_store_of(args), e)}", file=sys.stderr)
        return 2


def _store_of(args) -> Path:
    """The store a command was writing, for an SQLite error's message: ``--store``, else the
    sweep folder's default (``DIR/results/store.sqlite``)."""
    if getattr(args, "store", None):
        return Path(args.store)
    if getattr(args, "dir", None):
        return Path(args.dir) / "results" / "store.sqlite"
    return Path("the results store")


def _written_by(args) -> str | None:
    """Where a command writes (its ``--out``, else its store), for an OSError that names no
    file (``write()`` on a full disk names none)."""
    for key in ("out", "store", "dest"):
        value = getattr(args, key, None)
        if isinstance(value, (str, os.PathLike)) and value:
            return f"a file under {os.path.abspath(value)}"
    return None


def os_problem(e: OSError, where_else: str | None = None) -> str:
    """One line for an operating-system error: the path (``where_else`` when the error names
    none), what happened, what to do."""
    where = e.filename if e.filename is not None else where_else or "a file"
    if e.errno in (errno.EACCES, errno.EPERM):
        return (f"{where}: permission denied; make it (and its folder) writable by this user, "
                "or pass another --store/--out")
    if e.errno == errno.EROFS:
        return f"{where}: the file system is read-only; pass another --store/--out"
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return (f"{where}: no space left (disk full, quota or file-size limit); free space and rerun "
                "the same command (every committed run is kept)")
    return f"{where}: {e.strerror or e}"


if __name__ == "__main__":
    sys.exit(main())
