"""interp.core.attention: the Section 2 definitions, applied through TransformerLens hooks."""

import pytest
import torch

from interp.core import attention, constructions, models, tasks


def plain_pattern(row, mode):
    m = max(row)
    M = [j for j, s in enumerate(row) if s == m]
    if mode == "leftmost":
        return [1.0 if j == M[0] else 0.0 for j in range(len(row))]
    if mode == "rightmost":
        return [1.0 if j == M[-1] else 0.0 for j in range(len(row))]
    return [1.0 / len(M) if j in M else 0.0 for j in range(len(row))]


ROWS = [[0.0, 1.0, 0.5, 1.0, -2.0], [3.0, 3.0, 3.0, 3.0, 3.0], [-1.0, -0.5, -0.25, -4.0, -0.25]]


@pytest.mark.parametrize("mode", attention.HARD_MODES)
def test_hard_patterns_follow_the_definitions(mode):
    got = attention.pattern_from_scores(torch.tensor(ROWS, dtype=torch.float64), mode)
    assert got.tolist() == [plain_pattern(r, mode) for r in ROWS]


def test_softmax_with_inverse_temperature():
    s = torch.tensor(ROWS)
    torch.testing.assert_close(attention.pattern_from_scores(s, "softmax", 3.0), torch.softmax(3 * s, -1))


@pytest.mark.parametrize("mode", ["leftmost", "rightmost", "average", "softmax"])
def test_hooks_cache_the_real_scores_and_the_pattern_used(mode):
    n = 6
    model = models.build_model(4, n, 8, seed=0)
    attention.set_attention(model, mode, beta=2.5)
    tokens, _ = tasks.sample(4, n, 3)
    logits, cache = model.run_with_cache(tokens)
    q, k = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / model.cfg.d_head**0.5
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"], scores)
    pattern = cache["blocks.0.attn.hook_pattern"]
    if mode == "softmax":
        torch.testing.assert_close(pattern, torch.softmax(2.5 * scores, -1))
    else:
        flat = cache["blocks.0.attn.hook_attn_scores"].reshape(-1, tokens.shape[1]).tolist()
        expected = torch.tensor([plain_pattern(r, mode) for r in flat]).reshape(pattern.shape)
        assert torch.equal(pattern, expected)
    # the output really uses that pattern: z = pattern @ v
    z = torch.einsum("bhqk,bkhd->bqhd", pattern, cache["blocks.0.attn.hook_v"])
    torch.testing.assert_close(cache["blocks.0.attn.hook_z"], z)


def test_modes_are_permanent_until_removed():
    model = models.build_model(3, 5, 4, seed=0)
    tokens, _ = tasks.sample(3, 5, 8)
    softmax_logits = model(tokens)
    attention.set_attention(model, "leftmost")
    hard_logits = model(tokens)
    assert not torch.allclose(hard_logits, softmax_logits)
    model.reset_hooks()  # TransformerLens's reset keeps permanent hooks
    torch.testing.assert_close(model(tokens), hard_logits)
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", lambda z, hook: z)]):
        torch.testing.assert_close(model(tokens), hard_logits)
    attention.set_attention(model, "average")  # replaces, does not stack
    assert model.attention_modes == [("average", 1.0)]
    hp = model.blocks[0].attn.hook_pattern
    assert sum(attention._ours(fn) for fn in hp._forward_hooks.values()) == 1
    attention.remove_attention(model)
    torch.testing.assert_close(model(tokens), softmax_logits)


def test_per_layer_modes():
    model = models.build_model(5, 4, 8, n_layers=2, seed=0)
    attention.set_attention(model, "leftmost", layers=[0])
    attention.set_attention(model, "softmax", beta=4.0, layers=[1])
    assert model.attention_modes == [("leftmost", 1.0), ("softmax", 4.0)]
    tokens, _ = tasks.sample(5, 4, 2)
    _, cache = model.run_with_cache(tokens)
    p0 = cache["blocks.0.attn.hook_pattern"]
    assert set(p0.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(
        cache["blocks.1.attn.hook_pattern"], torch.softmax(4.0 * cache["blocks.1.attn.hook_attn_scores"], -1)
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [(dict(mode="hardest"), "attention='hardest'"), (dict(mode="softmax", beta=0.0), "beta=0.0"),
     (dict(mode="leftmost", layers=[3]), "layer 3")],
)
def test_bad_mode(kwargs, match):
    model = models.build_model(1, 3, 2)
    with pytest.raises(ValueError, match=match):
        attention.set_attention(model, **kwargs)


def test_modes_survive_reset_hooks_even_including_permanent():
    """TransformerLens's reset_hooks(including_permanent=True) used to drop hard attention
    silently (case 1 fell to chance); the modes are torch hooks it does not track."""
    model = constructions.build(1, 6)
    tokens, answers = tasks.sample(1, 6, 64)
    model.reset_hooks(including_permanent=True)
    assert torch.equal(model(tokens)[:, -1].argmax(-1), answers)
    assert attention.modes(model)[0].mode == "leftmost"
    attention.remove_attention(model)  # and remove_attention still takes them off
    assert not torch.equal(model(tokens)[:, -1].argmax(-1), answers)
