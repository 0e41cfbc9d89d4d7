"""interp.core.tasks against hand-written layouts and the plain-Python evaluator."""

import itertools
import math
import re

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


@pytest.mark.parametrize("case", [3, 5])
def test_key_order_batch_shares_one_key_order_per_batch(case):
    """key_order="batch": every input of a batch has the same key order (fresh per batch), f and
    the target still per input; answers by the plain-Python evaluator."""
    n, g = 7, torch.Generator().manual_seed(3)
    orders = []
    for _ in range(3):
        tokens, answers = tasks.sample(case, n, 50, generator=g, key_order="batch")
        decoded = [tasks.decode(case, n, row) for row in tokens.tolist()]
        assert len({tuple(k) for k, _, _ in decoded}) == 1
        assert len({tuple(v) for _, v, _ in decoded}) > 1 and len({t for _, _, t in decoded}) > 1
        assert answers.tolist() == [plain_answer(*d) for d in decoded]
        orders.append(tuple(decoded[0][0]))
    assert len(set(orders)) == 3  # a new order each batch
    sequence, _ = tasks.sample(case, n, 50, generator=torch.Generator().manual_seed(3))
    assert len({tuple(tasks.decode(case, n, r)[0]) for r in sequence.tolist()}) > 1  # the default: per input
    with pytest.raises(ValueError, match=r"key_order='per-batch'; accepted: one of \('sequence', 'batch'\)"):
        tasks.sample(case, n, 4, key_order="per-batch")


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
        (lambda: tasks.encode(-1, None, [0, 1], 0), "case=-1"),
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


# ---- the Task objects (interp.core.tasks.Task)


def _table_rows():
    """(length, d_vocab) expressions per case, read off the layout table in interp.core.tasks's
    docstring (columns as its ``====`` rule marks them)."""
    lines = tasks.__doc__.splitlines()
    rule = next(line for line in lines if line.startswith("===="))
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", rule)]
    spans[-1] = (spans[-1][0], None)
    rows = {}
    for line in lines:
        if re.match(r"\d +\S", line) and line[: spans[0][1]].strip().isdigit():
            cells = [line[a:b].strip() for a, b in spans]
            rows[int(cells[0])] = (cells[2], cells[3])
    return rows


def _value(expr: str, n: int) -> int:
    return eval(expr.replace("2n", "2*n"), {"n": n})  # e.g. "2n + 1", "n*n + n"


def test_the_docstring_table_lists_every_task():
    assert sorted(_table_rows()) == list(tasks.CASES) == sorted(tasks.TASKS)


@pytest.mark.parametrize("case", tasks.CASES)
def test_task_layout_matches_the_docstring_table(case):
    length, vocab = _table_rows()[case]
    task = tasks.get(case)
    for n in (1, 2, 3, 7, 50):
        assert task.seq_len(n) == tasks.seq_len(case, n) == _value(length, n)
        assert task.d_vocab(n) == tasks.d_vocab(case, n) == _value(vocab, n)
        assert task.query_pos(n) == _value(length, n) - 1


def _changed(a, b) -> set[int]:
    return set((a != b).nonzero()[:, -1].tolist())


@pytest.mark.parametrize("case", tasks.CASES)
def test_value_pos_is_where_encode_puts_the_value(case):
    """Changing only slot j's value changes only the token at value_pos(n, j)."""
    task, n = tasks.get(case), 5
    keys = [3, 0, 4, 1, 2] if task.permuted else None
    values = [1, 1, 0, 4, 2]
    base = task.encode(keys, values, 3)
    for j in range(n):
        other = list(values)
        other[j] = (values[j] + 1) % n
        assert _changed(base, task.encode(keys, other, 3)) == {task.value_pos(n, j)}
    assert task.value_positions(n).tolist() == [task.value_pos(n, j) for j in range(n)]


