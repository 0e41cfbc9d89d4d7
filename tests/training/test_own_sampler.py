"""A registered task is trained and evaluated with its own sampler on every engine (issue 55,
item 4), and a sampler whose answers have the wrong shape is refused before training (item 5).

``Shifted`` is a user's presentation whose ``sample`` returns other answers than the table's
lookup (f(i*) + 1 mod n), with the right shapes. The reference is the plain TransformerLens loop
(which draws with ``task.sample`` itself) and a plain-Python count of the stored accuracy.
"""

from __future__ import annotations

import pytest
import torch

import interp
from interp.training import fast_train, trainer
from interp.training.runs import generator
from interp.training.trainer import TrainConfig

CASE = 6


class Shifted(interp.tasks.Consecutive):
    """Case 4's tokens, but the answer is f(i*) + 1 (mod n): only its sampler says so."""

    def sample(self, n, batch_size, **kw):
        tokens, answers = super().sample(n, batch_size, **kw)
        return tokens, (answers + 1) % n


class Flat(interp.tasks.Consecutive):
    """A sampler whose answers have the wrong shape: [batch, 1]."""

    def sample(self, n, batch_size, **kw):
        tokens, answers = super().sample(n, batch_size, **kw)
        return tokens, answers[:, None]


@pytest.fixture
def shifted():
    task = interp.tasks.register(Shifted(CASE, "shifted answers", False))
    yield task
    interp.tasks.unregister(CASE)


def _plain_accuracy(result) -> float:
    """Stored accuracy recounted here: the task's own test batches, TransformerLens's logits."""
    config, task = result.config, interp.tasks.get(result.config.case)
    g, right = generator(config.seed, "test"), 0
    for _ in range(config.eval_batches):
        tokens, answers = task.sample(config.n, config.batch_size, generator=g, function=config.function)
        with torch.no_grad():
            right += int((result.model(tokens)[:, -1].argmax(-1) == answers).sum())
    return right / (config.eval_batches * config.batch_size)


def test_fast_and_reference_store_the_same_accuracy(shifted):
    config = TrainConfig(case=CASE, n=3, d_token=8, lr=0.01, max_steps=300,
                         stop_loss=0.0, curve_every=10, eval_batches=2, batch_size=64)
    fast = trainer.train(config, engine="fast")
    reference = trainer.train(config, engine="reference")
    torch.testing.assert_close(torch.tensor([v for _, v in fast.curve]),
                               torch.tensor([v for _, v in reference.curve]), atol=1e-3, rtol=0)
    assert fast.accuracy == reference.accuracy == _plain_accuracy(fast)
    assert fast.accuracy > 0.6  # chance is 1/3; a model of the unshifted answers scores near 0


def test_the_fast_data_are_the_samplers(shifted):
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    J, answers = fast_train.sample_indices(CASE, 4, 50, generator=g1)
    tokens, want = shifted.sample(4, 50, generator=g2)
    assert torch.equal(J[0], tokens) and torch.equal(answers, want)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_answers_of_the_wrong_shape_are_refused_before_training(engine, monkeypatch):
    interp.tasks.register(Flat(CASE, "flat answers", True))
    built = []
    monkeypatch.setattr(trainer, "init_model", lambda *a: built.append(a))
    monkeypatch.setattr(trainer.fast_train, "train_ensemble", lambda *a, **k: built.append(a))
    try:
        config = TrainConfig(case=CASE, n=4, d_token=4, max_steps=5, batch_size=8, eval_batches=1)
        with pytest.raises(ValueError, match=r"^case 6 \(.*Flat\): its sample\(n=4, 2\) returned answers "
                                             r"of shape \(2, 1\); accepted: \(2,\)$"):
            trainer.train(config, engine=engine)
    finally:
        interp.tasks.unregister(CASE)
    assert built == []
