"""Presentations that move the query (issue 50, item 2), registered from outside interp as a user
does (tests/core/test_external_task.py): the query first, then the table.

``QueryFirst`` (tokens of their own: i* at 0, k_j at 2j + 1, v_j at 2j + 2) and
``QueryFirstPairs`` (pair tokens: the query token n*n + i* at 0, pair k_j*n + v_j at j + 1). Each
says only where its tokens go. Every reader must take the query where the task says it is: the
input check and tokenizer (interp.core.tokens), both engines and the captured step, the position
labels. Where the answer is read (the final position) is one fact no presentation moves: a task
that says otherwise is refused when it is registered. Checked against references written here: a
plain-Python evaluator reading this layout's rule, the plain TransformerLens loop for the engines.
"""

from __future__ import annotations

import pytest
import torch

import interp
from interp.core import positions
from interp.core import tokens as tok
from interp.training import fast_train as ft
from interp.training.fast_graph import GraphEnsemble
from interp.training.trainer import TrainConfig, one_thread, train

CASE = 6


class QueryFirst(interp.tasks.Consecutive):
    """i* at 0, then slot j's key at 2j + 1 and its value at 2j + 2."""

    def query_pos(self, n):
        return 0

    def key_pos(self, n, j):
        return 2 * self._slot(n, j) + 1

    def value_pos(self, n, j):
        return 2 * self._slot(n, j) + 2

    def layout(self, n, keys, values, target):
        return torch.cat([target[:, None], torch.stack([keys, values], dim=2).flatten(1)], dim=1)

    def split(self, n, tokens):
        return tokens[:, 1::2], tokens[:, 2::2], tokens[:, 0]

    def _decode(self, n, toks):
        return toks[1::2], toks[2::2], toks[0]