@pytest.mark.parametrize("case", tasks.CASES)
def test_key_pos_is_where_encode_puts_the_key(case):
    """Swapping the keys of slots j and q changes exactly the tokens at key_pos(n, j) and
    key_pos(n, q); case 1 has no key tokens (key_pos None), and nothing changes. Ordered cases
    use the permuted sibling's encode (same layout family), since their keys cannot move."""
    task, n = tasks.get(case), 5
    sibling = next(t for t in tasks.TASKS.values() if type(t) is type(task) and t.permuted) \
        if task.same_position or task.consecutive else task
    keys, values = [3, 0, 4, 1, 2], [1, 1, 0, 4, 2]
    encode = (lambda k: sibling.encode(k, values, 3)) if sibling.permuted else \
        (lambda k: task.layout(n, torch.tensor([k]), torch.tensor([values]), torch.tensor([3])))
    for j, q in [(0, 1), (1, 4), (2, 3)]:
        swapped = list(keys)
        swapped[j], swapped[q] = swapped[q], swapped[j]
        changed = _changed(encode(keys), encode(swapped))
        if task.key_pos(n, j) is None:
            assert changed == set() and task.key_positions(n) is None
        else:
            assert changed == {task.key_pos(n, j), task.key_pos(n, q)}
    same = task.same_position
    assert all((task.key_pos(n, j) == task.value_pos(n, j)) == same for j in range(n) if task.key_pos(n, j) is not None)


@pytest.mark.parametrize("case", tasks.CASES)
def test_query_token_is_what_encode_puts_at_the_query(case):
    task, n = tasks.get(case), 4
    for target in range(n):
        tokens = task.encode([2, 0, 3, 1] if task.permuted else None, [1, 2, 3, 0], target)
        assert int(tokens[0, task.query_pos(n)]) == task.query_token(n, target)
        assert _changed(tokens, task.encode([2, 0, 3, 1] if task.permuted else None, [1, 2, 3, 0],
                                            (target + 1) % n)) == {task.query_pos(n)}


@pytest.mark.parametrize("case", tasks.CASES)
def test_task_methods_agree_with_the_plain_python_evaluator(case):
    task, n = tasks.get(case), 6
    tokens, answers = task.sample(n, 200, generator=torch.Generator().manual_seed(case), function="any")
    keys, values, target = task.read(n, tokens)
    for row, a, k, v, t in zip(tokens.tolist(), answers.tolist(), keys.tolist(), values.tolist(),
                               target.tolist(), strict=True):
        assert task.decode(n, row) == (k, v, t)
        assert task.evaluate(n, row) == a == plain_answer(k, v, t)
    assert task.answers(n, tokens).tolist() == answers.tolist()
    every, every_answer = task.enumerate_inputs(3, "permutation")
    assert len(every) == task.count_inputs(3, "permutation")
    assert [task.evaluate(3, r) for r in every.tolist()] == every_answer.tolist()


def _old_label(case, n, t):
    """The tokenizer's labels before the Task object (interp.core.tokens, by vocabulary)."""
    if case not in (2, 3):
        return str(t)
    return f"({t // n},{t % n})" if t < n * n else f"i*={t - n * n}"


def _old_position_labels(case, n, toks):
    """interp.inspect.tools.viz.token_labels before the Task object."""
    out = []
    for p, t in enumerate(toks[:-1]):
        out.append(f"f({p})={t}" if case == 1 else f"({t // n},{t % n})" if case in (2, 3)
                   else f"{'k' if p % 2 == 0 else 'v'}{t}")
    return out + [f"i*={toks[-1] - (n * n if case in (2, 3) else 0)}"]


@pytest.mark.parametrize("case", tasks.CASES)
def test_token_and_position_labels(case):
    task, n = tasks.get(case), 4
    assert [task.token_label(n, t) for t in range(task.d_vocab(n))] == \
        [_old_label(case, n, t) for t in range(task.d_vocab(n))]
    tokens, _ = task.sample(n, 5, generator=torch.Generator().manual_seed(0))
    for row in tokens:
        assert task.position_labels(n, row) == _old_position_labels(case, n, row.tolist())
    with pytest.raises(ValueError, match="token id"):
        task.token_label(n, task.d_vocab(n))
    with pytest.raises(ValueError, match="slot j=4"):
        task.value_pos(n, 4)


