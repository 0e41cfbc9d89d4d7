"""Faults tried on a small sweep, end to end through the `interp` command: what each did to the
runs and what the user was told. Writes faults.json and the table in README.md.

    .venv/bin/python experiments/faults/run.py                  # every fault (about 10 min)
    .venv/bin/python experiments/faults/run.py --only progress  # the faults whose key has it
    .venv/bin/python experiments/faults/run.py --resume         # the faults faults.json lacks
    .venv/bin/python experiments/faults/run.py --list           # the keys

Every scenario runs `python -m interp ...` in subprocesses on a fresh store (or a copy of the
reference store) of a 6-run sweep (three groups of two seeds), applies one fault, and compares
the store with an uninterrupted reference sweep run for run: status, accuracy, steps, final
loss, loss curve, seed and the sha256 of the weights file on disk. It reads the store with
plain ``sqlite3`` and hashes the files itself: nothing of ``interp`` judges ``interp``. Per try:

- runs lost: runs of the reference missing from the store after the plain rerun of the same
  command without the fault; where nothing is rerun (a refused command), committed runs that
  vanished;
- runs wrong: runs stored ``ok`` whose numbers or weights differ from the reference, at any
  point (after the fault, after the rerun), and a tampered run that a command served as good
  (``store verify`` passing it, ``report`` showing its number, ``load_run`` loading it);
- runs wrongly failed: runs stored ``failed: ...`` after the plain rerun, although the fault
  was the environment's (the reference trained them);
- the message: one line the command printed, the scratch folder shown as ``<tmp>``;
  ``TRACEBACK: <last line>`` where it printed a traceback; whether it names the path;
- what else the scenario checks (bytes of files that are not ours, processes left, seconds).

A try is ``ok`` when it has no lost, wrong or wrongly failed run, no traceback, a message naming
the path where the fault has a path, and passes its own check: what the issue (24) asks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = [HERE.parent.parent]  # the checkout whose `interp` the commands run (--tree)
SWEEP = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=case, n=5, d_token=4, pos_embed=pe, seed=seed, max_steps=steps,
                       stop_loss=0.0, batch_size=64, eval_batches=2, curve_every=10)
           for case, pe, steps in [(1, "learned", 40), (3, "none", 300), (2, "none", 900)]
           for seed in (0, 1)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="faults")
"""
#: one config of the sweep above, as configs.py source, for the configs.py variants
ONE = dict(case="1", n="5", d_token="4", pos_embed='"learned"', seed="0", max_steps="40", stop_loss="0.0",
           batch_size="64", eval_batches="2", curve_every="10")


def one(**changes: str) -> str:
    return "TrainConfig(" + ", ".join(f"{k}={v}" for k, v in {**ONE, **changes}.items()) + ")"


LAYOUT = ('LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token", '
          'paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="faults")\n')
HEAD = "from interp.sweeps import TableLayout\nfrom interp.training import TrainConfig\n"
SAVE_EVERY = ("--save-every", "0.05")  # seconds: progress files appear within the 900-step group
HANG_S = 90  # a command still running after this long is recorded as a hang and killed
LIMIT_AS = 4 << 30  # address-space limit for commands that may try to allocate huge tensors
TAG = "INTERP_FAULTS_TAG"  # in each command's environment: finds its descendants, orphans too
TMP = [""]  # the scratch folder, replaced by <tmp> in the messages the table shows
BAR = re.compile(r"\d+%\||[?\d.]+(run|it)/s|s/(run|it)|\d+run \[")  # a tqdm progress bar


# ------------------------------------------------------------------ running commands


@dataclass
class Ran:
    """A finished command: exit code (negative: killed by that signal), output, seconds, the
    peak resident memory of it and its waited-for children, and whether it hung."""

    code: int
    out: str
    err: str
    seconds: float
    peak_mb: float
    hung: bool = False

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err

    @property
    def message(self) -> str:
        return shown(said(self.out, self.err))

    @property
    def names_path(self) -> bool:
        return TMP[0] in said(self.out, self.err)


#: a launcher that sets resource limits in itself, then becomes the command (same pid); no
#: preexec_fn, which is unsafe beside this script's threads
LIMITED = """import os, resource, sys
fsize, memory = int(sys.argv[1]), int(sys.argv[2])
if fsize >= 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
if memory >= 0:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
os.execv(sys.argv[3], sys.argv[3:])
"""


class Command:
    """``python -m interp ARGS`` in its own session, reaped with ``wait4`` (its peak memory).
    Output goes to pipes, read by threads: a file-size limit must not apply to it."""

    def __init__(self, *args, limit_bytes: int | None = None, limit_memory: int | None = None,
                 python: str | None = None):
        self.tag = uuid.uuid4().hex
        cmd = [sys.executable, "-c", python] if python is not None else [sys.executable, "-m", "interp"]
        cmd += [a if isinstance(a, bytes) else os.fspath(a) if isinstance(a, Path) else str(a) for a in args]
        if limit_bytes is not None or limit_memory is not None:  # set in the child, then exec
            cmd = [sys.executable, "-c", LIMITED, str(limit_bytes or -1), str(limit_memory or -1), *cmd]
        self.start = time.perf_counter()
        env = {**os.environ, TAG: self.tag, "PYTHONPATH": str(TREE[0])}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, cwd=TREE[0], env=env)
        self.pid = self.proc.pid
        self._status = None
        self._text: list[bytes] = [b"", b""]
        self._readers = [threading.Thread(target=self._read, args=(i, f), daemon=True)
                         for i, f in enumerate((self.proc.stdout, self.proc.stderr))]
        for t in self._readers:
            t.start()

    def _read(self, i: int, f) -> None:
        self._text[i] = f.read()
        f.close()

    def poll(self) -> bool:
        """True once the command has exited (reaps it, keeping its resource usage)."""
        if self._status is None:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self._status = (os.waitstatus_to_exitcode(status), usage, time.perf_counter())
                self.proc.returncode = self._status[0]
        return self._status is not None

    def finish(self, timeout: float = 600) -> Ran:
        """Wait (killing the command and every process it started after ``timeout`` seconds)."""
        hung = False
        while not self.poll():
            if time.perf_counter() - self.start > timeout:
                hung = True
                self.kill()
            time.sleep(0.02)
        kill_tagged(self.tag)  # what it left running would hold its pipes open
        for t in self._readers:
            t.join()
        code, usage, end = self._status
        out, err = (b.decode("utf-8", "replace") for b in self._text)
        return Ran(code, out, err, round(end - self.start, 1), round(usage.ru_maxrss / 1024), hung)

    def kill(self) -> None:
        """SIGKILL the command's process group and every process carrying its tag."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        kill_tagged(self.tag)


def interp(*args, timeout: float = 600, **limits) -> Ran:
    return Command(*args, **limits).finish(timeout)


def tagged(tag: str) -> list[int]:
    """Live processes (not zombies) whose environment carries ``tag``: a command and everything
    it started, reparented orphans included."""
    pids, mark = [], f"{TAG}={tag}".encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if mark in Path(f"/proc/{d}/environ").read_bytes().split(b"\0") and proc_stat(int(d))[0] != "Z":
                pids.append(int(d))
        except (OSError, IndexError):
            pass
    return pids


def proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def rss_mb(pids) -> int:
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError):
            pass
    return round(total / 2**20)


def kill_tagged(tag: str) -> None:
    for pid in tagged(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def said(out: str, err: str) -> str:
    """The line the command told the user: the exception line of a traceback (``TRACEBACK:
    ...``), else its ``error:`` line, else its first line on stderr that is not a progress bar,
    else its first line on stdout."""
    raw = err.splitlines()
    if "Traceback (most recent call last)" in err:
        at = max(i for i, line in enumerate(raw) if line.startswith("Traceback (most recent call last)"))
        last = next((line for line in raw[at + 1:] if line.strip() and not line.startswith(" ")), "?")
        return "TRACEBACK: " + last.strip()
    # a line logged while a bar is shown follows the bar on its line: keep what is after it
    lines = [line.rsplit("]", 1)[-1].strip() if BAR.search(line) else line.strip() for line in raw]
    lines = [line for line in lines if line]
    errors = [line for line in lines if ": error: " in line]
    if errors:
        return errors[-1].split(": error: ", 1)[1]
    if lines:
        return lines[0]
    out_lines = [line.strip() for line in out.splitlines() if line.strip()]
    wrote = [line for line in out_lines if line.startswith("wrote ")]  # a report prints itself first
    return (wrote or out_lines or [""])[0]


def shown(text: str, width: int = 160) -> str:
    """``text`` for a table cell: the scratch folder as <tmp>, no pipes, at most ``width``."""
    text = (text.replace(TMP[0], "<tmp>") if TMP[0] else text).replace("|", "/")
    return (text[: width - 3] + "...") if len(text) > width else text


# ------------------------------------------------------------------ reading stores independently


def committed(path: Path) -> int:
    """Runs committed so far, read without disturbing the writer (0 while it holds the lock)."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05)) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def snapshot(path: Path) -> dict:
    """name -> (status, accuracy, steps, final_loss, curve, seed, sha256 of the weights file on
    disk): read with sqlite3 and hashed here. {} where there is no store or no runs table."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        os.fsencode(path).decode()
        db_path = path
    except UnicodeDecodeError:  # sqlite3 takes str paths only: read a copy
        db_path = Path(tempfile.mkdtemp(dir=TMP[0] or None)) / "copy.sqlite"
        shutil.copyfile(path, db_path)
    try:
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)) as db:
            rows = db.execute("SELECT name, status, accuracy, steps, final_loss, curve, seed, checkpoint "
                              "FROM runs").fetchall()
    except sqlite3.Error:
        return {}
    out = {}
    for name, status, acc, steps, loss, curve, seed, ckpt in rows:
        w = path.parent / ckpt / "model.safetensors" if isinstance(ckpt, str) else None
        sha = hashlib.sha256(w.read_bytes()).hexdigest() if w is not None and w.is_file() else None
        out[name] = (status, acc, steps, loss, curve, seed, sha)
    return out


def runs_done(path: Path) -> int:
    """Runs trained by every invocation in the store's sweeps log (trained twice: this minus
    the rows)."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            return sum(n or 0 for (n,) in db.execute("SELECT runs_done FROM sweeps"))
    except sqlite3.Error:
        return 0


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


