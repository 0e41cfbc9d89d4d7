"""ModelSpec: every architecture choice validated once, built as the paper defines it (checked
against a forward pass written from the definitions), evaluated by interp.core.forward as
TransformerLens computes it, and initialised as nn.MultiheadAttention initialises itself."""

import copy
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from interp.core import forward, models, tasks

BAD = [  # (choice, value): refused by ModelSpec, naming the field and what is accepted
    dict(testcase_name="mlp first", field="mlp", value="first"),
    dict(testcase_name="mlp None", field="mlp", value=None),
    dict(testcase_name="attn_bias int", field="attn_bias", value=1),
    dict(testcase_name="attn_bias str", field="attn_bias", value="False"),
    dict(testcase_name="unembed_bias None", field="unembed_bias", value=None),
    dict(testcase_name="W_O tied", field="W_O", value="tied"),
    dict(testcase_name="W_O bool", field="W_O", value=True),
    dict(testcase_name="residual prenorm", field="residual", value="pre-norm"),
    dict(testcase_name="init orthogonal", field="init", value="orthogonal"),
    dict(testcase_name="init MHA", field="init", value="MHA"),
    dict(testcase_name="pos_init normal", field="pos_init", value="normal"),
    dict(testcase_name="embed_scale float", field="embed_scale", value=1.0),
    dict(testcase_name="embed_scale sqrt", field="embed_scale", value="sqrt"),
]


@pytest.mark.parametrize("bad", BAD, ids=[b["testcase_name"] for b in BAD])
def test_bad_choices_are_refused_naming_field_and_accepted_values(bad):
    with pytest.raises(ValueError, match=rf"^{bad['field']}=.*accepted: one of"):
        models.ModelSpec(3, 5, 4, **{bad["field"]: bad["value"]})
    with pytest.raises(ValueError, match=rf"^{bad['field']}="):  # build_model: the same check
        models.build_model(3, 5, 4, **{bad["field"]: bad["value"]})


def test_mlp_last_without_an_mlp_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^mlp='last' with d_mlp=0.*accepted: d_mlp > 0"):
        models.ModelSpec(5, 4, 8, 2, mlp="last")
    assert models.ModelSpec(5, 4, 8, 2, d_mlp=8, mlp="last").has_mlp(1)


def test_choices_after_pos_embed_are_keyword_only():
    with pytest.raises(TypeError):
        models.ModelSpec(3, 5, 4, 1, "learned", 16)  # d_mlp positionally: refused, not guessed


# every choice off its default, alone and together, one and two layers
CHOICES = [
    dict(d_mlp=6, mlp="last"), dict(attn_bias=False), dict(unembed_bias=False),
    dict(W_O="identity"), dict(residual="embed"), dict(d_mlp=6, residual="embed"),
    dict(d_mlp=6, mlp="last", residual="embed", attn_bias=False, unembed_bias=False,
         W_O="identity", init="mha"),
    dict(pos_init="zero"), dict(embed_scale="sqrt_d_model"),
    dict(d_mlp=6, residual="embed", pos_init="zero", embed_scale="sqrt_d_model", attn_bias=False),
]


def _ids(choices):
    return ",".join(f"{k}={v}" for k, v in choices.items())


def _paper_forward(model, tokens, spec):
    """The model's logits at every position, written from the definitions (ModelSpec's table),
    not from TransformerLens: x_0 = W_E[t] + W_pos; block l adds attn_l(x_l) to x_l
    (residual "stream") or to x_0 ("embed"), then its MLP if the placement gives it one;
    embed_scale="sqrt_d_model": x_0 = sqrt(d_model) W_E[t] + W_pos."""
    scale = math.sqrt(spec.d_model) if spec.embed_scale == "sqrt_d_model" else 1.0
    x0 = scale * model.W_E[tokens] + model.W_pos[: tokens.shape[1]]
    x, last = x0, spec.n_layers - 1
    for layer, block in enumerate(model.blocks):
        a = block.attn
        q, k, v = (x @ W[0] + b[0] for W, b in ((a.W_Q, a.b_Q), (a.W_K, a.b_K), (a.W_V, a.b_V)))
        pattern = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(spec.d_model), dim=-1)
        attn_out = (pattern @ v) @ a.W_O[0] + a.b_O
        x = (x0 if spec.residual == "embed" else x) + attn_out
        if spec.d_mlp and (spec.mlp == "every" or layer == last):
            m = block.mlp
            x = x + torch.relu(x @ m.W_in + m.b_in) @ m.W_out + m.b_out
    return x @ model.W_U + model.b_U


