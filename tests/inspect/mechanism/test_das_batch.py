"""interp.inspect.mechanism.das_batch: the learned-rotation search of many models at once,
against the per-model search :func:`das.learned_dim` (the reference: TransformerLens's whole
forward and backward pass per step) and against :func:`das._run` for the replay itself.

The replay rounds where the model's pass rounds but sums differently, so the two searches may
drift apart by rounding: learned dimensions must agree except where the reference's held-out
IIA of a k tried lies within ``MARGIN`` (a few pairs) of ``iia_min``, and every IIA within it."""

from __future__ import annotations

import pytest
import torch

from interp.core import constructions
from interp.inspect.mechanism import controls, das, das_batch
from interp.inspect.mechanism.calibration import THRESHOLDS
from interp.training import trainer
from interp.training.machine import one_thread
from interp.training.runs import TrainConfig, init_model

BATCH = 128
MARGIN = 4 / BATCH


def reading_model(reading: str, case: int, n: int, d_token: int, **given):
    """An untrained model of a named reading (f14: MLP after the last layer, W_O = I, the embed
    residual, no b_U): the replay must follow every block the model has."""
    return init_model(TrainConfig.paper(case, n, d_token, reading=reading, **given))


@pytest.mark.parametrize("make", [
    lambda: controls.one_hot_lookup(3, 6),
    lambda: controls.one_hot_lookup(1, 5),
    lambda: controls.one_hot_lookup(4, 5),
    lambda: controls.widen(constructions.build(2, 6, attention="softmax", beta=100.0), 8, seed=1),
    lambda: reading_model("f14", 5, 5, 8, n_layers=2, seed=1),
    lambda: reading_model("f14", 1, 6, 8, seed=2),
    lambda: reading_model("attention-only", 4, 5, 8, n_layers=2, seed=3),
], ids=["case3-one-hot", "case1-one-hot", "case4-one-hot", "case2-circle-beta100",
        "case5-2layer-f14", "case1-f14-mlp", "case4-2layer"])
@pytest.mark.parametrize("variable", ["value", "query"])
def test_replay_scores_what_the_models_own_pass_scores(make, variable):
    model = make()
    p = das.pairs(model, variable, batch_size=64, seed=5)
    d = p.src.flatten(1).shape[1]
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(d, min(2, d), dtype=torch.float64, generator=g)).Q.T
    ref, want = das._run(model, variable, p, basis)
    got = das_batch.scores(das_batch.stack([das_batch.tail(model, p)]), basis[None])[0]
    ok = ref > -600  # probabilities that underflow float32 are clamped alike, not compared
    assert torch.equal(ok, got > -600)
    assert torch.allclose(got[ok], ref[ok], atol=1e-4, rtol=1e-5)
    assert torch.equal(das_batch.stack([das_batch.tail(model, p)]).want[0], want)
    # gradients flow to the basis (the search trains it)
    b = basis[None].clone().requires_grad_()
    das_batch.scores(das_batch.stack([das_batch.tail(model, p)]), b).sum().backward()
    assert b.grad is not None and bool(b.grad.abs().sum() > 0)


@pytest.fixture(scope="module")
def trained():
    """Small successful seeds of one cell (case 3, n 5, d_token 16, ~300 steps each)."""
    configs = [TrainConfig.paper(3, 5, 16, reading="attention-only", seed=s, max_steps=1500) for s in range(2)]
    runs = trainer.train_group(configs)
    return [r.model for r in runs if r.accuracy >= 0.99]


def agree(ref: das.LearnedDim, got: das.LearnedDim) -> None:
    near = any(abs(a - THRESHOLDS["iia_min"]) < MARGIN for _, a in ref.iia)
    assert got.axes_dim == ref.axes_dim  # the same principal axes, computed by the same code
    if not near:
        assert got.dim == ref.dim and [k for k, _ in got.iia] == [k for k, _ in ref.iia], (ref, got)
    for (k, a), (j, b) in zip(ref.iia, got.iia):
        assert k == j and abs(a - b) <= MARGIN, (ref, got)


@pytest.mark.parametrize("variable", ["value", "query"])
def test_batched_search_gives_the_per_model_search_on_trained_seeds(trained, variable):
    assert len(trained) >= 2  # the fixture is what it says: seeds to stack
    with one_thread():  # two threads on shared cores wait on each other
        got = das_batch.learned_dims(trained, variable, batch_size=BATCH, steps=100)
        for model, g in zip(trained, got):
            agree(das.learned_dim(model, variable, batch_size=BATCH, steps=100), g)


def test_batched_search_gives_the_per_model_search_on_built_codes():
    """Known codes of one shape (case 3, n 6): a 2-dimensional read plane hidden under unread
    variance (axes 3, learned 2), and a one-hot code (no small subspace)."""
    from tests.inspect.mechanism.test_das import unread_variance_lookup

    built = [unread_variance_lookup(), unread_variance_lookup(scale=2.0), controls.one_hot_lookup(3, 6)]
    with one_thread():
        got = das_batch.learned_dims(built, "value", batch_size=BATCH, steps=100)
        assert [g.dim for g in got] == [2, 2, 5]  # what the models were built to carry
        for model, g in zip(built, got):
            agree(das.learned_dim(model, "value", batch_size=BATCH, steps=100), g)


def test_learned_dim_is_a_function_of_its_arguments_and_leaves_the_generator():
    model = controls.one_hot_lookup(3, 5)
    torch.manual_seed(1)
    first = das.learned_dim(model, "value", batch_size=64, steps=20)
    after = torch.rand(1)
    torch.manual_seed(2)
    second = das.learned_dim(model, "value", batch_size=64, steps=20)
    torch.manual_seed(1)
    assert first == second and torch.equal(torch.rand(1), after)


def test_refusals_name_the_value():
    a, b = controls.one_hot_lookup(3, 5), controls.one_hot_lookup(3, 6)
    with pytest.raises(ValueError, match=r"models\[1\] has task=\(3, 6\), models\[0\] has \(3, 5\)"):
        das_batch.learned_dims([a, b], "value")
    wide = controls.widen(constructions.build(3, 5, attention="softmax", beta=100.0), 8, seed=1)
    with pytest.raises(ValueError, match=r"models\[1\] has d_model=16, models\[0\] has 10"):
        das_batch.learned_dims([a, wide], "value")
    with pytest.raises(ValueError, match=r"models\[0\] has attention modes \['leftmost'\]; accepted: softmax"):
        das_batch.learned_dims([constructions.build(3, 5)], "value")
    with pytest.raises(ValueError, match="max_k=0; accepted: an integer >= 1"):
        das_batch.learned_dims([a], "value", max_k=0)
    with pytest.raises(ValueError, match=r"at=\['value'\]; accepted"):
        das_batch.learned_dims([a, a], "value", at=["value"])
    with pytest.raises(ValueError, match="variable='key'"):
        das_batch.learned_dims([a], "key")
    with pytest.raises(ValueError, match=r"models=\[\]"):
        das_batch.learned_dims([], "value")
    t = das_batch.stack([das_batch.tail(a, das.pairs(a, "value", batch_size=64))])
    d = a.cfg.n_heads * a.cfg.d_head  # the site's width
    axes = [torch.eye(d, dtype=torch.float64)[:2]]
    for k in (0, d + 1, 2.0):
        with pytest.raises(ValueError, match=f"k={k!r}; accepted: an integer from 1 to the site's width {d}"):
            das_batch.learn(t, axes, k)
    with pytest.raises(ValueError, match=r"k=3: models \[0\] have fewer than 3 principal axes"):
        das_batch.learn(t, axes, 3)
