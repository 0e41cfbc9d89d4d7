"""``INTERP_TASKS``: a presentation registered outside interp reaches the shell commands, not
only ``interp sweep`` (issue 45's remainder): ``interp train --case 6`` trains it into a folder and
``interp probe`` reads its checkpoint back; a module that does not import is refused first."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

import interp
from interp import cli

# the user's module: tests/core/test_external_task.py's value-first presentation, registered on import
MODULE = """
import interp
from core.test_external_task import PRESENTATION

interp.tasks.register(PRESENTATION)
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_tasks_value_first.py").write_text(textwrap.dedent(MODULE))
    sys.modules.pop("my_tasks_value_first", None)  # imported afresh: its import registers case 6
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(cli.TASKS_ENV, "my_tasks_value_first")
    yield
    if 6 in interp.tasks.CASES:
        interp.tasks.unregister(6)


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def test_train_and_probe_a_registered_case_from_the_shell(tmp_path, user_module):
    run = tmp_path / "run"
    rc, out, err = _run(["train", "--case", "6", "--n", "4", "--d-token", "8", "--steps", "5",
                         "--reading", "attention-only", "--out", str(run), "--json"])
    assert rc == 0, err
    assert json.loads(out)["accuracy"] >= 0.0
    assert json.loads((run / "config.json").read_text())["model"]["case"] == 6
    rc, out, err = _run(["probe", str(run), "--json", "--batch-size", "64"])
    assert rc == 0, err
    assert json.loads(out)["case"] == 6


def test_a_module_that_does_not_import_is_refused_before_work(tmp_path, monkeypatch):
    monkeypatch.setenv(cli.TASKS_ENV, "no_such_module_here")
    rc, out, err = _run(["train", "--case", "3", "--n", "4", "--out", str(tmp_path / "x")])
    assert rc == 2 and not (tmp_path / "x").exists()
    assert "INTERP_TASKS='no_such_module_here': module 'no_such_module_here' did not import" in err
    assert "accepted: comma-separated importable module names" in err


def test_a_checkpoint_of_a_task_not_registered_says_to_set_interp_tasks(tmp_path, user_module, monkeypatch):
    """The checkpoint names its task (module and class); without the module that registers it,
    interp probe refuses in one line that names the task and INTERP_TASKS, not 'case=6 is not a
    presentation' (issue 50, item 3)."""
    run = tmp_path / "run"
    rc, _, err = _run(["train", "--case", "6", "--n", "4", "--d-token", "4", "--steps", "2",
                       "--reading", "attention-only", "--out", str(run)])
    assert rc == 0, err
    monkeypatch.delenv(cli.TASKS_ENV)
    interp.tasks.unregister(6)
    rc, out, err = _run(["probe", str(run), "--json"])
    assert rc == 2 and out == ""
    line, = err.strip().splitlines()
    assert "case 6 is core.test_external_task.ValueFirst ('consecutive, permuted keys, value first'), " \
           "which is not registered here" in line
    assert "set INTERP_TASKS to the module that registers it" in line


SWEEP = """
import my_tasks_value_first  # registers case 6 in the loader's process too
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=6, n=3, d_token=4, max_steps=5, batch_size=16, eval_batches=1)]
LAYOUT = TableLayout(rows=("case",), column="d_token")
"""


def test_atlas_and_explore_of_a_sweep_of_it_say_to_set_interp_tasks(tmp_path, user_module, monkeypatch):
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(SWEEP))
    tests = str(Path(__file__).resolve().parents[1])  # the user's module imports core.test_external_task
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), tests, os.environ.get("PYTHONPATH", "")]))
    rc, _, err = _run(["sweep", str(folder)])
    assert rc == 0, err
    monkeypatch.delenv(cli.TASKS_ENV)
    interp.tasks.unregister(6)
    rc, _, err = _run(["atlas", str(folder), "--json"])
    assert rc == 2 and "case=6 is not a presentation" in err
    assert "set INTERP_TASKS to the module that registers it" in err
    rc, _, err = _run(["explore", str(folder), "--out", str(tmp_path / "page"), "--json"])
    page = tmp_path / "page" / "index.html"  # the run skipped, named on the page with why
    assert "set INTERP_TASKS to the module that registers it" in err + (page.read_text() if page.exists() else "")