def _perturb(model, seed=5):
    """Every trainable parameter (biases too) pushed off its init; fixed tensors stay."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.mark.parametrize("choices", CHOICES, ids=_ids)
@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("case", [1, 3, 5])
def test_every_choice_computes_the_papers_definition(choices, n_layers, case):
    model = _perturb(models.build_model(case, 5, 3, n_layers, seed=2, **choices))
    spec = model.spec
    assert spec == models.ModelSpec(case, 5, 3, n_layers, **choices)
    tokens, _ = tasks.sample(case, 5, 16, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model(tokens), _paper_forward(model, tokens, spec), atol=1e-5, rtol=0)
    if spec.embed_scale != "1":  # the scale changes the function on the same weights
        unscaled = models.ModelSpec(case, 5, 3, n_layers, **{**choices, "embed_scale": "1"})
        assert not torch.allclose(model(tokens), _paper_forward(model, tokens, unscaled), atol=1e-3)
    if n_layers == 2 and spec.residual == "embed":
        # the choice changes the function: the stream definition on the same weights differs
        default = models.ModelSpec(case, 5, 3, 2, d_mlp=spec.d_mlp, mlp=spec.mlp)
        assert not torch.allclose(model(tokens), _paper_forward(model, tokens, default), atol=1e-3)


@pytest.mark.parametrize("choices", CHOICES, ids=_ids)
def test_fixed_tensors_hold_their_value_and_are_frozen(choices):
    model = models.build_model(2, 4, 3, 2, seed=0, **{"init": "pytorch", **choices})
    spec, d = model.spec, model.cfg.d_model
    fixed = models.fixed_weights(model, spec)
    expect = set()
    for layer in range(2):
        if not spec.attn_bias:
            expect |= {f"blocks.{layer}.attn.{b}" for b in ("b_Q", "b_K", "b_V", "b_O")}
        if spec.W_O == "identity":
            expect.add(f"blocks.{layer}.attn.W_O")
            assert torch.equal(model.blocks[layer].attn.W_O[0], torch.eye(d))
        if spec.mlp == "last" and layer == 0:
            expect |= {f"blocks.0.mlp.{w}" for w in ("W_in", "b_in", "W_out", "b_out")}
    if not spec.unembed_bias:
        expect.add("unembed.b_U")
    assert set(fixed) == expect
    for name, p in model.named_parameters():
        assert p.requires_grad == (name not in expect), name
        if name in expect and not name.endswith("W_O"):
            assert not p.any(), name


def test_embed_residual_keeps_caches_meaningful_and_patches_act():
    model = _perturb(models.build_model(4, 5, 4, 2, seed=1, d_mlp=6, residual="embed"))
    tokens, _ = tasks.sample(4, 5, 8, generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    x0 = cache["blocks.0.hook_resid_pre"]
    assert torch.equal(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"])
    torch.testing.assert_close(cache["blocks.1.hook_resid_mid"], x0 + cache["blocks.1.hook_attn_out"],
                               atol=1e-6, rtol=0)  # one rounding: (x1 + a) - x1 + x0
    # a patch of the attention output acts on the sum, as the paper's form says it should
    zero = lambda act, hook: torch.zeros_like(act)  # noqa: E731
    with model.hooks(fwd_hooks=[("blocks.1.hook_attn_out", zero)]):
        _, patched = model.run_with_cache(tokens)
    torch.testing.assert_close(patched["blocks.1.hook_resid_mid"], x0, atol=1e-6, rtol=0)
    # the hooks stay through reset_hooks, deepcopy and to_vanilla, and check_spec sees them
    model.reset_hooks(including_permanent=True)
    for m in (model, copy.deepcopy(model), models.to_vanilla(model)):
        torch.testing.assert_close(m(tokens), _paper_forward(m, tokens, m.spec), atol=1e-5, rtol=0)
        models.check_spec(m)


def test_pair_model_to_vanilla_keeps_the_spec_and_its_hooks():
    model = _perturb(models.build_model(3, 4, 3, 2, seed=1, residual="embed", attn_bias=False))
    vanilla = models.to_vanilla(model)
    assert vanilla.spec == model.spec and not models.has_pair_embedding(vanilla)
    tokens, _ = tasks.sample(3, 4, 8)
    torch.testing.assert_close(vanilla(tokens), model(tokens), atol=1e-6, rtol=0)


def test_an_edited_fixed_tensor_or_a_lost_hook_is_refused_by_name():
    model = models.build_model(5, 4, 4, 2, seed=0, d_mlp=6, mlp="last", attn_bias=False)
    tokens, _ = tasks.sample(5, 4, 4)
    with torch.no_grad():
        model.blocks[0].mlp.W_in[0, 0] = 1.0
    with pytest.raises(ValueError, match=r"blocks\.0\.mlp\.W_in.*mlp='last'"):
        forward.final_logits(model, tokens)
    embed = models.build_model(5, 4, 4, 2, seed=0, residual="embed")
    embed.blocks[1].hook_resid_post._forward_hooks.clear()
    with pytest.raises(ValueError, match="residual='embed'"):
        forward.final_logits(embed, tokens)


FORWARD = [dict(), *CHOICES, dict(d_mlp=6, mlp="every", residual="embed", W_O="identity")]


@pytest.mark.parametrize("choices", FORWARD, ids=_ids)
@pytest.mark.parametrize("case,pos_embed", [(1, "learned"), (2, "none"), (3, "learned"), (4, "none"), (5, "learned")])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_final_logits_match_transformer_lens(choices, case, pos_embed, n_layers):
    """interp.core.forward, the one evaluation pass, against TransformerLens's forward and
    backward for every choice (logits and every gradient, 1e-5)."""
    if pos_embed == "none":  # pos_init="zero" needs a learned W_pos (refused otherwise, tested above)
        choices = {k: v for k, v in choices.items() if k != "pos_init"}
    model = _perturb(models.build_model(case, 6, 4, n_layers, pos_embed, seed=1, **choices))
    tokens, answers = tasks.sample(case, 6, 32, generator=torch.Generator().manual_seed(3))
    ref, fast = model(tokens)[:, -1], forward.final_logits(model, tokens)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=0)
    params = [p for p in model.parameters() if p.requires_grad]
    g_ref = torch.autograd.grad(F.cross_entropy(ref, answers), params)
    g_fast = torch.autograd.grad(F.cross_entropy(fast, answers), params)
    for a, b in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def _embedding_draws(model):
    """Replay the "mha" family's draws before block 0's attention: the embeddings, N(0, 1)."""
    for name, p in model.named_parameters():
        if name.startswith("embed.") or (name == "pos_embed.W_pos" and p.requires_grad):
            torch.empty(p.shape).normal_()


@pytest.mark.parametrize("attn_bias", [True, False])
@pytest.mark.parametrize("case,pos_embed", [(1, "none"), (3, "learned")])
def test_mha_init_is_nn_multihead_attentions(attn_bias, case, pos_embed):
    """Two blocks drawn as two nn.MultiheadAttention(d_model, 1) made one after the other from
    the same RNG state: the same weights, and each block's attention output is the module's."""
    seed = 11
    model = models.build_model(case, 5, 4, 2, pos_embed, seed=seed, init="mha", attn_bias=attn_bias)
    d = model.cfg.d_model
    torch.manual_seed(seed)
    _embedding_draws(model)
    reference = [torch.nn.MultiheadAttention(d, 1, bias=attn_bias, batch_first=True) for _ in range(2)]
    x = torch.randn(3, 7, d)
    for block, mha in zip(model.blocks, reference, strict=True):
        w = mha.in_proj_weight
        assert torch.equal(block.attn.W_Q[0], w[:d].T) and torch.equal(block.attn.W_V[0], w[2 * d :].T)
        assert torch.equal(block.attn.W_O[0], mha.out_proj.weight.T)
        ours = block.attn(query_input=x, key_input=x, value_input=x)
        theirs, _ = mha(x, x, x, need_weights=False)
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
        if attn_bias:
            assert not any(getattr(block.attn, b).any() for b in ("b_Q", "b_K", "b_V", "b_O"))


def test_mha_init_distribution():
    """Xavier-uniform over the joint [3 d, d] in_proj: |w| <= sqrt(6 / (4 d)), spread to the
    bound; out_proj within nn.Linear's 1/sqrt(d); embeddings N(0, 1), W_U as "pytorch"."""
    d = 64
    model = models.build_model(1, 50, d, 2, seed=0, init="mha", d_mlp=32)
    xavier = math.sqrt(6 / (4 * d))
    qkv = torch.cat([getattr(b.attn, w).flatten() for b in model.blocks for w in ("W_Q", "W_K", "W_V")])
    assert qkv.abs().max() <= xavier and qkv.abs().max() > 0.99 * xavier
    assert abs(qkv.std().item() - xavier / math.sqrt(3)) < 0.01 * xavier
    W_O = torch.cat([b.attn.W_O.flatten() for b in model.blocks])
    assert W_O.abs().max() <= 1 / math.sqrt(d) and W_O.abs().max() > 0.99 / math.sqrt(d)
    assert abs(model.W_E.std().item() - 1.0) < 0.05
    assert model.W_U.abs().max() <= 1 / math.sqrt(d) and model.b_U.abs().max() > 0  # "pytorch"
    assert model.blocks[0].mlp.W_out.abs().max() <= 1 / math.sqrt(32)