def test_task_properties_and_identity():
    import copy
    import pickle

    assert tasks.PERMUTED == (3, 5) and tasks.SAME_POSITION == (2, 3) and tasks.CONSECUTIVE == (4, 5)
    assert [c for c, t in tasks.TASKS.items() if t.keys_by_position] == [1, 4]
    assert [tasks.get(c).d_model(8) for c in tasks.CASES] == [8, 16, 16, 8, 8]
    assert [tasks.get(c).paper.layers for c in tasks.CASES] == [1, 1, 1, 1, 2]
    for task in tasks.TASKS.values():  # one object per presentation, even through pickle/copy
        assert pickle.loads(pickle.dumps(task)) is task and copy.deepcopy(task) is task
        assert repr(task) == f"Task(case={task.case}, {task.name!r})"
    with pytest.raises(ValueError, match="case=0"):
        tasks.get(0)


def test_every_task_has_its_registered_constructions():
    from interp.core import constructions
    from interp.theory import softmax_construction, temperature  # noqa: F401 - they register

    for case, task in tasks.TASKS.items():
        assert "paper" in task.builders
        model = task.builder("paper")(task, 5, torch.float64)
        assert model.task is task  # the builder makes a model of its own task
        assert (model.cfg.n_layers, model.cfg.d_model) == (task.paper.layers, task.paper.d_model)
        assert constructions.build(case, 5).task is task
    assert sorted(tasks.get(5).builders) == ["paper", "theorem35", "tiebroken"]
    with pytest.raises(ValueError, match=r"case 2 has no construction 'theorem35'; accepted: one of \['paper'\]"):
        tasks.get(2).builder("theorem35")
    with pytest.raises(ValueError, match="already has a construction 'paper'"):
        tasks.register_builder("paper", 1)(lambda task, n, dtype: None)


#: where the paper's constructions attend, written from its theorems (the table in hooks.py):
#: the value of the slot whose key is i* sits at j (cases 1-3) or 2j + 1 (cases 4-5)
PAPER_VALUE_POS = {1: lambda j: j, 2: lambda j: j, 3: lambda j: j, 4: lambda j: 2 * j + 1, 5: lambda j: 2 * j + 1}


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_construction_targets_are_the_tasks_own_positions(case, n_layers):
    """Task.construction_targets against the theorems: the last layer's final query attends the
    matching slot's value; case 5 with two layers sends every p to 2 (p // 2) in layer 0."""
    task, n = tasks.get(case), 5
    tokens, _ = task.sample(n, 16, generator=torch.Generator().manual_seed(case))
    keys, _, target = task.read(n, tokens)
    got = task.construction_targets(n, n_layers, keys, target)
    L = task.seq_len(n)
    for b, row in enumerate(tokens.tolist()):
        ks, _, t = task.decode(n, row)
        last = [-1] * (L - 1) + [PAPER_VALUE_POS[case](ks.index(t))]
        first = [2 * (p // 2) for p in range(L)] if (case, n_layers) == (5, 2) else [-1] * L
        assert got[-1, b].tolist() == last
        if n_layers == 2:
            assert got[0, b].tolist() == first
    assert task.moves_keys_first(n_layers) == ((case, n_layers) == (5, 2))


def test_register_adds_a_presentation_that_pickles_by_value():
    import pickle

    task = tasks.Consecutive(101, "consecutive, permuted keys, registered", True)
    assert tasks.register(task) is task
    try:
        assert tasks.get(101) is task and tasks.CASES[-1] == 101 and 101 in tasks.PERMUTED
        assert tasks.register(tasks.Consecutive(101, "consecutive, permuted keys, registered", True)) is task
        data = pickle.dumps(task)
        assert pickle.loads(data) is task
        with pytest.raises(ValueError, match="case 101 is already"):
            tasks.register(tasks.Consecutive(101, "another", False))
        with pytest.raises(ValueError, match="one of the paper's"):
            tasks.unregister(5)
    finally:
        tasks.unregister(101)
    assert 101 not in tasks.CASES and tasks.CASES == (1, 2, 3, 4, 5)
    assert pickle.loads(data) == task and tasks.get(101) == task  # a worker registers it again
    tasks.unregister(101)
    for bad in (0, -1, True, "6"):
        with pytest.raises(ValueError, match="task.case="):
            tasks.register(tasks.NoKeys(bad, "bad", False))
