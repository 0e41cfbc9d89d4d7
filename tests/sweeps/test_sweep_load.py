"""Loading a sweep folder guards against its configs.py: hangs, exits, endless generators,
runs too many or too big, and folder names that are not UTF-8 all end as one line naming the
path, before any store exists.

References are independent of the loader: wall-clock bounds, the process table (is a pid still
alive), the file system (was a store written), and the declared run counts of the paper's tables
(150 = 6 rows x 5 d_token x 5 seeds; 160 = 4 n x 2 layers x 4 d_token x 5 seeds).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from interp import cli
from interp.core import limits
from interp.sweeps import driver as sweeps

REPO = Path(__file__).resolve().parents[2]

HEAD = """
import itertools, os, signal, sys, time
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
LAYOUT = TableLayout(rows=("case",), column="d_token")
"""
ONE = "CONFIGS = [TrainConfig(case=1, n=5, d_token=4, max_steps=5, seed=s) for s in (0, 1)]\n"


def folder_with(root: Path, body: str, name: str = "s") -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(HEAD) + textwrap.dedent(body))
    return folder


def cli_run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, err.getvalue()


@pytest.fixture(scope="module", autouse=True)
def warm(tmp_path_factory):
    """Start the loader once (it imports the trainer: seconds), so the timings below measure
    only the loads."""
    sweeps.load(folder_with(tmp_path_factory.mktemp("warm"), ONE))


def test_a_good_folder_loads_with_its_configs_and_layout(tmp_path):
    sw = sweeps.load(folder_with(tmp_path, ONE + "print('chatter on stdout ' * 10000)\n"))
    assert [(c.case, c.n, c.d_token, c.seed) for c in sw.configs] == [(1, 5, 4, 0), (1, 5, 4, 1)]
    assert sw.layout == sweeps.TableLayout(rows=("case",), column="d_token")


@pytest.mark.parametrize("table, runs", [
    ("table1", 150), ("table2", 160),
    *[(f"readings/{r}/{t}", 150 if t == "table1" else 160)
      for r in ("mlp-1x", "mlp-4x", "torch-encoder") for t in ("table1", "table2")],
])
def test_the_real_tables_still_load(table, runs):
    """The readings' configs.py load experiments/tableN themselves (a load inside the loader)."""
    sw = sweeps.load(REPO / "experiments" / table)
    assert len(sw.configs) == runs


@pytest.mark.parametrize("folder", sorted(str(p.parent.relative_to(REPO))
                                          for p in (REPO / "experiments").rglob("configs.py")))
def test_every_sweep_in_experiments_passes_the_checks(folder):
    """The cap and the size check refuse none of the sweeps this repository runs."""
    assert sweeps.load(REPO / folder).configs


def test_an_endless_loop_is_stopped_at_the_timeout(tmp_path):
    folder = folder_with(tmp_path, "while True:\n    pass\n")
    start = time.monotonic()
    with pytest.raises(ValueError) as e:
        sweeps.load(folder, timeout=3)
    took = time.monotonic() - start
    assert 3 <= took < 3 + 15, took
    message = str(e.value)
    assert message == (f"{folder / 'configs.py'} did not finish loading within 3 s (an endless "
                       "loop or generator?); raise --load-timeout (or INTERP_LOAD_TIMEOUT) if it "
                       "is just slow")
    assert sweeps.load(folder_with(tmp_path, ONE, "after")).configs  # the loader carries on


def test_the_loading_child_is_killed_at_the_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    folder = folder_with(tmp_path, f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                                   "time.sleep(1000)\n")
    with pytest.raises(ValueError, match="did not finish loading within 2 s"):
        sweeps.load(folder, timeout=2)
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.parametrize("body, message", [
    ("os._exit(0)\n", "ended the loading process (exit code 0) while being loaded"),
    ("os._exit(3)\n", "ended the loading process (exit code 3) while being loaded"),
    ("os.kill(os.getpid(), signal.SIGSEGV)\n", "ended the loading process (killed by SIGSEGV)"),
    ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt while being loaded"),
    ("sys.exit(0)\n", "called sys.exit(0) while being loaded"),
    ("raise RuntimeError('boom')\n", "configs.py: RuntimeError: boom"),
    ("from interp.training.sweeps import Layout\n",
     "No module named 'interp.training.sweeps' (the sweep machinery moved to interp.sweeps: "
     "write `from interp.sweeps import TableLayout`)"),
    ("CONFIGS = (TrainConfig(case=1, n=5, d_token=4, seed=s) if s < 2 else 1 / 0 for s in range(9))\n",
     "configs.py: ZeroDivisionError while iterating CONFIGS: division by zero"),
])
def test_every_way_configs_py_ends_badly_is_one_line(tmp_path, body, message):
    folder = folder_with(tmp_path, body)
    with pytest.raises(ValueError) as e:
        sweeps.load(folder)
    assert message in str(e.value) and str(folder / "configs.py") in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("body, message", [
    ("CONFIGS = (TrainConfig(case=1, n=5, d_token=4, seed=i) for i in itertools.count())\n",
     "CONFIGS yields more than 50 runs (stopped at run 51"),
    ("CONFIGS = [TrainConfig(case=1, n=5, d_token=4, seed=i) for i in range(60)]\n",
     "CONFIGS declares 60 runs; accepted: at most 50 per sweep folder"),
])
def test_more_runs_than_the_cap_are_refused(tmp_path, body, message):
    folder = folder_with(tmp_path, body)
    start = time.monotonic()
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as e:
        sweeps.load(folder, max_runs=50)
    assert time.monotonic() - start < 15  # stopped at the cap, not by the 60 s limit
    assert "split the sweep into several folders" in str(e.value)


