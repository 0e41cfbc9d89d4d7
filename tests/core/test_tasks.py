"""interp.core.tasks against hand-written layouts and the plain-Python evaluator."""

import itertools
import math

import pytest
import torch

from interp.core import tasks


def plain_answer(keys, values, target):
    return {k: v for k, v in zip(keys, values, strict=True)}[target]


@pytest.mark.parametrize(
    "case,keys,values,target,expected",
    [
        (1, None, [2, 0, 1], 1, [2, 0, 1, 1]),
        (2, None, [2, 0, 1], 2, [0 * 3 + 2, 1 * 3 + 0, 2 * 3 + 1, 9 + 2]),
        (3, [2, 0, 1], [1, 1, 0], 0, [2 * 3 + 1, 0 * 3 + 1, 1 * 3 + 0, 9 + 0]),
        (4, [0, 1, 2], [2, 0, 1], 1, [0, 2, 1, 0, 2, 1, 1]),
        (5, [1, 2, 0], [0, 0, 2], 2, [1, 0, 2, 0, 0, 2, 2]),
    ],
)
def test_encode_layout_is_the_contract(case, keys, values, target, expected):
    tokens = tasks.encode(case, keys, values, target)
    assert tokens.tolist() == [expected]
    assert tokens.dtype == torch.long
    assert tokens.shape[1] == tasks.seq_len(case, 3)
    assert int(tokens.max()) < tasks.d_vocab(case, 3)


def test_paper_worked_example_tokens():
    # Appendix B: pairs (0,2),(2,3),(1,2),(3,1), i* = 2, answer f(2) = 3.
    tokens = tasks.encode(3, [0, 2, 1, 3], [2, 3, 2, 1], 2)
    assert tokens.tolist() == [[0 * 4 + 2, 2 * 4 + 3, 1 * 4 + 2, 3 * 4 + 1, 16 + 2]]
    assert tasks.evaluate(3, 4, tokens[0]) == 3


@pytest.mark.parametrize("case", tasks.CASES)
@pytest.mark.parametrize("function", tasks.FUNCTIONS)
def test_sample_answers_match_plain_python(case, function):
    n = 7
    g = torch.Generator().manual_seed(1)
    tokens, answers = tasks.sample(case, n, 300, generator=g, function=function)
    assert tokens.shape == (300, tasks.seq_len(case, n))
    for row, a in zip(tokens.tolist(), answers.tolist(), strict=True):
        keys, values, target = tasks.decode(case, n, row)
        assert a == plain_answer(keys, values, target)
        if function == "permutation":
            assert sorted(values) == list(range(n))
        if case in (1, 2, 4):
            assert keys == list(range(n))
    assert tasks.answers(case, n, tokens).tolist() == answers.tolist()


def test_sample_is_random_where_it_should_be():
    g = torch.Generator().manual_seed(0)
    tokens, _ = tasks.sample(5, 6, 2000, generator=g, function="any")
    keys = tokens[:, 0:12:2]
    assert len({tuple(k) for k in keys.tolist()}) > 500  # fresh key order per input
    values = tokens[:, 1:12:2]
    assert (values.sort(1).values != torch.arange(6)).any(1).float().mean() > 0.9  # not permutations
    target = tokens[:, -1]
    assert set(target.tolist()) == set(range(6))


def test_sample_generator_is_reproducible():
    a = tasks.sample(3, 5, 10, generator=torch.Generator().manual_seed(3))
    b = tasks.sample(3, 5, 10, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("case", tasks.CASES)
@pytest.mark.parametrize("function", tasks.FUNCTIONS)
def test_enumerate_inputs_is_every_input_once(case, function):
    n = 3
    tokens, answers = tasks.enumerate_inputs(case, n, function)
    assert tokens.shape[0] == tasks.count_inputs(case, n, function)
    rows = [tuple(r) for r in tokens.tolist()]
    assert len(set(rows)) == len(rows)
    # an independent enumeration in plain Python
    fs = itertools.permutations(range(n)) if function == "permutation" else itertools.product(range(n), repeat=n)
    orders = list(itertools.permutations(range(n))) if case in tasks.PERMUTED else [tuple(range(n))]
    expected = set()
    for f in fs:
        for order in orders:
            for t in range(n):
                keys = list(order) if case != 1 else None
                expected.add(tuple(tasks.encode(case, keys, [f[k] for k in order], t)[0].tolist()))
    assert set(rows) == expected
    for row, a in zip(rows, answers.tolist(), strict=True):
        assert tasks.evaluate(case, n, row) == a


def test_count_inputs_matches_the_paper():
    # Section 4.2: n * n! ordered inputs and n * (n!)^2 permuted ones (f a permutation).
    assert tasks.count_inputs(2, 10, "permutation") == 10 * math.factorial(10)
    assert tasks.count_inputs(5, 10, "permutation") == 10 * math.factorial(10) ** 2


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: tasks.encode(6, None, [0, 1], 0), "case=6"),
        (lambda: tasks.encode(3, [0, 0, 1], [0, 1, 2], 0), "not a permutation"),
        (lambda: tasks.encode(3, None, [0, 1, 2], 0), "keys=None"),
        (lambda: tasks.encode(2, [1, 0, 2], [0, 1, 2], 0), "in order"),
        (lambda: tasks.encode(1, None, [0, 3, 1], 0), "holds 3, outside the accepted range 0..2"),
        (lambda: tasks.encode(1, None, [0, 1, 1], 5), "target holds 5"),
        (lambda: tasks.encode(1, None, [0.5, 1.0], 0), "integer"),
        (lambda: tasks.encode(5, [0, 1], [0, 1, 1], 0), "shape"),
        (lambda: tasks.encode(1, None, [], 0), "n=0"),
        (lambda: tasks.sample(3, 0, 4), "n=0"),
        (lambda: tasks.sample(3, 4, 0), "batch_size=0"),
        (lambda: tasks.sample(3, 4, 2, function="bijection"), "function='bijection'"),
        (lambda: tasks.enumerate_inputs(5, 6), "at most"),
        (lambda: tasks.decode(4, 3, [0, 1, 1, 0, 2, 2]), "length 7"),
        (lambda: tasks.decode(4, 3, [0, 1, 2, 0, 1, 2, 1]), "not valid"),
        (lambda: tasks.answers(3, 3, torch.tensor([[0, 1, 2, 9]])), "not a permutation"),
        (lambda: tasks.check_tokens(1, 3, torch.zeros(2, 5, dtype=torch.long)), r"\[batch, 4\]"),
        (lambda: tasks.check_tokens(1, 3, torch.zeros(2, 4)), "dtype"),
    ],
)
def test_bad_input_names_the_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()
