"""Configs are canonical before they are named (issue 43): numbers given as 0, 0.0, -0.0 or a
numpy float are one config, one run name and one group of seeds; and no run name of a committed
store changes (each stored run's name is recomputed from its stored config).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from interp.sweeps import driver as sweeps
from interp.sweeps import store
from interp.training.runs import FLOAT_FIELDS, TrainConfig

REPO = Path(__file__).resolve().parents[2]
BASE = dict(case=1, n=5, d_token=4, max_steps=20, batch_size=32, eval_batches=1, curve_every=10)


@pytest.mark.parametrize("field,values", [
    ("stop_loss", (0, 0.0, -0.0, np.float64(0.0))),
    ("lr", (1, 1.0, np.float64(1.0))),
])
def test_equal_numbers_are_one_config_one_name_one_group(field, values):
    configs = [TrainConfig(**BASE, **{field: v}) for v in values]
    assert len({c.name() for c in configs}) == 1
    assert len({json.dumps(c.to_dict(), sort_keys=True) for c in configs}) == 1
    assert all(type(getattr(c, field)) is float for c in configs)
    assert len(sweeps.group_by_seed([c.replace(seed=i) for i, c in enumerate(configs)])) == 1
    assert configs[0].name() == TrainConfig(**BASE, **{field: float(values[0])}).name()


def test_unequal_numbers_stay_apart():
    a, b = TrainConfig(**BASE, stop_loss=0.0), TrainConfig(**BASE, stop_loss=1e-300)
    assert a != b and a.name() != b.name() and len(sweeps.group_by_seed([a, b])) == 2
    with pytest.raises(ValueError, match="stop_loss=False"):
        TrainConfig(**BASE, stop_loss=False)


def test_a_sweep_with_0_and_0_point_0_trains_one_group_and_refuses_a_repeat(tmp_path, capsys):
    """``stop_loss=0`` beside ``stop_loss=0.0``: with two seeds one group, both runs ok (they were
    two names in one group, both stored failed as 'repeated seeds'); with one seed, a repeat,
    refused naming it before any training."""
    from interp import cli

    folder = tmp_path / "zero"
    folder.mkdir()
    head = "from interp.sweeps import TableLayout\nfrom interp.training import TrainConfig\n"
    layout = 'LAYOUT = TableLayout(rows=("case",), column="d_token")\n'
    base = ", ".join(f"{k}={v}" for k, v in BASE.items())
    (folder / "configs.py").write_text(head + textwrap.dedent(f"""
        CONFIGS = [TrainConfig({base}, stop_loss=0, seed=0), TrainConfig({base}, stop_loss=0.0, seed=1)]
        """) + layout)
    summary = sweeps.run_sweep(sweeps.load(folder))
    assert (summary.trained, summary.failed) == (2, 0)
    df = store.read(folder / "results" / "store.sqlite")
    assert (df["status"] == "ok").all() and df["stop_loss"].tolist() == [0.0, 0.0]
    (folder / "configs.py").write_text(head + textwrap.dedent(f"""
        CONFIGS = [TrainConfig({base}, stop_loss=0, seed=0), TrainConfig({base}, stop_loss=0.0, seed=0)]
        """) + layout)
    assert cli.main(["sweep", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CONFIGS[1] repeats CONFIGS[0]" in err[0], err


def _committed_stores() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.sqlite"], cwd=REPO, capture_output=True, text=True)
    return [REPO / p for p in listed.stdout.split()] if listed.returncode == 0 else []


@pytest.mark.parametrize("path", _committed_stores() or [REPO / "experiments" / "atlas" / "store-rows.sqlite"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_run_keeps_its_name(path):
    with closing(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)) as db:
        rows = db.execute("SELECT name, config FROM runs").fetchall()
    assert rows
    for name, text in rows:
        stored = json.loads(text)
        assert all(type(stored[f]) is float for f in FLOAT_FIELDS), name
        assert TrainConfig.from_dict(stored).name() == name