def test_exactly_the_cap_loads(tmp_path):
    folder = folder_with(tmp_path, "CONFIGS = (TrainConfig(case=1, n=5, d_token=4, seed=i) for i in range(50))\n")
    assert [c.seed for c in sweeps.load(folder, max_runs=50).configs] == list(range(50))


@pytest.mark.parametrize("fields, blamed", [
    ("case=3, n=10, d_token=100000", "d_token=100000 dominates"),
    ("case=1, n=5, d_token=4, batch_size=10**9", "batch_size=1000000000 dominates"),
    ("case=1, n=5, d_token=4, d_mlp=10**10", "d_mlp=10000000000 dominates"),
])
def test_a_config_too_big_to_train_is_refused_before_the_store_exists(tmp_path, fields, blamed):
    folder = folder_with(tmp_path, "CONFIGS = [TrainConfig(case=1, n=5, d_token=4), "
                                   f"TrainConfig({fields}, seed=0), TrainConfig({fields}, seed=1)]\n")
    with pytest.raises(ValueError) as e:
        sweeps.load(folder)
    message = str(e.value)
    assert message.startswith(f"{folder / 'configs.py'}: CONFIGS[1]: one training step of ")
    assert blamed in message and "x 2 seed(s) stacked" in message and "GiB" in message
    store = tmp_path / "store.sqlite"
    code, err = cli_run(["sweep", str(folder), "--store", str(store)])
    assert code == 2 and blamed in err and err.count("\n") == 1, err
    assert not store.exists() and not (store.parent / "checkpoints").exists()


def test_the_size_estimate_counts_the_terms_it_names():
    """train_step_bytes against the shapes written out by hand: case 1, n=5 -> pos 6, vocab 5."""
    d, pos, vocab, n, B, m = 4, 6, 5, 5, 7, 3
    params = vocab * d + pos * d + (4 * d * d + 4 * d + 2 * d * m + m + d) + d * n + n
    acts = 6 * B * pos * d + 2 * B * pos * pos + 2 * B * pos * m + B * pos * (d + n)
    assert limits.train_step_bytes(1, 5, 4, d_mlp=3, batch_size=7, seeds=2) == 2 * 4 * (4 * params + 2 * acts)


def test_a_group_of_many_seeds_is_blamed_on_its_seeds(monkeypatch):
    from interp.training.trainer import TrainConfig

    one = limits.train_step_bytes(1, 5, 4)
    monkeypatch.setattr(limits, "memory_bytes", lambda: 2 * 100 * one)  # room for 100 seeds
    limits.check_trainable(TrainConfig(case=1, n=5, d_token=4), seeds=100)
    with pytest.raises(ValueError, match="its 101 seeds, trained stacked, dominate"):
        limits.check_trainable(TrainConfig(case=1, n=5, d_token=4), seeds=101)


def test_a_folder_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    raw = os.fsencode(tmp_path) + b"/bad\xff"
    os.mkdir(raw)
    with open(raw + b"/configs.py", "w") as f:
        f.write(textwrap.dedent(HEAD) + ONE)
    folder = os.fsdecode(raw)
    with pytest.raises(ValueError) as e:
        sweeps.load(folder)
    assert repr(raw) in str(e.value) and "not valid UTF-8" in str(e.value) and "rename" in str(e.value)
    code, err = cli_run(["sweep", folder, "--limit", "0"])
    assert code == 2 and "not valid UTF-8" in err and err.count("\n") == 1, err
    assert os.listdir(raw) == [b"configs.py"]  # no results folder, no store


