"""``INTERP_TASKS``: a presentation registered outside interp reaches the shell commands, not
only ``interp sweep`` (issue 45's remainder): ``interp train --case 6`` trains it into a folder and
``interp probe`` reads its checkpoint back; a module that does not import is refused first."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

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
