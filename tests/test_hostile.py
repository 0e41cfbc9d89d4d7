"""Hostile input (property-based): the public core API and the CLI answer malformed input with a
ValueError (CLI: exit code 2 and a message) that names the problem; never a crash deep inside
torch and never a silent wrong answer."""

import contextlib
import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp import cli, constructions, models, tasks

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ints = st.integers(min_value=-5, max_value=12)
anything = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3), ints,
    st.lists(ints, max_size=6), st.lists(st.floats(), min_size=1, max_size=4),
)


@SETTINGS
@given(case=st.one_of(ints, st.text(max_size=2), st.none()), n=anything)
def test_sample_rejects_or_returns_valid_inputs(case, n):
    try:
        tokens, answers = tasks.sample(case, n, 3)
    except ValueError:
        return
    # accepted: then it really is a valid input of that case, with the right answers
    assert [tasks.evaluate(case, n, row) for row in tokens.tolist()] == answers.tolist()


@SETTINGS
@given(case=st.sampled_from(tasks.CASES), keys=st.one_of(st.none(), st.lists(ints, max_size=6)),
       values=st.lists(ints, max_size=6), target=ints)
def test_encode_never_silently_wrong(case, keys, values, target):
    try:
        tokens = tasks.encode(case, keys, values, target)
    except ValueError:
        return
    n = len(values)
    k = list(range(n)) if keys is None else keys
    assert sorted(k) == list(range(n)) and 0 <= target < n and all(0 <= v < n for v in values)
    assert tasks.evaluate(case, n, tokens[0]) == values[k.index(target)]


@SETTINGS
@given(
    case=st.sampled_from(tasks.CASES),
    n=st.integers(1, 5),
    tokens=st.one_of(
        st.lists(st.lists(st.integers(-3, 40), min_size=1, max_size=12), min_size=1, max_size=3),
        st.lists(st.lists(st.floats(0, 3), min_size=1, max_size=12), min_size=1, max_size=2),
    ),
)
def test_answers_validates_token_batches(case, n, tokens):
    if len({len(r) for r in tokens}) > 1:
        return  # ragged lists are not tensors
    try:
        got = tasks.answers(case, n, tokens)
    except ValueError:
        return
    assert got.tolist() == [tasks.evaluate(case, n, row) for row in tokens]


@SETTINGS
@given(case=anything, n=anything, d_token=anything, n_layers=anything, pos_embed=anything)
def test_build_model_validates_every_field(case, n, d_token, n_layers, pos_embed):
    try:
        models.ModelSpec(case, n, d_token, n_layers, pos_embed)
    except ValueError as e:
        assert "accepted" in str(e)
    except TypeError:
        pytest.fail("a TypeError escaped instead of a ValueError")


@SETTINGS
@given(case=anything, n=anything, attention=anything)
def test_build_construction_validates(case, n, attention):
    try:
        constructions.build(case, n, attention=attention) if isinstance(n, int) and n < 60 else constructions.build(case, -1)
    except ValueError as e:
        assert "accepted" in str(e) or "Theorem 3.6" in str(e)


@settings(max_examples=15, deadline=None)
@given(argv=st.lists(st.sampled_from(["--case", "--n", "0", "-3", "x", "9", "2", "--plan", "exhaustive",
                                      "--inputs", "--dtype", "float16", "--attention", "soft"]), max_size=6))
def test_verify_cli_never_tracebacks(argv):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["verify", "--case", "1", "--n", "3", "--inputs", "5", *argv])
    except SystemExit as e:  # argparse: usage error, exit 2
        assert e.code == 2
        return
    err = err.getvalue()
    assert code in (0, 1, 2)
    if code == 2:
        assert "error:" in err