# ------------------------------------------------------------------ safetensors files, edited by hand


def st_read(path: Path) -> tuple[dict, bytes]:
    """A safetensors file's header (JSON) and its data bytes."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def st_write(path: Path, header: dict, body: bytes) -> None:
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def st_tensor(header: dict, prefix: str) -> tuple[str, int, int]:
    """(name, start, end) in the data of the first float32 weight matrix (``W_...``) whose name
    starts with ``prefix``, by name."""
    for name in sorted(k for k in header if k != "__metadata__"):
        if name.startswith(prefix) and ".W_" in name and header[name]["dtype"] == "F32":
            start, end = header[name]["data_offsets"]
            if end - start >= 8:
                return name, start, end
    raise ValueError(f"no float32 tensor {prefix}* in the file")


# ------------------------------------------------------------------ the bench: reference and judge


class Bench:
    """The sweep folder, its uninterrupted reference store, and what scenarios share (each made
    once, when first needed)."""

    def __init__(self, root: Path):
        self.root = root
        self.folder = root / "sweep"
        self.folder.mkdir()
        (self.folder / "configs.py").write_text(textwrap.dedent(SWEEP))
        self.ref_path = root / "ref" / "store.sqlite"
        ran = interp("sweep", self.folder, "--store", self.ref_path)
        assert ran.code == 0, ran.err
        self.reference = snapshot(self.ref_path)
        assert len(self.reference) == 6 and all(v[0] == "ok" for v in self.reference.values())
        self._made: dict = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # -- shared pieces, each made once, by whichever fault asks first (others wait for it)
    def _once(self, name: str, make):
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._made:
                self._made[name] = make()
        return self._made[name]

    def progress_base(self) -> Path:
        """A store folder left by a SIGKILL in the middle of the last (900-step) group, with
        progress saving on: 4 runs committed and the group's progress file, saved at a step
        past 300."""
        return self._once("progress", self._progress_base)

    def _progress_base(self) -> Path:
        path = self.fresh("progress-base")
        cmd = Command("sweep", self.folder, "--store", path, *SAVE_EVERY)
        while not cmd.poll():
            if committed(path) >= 4 and any(saved_step(f) >= 300 for f in progress_files(path)):
                break
            time.sleep(0.01)
        cmd.kill()
        cmd.finish()
        files = progress_files(path)
        assert files and len(snapshot(path)) == 4, (files, snapshot(path))
        return path.parent

    def ref_report(self) -> Path:
        """``interp report`` of the reference store: the report.md and violins.png it writes."""
        return self._once("report", self._ref_report)

    def _ref_report(self) -> Path:
        out = self.root / "ref-report"
        ran = interp("report", self.folder, "--store", self.ref_path, "--out", out)
        assert ran.code == 0, ran.err
        return out

    def flag(self, word: str) -> str | None:
        """An ``interp sweep`` option whose name has ``word`` (e.g. a load timeout), if any."""
        flags = self._once("flags", lambda: re.findall(r"(--[a-z][\w-]*)", interp("sweep", "--help").out))
        return next((f for f in flags if word in f), None)

    # -- stores
    def fresh(self, name: str) -> Path:
        path = self.root / name / "store.sqlite"
        shutil.rmtree(path.parent, ignore_errors=True)
        return path

    def copy(self, source: Path, name: str) -> Path:
        """A copy of the store folder ``source`` (without its lock file)."""
        path = self.fresh(name)
        shutil.copytree(source, path.parent, symlinks=True, ignore=shutil.ignore_patterns("*.lock"))
        return path

    def copy_ref(self, name: str) -> Path:
        return self.copy(self.ref_path.parent, name)

    def sweep(self, path: Path, *extra, **limits) -> Ran:
        return interp("sweep", self.folder, "--store", path, *extra, **limits)

    def wrong(self, rows: dict) -> set:
        return {k for k, v in rows.items() if v[0] == "ok" and k in self.reference and v != self.reference[k]}

    def failed(self, rows: dict) -> set:
        return {k for k, v in rows.items() if v[0] != "ok" and self.reference.get(k, ("?",))[0] == "ok"}

    def judge(self, path: Path, fault: Ran | None, *, rerun: tuple | None = (), before: dict | None = None,
              complete: bool = False, tampered=(), served: bool = False, names=(),
              expect_message: bool = True, check: bool = True, **checks) -> dict:
        """One try's outcome.

        ``fault``: the command that met the fault (None: killed, no message). ``rerun``: extra
        arguments of the plain rerun (``interp sweep DIR --store PATH``), None for none.
        ``before``: the rows committed before the fault (a refusal must keep them);
        ``complete``: the fault's command was itself the rerun (every reference run is due).
        ``tampered``: runs the scenario edited itself (wrong only if ``served`` or still so
        after the rerun). ``names``: file names that count as naming the path. ``check``: the
        scenario's own test (bytes unchanged, no processes left...), ``checks`` its numbers.
        """
        after = snapshot(path)
        wrong = self.wrong(after) - set(tampered) | (set(tampered) if served else set())
        lost = set(self.reference) - set(after) if complete else set(before or {}) - set(after)
        final, again = after, None
        if rerun is not None:
            again = self.sweep(path, *rerun)
            final = snapshot(path)
            wrong |= self.wrong(final)
            lost = set(self.reference) - set(final)
        failed = self.failed(final)
        text = said(fault.out, fault.err) if fault is not None else ""
        named = bool(text) and (TMP[0] in text or any(n in text for n in names))
        traceback = any(r is not None and r.traceback for r in (fault, again))
        ok = (check and not lost and not wrong and not failed and not traceback
              and (named or not expect_message) and not (fault is not None and fault.hung))
        return dict(code=None if fault is None else fault.code, message=shown(text),
                    names_path=named if fault is not None else None, traceback=traceback,
                    lost=len(lost), wrong=len(wrong), wrongly_failed=len(failed),
                    failed_after_fault=len(self.failed(after)), rows_after_fault=len(after),
                    rerun_code=None if again is None else again.code,
                    rerun_message="" if again is None else again.message,
                    seconds=None if fault is None else fault.seconds, ok=bool(ok), **checks)


def progress_files(store_path: Path) -> list[Path]:
    d = store_path.parent / "progress"
    return sorted(p for p in d.glob("*.safetensors") if p.is_file()) if d.is_dir() else []


def saved_step(path: Path) -> int:
    """The step counter of a progress file (-1 if it cannot be read: being replaced)."""
    try:
        return int(json.loads(st_read(path)[0]["__metadata__"]["interp_progress"])["t"])
    except (OSError, ValueError, KeyError, struct.error):
        return -1


# ------------------------------------------------------------------ the faults of the first table


def sigkill(bench: Bench, seed: int, after_rows: int | None = None) -> dict:
    """SIGKILL the whole process group as soon as ``after_rows`` runs are committed (a kill in
    the middle of the sweep, other groups training and checkpoints being written), or, for
    ``after_rows=None``, at a random moment of training: after a random number of commits
    (0-5; 0: once both pool workers run) and a random delay of up to 1 s. Random moments are
    counted from events, not from the start: the import time's noise would move them out of
    the training."""
    path = bench.fresh(f"kill{seed}-{after_rows}")
    cmd = Command("sweep", bench.folder, "--store", path, "--workers", "2")
    rng = random.Random(seed)
    rows, delay = (rng.randrange(6), rng.uniform(0, 1)) if after_rows is None else (after_rows, 0.0)
    while not cmd.poll() and (committed(path) < rows if rows else len(pool_workers(cmd)) < 2):
        time.sleep(0.005)
    time.sleep(delay)
    cmd.kill()
    cmd.finish()
    return bench.judge(path, None, expect_message=False, rows_at_kill=len(snapshot(path)))


def full_disk(bench: Bench, kib: int, *extra) -> dict:
    path = bench.fresh(f"full{kib}{'-progress' if extra else ''}")
    ran = bench.sweep(path, *extra, limit_bytes=kib * 1024)
    out = bench.judge(path, ran, rerun=extra)
    out["checked"] = (f"sweep exit {ran.code}, {out['failed_after_fault']} run(s) stored failed by the fault; "
                      f"rerun exit {out['rerun_code']}")
    return out


def damaged_checkpoint(bench: Bench, how: str) -> dict:
    path = bench.copy_ref(f"ckpt-{how}")
    run = sorted(bench.reference)[0]
    folder = path.parent / "checkpoints" / run
    if how == "flip":
        w = folder / "model.safetensors"
        data = bytearray(w.read_bytes())
        data[len(data) // 2] ^= 0xFF
        w.write_bytes(bytes(data))
    else:
        shutil.rmtree(folder)
    ran = interp("store", "verify", path)
    return bench.judge(path, ran, tampered={run}, served=ran.code == 0, verify_code=ran.code)


def two_drivers(bench: Bench, delete_lock: bool) -> dict:
    """Driver A holds the store (stopped with SIGSTOP once its sweeps-log row is readable, or 3 s
    after the store appeared if it stays locked, so that it cannot finish first); driver B,
    the same command, starts (after the lock file is deleted, if ``delete_lock``); A goes on
    once B has exited or committed a run. Runs trained twice: the runs both invocations
    logged, minus the rows."""
    path = bench.fresh("lock-deleted" if delete_lock else "two")
    lock = Path(str(path) + ".lock")
    a = Command("sweep", bench.folder, "--store", path)
    appeared = None
    while not a.poll():
        if path.exists():
            appeared = appeared or time.perf_counter()
            try:
                with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.01)) as db:
                    if db.execute("SELECT count(*) FROM sweeps").fetchone()[0]:
                        break
            except sqlite3.Error:
                if time.perf_counter() - appeared > 3:
                    break
        time.sleep(0.005)
    signal_group(a, signal.SIGSTOP)
    had_lock = lock.exists() or lock.is_symlink()
    if delete_lock and had_lock:
        lock.unlink()
    b = Command("sweep", bench.folder, "--store", path)
    while not b.poll() and committed(path) == 0:
        time.sleep(0.05)
    signal_group(a, signal.SIGCONT)
    ran_b, ran_a = b.finish(), a.finish()
    rows = snapshot(path)
    twice = max(0, runs_done(path) - len(rows))
    missing = set(bench.reference) - set(rows)
    out = bench.judge(path, ran_b, rerun=() if missing else None, complete=True,
                      check=twice == 0 and ran_b.code != 0,
                      trained_twice=twice, code_a=ran_a.code, lock_file_found=had_lock)
    out["checked"] = f"second driver exit {ran_b.code}, first exit {ran_a.code}; runs trained twice: {twice}"
    return out


def signal_group(cmd: Command, sig: int) -> None:
    if not cmd.poll():
        try:
            os.killpg(cmd.pid, sig)
        except ProcessLookupError:
            pass


def locked_store(bench: Bench) -> dict:
    path = bench.copy_ref("locked")
    before = snapshot(path)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        ran = interp("report", bench.folder, "--store", path, "--out", path.parent / "report")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    return bench.judge(path, ran, rerun=None, before=before, check=ran.code != 0)


def read_only(bench: Bench) -> dict:
    path = bench.copy_ref("ro-data")
    before = snapshot(path)
    mount = path.parent.parent / "ro"
    mount.mkdir(exist_ok=True)
    if subprocess.run(["mount", "--bind", path.parent, mount], capture_output=True).returncode or \
            subprocess.run(["mount", "-o", "remount,ro,bind", mount], capture_output=True).returncode:
        subprocess.run(["umount", mount], capture_output=True)
        return dict(skipped="no bind mounts here")
    try:
        ran = bench.sweep(mount / "store.sqlite")
    finally:
        subprocess.run(["umount", mount])
    return bench.judge(path, ran, rerun=None, before=before, check=ran.code != 0)


def corrupt_bytes(bench: Bench, what: str) -> dict:
    path = bench.fresh(f"bytes-{what}")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"" if what == "empty" else os.urandom(4096))
    before = path.read_bytes()
    ran = bench.sweep(path)
    untouched = path.read_bytes() == before
    path.unlink()  # what the message says to do: move it away
    out = bench.judge(path, ran, check=untouched and ran.code != 0, file_untouched=untouched)
    out["checked"] = f"file untouched: {'yes' if untouched else 'NO'}"
    return out


def edited_row(bench: Bench, table: str) -> dict:
    path = bench.copy_ref(f"edit-{table}")
    with closing(sqlite3.connect(path)) as db, db:
        column = "accuracy" if table == "runs" else "wall_seconds"
        db.execute(f"UPDATE {table} SET {column} = 0.5 WHERE rowid = 1")
        name = db.execute("SELECT name FROM runs WHERE rowid = 1").fetchone()[0]
    command = ("sweep", bench.folder, "--store", path) if table == "runs" else \
        ("report", bench.folder, "--store", path, "--out", path.parent / "report")
    ran = interp(*command)
    tampered = {name} if table == "runs" else set()
    out = bench.judge(path, ran, rerun=None, tampered=tampered, served=ran.code == 0, check=ran.code != 0)
    out["checked"] = "refused until the edited row is deleted" if ran.code else "the edited row was used"
    return out


# ------------------------------------------------------------------ progress files


def progress_fault(bench: Bench, how: str) -> dict:
    """A copy of the store killed mid-group (4 runs committed, the last group's progress file
    saved), the progress file altered by hand, then the plain rerun of the same command."""
    path = bench.copy(bench.progress_base(), f"progress-{how}")
    files = progress_files(path)
    saved_at = max(saved_step(f) for f in files)
    for f in files:
        header, body = st_read(f)
        meta = json.loads(header["__metadata__"]["interp_progress"])
        if how == "flip":  # one bit of a weight (bit 21 of a float32: its mantissa's 2nd bit)
            _, start, end = st_tensor(header, "model.0.")
            body = bytearray(body)
            body[start + ((end - start) // 8) * 4 + 2] ^= 0x20
            body = bytes(body)
        elif how == "nan":  # one weight NaN
            _, start, end = st_tensor(header, "model.0.")
            body = body[:start] + struct.pack("<f", float("nan")) + body[start + 4:]
        elif how == "active":  # seed 1 marked as stopped
            meta["active"] = meta["active"][:1]
        elif how == "step":  # the step counter past the end
            meta["t"] = 3990
        header["__metadata__"]["interp_progress"] = json.dumps(meta)
        if how != "control":
            st_write(f, header, body)
    ran = bench.sweep(path, *SAVE_EVERY)  # the plain rerun of the killed command meets the file
    out = bench.judge(path, ran, rerun=None, complete=True, names=[f.name for f in files],
                      expect_message=how != "control", saved_at_step=saved_at)
    out["checked"] = f"the file saved at step {saved_at} of 900; rerun exit {ran.code}"
    return out


def progress_folder(bench: Bench, how: str) -> dict:
    """``progress/`` deleted while the sweep saves to it every 0.05 s (``once``: while a save's
    temporary file is there, or 2 s after the folder appeared; ``repeat``: every few
    milliseconds), or replaced by a file (``file``, then ``interp report``); then the plain
    rerun without the fault."""
    path = bench.fresh(f"progress-dir-{how}")
    folder = path.parent / "progress"
    cmd = Command("sweep", bench.folder, "--store", path, *SAVE_EVERY)
    hits, appeared = 0, None
    while not cmd.poll():
        if folder.is_dir() and not (how != "repeat" and hits):
            appeared = appeared or time.perf_counter()
            saving = any(".tmp" in p.name for p in folder.iterdir()) if folder.is_dir() else False
            if how != "once" or saving or time.perf_counter() - appeared > 2:
                shutil.rmtree(folder, ignore_errors=True)
                hits += 1
                if how == "file":
                    folder.write_text("not a folder\n")
        time.sleep(0.0005 if how == "once" else 0.002)
    ran = cmd.finish()
    checks, text, check = dict(removals=hits), f"progress/ removed {hits} time(s), sweep exit {ran.code}", True
    if how == "file":
        rep = interp("report", bench.folder, "--store", path, "--out", path.parent / "report")
        checks.update(report_code=rep.code, report_message=rep.message)
        text += f"; interp report then: exit {rep.code}" + (f" ({rep.message})" if rep.code else "")
        check = rep.code == 0 and not rep.traceback
        if folder.is_file():
            folder.unlink()  # the fault, removed before the rerun
    out = bench.judge(path, ran, rerun=SAVE_EVERY, check=check, expect_message=False, **checks)
    out["checked"] = text + f"; {out['failed_after_fault']} run(s) stored failed by the fault"
    return out


# ------------------------------------------------------------------ processes


def kill_driver_only(bench: Bench) -> dict:
    """SIGKILL the driver alone (2 pool workers) once its first group is committed; processes it
    started still alive 10 s later are counted (and their memory), then killed."""
    path = bench.fresh("kill-driver")
    cmd = Command("sweep", bench.folder, "--store", path, "--workers", "2")
    while committed(path) < 2 and not cmd.poll():
        time.sleep(0.01)
    os.kill(cmd.pid, signal.SIGKILL)
    cmd.poll()
    time.sleep(10)
    left = tagged(cmd.tag)
    mb = rss_mb(left)
    cmd.finish()  # kills what is left
    out = bench.judge(path, None, expect_message=False, check=not left, processes_left=len(left), left_mb=mb)
    out["checked"] = f"processes left 10 s after the kill: {len(left)} ({mb} MB)"
    return out


def kill_one_worker(bench: Bench) -> dict:
    """SIGKILL one of the 2 pool workers while both train (before any commit). Healthy runs
    thrown away: the runs not stored after the fault beyond the killed group's 2."""
    path = bench.fresh("kill-worker")
    cmd = Command("sweep", bench.folder, "--store", path, "--workers", "2")
    workers: list[int] = []
    while not cmd.poll() and len(workers) < 2:
        workers = pool_workers(cmd)
        time.sleep(0.01)
    time.sleep(0.3)
    if workers:
        os.kill(min(workers), signal.SIGKILL)
    ran = cmd.finish()
    stored = len(snapshot(path))
    thrown = max(0, len(bench.reference) - 2 - stored)
    out = bench.judge(path, ran, expect_message=False, check=thrown == 0 and bool(workers),
                      healthy_runs_thrown_away=thrown, workers_seen=len(workers))
    out["checked"] = f"sweep exit {ran.code}; runs of healthy groups not stored: {thrown} of 4"
    return out