def test_mlp_last_with_one_layer_is_every_and_embed_with_one_layer_is_stream():
    base = models.build_model(4, 5, 4, 1, seed=3, d_mlp=6, init="pytorch")
    for choices in (dict(mlp="last"), dict(residual="embed")):
        other = models.build_model(4, 5, 4, 1, seed=3, d_mlp=6, init="pytorch", **choices)
        for (name, p), q in zip(base.named_parameters(), other.parameters(), strict=True):
            assert torch.equal(p, q) and p.requires_grad == q.requires_grad, name
        tokens, _ = tasks.sample(4, 5, 8)
        assert torch.equal(base(tokens), other(tokens))


def test_build_model_accepts_every_field_and_from_spec_the_spec():
    spec = models.ModelSpec(2, 4, 3, 2, "none", d_mlp=5, mlp="last", attn_bias=False,
                            unembed_bias=False, W_O="identity", residual="embed", init="mha")
    a = models.from_spec(spec, seed=4)
    b = models.build_model(2, 4, 3, 2, "none", seed=4, d_mlp=5, mlp="last", attn_bias=False,
                           unembed_bias=False, W_O="identity", residual="embed", init="mha")
    assert a.spec == b.spec == spec
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="accepted: an interp.core.models.ModelSpec"):
        models.from_spec(dict(case=2, n=4, d_token=3))