class QueryFirstPairs(interp.tasks.PairTokens):
    """The query token n*n + i* at 0, then pair token k_j*n + v_j at j + 1."""

    def query_pos(self, n):
        return 0

    def key_pos(self, n, j):
        return self._slot(n, j) + 1

    value_pos = key_pos

    def layout(self, n, keys, values, target):
        return torch.cat([(n * n + target)[:, None], keys * n + values], dim=1)

    def split(self, n, tokens):
        pairs, target = tokens[:, 1:], tokens[:, 0] - n * n
        if (pairs >= n * n).any() or (target < 0).any():
            raise ValueError(self._misplaced(n))
        return pairs // n, pairs % n, target

    def _decode(self, n, toks):
        if any(t >= n * n for t in toks[1:]) or toks[0] < n * n:
            raise ValueError(self._misplaced(n))
        return [t // n for t in toks[1:]], [t % n for t in toks[1:]], toks[0] - n * n


PRESENTATIONS = {
    "tokens": QueryFirst(CASE, "query first, consecutive, permuted keys", True),
    "pairs": QueryFirstPairs(CASE, "query first, pair tokens, permuted keys", True),
}


@pytest.fixture(params=list(PRESENTATIONS))
def registered(request):
    task = interp.tasks.register(PRESENTATIONS[request.param])
    yield task
    interp.tasks.unregister(CASE)


def plain_answer(task, row: list[int], n: int) -> int:
    """f(i*) by this file's rules: the query first, then keys and values (or pairs)."""
    if task.same_position:
        target, pairs = row[0] - n * n, row[1:]
        return next(p % n for p in pairs if p // n == target)
    target, keys, values = row[0], row[1::2], row[2::2]
    return values[keys.index(target)]


def test_it_samples_and_labels_with_the_query_first(registered):
    n = 4
    tokens, answers = registered.sample(n, 100, generator=torch.Generator().manual_seed(0))
    assert answers.tolist() == [plain_answer(registered, row, n) for row in tokens.tolist()]
    assert registered.query_pos(n) == 0
    labels = registered.position_labels(n, tokens[0])
    assert labels[0] == f"i*={plain_target(registered, tokens[0].tolist(), n)}" and len(labels) == tokens.shape[1]
    assert not any(label.startswith("i*") for label in labels[1:])


def plain_target(task, row, n):
    return row[0] - n * n if task.same_position else row[0]


def test_the_model_reads_it_and_its_tokenizer_speaks_it(registered):
    n = 4
    model = interp.models.build_model(CASE, n, 4, seed=0)
    tokens, answers = registered.sample(n, 8, generator=torch.Generator().manual_seed(1))
    assert model(tokens, return_type="loss").isfinite()  # the input check reads the query at 0
    text = model.to_str_tokens(tokens[0])
    assert text[0].startswith("i*=") and not any(t.startswith("i*=") for t in text[1:])
    assert model.to_tokens(" ".join(text)).tolist() == tokens[:1].tolist()
    moved = tokens.roll(1, dims=1)  # the query last: not this task's input
    if registered.same_position:
        with pytest.raises(ValueError, match="query token"):
            model(moved)
    with pytest.raises(ValueError, match="query's label"):
        model.to_tokens(" ".join(text[1:] + text[:1]))


def _group(case=CASE, **kw):
    base = TrainConfig(case=case, n=4, d_token=4, max_steps=25, stop_loss=0.0, curve_every=1,
                       eval_batches=1, batch_size=32, lr=0.01)
    return base.replace(**kw)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_every_engine_trains_the_same_losses(registered, n_layers):
    """The reference loop (TransformerLens's forward), the fast engine and its captured step
    (eager on the CPU) give the same loss curve on the query-first data."""
    config = _group(n_layers=n_layers)
    reference = train(config, engine="reference")
    fast = train(config, engine="fast")
    with one_thread():
        ens = GraphEnsemble([config], check_every=7)
        while not ens.done:
            ens.advance()
        graph = ens.results()[0]
    want = torch.tensor([v for _, v in reference.curve])
    assert len(want) == 25
    for got in (fast, graph):
        torch.testing.assert_close(torch.tensor([v for _, v in got.curve]), want, atol=1e-4, rtol=0)
    assert fast.accuracy == pytest.approx(reference.accuracy, abs=0.05)


def test_the_fast_logits_are_transformer_lens_logits(registered):
    n = 4
    model = interp.models.build_model(CASE, n, 4, n_layers=2, seed=3)
    tokens, _ = registered.sample(n, 16, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(ft.model_final_logits(model, tokens), model(tokens)[:, -1], atol=1e-5, rtol=0)


class AnswerFirst(interp.tasks.Consecutive):
    """Claims its answer is read at position 0: no engine reads it there."""

    def answer_pos(self, n):
        return 0


class QueryNowhere(interp.tasks.Consecutive):
    """Says its query is first but lays it out last, as case 5 does."""

    def query_pos(self, n):
        return 0


@pytest.mark.parametrize("task, words", [
    (AnswerFirst(CASE, "answer first", True), r"answer_pos\(n\)=0.*final position"),
    (QueryNowhere(CASE, "query nowhere", True), r"query_pos\(n\)=0.*query token"),
])
def test_a_layout_the_code_cannot_read_is_refused_when_registered(task, words):
    try:
        with pytest.raises(ValueError, match=words):
            interp.tasks.register(task)
    finally:
        registered = CASE in interp.tasks.CASES
        if registered:
            interp.tasks.unregister(CASE)
    assert not registered


def test_the_paper_layouts_and_the_moved_ones_pass_the_check():
    for task in [*interp.tasks.TASKS.values(), *PRESENTATIONS.values()]:
        positions.check_layout(task, sizes=(2, 3, 4, 7))


def test_the_input_check_of_the_paper_cases_is_unchanged():
    cfg = interp.models.build_model(2, 3, 2).cfg
    good = interp.tasks.encode(2, [0, 1, 2], [1, 2, 0], 1)
    tok.check_input(cfg, good)
    with pytest.raises(ValueError, match="query token"):
        tok.check_input(cfg, good.roll(1, dims=1))


def test_probe_and_interchange_inputs_put_the_query_where_the_task_says(registered):
    """hooks.sample_inputs (probes, attention views) cycles the targets through 0..n-1, and the
    code level's interchange inputs set the query to a symbol: both at query_pos, read back by
    this file's plain evaluator."""
    from interp.inspect.mechanism import codes
    from interp.inspect.tools import hooks

    n = 4
    tokens = hooks.sample_inputs(CASE, n, 64, seed=3)
    targets = [plain_target(registered, row, n) for row in tokens.tolist()]
    assert sorted(targets) == sorted(list(range(n)) * 16)
    assert [plain_answer(registered, row, n) for row in tokens.tolist()] == registered.answers(n, tokens).tolist()
    view = hooks.read(CASE, n, tokens)
    symbol = (view.target + 1) % n
    moved = codes._with_symbol(registered, n, view, "query", symbol)
    assert [plain_target(registered, row, n) for row in moved.tolist()] == symbol.tolist()
    assert torch.equal(registered.read(n, moved)[1], view.values)  # the table untouched
