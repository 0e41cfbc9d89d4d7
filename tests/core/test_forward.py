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
