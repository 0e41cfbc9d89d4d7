"""Faults tried on a small sweep, end to end through the `interp` command: what each did to the
store and what the user was told. Writes faults.json and the table in README.md.

    .venv/bin/python experiments/faults/run.py          # a few minutes

Every scenario runs `python -m interp ...` in a subprocess on a fresh store of a 6-run sweep,
then checks, against an uninterrupted reference sweep: rows lost or duplicated, whether the
store verifies (rows and checkpoint files) and, after rerunning the same `interp sweep`
without the fault, whether it equals the reference run for run (numbers and weights). The
message column is the one line the command printed (exit 2 unless said otherwise).
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from interp.training import store

HERE = Path(__file__).resolve().parent
SWEEP = """
from interp.training.sweeps import Layout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=case, n=5, d_token=4, pos_embed=pe, seed=seed, max_steps=steps,
                       stop_loss=0.0, batch_size=64, eval_batches=2, curve_every=10)
           for case, pe, steps in [(1, "learned", 40), (3, "none", 300), (2, "none", 900)]
           for seed in (0, 1)]
LAYOUT = Layout(rows=("case", "pos_embed"), column="d_token",
                paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="faults")
"""
COMPARED = ["accuracy", "steps", "final_loss", "status", "seed"]
TMP = [""]  # the scratch folder, replaced by <tmp> in the messages the table shows


def interp(*args, limit_bytes=None, wait=True):
    def limit():
        os.setsid()
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    cmd = [sys.executable, "-m", "interp", *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out, err


def message(err: str) -> str:
    """The line the command told the user (its error line, else its last line), shortened."""
    if "Traceback" in err:
        return "TRACEBACK"
    lines = [line.strip() for line in err.splitlines() if line.strip() and "run/s" not in line]
    errors = [line for line in lines if ": error:" in line]
    said = errors[-1].split(": error: ", 1)[1] if errors else (lines[0] if lines else "")
    return said.replace("|", "/").replace(TMP[0], "<tmp>")[:170]


def committed(path: Path) -> int:
    """Runs committed so far, read without disturbing the writer (0 while it holds the lock)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def rows(path: Path) -> dict:
    if not path.is_file():
        return {}
    df = store.read(path)
    assert df["name"].is_unique
    return {r["name"]: (tuple(r[c] for c in COMPARED), r["checksums"]["model.safetensors"] if r["checksums"] else None)
            for _, r in df.iterrows()}


class Bench:
    def __init__(self, root: Path):
        self.root = root
        self.folder = root / "sweep"
        self.folder.mkdir()
        (self.folder / "configs.py").write_text(textwrap.dedent(SWEEP))
        code, _, err = interp("sweep", self.folder, "--store", root / "ref" / "store.sqlite")
        assert code == 0, err
        self.reference = rows(root / "ref" / "store.sqlite")
        # when the killed command commits its runs, uninterrupted: kills land in that window
        timed = root / "timed" / "store.sqlite"
        start, seen, proc = time.perf_counter(), [], interp("sweep", self.folder, "--store", timed, "--workers", "2", wait=False)
        while proc.poll() is None:
            if committed(timed) > len(seen):
                seen.append(time.perf_counter() - start)
            time.sleep(0.02)
        assert proc.returncode == 0
        self.window = (seen[0] - 0.5, time.perf_counter() - start) if seen else (0.0, time.perf_counter() - start)

    def fresh(self, name: str) -> Path:
        path = self.root / name / "store.sqlite"
        shutil.rmtree(path.parent, ignore_errors=True)
        return path

    def outcome(self, path: Path, code: int, err: str, *, expect_code=2) -> dict:
        """Verify, resume and compare with the reference."""
        kept = rows(path)
        lost = [k for k, v in kept.items() if self.reference.get(k) != v and v[0][3] == "ok"]
        try:
            ok_files = store.verify(path, files=True) is not None if path.is_file() else True
        except ValueError:
            ok_files = False  # damaged checkpoints: the rerun must repair them
        rc, _, rerr = interp("sweep", self.folder, "--store", path)
        survived = rc == 0 and rows(path) == self.reference
        return dict(code=code, expected_code=code == expect_code, message=message(err),
                    verified=ok_files, lost_or_wrong=len(lost), survived=survived,
                    resumed_message=message(rerr))


def sigkill(bench: Bench, seed: int, after_rows: int | None = None) -> dict:
    """SIGKILL the whole process group at a random time in the commit window, or as soon as
    ``after_rows`` runs are committed (a kill in the middle of the sweep, other groups training
    and checkpoints being written)."""
    path = bench.fresh(f"kill{seed}-{after_rows}")
    proc = interp("sweep", bench.folder, "--store", path, "--workers", "2", wait=False)
    if after_rows is None:
        time.sleep(random.Random(seed).uniform(*bench.window))
    else:
        while committed(path) < after_rows and proc.poll() is None:
            time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    at_kill = len(rows(path))
    out = bench.outcome(path, -9, "", expect_code=-9)
    out["rows_at_kill"] = at_kill
    return out


def full_disk(bench: Bench, kib: int) -> dict:
    path = bench.fresh(f"full{kib}")
    code, _, err = interp("sweep", bench.folder, "--store", path, limit_bytes=kib * 1024)
    return bench.outcome(path, code, err)