def test_the_cli_flag_and_the_environment_set_the_timeout(tmp_path, monkeypatch):
    folder = folder_with(tmp_path, "while True:\n    pass\n")
    store = tmp_path / "store.sqlite"
    start = time.monotonic()
    code, err = cli_run(["sweep", str(folder), "--store", str(store), "--load-timeout", "2"])
    assert code == 2 and "did not finish loading within 2 s" in err and err.count("\n") == 1, err
    assert time.monotonic() - start < 2 + 15 and not store.exists()
    code, err = cli_run(["report", str(folder), "--load-timeout", "2"])
    assert code == 2 and "did not finish loading within 2 s" in err, err
    monkeypatch.setenv("INTERP_LOAD_TIMEOUT", "1.5")
    with pytest.raises(ValueError, match="within 1.5 s"):
        sweeps.load(folder)
    monkeypatch.setenv("INTERP_LOAD_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="INTERP_LOAD_TIMEOUT='soon'; accepted: seconds > 0"):
        sweeps.load(folder)
    with pytest.raises(ValueError, match="timeout=0; accepted: seconds > 0"):
        sweeps.load(folder, timeout=0)


@pytest.mark.parametrize("body", ["os._exit(0)\n", "raise KeyboardInterrupt\n"])
def test_the_cli_exits_2_with_one_line(tmp_path, body):
    folder = folder_with(tmp_path, body)
    store = tmp_path / "store.sqlite"
    code, err = cli_run(["sweep", str(folder), "--store", str(store)])
    assert code == 2 and err.startswith("interp sweep: error:") and err.count("\n") == 1, err
    assert not store.exists()


@pytest.mark.slow  # a fresh driver and its forkserver import the trainer (~15-25 s on 2 busy cores)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("stuck", ["python", "c"])
def test_a_killed_driver_leaves_no_loading_process_behind(tmp_path, stuck):
    """SIGKILL the process that is loading a hanging configs.py: the child executing it ends.
    Stuck in Python, within seconds (it watches the driver); stuck in C code that holds the GIL
    (where no thread can watch), at its time limit plus ALARM_GRACE, by its own alarm. What
    configs.py prints goes to the driver's stderr, never its stdout."""
    from interp.sweeps.loader import ALARM_GRACE

    pid_file, out, err = tmp_path / "pid", tmp_path / "out", tmp_path / "err"
    hang = "while True:\n    pass\n" if stuck == "python" else "sum(range(10**15))\n"
    folder = folder_with(tmp_path, "print('chatter', flush=True)\n"
                                   f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" + hang)
    timeout = 8.0
    with open(out, "w") as o, open(err, "w") as e:
        driver = subprocess.Popen(
            [sys.executable, "-c", f"from interp.sweeps import driver\ndriver.load({str(folder)!r})\n"],
            stdout=o, stderr=e, env={**os.environ, "PYTHONPATH": str(Path(sweeps.__file__).parents[2]),
                                     "INTERP_LOAD_TIMEOUT": str(timeout)})
    try:
        deadline = time.monotonic() + 120  # the fresh driver's forkserver imports the trainer first
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and driver.poll() is None
            time.sleep(0.2)
        child = int(pid_file.read_text())
        assert child != driver.pid and _alive(child)  # configs.py runs apart from the driver
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    # stuck in C, the GIL held, the watching thread cannot run: the alarm ends the child
    deadline = time.monotonic() + (10 if stuck == "python" else timeout + ALARM_GRACE + 10)
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child)
    assert "chatter" in err.read_text() and "chatter" not in out.read_text()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_loading_child_holds_no_file_of_the_driver(tmp_path):
    """The child that executes configs.py must not hold the driver's files (a driver lock it held
    would outlive the driver): it is forked from the forkserver, not from the driver."""
    import fcntl

    from interp.sweeps import store

    held = tmp_path / "held"
    held.mkdir()
    check = ("def target(fd):\n    try:\n        return os.readlink(f'/proc/self/fd/{fd}')\n"
             "    except OSError:\n        return ''\n"
             f"mine = [t for t in map(target, os.listdir('/proc/self/fd')) if t.startswith({str(tmp_path)!r})]\n"
             "assert not mine, mine\n")
    with store.DriverLock(held / "store.sqlite"), open(tmp_path / "open.txt", "w"):
        assert len(sweeps.load(folder_with(tmp_path, check + ONE)).configs) == 2
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)  # the driver's lock died with its holder
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_train_refuses_a_step_too_big_for_this_machine_before_allocating():
    from interp.training import TrainConfig, train, train_group

    big = TrainConfig(case=3, n=10, d_token=100_000, max_steps=1)
    for call in (lambda: train(big), lambda: train(big, engine="reference"),
                 lambda: train_group([big, big.replace(seed=1)])):
        with pytest.raises(ValueError, match="d_token=100000"):
            call()
