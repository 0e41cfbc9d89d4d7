"""A presentation that moves the values (issue 50's hidden re-run, a second kind): each slot's
value before its key, registered from outside interp. Every engine trains the same data: the
fast and reference loss curves agree, and the task's answers are the ones a plain reading of
this layout gives."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.core import forward
from interp.training.trainer import TrainConfig, train

CASE = 7


class ValueFirst(interp.tasks.Consecutive):
    """Slot j's value at 2j, its key at 2j + 1, the query last."""

    def key_pos(self, n, j):
        return 2 * self._slot(n, j) + 1

    def value_pos(self, n, j):
        return 2 * self._slot(n, j)

    def layout(self, n, keys, values, target):
        return torch.cat([torch.stack([values, keys], dim=2).flatten(1), target[:, None]], dim=1)

    def split(self, n, tokens):
        return tokens[:, 1:-1:2], tokens[:, 0:-1:2], tokens[:, -1]

    def _decode(self, n, toks):
        return toks[1:-1:2], toks[0:-1:2], toks[-1]


@pytest.fixture
def value_first():
    task = ValueFirst(CASE, "value first, consecutive, permuted keys", True)
    interp.tasks.register(task)
    yield task
    interp.tasks.unregister(CASE)


def _plain_answers(tokens):
    """f(i*) read off the layout by hand: the value right before the key that equals the query."""
    out = []
    for row in tokens.tolist():
        table, query = row[:-1], row[-1]
        out.append(next(table[p - 1] for p in range(1, len(table), 2) if table[p] == query))
    return torch.tensor(out)


def test_a_value_first_presentation_trains_the_same_data_on_every_engine(value_first):
    tokens, answers = interp.tasks.sample(CASE, 5, 64, generator=torch.Generator().manual_seed(1))
    assert torch.equal(answers, _plain_answers(tokens))
    config = TrainConfig(case=CASE, n=5, d_token=8, pos_embed="learned", seed=0, max_steps=100)
    fast, reference = train(config, engine="fast"), train(config, engine="reference")
    curve = lambda r: torch.tensor([loss for _, loss in r.metrics()["curve"]])  # noqa: E731
    assert torch.allclose(curve(fast), curve(reference), atol=1e-4)
    pred = forward.final_logits(fast.model, tokens).argmax(-1)
    assert fast.model.task is value_first and pred.shape == answers.shape