def damaged_checkpoint(bench: Bench, how: str) -> dict:
    path = bench.fresh(f"ckpt-{how}")
    assert interp("sweep", bench.folder, "--store", path)[0] == 0
    run = next(iter(sorted(rows(path))))
    folder = path.parent / "checkpoints" / run
    if how == "flip":
        w = folder / "model.safetensors"
        data = bytearray(w.read_bytes())
        data[len(data) // 2] ^= 0xFF
        w.write_bytes(bytes(data))
    else:
        shutil.rmtree(folder)
    code, _, err = interp("store", "verify", path)
    return bench.outcome(path, code, err, expect_code=1)


def second_driver(bench: Bench) -> dict:
    path = bench.fresh("two")
    assert interp("sweep", bench.folder, "--store", path, "--limit", "2")[0] == 0
    before = path.read_bytes()
    with store.DriverLock(path):
        code, _, err = interp("sweep", bench.folder, "--store", path)
    untouched = path.read_bytes() == before
    out = bench.outcome(path, code, err)
    out["store_untouched"] = untouched
    return out


def locked_store(bench: Bench) -> dict:
    path = bench.fresh("locked")
    assert interp("sweep", bench.folder, "--store", path, "--limit", "2")[0] == 0
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = interp("report", bench.folder, "--store", path, "--out", path.parent / "report")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    return bench.outcome(path, code, err)


def read_only(bench: Bench) -> dict:
    path = bench.fresh("ro-data")
    assert interp("sweep", bench.folder, "--store", path, "--limit", "2")[0] == 0
    mount = path.parent.parent / "ro"
    mount.mkdir(exist_ok=True)
    if subprocess.run(["mount", "--bind", path.parent, mount]).returncode or \
            subprocess.run(["mount", "-o", "remount,ro,bind", mount]).returncode:
        return dict(skipped="no bind mounts here")
    try:
        code, _, err = interp("sweep", bench.folder, "--store", mount / "store.sqlite")
    finally:
        subprocess.run(["umount", mount])
    return bench.outcome(path, code, err)


def corrupt_bytes(bench: Bench, what: str) -> dict:
    path = bench.fresh(f"bytes-{what}")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"" if what == "empty" else os.urandom(4096))
    before = path.read_bytes()
    code, _, err = interp("sweep", bench.folder, "--store", path)
    untouched = path.read_bytes() == before
    path.unlink()  # what the message says to do: move it away
    out = bench.outcome(path, code, err)
    out["store_untouched"] = untouched
    return out


def edited_row(bench: Bench, table: str) -> dict:
    path = bench.fresh(f"edit-{table}")
    assert interp("sweep", bench.folder, "--store", path, "--limit", "2")[0] == 0
    with sqlite3.connect(path) as db:
        column = "accuracy" if table == "runs" else "wall_seconds"
        db.execute(f"UPDATE {table} SET {column} = 0.5 WHERE rowid = 1")
    command = ("sweep", bench.folder, "--store", path) if table == "runs" else \
        ("report", bench.folder, "--store", path, "--out", path.parent / "report")
    code, _, err = interp(*command)
    return dict(code=code, expected_code=code == 2, message=message(err), verified=False,
                lost_or_wrong=0, survived=None, note="refused until the edited row is deleted")


SCENARIOS = [
    ("SIGKILL of the driver and its workers: at 5 random times, and right after the 1st, 2nd, 4th commit",
     lambda b: [sigkill(b, s) for s in range(5)] + [sigkill(b, 9, k) for k in (1, 2, 4)]),
    ("disk full (file-size limit 12, 16, 20 KiB)", lambda b: [full_disk(b, k) for k in (12, 16, 20)]),
    ("a flipped byte in a checkpoint's weights", lambda b: [damaged_checkpoint(b, "flip")]),
    ("a deleted checkpoint folder", lambda b: [damaged_checkpoint(b, "delete")]),
    ("a second driver on the same store", lambda b: [second_driver(b)]),
    ("the store locked by another process (interp report)", lambda b: [locked_store(b)]),
    ("the store on a read-only mount", lambda b: [read_only(b)]),
    ("random bytes as the store file", lambda b: [corrupt_bytes(b, "random")]),
    ("an empty (0-byte) store file", lambda b: [corrupt_bytes(b, "empty")]),
    ("an edited run row", lambda b: [edited_row(b, "runs")]),
    ("an edited sweeps-log row (interp report)", lambda b: [edited_row(b, "sweeps")]),
]


def main() -> None:
    results = []
    with tempfile.TemporaryDirectory(prefix="interp-faults-") as tmp:
        TMP[0] = tmp
        bench = Bench(Path(tmp))
        bench_runs = [bench.reference]
        for name, scenario in SCENARIOS:
            tries = scenario(bench)
            results.append(dict(fault=name, tries=tries))
            print(name, json.dumps(tries), file=sys.stderr, flush=True)
    (HERE / "faults.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["| fault | tried | survived (rerun equals an uninterrupted sweep) | runs lost or wrong | message |",
             "|---|---|---|---|---|"]
    for r in results:
        tries = [t for t in r["tries"] if "skipped" not in t]
        survived = sum(bool(t["survived"]) for t in tries if t["survived"] is not None)
        judged = sum(t["survived"] is not None for t in tries)
        lost = sum(t["lost_or_wrong"] for t in tries)
        said = next((t["message"] for t in tries if t["message"]), "")
        if "rows_at_kill" in tries[0]:
            said = (f"(killed: no message) runs committed at the kill: {[t['rows_at_kill'] for t in tries]} "
                    f"of {len(bench_runs[0])}")
        surv = f"{survived} of {judged}" if judged else "refused (see message)"
        lines.append(f"| {r['fault']} | {len(tries)} | {surv} | {lost} | {said} |")
    table = "\n".join(lines)
    readme = HERE / "README.md"
    text = readme.read_text()
    start, end = "<!-- table -->", "<!-- /table -->"
    readme.write_text(text[: text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end):])
    print(table)


if __name__ == "__main__":
    main()
