"""No orphans, and a dead worker costs only its own group (issue 24, item 4).

`interp sweep --workers 2` runs in a subprocess in its own session (as in test_crash_resume);
the test finds its processes through /proc: the driver's children are the forkserver and the
resource tracker, the forkserver's children are the workers. Killing the driver alone
(SIGKILL: no handler runs) must leave no process of the session alive; killing one worker
must lose that group alone, name it in one line, exit 1, store the other groups as an
uninterrupted sweep does, and a plain rerun must train the lost group to that sweep's store.
Independent reference: the same command run uninterrupted into another store.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from interp import cli
from interp.sweeps import store, driver as sweeps, workers
from interp.training.trainer import TrainConfig
from test_crash_resume import COMPARED, _interp_sweep, _kill_group, _rows_committed, _to_completion, _wait_for
from test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

HEADER = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

def tiny(case, pe, d_token, steps, seed):
    return TrainConfig(case=case, n=5, d_token=d_token, pos_embed=pe, seed=seed, max_steps=steps,
                       stop_loss=0.0, batch_size=64, eval_batches=2, curve_every=10)

LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="orphans")
"""

# two groups that would train for many minutes: the driver is killed while both train
ENDLESS = HEADER + """
CONFIGS = [tiny(case, pe, 4, 10**6, seed) for case, pe in [(1, "learned"), (3, "none")] for seed in (0, 1)]
"""

# the scheduler takes the costliest first: A (killed) and B start; B ends, C starts; A is
# killed while C trains
THREE = HEADER + """
CONFIGS = ([tiny(3, "none", 8, 400, seed) for seed in (0, 1)]   # A
           + [tiny(3, "none", 4, 60, 0)]                         # B
           + [tiny(1, "none", 4, 200, 0)])                       # C
"""


# --------------------------------------------------------------------------- /proc


def _stat(pid: int) -> list[str] | None:
    """Fields 3 onwards of /proc/PID/stat (state, ppid, pgrp, session, ...), None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()


def _live() -> dict[int, list[str]]:
    """Every live process (zombies are dead: they hold no memory and run nothing)."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and fields[0] not in "ZX":
                procs[int(entry)] = fields
    return procs


def _session(sid: int) -> dict[int, str]:
    """The live processes of session ``sid`` (the sweep's; nothing in it calls setsid), with
    their command lines."""
    out = {}
    for pid, fields in _live().items():
        if int(fields[3]) == sid:
            try:
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
            except OSError:
                out[pid] = "?"
    return out


def _workers(driver: int) -> dict[int, list[str]]:
    """The driver's grandchildren: the processes the forkserver forked, one per group."""
    procs = _live()
    children = {pid for pid, f in procs.items() if int(f[1]) == driver}
    return {pid: f for pid, f in procs.items() if int(f[1]) in children}


def _cpu_seconds(fields: list[str]) -> float:
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# --------------------------------------------------------------------------- tests


def test_a_sigkilled_driver_leaves_no_process_behind(tmp_path):
    """The driver alone gets SIGKILL while both workers train: the workers, the forkserver
    and the resource tracker all end within seconds (before the fix they trained on)."""
    folder = make_sweep(tmp_path, ENDLESS, name="orphans")
    err_path = tmp_path / "sweep.err"
    with open(err_path, "w") as err:
        proc = _interp_sweep(folder, "--workers", "2", stderr=err)
        try:
            _wait_for(lambda: sum(_cpu_seconds(f) > 0.3 for f in _workers(proc.pid).values()) == 2,
                      proc, err_path, "two workers training")
            family = _session(proc.pid)
            assert len(family) >= 4, family  # driver, forkserver, two workers (and a resource tracker)
            os.kill(proc.pid, signal.SIGKILL)  # the driver only
            proc.wait()
            deadline = time.monotonic() + 10
            while left := _session(proc.pid):
                assert time.monotonic() < deadline, f"alive 10 s after the driver's death: {left}"
                time.sleep(0.1)
        finally:
            _kill_group(proc)


