"""interp verify: the library rows and the CLI."""

import json
import subprocess
import sys

import pytest
import torch

from interp import cli
from interp.core import tasks, verify


def test_rows_count_what_was_checked():
    row = verify.verify(4, 12, plan="random", inputs=300, function="any")
    assert (row.case, row.layers, row.n, row.inputs, row.correct) == (4, 1, 12, 300, 300)
    ex = verify.verify(3, 3, plan="exhaustive", function="any")
    assert ex.inputs == tasks.count_inputs(3, 3, "any") == ex.correct


def test_a_wrong_model_is_caught():
    # rightmost attention breaks the case 3 construction (the query ties with the target key)
    row = verify.verify(3, 10, plan="random", inputs=500, attention="rightmost")
    assert row.correct < 0.2 * row.inputs


def test_covering_inputs_exercise_every_target_and_value():
    n = 9
    tokens = verify.covering_inputs(5, n, torch.Generator().manual_seed(0))
    assert tokens.shape[0] == 3 * n
    targets = tokens[:, -1]
    for block in targets.split(n):
        assert sorted(block.tolist()) == list(range(n))
    answers = tasks.answers(5, n, tokens)
    for block in answers.split(n):
        assert sorted(block.tolist()) == list(range(n))


def test_cli_json(capsys):
    code = cli.main(["verify", "--case", "1", "5", "--n", "7", "--inputs", "50", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["case"], r["n"], r["inputs"], r["accuracy"]) for r in rows] == [(1, 7, 50, 1.0), (5, 7, 50, 1.0)]


def test_cli_table_and_failure_exit_code(capsys):
    code = cli.main(["verify", "--case", "3", "--n", "10", "--inputs", "200", "--attention", "rightmost"])
    out = capsys.readouterr().out
    assert code == 1 and "rightmost" in out and "accuracy" in out


@pytest.mark.parametrize(
    "argv,match",
    [(["verify", "--case", "-1"], "case=-1"), (["verify", "--case", "5", "--n", "9", "--plan", "exhaustive"], "at most"),
     (["verify", "--case", "1", "--n", "0"], "n=0"), (["verify", "--case", "1", "--attention", "hard"], "attention='hard'")],
)
def test_cli_bad_input(argv, match, capsys):
    assert cli.main(argv) == 2
    assert match in capsys.readouterr().err


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "interp", "verify", "--case", "2", "--n", "4", "--plan", "exhaustive",
         "--function", "any", "--json"],
        capture_output=True, text=True, check=True,
    ).stdout
    (row,) = json.loads(out)
    assert row["inputs"] == tasks.count_inputs(2, 4, "any") and row["accuracy"] == 1.0


@pytest.fixture
def no_construction():
    """A presentation registered without a construction (case 5's layout under another
    number); unregistered at the end."""
    task = tasks.register(tasks.Consecutive(101, "consecutive, permuted keys, no construction", True))
    yield task
    tasks.unregister(task.case)


def test_a_presentation_without_a_construction_is_skipped_with_a_line(no_construction, capsys):
    assert 101 not in [row["case"] for row in verify.default_plan(quick=True)]
    assert cli.main(["verify", "--case", "101", "1", "--n", "4", "--inputs", "20", "--json"]) == 0
    captured = capsys.readouterr()
    assert [r["case"] for r in json.loads(captured.out)] == [1]
    assert "case 101 (consecutive, permuted keys, no construction): no construction, skipped" in captured.err
    assert cli.main(["precision", "--case", "101", "--n", "4", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["rows"] == [] and "case 101" in captured.err
    with pytest.raises(ValueError, match="case 101 .* has no construction"):
        from interp.core import constructions

        constructions.build(101, 4)