@pytest.mark.parametrize("init", models.INITS)
def test_every_init_family_keeps_fixed_tensors_fixed(init):
    for choices in itertools.islice(CHOICES, 0, None, 3):
        model = models.build_model(5, 4, 4, 2, seed=1, **{**choices, "init": init})
        models.check_spec(model, trainable=True)


@pytest.mark.parametrize("init", ["gpt2", "pytorch", "mha"])
def test_pos_init_zero_starts_w_pos_at_zero_trainable_and_draws_nothing_else(init):
    drawn = models.build_model(5, 5, 4, 2, seed=3, init=init, d_mlp=8)
    zero = models.build_model(5, 5, 4, 2, seed=3, init=init, d_mlp=8, pos_init="zero")
    assert drawn.pos_embed.W_pos.abs().sum() > 0
    assert not zero.pos_embed.W_pos.any() and zero.pos_embed.W_pos.requires_grad
    for (name, p), q in zip(drawn.named_parameters(), zero.parameters(), strict=True):
        if name != "pos_embed.W_pos":
            assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="pos_init='zero' with pos_embed='none'"):
        models.ModelSpec(5, 5, 4, 2, "none", pos_init="zero")


def test_embed_scale_hook_is_what_hook_embed_caches_and_survives_reset_hooks():
    model = _perturb(models.build_model(3, 4, 3, 1, seed=1, embed_scale="sqrt_d_model"))
    tokens, _ = tasks.sample(3, 4, 8, generator=torch.Generator().manual_seed(2))
    scale = math.sqrt(model.cfg.d_model)  # 2 d_token = 6 in case 3
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["hook_embed"], scale * model.W_E[tokens], atol=0, rtol=0)
    torch.testing.assert_close(forward.embed(model, tokens), cache["hook_embed"], atol=0, rtol=0)
    before = model(tokens)
    model.reset_hooks(including_permanent=True)
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)
    # a user hook on hook_embed sees (and can patch) the scaled embedding
    seen = []
    model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", lambda x, hook: seen.append(x))])
    torch.testing.assert_close(seen[0], cache["hook_embed"], atol=0, rtol=0)
    with pytest.warns(UserWarning, match="embed_scale='sqrt_d_model' hook"):
        models.to_vanilla(model)
    model.hook_embed._forward_hooks.clear()
    with pytest.raises(ValueError, match="embed_scale='sqrt_d_model', but the hook_embed scale hook is gone"):
        forward.final_logits(model, tokens)