def test_a_killed_worker_loses_its_group_alone_and_a_rerun_trains_it(tmp_path):
    folder = make_sweep(tmp_path, THREE, name="three")
    sw = sweeps.load(folder)
    a, b, c = sorted(sweeps.plan(sw.configs, {}), key=workers.cost, reverse=True)
    assert ([len(a), len(b), len(c)], [g[0].max_steps for g in (a, b, c)]) == ([2, 1, 1], [400, 60, 200])
    path = sw.default_store
    ref_store = tmp_path / "ref" / "store.sqlite"  # the same command, never killed (meanwhile)
    with open(tmp_path / "ref.err", "w") as ref_err, open(tmp_path / "sweep.err", "w") as err:
        ref_proc = _interp_sweep(folder, "--workers", "1", "--store", str(ref_store), stderr=ref_err)
        proc = _interp_sweep(folder, "--workers", "2", stderr=err)
        try:
            # B is stored and C has started beside A: A's worker is the older of the two
            _wait_for(lambda: _rows_committed(path) >= 1 and len(_workers(proc.pid)) == 2, proc,
                      tmp_path / "sweep.err", "B stored and C training")
            assert _rows_committed(path) == 1
            ages = {pid: (int(f[19]), pid) for pid, f in _workers(proc.pid).items()}  # start time
            victim = min(ages, key=ages.get)
            os.kill(victim, signal.SIGKILL)
            out, _ = proc.communicate(timeout=300)
            ref_proc.communicate(timeout=300)
        finally:
            _kill_group(proc)
            _kill_group(ref_proc)
    err = (tmp_path / "sweep.err").read_text()
    assert proc.returncode == 1, err[-2000:]
    assert ref_proc.returncode == 0, (tmp_path / "ref.err").read_text()[-2000:]
    reason = f"worker process {victim} died (SIGKILL)"
    lines = [line for line in re.split(r"[\r\n]", err) if "lost" in line]
    assert len(lines) == 1 and workers.describe(a[0]) in lines[0] and reason in lines[0], err[-2000:]
    assert f"2 run(s) lost: {workers.describe(a[0])}: {reason}; rerun the same command" in out
    assert "Traceback" not in err and "BrokenProcessPool" not in err

    ref = store.read(ref_store)
    _same_rows(store.read(path), ref, [x.name() for x in b + c])  # the other groups, as if alone
    log = store.read_sweeps(path)
    assert list(log["outcome"]) == ["done: 2 run(s) lost"] and list(log["runs_done"]) == [2]

    rerun = _to_completion(_interp_sweep(folder, "--workers", "2"))  # plain rerun
    assert "2 already stored, 2 trained now (0 failed)" in rerun and "run(s) lost" not in rerun
    _same_rows(store.read(path), ref, [x.name() for x in sw.configs])


def _same_rows(df, ref, names: list[str]) -> None:
    """``df`` holds exactly ``names``, each row as the reference store has it, weights too."""
    df = df.set_index("name").sort_index()
    assert list(df.index) == sorted(names)
    ref = ref.set_index("name").loc[sorted(names)]
    for col in COMPARED:
        assert list(df[col]) == list(ref[col]), col
    assert [s["model.safetensors"] for s in df["checksums"]] == [
        s["model.safetensors"] for s in ref["checksums"]]


def test_lost_records_are_logged_not_stored_and_the_cli_exits_1(tmp_path, monkeypatch, capsys, caplog):
    """The driver's side of the "lost" contract, in process: a group that comes back lost
    leaves no row, one warning names it, the summary counts it and the CLI exits 1 saying
    what to do; the next sweep trains it like any missing run."""
    folder = make_sweep(tmp_path)  # test_sweeps.TINY: two groups of two seeds
    sw = sweeps.load(folder)
    real = sweeps.train_records

    def losing(config_dicts, sweep, *args, **kw):
        if config_dicts[0]["case"] == 1:  # what a worker returns when it cannot train its group
            return [store.RunRecord(name=c.name(), sweep=sweep, config=c.to_dict(), seed=c.seed,
                                    status="lost: worker process 7 died (SIGKILL)")
                    for c in map(TrainConfig.from_dict, config_dicts)]
        return real(config_dicts, sweep, *args, **kw)

    monkeypatch.setattr(sweeps, "train_records", losing)
    assert cli.main(["sweep", str(folder), "--json"]) == 1
    import json

    summary = json.loads(capsys.readouterr().out)
    label = workers.describe(sw.configs[0])
    assert (summary["trained"], summary["failed"], summary["lost"]) == (2, 0, 2)
    assert summary["lost_groups"] == [f"{label}: worker process 7 died (SIGKILL)"]
    warned = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert warned == [f"{label}: 2 run(s) lost: worker process 7 died (SIGKILL); not stored, "
                      "the next sweep trains them"]
    assert sorted(store.read(sw.default_store)["case"]) == [3, 3]  # nothing stored for case 1

    monkeypatch.setattr(sweeps, "train_records", real)
    assert cli.main(["sweep", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "2 already stored, 2 trained now (0 failed)" in out and "run(s) lost" not in out
    assert set(store.read(sw.default_store)["status"]) == {"ok"}