def pool_workers(cmd: Command) -> list[int]:
    """The pool's worker processes: children of the forkserver (or of the driver, spawned)."""
    procs = {}
    for pid in tagged(cmd.tag):
        try:
            procs[pid] = (int(proc_stat(pid)[1]), Path(f"/proc/{pid}/cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            pass
    servers = {pid for pid, (ppid, line) in procs.items() if ppid == cmd.pid and b"forkserver" in line}
    return sorted(pid for pid, (ppid, line) in procs.items()
                  if ppid in servers or (ppid == cmd.pid and b"spawn_main" in line))


# ------------------------------------------------------------------ files that are not ours


def each_command(bench: Bench, path: Path, commands=("verify", "runs", "report", "explore", "sweep")) -> tuple[dict, list[Ran]]:
    """Run each command on ``path``; exit code and whether the file's bytes stayed as they were."""
    results, rans = {}, []
    out = path.parent / "out"
    for name in commands:
        before = path.read_bytes()
        args = {"verify": ("store", "verify", path), "runs": ("runs", path),
                "report": ("report", bench.folder, "--store", path, "--out", out / "report"),
                "explore": ("explore", path, "--out", out / "explore", "--where", "case=1", "--inputs", "1"),
                "sweep": ("sweep", bench.folder, "--store", path)}[name]
        ran = interp(*args)
        results[name] = dict(code=ran.code, message=ran.message, untouched=path.read_bytes() == before)
        rans.append(ran)
    return results, rans


def summary(results: dict) -> str:
    return ", ".join(f"{k} exit {v['code']}{'' if v['untouched'] else ' (file CHANGED)'}" for k, v in results.items())


def foreign_sqlite(bench: Bench, with_runs: bool) -> dict:
    """Another program's SQLite file (a ``notes`` table; with or without its own ``runs``
    table) given as ``--store`` to every command."""
    path = bench.fresh(f"foreign-{'runs' if with_runs else 'plain'}")
    path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        db.executemany("INSERT INTO notes (text) VALUES (?)", [("keep me",), ("and me",)])
        if with_runs:
            db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, distance REAL, day TEXT)")
            db.execute("INSERT INTO runs (distance, day) VALUES (5.2, 'monday')")
    original = path.read_bytes()
    results, rans = each_command(bench, path, ("verify", "runs", "report", "sweep"))
    unchanged = path.read_bytes() == original
    refused = all(r.code != 0 for r in rans)
    main = rans[-1]
    out = bench.judge(path, main, rerun=None, check=unchanged and refused, bytes_unchanged=unchanged,
                      commands=results)
    if not refused or not unchanged:
        out["ok"] = False
    out["checked"] = f"file bytes unchanged: {'yes' if unchanged else 'NO'}; {summary(results)}"
    return out


def future_schema(bench: Bench) -> dict:
    """A store of a later schema (``user_version`` 7) given to every command."""
    path = bench.copy_ref("future")
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA user_version = 7")
    before = snapshot(path)
    original = path.read_bytes()
    results, rans = each_command(bench, path)
    unchanged = path.read_bytes() == original
    refused = all(r.code != 0 for r in rans)
    said_by = next((r for r in rans if r.code), rans[0])
    out = bench.judge(path, said_by, rerun=None, before=before, check=unchanged and refused,
                      bytes_unchanged=unchanged, commands=results)
    out["checked"] = f"file bytes unchanged: {'yes' if unchanged else 'NO'}; {summary(results)}"
    return out


def symlink(bench: Bench, at: str) -> dict:
    """A symlink where the program writes a file of its own (the lock file; report.md's
    temporary file) pointing at a file of the user's."""
    path = bench.copy_ref(f"symlink-{at}")
    before = snapshot(path)
    victim = path.parent / "victim.txt"
    victim.write_text("the user's file: these bytes must stay\n")
    original = victim.read_bytes()
    if at == "lock":
        link = Path(str(path) + ".lock")
        link.symlink_to(victim)
        ran = bench.sweep(path)
    else:
        out_dir = path.parent / "report"
        out_dir.mkdir()
        link = out_dir / "report.md.tmp"
        link.symlink_to(victim)
        ran = interp("report", bench.folder, "--store", path, "--out", out_dir)
    untouched = victim.read_bytes() == original
    out = bench.judge(path, ran, rerun=None, before=before, check=untouched, expect_message=ran.code != 0,
                      target_untouched=untouched)
    out["checked"] = f"symlink target untouched: {'yes' if untouched else 'NO'}; exit {ran.code}"
    return out


# ------------------------------------------------------------------ outputs under a full disk


def report_full_disk(bench: Bench, kib: int) -> dict:
    """``interp report`` under a file-size limit, over the reference report's files: the message
    names the path, and the files there are the previous good ones or new complete ones."""
    path = bench.ref_path
    out_dir = bench.fresh(f"report-full{kib}").parent
    shutil.copytree(bench.ref_report(), out_dir)
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    ran = interp("report", bench.folder, "--store", path, "--out", out_dir, limit_bytes=kib * 1024)
    now = {p.name: p.read_bytes() for p in out_dir.iterdir() if p.is_file()}
    damaged = [k for k, v in before.items() if now.get(k) != v]  # same store: a good rewrite is equal
    left = sorted(set(now) - set(before))
    intact = not damaged
    out = bench.judge(path, ran, rerun=None, check=intact and ran.code != 0, previous_files_intact=intact,
                      left_behind=left)
    out["checked"] = (f"{kib} KiB: previous report.md and violins.png intact: {'yes' if intact else 'NO'}"
                      + (f" ({', '.join(damaged)} changed)" if damaged else "")
                      + (f", left behind: {', '.join(left)}" if left else ""))
    return out


def explore_full_disk(bench: Bench) -> dict:
    out_dir = bench.fresh("explore-full").parent
    ran = interp("explore", bench.ref_path, "--out", out_dir, "--where", "case=1", "--inputs", "1",
                 limit_bytes=8 * 1024)
    out = bench.judge(bench.ref_path, ran, rerun=None, check=ran.code != 0)
    out["checked"] = f"exit {ran.code}"
    return out


# ------------------------------------------------------------------ configs.py


def configs_folder(bench: Bench, name: str, text: str) -> Path:
    folder = bench.root / f"configs-{name}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "configs.py").write_text(text)
    return folder


def configs_fault(bench: Bench, name: str, text: str, *extra, timeout: float = HANG_S, limit_memory=None,
                  streams: bool = False) -> dict:
    """A sweep folder whose configs.py misbehaves; ``interp sweep`` on it (with a load timeout
    of 10 s where the command has such an option, except where it ``streams``: 10^6 runs are
    given the default). Refused in one line naming configs.py, no store created, within the
    time limit (``streams``: or done in under 60 s and 1 GB)."""
    folder = configs_folder(bench, name, text)
    path = folder / "results" / "store.sqlite"
    flag = bench.flag("timeout")
    if flag and not streams:
        extra = (*extra, flag, "10")
    ran = interp("sweep", folder, "--store", path, *extra, timeout=timeout, limit_memory=limit_memory)
    created = path.exists()
    rows = snapshot(path)
    refused = ran.code != 0 and not ran.hung and not created
    quick = streams and ran.code == 0 and ran.seconds < 60 and ran.peak_mb < 1024
    out = bench.judge(path, ran, rerun=None, check=refused or quick, expect_message=not quick,
                      store_created=created, rows=len(rows), hung=ran.hung, peak_mb=ran.peak_mb,
                      load_timeout_flag=flag)
    if not ran.message and not ran.hung:
        out["message"] = f"(exit {ran.code}, no output)"
    if ran.hung:
        out["message"] = f"(hang: killed after {timeout:.0f} s)"
    out["checked"] = (f"exit {ran.code}{' (hang)' if ran.hung else ''} after {ran.seconds:.0f} s, peak {ran.peak_mb} MB;"
                      f" store created: {'yes' if created else 'no'}" + (f", {len(rows)} run(s) stored"
                                                                         f" ({sum(v[0] != 'ok' for v in rows.values())} failed)" if rows else ""))
    return out


CONFIGS_FAULTS = {
    "exit": HEAD + "import os\nos._exit(0)\n",
    "keyboard": HEAD + "raise KeyboardInterrupt\n",
    "loop": HEAD + "while True:\n    pass\n",
    # slow on purpose: an endless stream of configs, not a memory bomb
    "generator": HEAD + "import time, itertools\n\ndef endless():\n    for s in itertools.count():\n"
                 "        time.sleep(0.002)\n        yield " + one(seed="s") + "\n\nCONFIGS = endless()\n" + LAYOUT,
    "million": HEAD + "CONFIGS = [" + one(seed="s") + " for s in range(10**6)]\n" + LAYOUT,
}
HUGE = {"d_token": "100_000", "batch_size": "10**9", "d_mlp": "10**10"}


def huge(bench: Bench, field: str) -> dict:
    text = HEAD + "CONFIGS = [" + one(**{field: HUGE[field]}) + "]\n" + LAYOUT
    out = configs_fault(bench, f"huge-{field}", text, timeout=300, limit_memory=LIMIT_AS)
    if field not in out["message"]:  # the size check names the field
        out["ok"] = False
    stored = f", {out['rows']} run(s) stored" if out["rows"] else ""
    out["checked"] = (f"{field}: exit {out['code']}, store created: {'yes' if out['store_created'] else 'no'}"
                      f"{stored}")
    return out


def non_utf8(bench: Bench) -> dict:
    """A sweep folder whose name is not valid UTF-8 (its first group only: --limit 2)."""
    folder = os.fsencode(bench.root) + b"/sweep-\xff\xfe"
    shutil.rmtree(folder, ignore_errors=True)
    os.mkdir(folder)
    with open(folder + b"/configs.py", "w") as f:
        f.write(textwrap.dedent(SWEEP))
    ran = interp("sweep", folder, "--limit", "2")
    path = Path(os.fsdecode(folder)) / "results" / "store.sqlite"
    rows = snapshot(path)
    wrong = bench.wrong(rows)
    trained = ran.code == 0 and len(rows) == 2 and not wrong
    refused = ran.code == 2 and ran.names_path
    out = bench.judge(path, ran, rerun=None, check=trained or refused, expect_message=ran.code != 0,
                      rows=len(rows))
    out["checked"] = f"exit {ran.code}; runs stored: {len(rows)} of 2 asked"
    return out


# ------------------------------------------------------------------ tampered store content


def nan_checkpoint(bench: Bench) -> dict:
    """One checkpoint's weights set to NaN, its hashes recomputed (config.json, the store's
    checksums and row digest): ``load_run`` must refuse it, ``interp explore`` skip it."""
    from interp.sweeps import store  # the forger's tool: the row digest as the store computes it

    path = bench.copy_ref("nan-ckpt")
    run = sorted(bench.reference)[0]
    folder = path.parent / "checkpoints" / run
    w, c = folder / "model.safetensors", folder / "config.json"
    header, body = st_read(w)
    name, start, end = st_tensor(header, "")
    body = body[:start] + struct.pack("<f", float("nan")) * ((end - start) // 4) + body[end:]
    st_write(w, header, body)
    meta = json.loads(c.read_text())
    meta["sha256"] = digest(w)
    c.write_text(json.dumps(meta, indent=1))
    with closing(sqlite3.connect(path)) as db, db:
        sums = {p.name: digest(p) for p in (w, c)}
        db.execute("UPDATE runs SET checksums=? WHERE name=?", (json.dumps(sums, sort_keys=True), run))
        values = db.execute(f"SELECT {', '.join(store.RUN_COLUMNS)} FROM runs WHERE name=?", (run,)).fetchone()
        db.execute("UPDATE runs SET row_sha256=? WHERE name=?", (store.row_digest(values), run))
    verify = interp("store", "verify", path)
    probe = ("import sys\nfrom interp.training.checkpoints import load_run\ntry:\n"
             "    r = load_run(sys.argv[1])\nexcept ValueError as e:\n"
             "    print(f'interp load_run: error: {e}', file=sys.stderr); sys.exit(2)\n"
             "print(f'load_run loaded it (accuracy {r.metrics.get(\"accuracy\")} in its metrics)')\n")
    loaded = interp(folder, python=probe)
    page = path.parent / "explore"
    explore = interp("explore", path, "--out", page, "--where", "case=1", "--inputs", "1")
    index = page / "index.html"
    page_text = index.read_text(errors="replace") if index.is_file() else ""
    # skipped with a note: the page names the run beside "skip" or "non-finite"
    noted = explore.code == 0 and bool(re.search(rf"{run}[^<]*(skip|non-finite)|(skip|non-finite)[^<]*{run}",
                                                 page_text, re.I))
    out = bench.judge(path, loaded, rerun=None, tampered={run}, served=loaded.code == 0,
                      check=loaded.code != 0 and noted, verify_code=verify.code, load_run_code=loaded.code,
                      explore_code=explore.code, explore_message=explore.message, explore_page=index.is_file())
    out["checked"] = (f"load_run: {'refused' if loaded.code else 'LOADED'}; explore: exit {explore.code}"
                      + (f" ({explore.message})" if explore.code else ", page written"
                         + (", the run skipped with a note" if noted else " WITHOUT a note on the run"))
                      + f"; store verify exit {verify.code}")
    return out


def null_digest(bench: Bench) -> dict:
    """A row's ``row_sha256`` set to NULL and its accuracy to 0.999, beside checksummed rows:
    ``store verify``, ``report`` and ``sweep`` must not use it as good."""
    path = bench.copy_ref("null-sha")
    run = sorted(bench.reference)[0]
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE runs SET row_sha256=NULL, accuracy=0.999 WHERE name=?", (run,))
    verify = interp("store", "verify", path)
    out_dir = path.parent / "report"
    report = interp("report", bench.folder, "--store", path, "--out", out_dir)
    shown_in_report = (out_dir / "report.md").is_file() and "99.90" in (out_dir / "report.md").read_text()
    sweep = bench.sweep(path)
    served = verify.code == 0 or shown_in_report or (sweep.code == 0 and snapshot(path).get(run, ("",))[0] == "ok")
    said_by = next((r for r in (verify, report, sweep) if r.code), verify)
    out = bench.judge(path, said_by, rerun=None, tampered={run}, served=served, check=not served,
                      verify_code=verify.code, report_code=report.code, report_shows_edit=shown_in_report,
                      sweep_code=sweep.code)
    out["checked"] = (f"store verify exit {verify.code}; report exit {report.code}"
                      f"{', shows 99.90' if shown_in_report else ''}; sweep exit {sweep.code}")
    return out


# ------------------------------------------------------------------ issue 43: what reads a store, and what writes beside it


def rows_dest(bench: Bench) -> dict:
    """``interp store rows REF B`` where B is another sweep's live store (a copy of the reference
    with its checkpoints), a user's text file, or another program's SQLite file: each refused,
    its bytes kept; then B = an earlier rows-only copy of REF is replaced (exit 0)."""
    live = bench.copy_ref("rows-live")
    before = snapshot(live)
    text = live.parent / "notes.txt"
    text.write_text("the user's notes\n")
    foreign = live.parent / "other.sqlite"
    with closing(sqlite3.connect(foreign)) as db, db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('keep me')")
    other = bench.fresh("rows-other")  # another store of the same sweep folder (its first group)
    assert interp("sweep", bench.folder, "--store", other, "--limit", "2").code == 0
    codes, kept, said_by = [], [], None
    for dest in (live, text, foreign, other):
        original = dest.read_bytes()
        ran = interp("store", "rows", bench.ref_path, dest)
        codes.append(ran.code)
        kept.append(dest.read_bytes() == original)
        said_by = said_by or ran
    copy = live.parent / "rows.sqlite"
    first, again = interp("store", "rows", bench.ref_path, copy), interp("store", "rows", bench.ref_path, copy)
    refused = all(c == 2 for c in codes) and all(kept)
    out = bench.judge(live, said_by, rerun=None, before=before, check=refused and first.code == again.code == 0,
                      codes=codes, bytes_kept=kept)
    out["checked"] = (f"exit {codes} for a live store, a text file, another program's SQLite file, another store "
                      f"of the sweep; bytes kept: {'yes' if all(kept) else 'NO'}; an earlier copy replaced: "
                      f"exit {again.code}")
    return out


def train_force_into(bench: Bench, what: str) -> dict:
    """``interp train --force --out`` a sweep's checkpoint folder (``checkpoint``), or a run folder
    holding the user's notes too (``notes``): refused before training, the folder's bytes kept."""
    if what == "checkpoint":
        path = bench.copy_ref("train-into-ckpt")
        folder = path.parent / "checkpoints" / sorted(bench.reference)[0]
    else:
        path = bench.fresh("train-into-notes")
        folder = path.parent
        assert interp("train", "--case", "1", "--n", "5", "--d-token", "4", "--steps", "5", "--out", folder).code == 0
        (folder / "notes.txt").write_text("my notes")
    before_rows = snapshot(path)
    files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    ran = interp("train", "--case", "1", "--n", "5", "--d-token", "4", "--steps", "5", "--out", folder, "--force")
    kept = all(p.is_file() and p.read_bytes() == b for p, b in files.items())
    verify = interp("store", "verify", path)
    out = bench.judge(path, ran, rerun=None, before=before_rows, tampered=set(before_rows) if not kept else (),
                      served=not kept and verify.code == 0, check=ran.code == 2 and kept,
                      bytes_kept=kept, verify_code=verify.code)
    out["checked"] = f"train exit {ran.code}; folder bytes kept: {'yes' if kept else 'NO'}; store verify exit {verify.code}"
    return out


def store_symlink(bench: Bench) -> dict:
    """``--store LINK`` (a symlink to a store in another folder): a sweep through the link
    (first group), one through the real path, one through the link again: every run stored once,
    checkpoints in the real folder, nothing trained twice."""
    real = bench.fresh("link-real")
    real.parent.mkdir(parents=True)
    link = bench.fresh("link-here")
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    a = bench.sweep(link, "--limit", "2")
    b = bench.sweep(real)
    c = bench.sweep(link)
    verify = interp("store", "verify", link)
    twice = max(0, runs_done(real) - len(snapshot(real)))
    out = bench.judge(real, c, rerun=None, complete=True, expect_message=False,
                      check=twice == 0 and verify.code == 0 and (a.code, b.code, c.code) == (0, 0, 0)
                      and not (link.parent / "checkpoints").exists(), trained_twice=twice, verify_code=verify.code)
    out["checked"] = (f"sweeps exit {a.code}, {b.code}, {c.code}; runs trained twice: {twice}; store verify "
                      f"through the link exit {verify.code}")
    return out


def stop_loss_int(bench: Bench) -> dict:
    """A configs.py with ``stop_loss=0`` (seed 0) beside ``stop_loss=0.0`` (seed 1): one group,
    both runs ok, and the plain rerun trains nothing."""
    text = HEAD + "CONFIGS = [" + one(stop_loss="0") + ", " + one(stop_loss="0.0", seed="1") + "]\n" + LAYOUT
    folder = configs_folder(bench, "stop-loss", text)
    path = folder / "results" / "store.sqlite"
    ran = interp("sweep", folder, "--store", path)
    again = interp("sweep", folder, "--store", path)
    rows = snapshot(path)
    failed = sum(v[0] != "ok" for v in rows.values())
    wrong = {k for k, v in rows.items() if v[0] == "ok" and k in bench.reference and v != bench.reference[k]}
    ok = ran.code == 0 and len(rows) == 2 and not failed and "0 trained now" in again.out and not wrong
    out = dict(code=ran.code, message=shown(said(ran.out, ran.err)), names_path=None, traceback=ran.traceback,
               lost=2 - len(rows), wrong=len(wrong), wrongly_failed=failed, ok=ok)
    out["checked"] = f"exit {ran.code}; {len(rows)} run(s) stored, {failed} failed; rerun trained none: " \
                     f"{'yes' if '0 trained now' in again.out else 'NO'}"
    return out


def orphan_progress(bench: Bench) -> dict:
    """The store killed mid-group (its progress file saved), then configs.py edited to drop that
    group: the sweep warns, ``store verify`` names the file, ``--remove-orphans`` removes it."""
    path = bench.copy(bench.progress_base(), "orphan")
    files = progress_files(path)
    folder = configs_folder(bench, "orphan", textwrap.dedent(SWEEP).replace('(2, "none", 900)', '(2, "none", 901)'))
    ran = interp("sweep", folder, "--store", path)
    verify = interp("store", "verify", path, "--sweep", folder)
    named = all(str(f) in verify.err for f in files)
    removed = interp("store", "verify", path, "--sweep", folder, "--remove-orphans")
    gone = not any(f.exists() for f in files)
    out = bench.judge(path, verify, rerun=None, before=snapshot(path), names=[f.name for f in files],
                      check=bool(files) and named and gone and "orphaned progress" in ran.err)
    out["checked"] = (f"sweep warned: {'yes' if 'orphaned progress' in ran.err else 'NO'}; store verify named "
                      f"it: {'yes' if named else 'NO'}; --remove-orphans removed it: {'yes' if gone else 'NO'}")
    return out


def swap_checkpoints(store_path: Path, a: str, b: str) -> None:
    """Swap the checkpoint folders of runs ``a`` and ``b`` beside ``store_path`` (each stays
    self-consistent: only the store's rows say which is which)."""
    ca, cb = store_path.parent / "checkpoints" / a, store_path.parent / "checkpoints" / b
    ca.rename(ca.with_name("x"))
    cb.rename(ca)
    ca.with_name("x").rename(cb)


def swapped_explore(bench: Bench) -> dict:
    """Two checkpoint folders of the reference swapped (each self-consistent): ``interp explore``
    must skip both with a note naming the run and its folder, and show neither as the other."""
    path = bench.copy_ref("swap")
    a, b = sorted(bench.reference)[:2]
    swap_checkpoints(path, a, b)
    page = path.parent / "explore"
    ran = interp("explore", path, "--out", page, "--inputs", "1")
    text = (page / "index.html").read_text() if (page / "index.html").is_file() else ""
    noted = all(f"run {r}: checkpoint folder {path.parent / 'checkpoints' / r}" in text for r in (a, b))
    shown_rows = set(re.findall(r'<tr data-seed="([\w-]+)"', text))
    served = bool({a, b} & shown_rows)
    out = bench.judge(path, ran, rerun=None, tampered={a, b}, served=served, expect_message=False,
                      check=ran.code == 0 and noted and not served, explore_code=ran.code)
    out["checked"] = (f"explore exit {ran.code}; both runs skipped with a note naming run and folder: "
                      f"{'yes' if noted else 'NO'}; shown as the other run: {'YES' if served else 'no'}")
    return out


def interrupted(bench: Bench) -> dict:
    """SIGINT to ``interp explore`` once it has begun writing its page (circuitsvis.js is there,
    the seeds being measured): one line, exit 130, no traceback."""
    out_dir = bench.fresh("sigint-explore").parent
    cmd = Command("explore", bench.ref_path, "--out", out_dir, "--inputs", "1")
    while not cmd.poll() and not (out_dir / "circuitsvis.js").is_file():
        time.sleep(0.05)
    sent = not cmd.poll()
    if sent:
        time.sleep(0.5)
        os.kill(cmd.pid, signal.SIGINT)
    ran = cmd.finish()
    lines = [line for line in ran.err.splitlines() if line.strip() and not BAR.search(line)]
    one_line = sent and ran.code == 130 and len(lines) <= 2 and not ran.traceback
    out = bench.judge(bench.ref_path, ran, rerun=None, expect_message=False, check=one_line, lines=len(lines))
    out["checked"] = (f"exit {ran.code}; {len(lines)} line(s) on stderr; traceback: {'YES' if ran.traceback else 'no'}"
                      + ("" if sent else "; finished before the signal"))
    return out


def long_out(bench: Bench) -> dict:
    """``interp train --out`` a 242-character name: refused before training, naming it."""
    out_dir = bench.root / ("r" * 242)
    ran = interp("train", "--case", "1", "--n", "5", "--d-token", "4", "--steps", "5", "--out", out_dir)
    made = os.path.exists(out_dir)
    out = bench.judge(bench.ref_path, ran, rerun=None, check=ran.code == 2 and not made and ran.seconds < 60)
    out["checked"] = f"exit {ran.code} after {ran.seconds:.0f} s; folder made: {'YES' if made else 'no'}"
    return out


def swapped_atlas(bench: Bench) -> dict:
    """The best run's checkpoint folder swapped with a failed run's (each self-consistent), then
    ``interp atlas``: the run it would measure is skipped with a line naming it (label
    ``unmeasured``), never measured as the other run."""
    import csv

    path = bench.copy_ref("swap-atlas")
    # the best run (measured: not near chance) and another: a measured run gets a foreign checkpoint
    by_acc = sorted(bench.reference, key=lambda r: -(bench.reference[r][1] or 0.0))
    a, b = by_acc[0], by_acc[-1]
    swap_checkpoints(path, a, b)
    out_dir = path.parent / "atlas"
    ran = interp("atlas", path, "--out", out_dir, "--batch-size", "64")
    rows = {r["name"]: r for r in csv.DictReader((out_dir / "atlas.csv").open())} if (out_dir / "atlas.csv").is_file() else {}
    skipped = rows.get(a, {}).get("label") == "unmeasured" and a in rows.get(a, {}).get("note", "")
    served = any(rows.get(r, {}).get("label") not in (None, "unmeasured", "failed") for r in (a, b))
    out = bench.judge(path, ran, rerun=None, tampered={a, b}, served=served, expect_message=False,
                      check=ran.code == 0 and skipped and not served)
    out["checked"] = (f"atlas exit {ran.code}; the measured run skipped by name: {'yes' if skipped else 'NO'}; "
                      f"measured as the other run: {'YES' if served else 'no'}")
    return out


def atlas_cache(bench: Bench) -> dict:
    """An atlas.csv with one measured row edited by hand and its last row cut, then ``interp
    atlas`` again; then again at another --batch-size: every such row is measured again and the
    command says how many."""
    path = bench.copy_ref("atlas-cache")
    out_dir = path.parent / "atlas"
    first = interp("atlas", path, "--out", out_dir, "--batch-size", "64")
    table = out_dir / "atlas.csv"
    lines = table.read_text().splitlines()
    col = lines[0].split(",").index("qk_diag")
    i = next(k for k, line in enumerate(lines[1:], 1) if line.split(",")[col] not in ("", "0.0"))
    fields = lines[i].split(",")
    fields[col] = "0.0"
    lines[i] = ",".join(fields)
    table.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    again = interp("atlas", path, "--out", out_dir, "--batch-size", "64")
    said_bad = "2 cached rows cut or edited" in again.out
    other = interp("atlas", path, "--out", out_dir, "--batch-size", "32")
    found = re.search(r"(\d+) rows from the cache, (\d+) measured", other.out)
    lent, measured = (int(found.group(1)), int(found.group(2))) if found else (-1, -1)
    failed = sum(1 for line in table.read_text().splitlines()[1:] if ",failed,failed," in line)
    ok = (first.code == 0 and again.code == 0 and said_bad and other.code == 0
          and lent == failed and measured == len(bench.reference) - failed)
    out = bench.judge(path, again, rerun=None, expect_message=False, check=ok)
    out["checked"] = (f"edited + cut rows reported: {'yes' if said_bad else 'NO'}; at another batch size "
                      f"{lent} row(s) lent by the cache (the {failed} failed seeds, never measured), "
                      f"{measured} measured again")
    return out


def atlas_full_disk(bench: Bench) -> dict:
    """``interp atlas`` under a file-size limit over an earlier atlas: the files there stay the
    earlier set (atlas.csv, atlas.md, figures written together or not at all)."""
    path = bench.copy_ref("atlas-full")
    out_dir = path.parent / "atlas"
    interp("atlas", path, "--out", out_dir, "--batch-size", "64")
    before = {p.name: p.read_bytes() for p in out_dir.iterdir() if p.is_file()}
    ran = interp("atlas", path, "--out", out_dir, "--batch-size", "32", limit_bytes=16 * 1024)
    now = {p.name: p.read_bytes() for p in out_dir.iterdir() if p.is_file()}
    mixed = ran.code != 0 and now != before
    out = bench.judge(path, ran, rerun=None, check=ran.code != 0 and not mixed)
    out["checked"] = f"exit {ran.code}; the earlier set intact: {'yes' if not mixed else 'NO'}"
    return out


# ------------------------------------------------------------------ the table

#: (key, fault, tries): keys are what --only/--skip match
SCENARIOS = [
    ("sigkill", "SIGKILL of the driver and its workers: at 5 random moments (after 0-5 commits and up to 1 s), "
                "and right after the 1st, 2nd, 4th commit",
     lambda b: [sigkill(b, s) for s in range(5)] + [sigkill(b, 9, k) for k in (1, 2, 4)]),
    ("disk-full", "disk full (file-size limit 12, 16, 20 KiB)", lambda b: [full_disk(b, k) for k in (12, 16, 20)]),
    ("ckpt-flip", "a flipped byte in a checkpoint's weights", lambda b: [damaged_checkpoint(b, "flip")]),
    ("ckpt-delete", "a deleted checkpoint folder", lambda b: [damaged_checkpoint(b, "delete")]),
    ("second-driver", "a second driver on the same store", lambda b: [two_drivers(b, delete_lock=False)]),
    ("locked", "the store locked by another process (interp report)", lambda b: [locked_store(b)]),
    ("read-only", "the store on a read-only mount", lambda b: [read_only(b)]),
    ("bytes-random", "random bytes as the store file", lambda b: [corrupt_bytes(b, "random")]),
    ("bytes-empty", "an empty (0-byte) store file", lambda b: [corrupt_bytes(b, "empty")]),
    ("edit-runs", "an edited run row", lambda b: [edited_row(b, "runs")]),
    ("edit-sweeps", "an edited sweeps-log row (interp report)", lambda b: [edited_row(b, "sweeps")]),
    # issue 24
    ("progress-control", "SIGKILL mid-group with progress saving on, progress file intact (control)",
     lambda b: [progress_fault(b, "control")]),
    ("progress-flip", "a flipped bit in a progress file's weights", lambda b: [progress_fault(b, "flip")]),
    ("progress-active", "a progress file's `active` list edited (seed 1 stopped)", lambda b: [progress_fault(b, "active")]),
    ("progress-step", "a progress file's step counter set to 3990", lambda b: [progress_fault(b, "step")]),
    ("progress-nan", "a NaN weight in a progress file", lambda b: [progress_fault(b, "nan")]),
    ("progress-full", "disk full while saving progress (file-size limit 24 KiB, --save-every 0.05)",
     lambda b: [full_disk(b, 24, *SAVE_EVERY)]),
    ("progress-dir-once", "`progress/` deleted once, during a save", lambda b: [progress_folder(b, "once")]),
    ("progress-dir-repeat", "`progress/` deleted every few ms during the sweep", lambda b: [progress_folder(b, "repeat")]),
    ("progress-dir-file", "`progress/` replaced by a file during the sweep, then interp report",
     lambda b: [progress_folder(b, "file")]),
    ("lock-deleted", "the lock file deleted while a driver holds it, then a second driver",
     lambda b: [two_drivers(b, delete_lock=True)]),
    ("kill-driver", "SIGKILL of the driver alone (2 pool workers)", lambda b: [kill_driver_only(b)]),
    ("kill-worker", "SIGKILL of one of 2 pool workers", lambda b: [kill_one_worker(b)]),
    ("foreign-plain", "--store: another program's SQLite file (no `runs` table); verify, runs, report, sweep",
     lambda b: [foreign_sqlite(b, with_runs=False)]),
    ("foreign-runs", "--store: another program's SQLite file with its own `runs` table; verify, runs, report, sweep",
     lambda b: [foreign_sqlite(b, with_runs=True)]),
    ("future-schema", "a store of a future schema (user_version 7); verify, runs, report, explore, sweep",
     lambda b: [future_schema(b)]),
    ("symlink-lock", "a symlink at the lock file", lambda b: [symlink(b, "lock")]),
    ("symlink-report-tmp", "a symlink at report.md.tmp (interp report)", lambda b: [symlink(b, "report-tmp")]),
    ("report-full", "interp report under disk full over a good report (file-size limit 1, 20 KiB)",
     lambda b: [report_full_disk(b, k) for k in (1, 20)]),
    ("explore-full", "interp explore under disk full (file-size limit 8 KiB)", lambda b: [explore_full_disk(b)]),
    ("configs-exit", "configs.py calls os._exit(0)", lambda b: [configs_fault(b, "exit", CONFIGS_FAULTS["exit"])]),
    ("configs-keyboard", "configs.py raises KeyboardInterrupt",
     lambda b: [configs_fault(b, "keyboard", CONFIGS_FAULTS["keyboard"])]),
    ("configs-loop", "configs.py loops forever", lambda b: [configs_fault(b, "loop", CONFIGS_FAULTS["loop"])]),
    ("configs-generator", "CONFIGS is an endless generator",
     lambda b: [configs_fault(b, "generator", CONFIGS_FAULTS["generator"])]),
    ("configs-million", "10^6 declared runs (--limit 1)",
     lambda b: [configs_fault(b, "million", CONFIGS_FAULTS["million"], "--limit", "1", streams=True)]),
    ("configs-huge", "huge dims in a TrainConfig: d_token 1e5, batch_size 1e9, d_mlp 1e10 (4 GiB address-space limit)",
     lambda b: [huge(b, f) for f in HUGE]),
    ("non-utf8", "a sweep folder whose name is not valid UTF-8", lambda b: [non_utf8(b)]),
    ("nan-checkpoint", "a checkpoint with NaN weights, its hashes recomputed (load_run, explore)",
     lambda b: [nan_checkpoint(b)]),
    ("null-digest", "a row's row_sha256 set to NULL, its accuracy to 0.999 (verify, report, sweep)",
     lambda b: [null_digest(b)]),
    # issue 43
    ("rows-dest", "`interp store rows REF B`, B: another sweep's live store, a text file, another program's "
                  "SQLite file, another store of the sweep", lambda b: [rows_dest(b)]),
    ("train-force-ckpt", "`interp train --force --out <store>/checkpoints/<run>`", lambda b: [train_force_into(b, "checkpoint")]),
    ("train-force-notes", "`interp train --force` onto a run folder holding the user's notes",
     lambda b: [train_force_into(b, "notes")]),
    ("store-symlink", "--store as a symlink to the store: a sweep through it, through the real path, through it again",
     lambda b: [store_symlink(b)]),
    ("stop-loss-int", "stop_loss=0 (seed 0) beside stop_loss=0.0 (seed 1) in configs.py", lambda b: [stop_loss_int(b)]),
    ("orphan-progress", "configs.py edited between a killed sweep and its resume (progress file orphaned)",
     lambda b: [orphan_progress(b)]),
    ("swap-explore", "two checkpoint folders swapped, each self-consistent (interp explore)", lambda b: [swapped_explore(b)]),
    ("swap-atlas", "a measured run's checkpoint folder swapped with a failed run's (interp atlas)", lambda b: [swapped_atlas(b)]),
    ("atlas-cache", "atlas.csv: a measure edited, the last row cut; then --batch-size 32 over a cache made at 64",
     lambda b: [atlas_cache(b)]),
    ("atlas-full", "interp atlas under a file-size limit (16 KiB) over an earlier atlas", lambda b: [atlas_full_disk(b)]),
    ("sigint-explore", "Ctrl-C (SIGINT) during interp explore, once it writes its page", lambda b: [interrupted(b)]),
    ("long-out", "`interp train --out` a 242-character name", lambda b: [long_out(b)]),
]
# issue 55: the readers' cross-checks, one bad run among good ones, messages (readers.py)
sys.path.insert(0, str(HERE))
import readers  # noqa: E402 - after the table it extends

SCENARIOS += readers.scenarios(sys.modules[__name__])


def row(fault: str, tries: list[dict]) -> str:
    tries = [t for t in tries if "skipped" not in t]
    if not tries:
        return f"| {fault} | 0 | | | | (skipped) | | | |"
    lost, wrong, failed = (sum(t[k] for t in tries) for k in ("lost", "wrong", "wrongly_failed"))
    said = next((t["message"] for t in tries if t["message"]), "")
    named = [t["names_path"] for t in tries if t.get("names_path") is not None]
    if "rows_at_kill" in tries[0]:
        said = "(killed: no message)"
        checked = f"runs committed at the kill: {[t['rows_at_kill'] for t in tries]} of 6"
    else:
        checked = "; ".join(dict.fromkeys(t.get("checked", "") for t in tries if t.get("checked")))
    checked = shown(checked, 200)
    names = "—" if not named else "yes" if all(named) else "no" if not any(named) else f"{sum(named)} of {len(named)}"
    ok = sum(t["ok"] for t in tries)
    verdict = "yes" if ok == len(tries) else "no" if not ok else f"{ok} of {len(tries)}"
    return f"| {fault} | {len(tries)} | {lost} | {wrong} | {failed} | {said} | {names} | {verdict} | {checked} |"


HEADER = ["| fault | tries | runs lost | runs wrong | runs wrongly failed | message | names the path | ok | checked |",
          "|---|--:|--:|--:|--:|---|---|---|---|"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="run the faults whose key contains TEXT (repeatable)")
    p.add_argument("--skip", action="append", default=[], metavar="TEXT",
                   help="leave out the faults whose key contains TEXT (repeatable)")
    p.add_argument("--resume", action="store_true", help="run only the faults the results file lacks")
    p.add_argument("--out", type=Path, default=HERE,
                   help="folder for faults.json and table.md (default: this folder, which also "
                        "rewrites the table in README.md)")
    p.add_argument("--tree", type=Path, default=TREE[0],
                   help="the checkout whose interp the commands run (default: this one), e.g. a "
                        "`git worktree` of an older commit")
    p.add_argument("--jobs", type=int, default=2,
                   help="faults tried at once (default 2: about 10 min on 2 cores instead of 16; "
                        "1 for timings undisturbed by a neighbour)")
    p.add_argument("--list", action="store_true", help="print the fault keys and stop")
    args = p.parse_args(argv)
    TREE[0] = args.tree.resolve()
    sys.path.insert(0, str(TREE[0]))  # the one import here (a row digest, to forge a row) too
    if args.list:
        for key, fault, _ in SCENARIOS:
            print(f"{key:22} {fault}")
        return
    results_file = args.out / "faults.json"
    old = json.loads(results_file.read_text()) if results_file.is_file() else []
    kept = {r["key"]: r for r in old if isinstance(r, dict) and "key" in r}
    chosen = [(k, f, s) for k, f, s in SCENARIOS
              if (not args.only or any(t in k for t in args.only)) and not any(t in k for t in args.skip)
              and not (args.resume and k in kept)]
    start, done = time.perf_counter(), threading.Lock()
    with tempfile.TemporaryDirectory(prefix="interp-faults-") as tmp:
        TMP[0] = tmp
        bench = Bench(Path(tmp)) if chosen else None

        def attempt(item) -> None:
            key, fault, scenario = item
            t0 = time.perf_counter()
            tries = scenario(bench)
            with done:  # saved after each fault: an interrupted run keeps what it measured
                kept[key] = dict(key=key, fault=fault, seconds=round(time.perf_counter() - t0, 1), tries=tries)
                print(f"[{time.perf_counter() - start:6.0f} s] {row(fault, tries)}", file=sys.stderr, flush=True)
                args.out.mkdir(parents=True, exist_ok=True)
                results_file.write_text(json.dumps([kept[k] for k, _, _ in SCENARIOS if k in kept], indent=1) + "\n")

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(attempt, chosen))
        table = "\n".join(HEADER + [row(kept[k]["fault"], kept[k]["tries"]) for k, _, _ in SCENARIOS if k in kept])
    (args.out / "table.md").write_text(table + "\n")
    if args.out.resolve() == HERE:
        readme = HERE / "README.md"
        text = readme.read_text()
        begin, end = "<!-- table -->", "<!-- /table -->"
        readme.write_text(text[: text.index(begin) + len(begin)] + "\n" + table + "\n" + text[text.index(end):])
    print(table)
    print(f"{len(chosen)} fault(s) tried in {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
