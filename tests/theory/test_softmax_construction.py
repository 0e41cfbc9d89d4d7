"""Theorem 3.5's explicit transformer, checked with TransformerLens's own forward pass against
the plain-Python evaluator, and its internals against hand computations from the tokens."""

import math

import pytest
import torch

from interp.theory import softmax_construction as S
from interp.core import tasks


@pytest.mark.parametrize("n", [2, 3])
def test_exhaustive(n):
    model = S.build(n)
    for function in ("any", "permutation"):
        tokens, answers = tasks.enumerate_inputs(5, n, function)
        pred = model(tokens)[:, -1].argmax(-1)
        assert pred.tolist() == [tasks.evaluate(5, n, t) for t in tokens.tolist()]


@pytest.mark.parametrize("n", [4, 16, 20])
def test_random_inputs(n):
    model = S.build(n)
    for function in ("any", "permutation"):
        tokens, answers = tasks.sample(5, n, 200, function=function, generator=torch.Generator().manual_seed(n))
        assert torch.equal(model(tokens)[:, -1].argmax(-1), answers)


def test_attention_weights_and_mlp_output_by_hand():
    n = 5
    model = S.build(n)
    tokens, answers = tasks.sample(5, n, 16, function="any")
    _, cache = model.run_with_cache(tokens)
    pattern = cache["blocks.0.attn.hook_pattern"][:, 0, -1]  # final query row
    S_ = (tokens + 1).sum(-1, keepdim=True).double()
    torch.testing.assert_close(pattern, (tokens + 1).double() / S_, rtol=1e-12, atol=0)  # (t_j + 1) / S
    resid = cache["blocks.0.hook_resid_post"][:, -1]
    torch.testing.assert_close(resid[:, 1], (answers + 1).double() / S_[:, 0], rtol=1e-9, atol=0)  # y
    K = n * (n + 1) / 2 / S_[:, 0]
    torch.testing.assert_close(resid[:, 0 : 2 * n : 2].sum(-1), K, rtol=1e-12, atol=0)
    logits = model(tokens)[:, -1]
    u = torch.arange(n, dtype=torch.float64)
    expected = K[:, None] * ((answers[:, None] + 1) ** 2 - (u - answers[:, None]) ** 2)
    torch.testing.assert_close(logits, expected, rtol=1e-8, atol=1e-9)


def test_parameter_counts():
    for n in (2, 7):
        D, dh, H = 2 * n + 2, 2 * n + 1, 5 * n
        c = S.parameter_counts(S.build(n))
        dense = n * D + (2 * n + 1) * D + 3 * (D * dh + dh) + dh * D + D + 2 * D * H + H + D + D * n + n
        assert c["total"] == dense
        assert c["mlp"] == 2 * D * H + H + D
        # per pair: u1, u2 read 3 coordinates + bias + 1 output; u3, u4 read 2 + bias + 1; u5 reads 1 + 1
        assert c["mlp_nonzero"] == 20 * n
        assert c["d_model"] == 2 * n + 2


def test_float32_is_exact_at_small_n():
    model = S.build(16, dtype=torch.float32)
    tokens, answers = tasks.sample(5, 16, 500, function="any", generator=torch.Generator().manual_seed(0))
    assert torch.equal(model(tokens)[:, -1].argmax(-1), answers)


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="n=1"):
        S.build(1)
    with pytest.raises(ValueError, match="dtype"):
        S.build(4, dtype=torch.float16)


def test_cli(capsys):
    import json

    from interp.cli import main

    assert main(["theorem35", "--n", "2", "5", "--dtype", "float64", "--random", "256", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["any_exhaustive"]["accuracy"] == 1.0 and rows[1]["any_random"]["accuracy"] == 1.0
    assert math.isclose(rows[1]["d_model"], 12)
