"""interp.core.forward against TransformerLens's own forward and backward passes."""

import pytest
import torch

from interp.core import attention, constructions, models, tasks
from interp.core.forward import final_logits


@pytest.mark.parametrize("case", tasks.CASES)
@pytest.mark.parametrize("pos_embed", ["learned", "none"])
@pytest.mark.parametrize("n_layers,d_mlp", [(1, 0), (2, 0), (1, 16), (2, 16)])
def test_logits_and_gradients_match_transformer_lens(case, pos_embed, n_layers, d_mlp):
    n = 6
    model = models.build_model(case, n, 4, n_layers=n_layers, pos_embed=pos_embed, seed=1, d_mlp=d_mlp)
    with torch.no_grad():  # non-zero biases so that every term is exercised
        for name, p in model.named_parameters():
            if name.split(".")[-1].startswith("b_"):
                p.normal_(0, 0.3)
    tokens, answers = tasks.sample(case, n, 32)
    ref = model(tokens)[:, -1]
    fast = final_logits(model, tokens)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    params = [p for p in model.parameters() if p.requires_grad]
    g_ref = torch.autograd.grad(torch.nn.functional.cross_entropy(ref, answers), params)
    g_fast = torch.autograd.grad(torch.nn.functional.cross_entropy(fast, answers), params)
    for a, b in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["leftmost", "rightmost", "average", "softmax"])
def test_attention_modes_match(mode):
    model = models.build_model(5, 5, 8, n_layers=2, seed=0)
    attention.set_attention(model, mode, beta=3.0)
    tokens, _ = tasks.sample(5, 5, 16)
    torch.testing.assert_close(final_logits(model, tokens), model(tokens)[:, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", tasks.CASES)
def test_constructions_bitwise(case):
    model = constructions.build(case, 40)
    tokens, _ = tasks.sample(case, 40, 64, function="any")
    fast = final_logits(model, tokens, chunk=10)
    ref = model(tokens)[:, -1]
    assert torch.equal(fast.argmax(-1), ref.argmax(-1))
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=0)


def test_rejects_models_it_does_not_cover():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    base = dict(n_layers=1, d_model=4, n_ctx=4, d_head=4, d_vocab=3, normalization_type=None)
    refused = [
        (dict(act_fn="gelu", d_mlp=8, attention_dir="bidirectional"), "act_fn='gelu'"),
        (dict(attn_only=True, attention_dir="causal"), "bidirectional"),
        (dict(attn_only=True, attention_dir="bidirectional", normalization_type="LN"), "LayerNorm"),
    ]
    for extra, message in refused:
        cfg = HookedTransformerConfig(**{**base, **extra})
        with pytest.raises(ValueError, match=message):
            final_logits(HookedTransformer(cfg), torch.zeros(1, 4, dtype=torch.long))


def _scale_embed(act, hook):  # TransformerLens's signature: a new activation
    return act * 1.5


def _zero_head_0(act, hook):  # in place, returns None (kept, as TransformerLens keeps it)
    assert hook.name.endswith("hook_z")
    act[:, :, 0] = 0.0


def _knock_out_key_1(act, hook):  # blocks.0 pattern, every query: no weight on key 1
    act = act.clone()
    act[..., 1] = 0.0
    return act


@pytest.mark.parametrize("mode", ["leftmost", "softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tl_style_hooks_match_run_with_hooks(mode, dtype):
    """final_logits(fwd_hooks=h) is model.run_with_hooks(tokens, fwd_hooks=h)[:, -1]: names,
    filters, hooks returning None, several hooks on one point (in list order)."""
    model = models.build_model(4, 5, 8, n_layers=2, d_mlp=8, seed=2)
    model.to(dtype)
    model.cfg.dtype = dtype
    attention.set_attention(model, mode, beta=2.0)
    tokens, _ = tasks.sample(4, 5, 16)
    seen = []
    hooks = [
        ("hook_embed", _scale_embed),
        (lambda name: name.endswith("hook_z"), _zero_head_0),
        ("blocks.0.attn.hook_pattern", _knock_out_key_1),
        ("blocks.1.hook_resid_post", lambda act, hook: act + 0.25),
        ("blocks.1.hook_resid_post", lambda act, hook: act * 2.0),
        (lambda name: name.startswith("blocks.1"), lambda act, hook: seen.append(hook.name)),
    ]
    ref = model.run_with_hooks(tokens, fwd_hooks=hooks)[:, -1]
    names_tl, seen[:] = list(seen), []
    fast = final_logits(model, tokens, fwd_hooks=hooks)
    assert seen == names_tl  # the same points, in TransformerLens's order
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(fast, ref, atol=tol, rtol=0)
    assert not torch.allclose(fast, final_logits(model, tokens), atol=1e-3)  # the hooks did act
    assert not any(hp.fwd_hooks for hp in model.hook_dict.values())  # nothing left behind


def test_scores_hooks_run_before_the_mode_reads_them():
    """A hook on hook_attn_scores: final_logits runs it where precision's rounding needs it, before
    a hard mode reads the scores, as TransformerLens's own forward does with add_hook(prepend=True)
    and with plain run_with_hooks (the mode reads the scores after every user hook)."""
    model = models.build_model(5, 5, 8, n_layers=1, seed=0)
    attention.set_attention(model, "leftmost")
    tokens, _ = tasks.sample(5, 5, 16)
    point = "blocks.0.attn.hook_attn_scores"

    def flip(act, hook):
        return -act

    fast = final_logits(model, tokens, fwd_hooks=[(point, flip)])
    model.add_hook(point, flip, prepend=True)
    try:
        prepended = model(tokens)[:, -1]
    finally:
        model.reset_hooks()
    torch.testing.assert_close(fast, prepended, atol=1e-5, rtol=0)
    plain = model.run_with_hooks(tokens, fwd_hooks=[(point, flip)])[:, -1]
    torch.testing.assert_close(fast, plain, atol=1e-5, rtol=0)
    assert not torch.allclose(fast, model(tokens)[:, -1], atol=1e-3)  # the flip did act


def test_an_unknown_hook_name_is_refused_as_transformer_lens_does():
    model = models.build_model(1, 4, 4, seed=0)
    tokens, _ = tasks.sample(1, 4, 2)
    with pytest.raises(KeyError):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_nothing", _scale_embed)])
    with pytest.raises(KeyError, match="blocks.0.hook_nothing"):
        final_logits(model, tokens, fwd_hooks=[("blocks.0.hook_nothing", _scale_embed)])
