"""experiments/bench/retime.sh and tables_cpu.py: a re-timing of two table folders, end to end on
two tiny tables (a few 15-step runs), and bad input refused before any sweep starts."""

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RETIME = REPO / "experiments" / "bench" / "retime.sh"

TINY = '''from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
CONFIGS = [TrainConfig(case={case}, n=3, d_token=4, n_layers={layers}, max_steps=15, eval_batches=2, seed=s{pe})
           for s in range({seeds})]
LAYOUT = TableLayout(rows=("case", "n"), column="d_token", title="tiny {table}")
'''


def _run(*args, cwd=REPO):
    return subprocess.run(["bash", str(RETIME), *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.parametrize("args", [[], ["DIR", "2", "experiments/no-such-folder"]])
def test_retime_refuses_bad_input_before_any_sweep(tmp_path, args):
    args = [tmp_path / "out" if a == "DIR" else a for a in args]
    r = _run(*args)
    assert r.returncode != 0
    assert "usage: retime.sh DIR [WORKERS] [TABLES]" in r.stderr or "no table1/configs.py there" in r.stderr, r.stderr
    assert "==" not in r.stdout and not (tmp_path / "out").exists()  # no sweep began, nothing written


def test_retime_of_a_readings_tables_writes_their_timing_against_the_120_minute_target(tmp_path):
    tables = tmp_path / "tables"
    for table, case, layers, seeds, pe in (("table1", 1, 1, 2, ""), ("table2", 5, 2, 3, ', pos_embed="learned"')):
        (tables / table).mkdir(parents=True)
        (tables / table / "configs.py").write_text(TINY.format(case=case, layers=layers, seeds=seeds, pe=pe, table=table))
    out = tmp_path / "out"
    r = _run(out, 1, tables)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (out / "timing.md").read_text()
    assert text.startswith(f"# The paper's tables on this machine: where the time goes (`{tables}/table1`, `table2`)")
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1] for line in text.splitlines()
            if line.startswith("| table1 |") or line.startswith("| table2 |")}
    assert rows == {"table1": "2", "table2": "3"}  # every declared run, one row per table
    assert "against the 120-minute target (met)" in text
    assert (out / "table1" / "report.md").is_file() and (out / "table2" / "report.md").is_file()
    r = _run(out, 1, tables)  # a second timing into the same DIR is refused: one uninterrupted sweep each
    assert r.returncode == 2 and "choose a fresh DIR" in r.stderr

    # the attention-only tables are judged against their own 30-minute target, however spelled
    cpu = [sys.executable, str(REPO / "experiments" / "bench" / "tables_cpu.py"), "--dir", str(out)]
    for spelled in ("experiments", "./experiments/"):
        r = subprocess.run([*cpu, "--tables", spelled], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "against the 30-minute target" in r.stdout and "`table2`)" not in r.stdout.splitlines()[0]

    # tables_summary.py (gpu.sh's step 4) reads the same stores laid out as gpu.sh writes them
    gpu = tmp_path / "gpu"
    for table in ("table1", "table2"):
        (gpu / table).mkdir(parents=True)
        shutil.copy(out / table / "results" / "store.sqlite", gpu / table / "store.sqlite")
    summary = [sys.executable, str(REPO / "experiments" / "bench" / "tables_summary.py"), str(gpu)]
    r = subprocess.run([*summary, "--tables", str(tables)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "| table1 | 2 / 2 |" in r.stdout and "| table2 | 3 / 3 |" in r.stdout
    assert "against the 10-minute target (met)" in r.stdout
    r = subprocess.run([*summary, "--tables", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no table1/configs.py there" in r.stderr


def test_gpu_sh_refuses_a_tables_folder_without_the_two_tables_before_any_work(tmp_path):
    import os

    r = subprocess.run(["bash", str(REPO / "experiments" / "bench" / "gpu.sh"), "--dry-run", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60, cwd=REPO,
                       env={**os.environ, "TABLES": str(tmp_path / "none")})
    assert r.returncode == 2 and "no table1/configs.py there" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()  # nothing written
