"""interp.core.models: the paper's Section 4 architecture as a HookedTransformer."""

import warnings

import pytest
import torch

from interp.core import models, tasks


@pytest.mark.parametrize("case", tasks.CASES)
def test_architecture(case):
    n, d_token = 5, 3
    model = models.build_model(case, n, d_token, n_layers=2, seed=0)
    cfg = model.cfg
    d_model = 2 * d_token if case in (2, 3) else d_token
    assert (cfg.d_model, cfg.d_head, cfg.n_heads, cfg.n_layers) == (d_model, d_model, 1, 2)
    assert cfg.attn_only and cfg.normalization_type is None
    assert cfg.n_ctx == tasks.seq_len(case, n) and cfg.d_vocab_out == n
    assert not any("mlp" in name or "ln" in name for name, _ in model.named_parameters())
    tokens, _ = tasks.sample(case, n, 4)
    assert model(tokens).shape == (4, tasks.seq_len(case, n), n)


def test_attention_is_bidirectional():
    # Changing the last token must change the output at position 0 (no causal mask).
    model = models.build_model(4, 5, 8, seed=0)
    tokens, _ = tasks.sample(4, 5, 1)
    other = tokens.clone()
    other[0, -1] = (other[0, -1] + 1) % 5
    assert not torch.allclose(model(tokens)[0, 0], model(other)[0, 0])


def test_no_positional_embedding_is_zero_frozen_and_permutation_invariant():
    model = models.build_model(1, 6, 4, pos_embed="none", seed=0)
    W_pos = model.pos_embed.W_pos
    assert not W_pos.requires_grad and torch.count_nonzero(W_pos) == 0
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    tokens, answers = tasks.sample(1, 6, 16)
    torch.nn.functional.cross_entropy(model(tokens)[:, -1], answers).backward()
    opt.step()
    assert torch.count_nonzero(model.pos_embed.W_pos) == 0
    # Without positions the final output cannot depend on the order of the other tokens.
    shuffled = torch.cat([tokens[:, :6].flip(1), tokens[:, 6:]], dim=1)
    torch.testing.assert_close(model(tokens)[:, -1], model(shuffled)[:, -1])


def test_learned_positional_embedding_is_trainable():
    model = models.build_model(4, 5, 4, pos_embed="learned", seed=0)
    assert model.pos_embed.W_pos.requires_grad and torch.count_nonzero(model.pos_embed.W_pos) > 0


@pytest.mark.parametrize("case", [2, 3])
def test_pair_embedding_concatenates_two_small_tables(case):
    n, d_token = 4, 3
    model = models.build_model(case, n, d_token, seed=0)
    assert models.has_pair_embedding(model)
    key = model.embed.parametrizations.W_E.original0
    value = model.embed.parametrizations.W_E.original1
    assert key.shape == value.shape == (n, d_token)
    W_E = model.embed.W_E
    assert W_E.shape == (n * n + n, 2 * d_token)
    for k in range(n):
        for v in range(n):
            assert torch.equal(W_E[k * n + v], torch.cat([key[k], value[v]]))
        assert torch.equal(W_E[n * n + k], torch.cat([key[k], torch.zeros(d_token)]))
    trainable = sum(p.numel() for p in model.embed.parameters() if p.requires_grad)
    assert trainable == 2 * n * d_token  # not a free n*n-row table
    # hooks and caches see the concatenated embedding, gradients reach both tables
    tokens, answers = tasks.sample(case, n, 8)
    logits, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(cache["hook_embed"], W_E[tokens])
    torch.nn.functional.cross_entropy(logits[:, -1], answers).backward()
    assert key.grad is not None and value.grad is not None and key.grad.abs().sum() > 0


def test_seed_reproduces_initialisation():
    a = models.build_model(3, 5, 4, seed=7)
    b = models.build_model(3, 5, 4, seed=7)
    c = models.build_model(3, 5, 4, seed=8)
    for (name, p), q, r in zip(a.named_parameters(), b.parameters(), c.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert any(not torch.equal(p, r) for p, r in zip(a.parameters(), c.parameters(), strict=True))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(case=0, n=5, d_token=2), "case=0"),
        (dict(case=1, n=0, d_token=2), "n=0"),
        (dict(case=1, n=5, d_token=0), "d_token=0"),
        (dict(case=1, n=5, d_token=2, n_layers=3), "n_layers=3"),
        (dict(case=1, n=5, d_token=2, pos_embed="sinusoidal"), "pos_embed='sinusoidal'"),
    ],
)
def test_bad_spec(kwargs, match):
    with pytest.raises(ValueError, match=match):
        models.build_model(**kwargs)


def _reference_forward(model, tokens, mlp=True):
    """Embed + attention + ReLU MLP + unembed in plain torch from the model's weights."""
    cfg = model.cfg
    x = model.embed.W_E[tokens] + model.pos_embed.W_pos[: tokens.shape[1]]
    for block in model.blocks:
        a = block.attn
        q = x @ a.W_Q[0] + a.b_Q[0]
        k = x @ a.W_K[0] + a.b_K[0]
        v = x @ a.W_V[0] + a.b_V[0]
        pattern = torch.softmax(q @ k.transpose(-1, -2) / cfg.d_head**0.5, dim=-1)  # no mask
        x = x + (pattern @ v) @ a.W_O[0] + a.b_O
        if mlp:
            m = block.mlp
            x = x + torch.relu(x @ m.W_in + m.b_in) @ m.W_out + m.b_out
    return x @ model.unembed.W_U + model.unembed.b_U


@pytest.mark.parametrize("case", tasks.CASES)
@pytest.mark.parametrize("n_layers", [1, 2])
def test_mlp_model_matches_a_hand_written_forward(case, n_layers):
    n, d_token, d_mlp = 4, 3, 10
    model = models.build_model(case, n, d_token, n_layers=n_layers, seed=1, d_mlp=d_mlp)
    cfg = model.cfg
    assert not cfg.attn_only and cfg.d_mlp == d_mlp and cfg.act_fn == "relu"
    assert cfg.normalization_type is None
    names = {name for name, _ in model.named_parameters()}
    for layer in range(n_layers):
        for w in ("W_in", "b_in", "W_out", "b_out"):
            assert f"blocks.{layer}.mlp.{w}" in names
    assert model.blocks[0].mlp.W_in.shape == (cfg.d_model, d_mlp)
    assert models.has_pair_embedding(model) == (case in (2, 3))  # embedding unchanged
    with torch.no_grad():  # biases off zero so the reference checks them too
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1].startswith("b_"):
                p.copy_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
    tokens, _ = tasks.sample(case, n, 16, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model(tokens), _reference_forward(model, tokens), atol=1e-5, rtol=0)
    # the attention-only reference drops exactly the MLP: it must differ here
    assert not torch.allclose(model(tokens), _reference_forward(model, tokens, mlp=False))


def test_attention_only_model_is_unchanged_by_d_mlp_zero():
    a = models.build_model(4, 5, 3, seed=3)
    b = models.build_model(4, 5, 3, seed=3, d_mlp=0)
    assert b.cfg.attn_only and a.state_dict().keys() == b.state_dict().keys()
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    tokens, _ = tasks.sample(4, 5, 8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(b(tokens), _reference_forward(b, tokens, mlp=False), atol=1e-5, rtol=0)
    assert models.describe(a)["d_mlp"] == 0
    assert models.describe(models.build_model(4, 5, 3, d_mlp=7))["d_mlp"] == 7


@pytest.mark.parametrize("d_mlp", [-1, 2.0, True])
def test_bad_d_mlp(d_mlp):
    with pytest.raises(ValueError, match=f"d_mlp={d_mlp!r}"):
        models.build_model(5, 2, 2, d_mlp=d_mlp)


def test_to_vanilla_gives_a_plain_model_whose_w_e_edits_take_effect():
    from transformer_lens import HookedTransformer

    from interp.core import constructions

    for case, model in ((3, models.build_model(3, 4, 4, seed=0)), (2, constructions.build(2, 4))):
        with warnings.catch_warnings(record=True) as caught:  # the construction's leftmost attention
            warnings.simplefilter("always")
            vanilla = models.to_vanilla(model)
        assert [str(w.message)[:51] for w in caught] == \
            ["to_vanilla: a plain HookedTransformer that loads th"] * (case == 2)
        tokens, _ = tasks.sample(case, 4, 8)
        torch.testing.assert_close(vanilla(tokens), model(tokens))
        plain = HookedTransformer(vanilla.cfg)  # TransformerLens's own class loads its state
        plain.load_state_dict(vanilla.state_dict())
        with torch.no_grad():
            vanilla.W_E[:] = 0  # the edit a TransformerLens user makes, and it takes effect
        assert not torch.allclose(vanilla(tokens), model(tokens))
        assert torch.equal(model.W_E, models.to_vanilla(model).W_E)  # the original is untouched
    with pytest.raises(ValueError, match="max_rows"):
        models.to_vanilla(models.build_model(2, 40, 2, seed=0), max_rows=100)


WRITES = {  # the edits a TransformerLens user makes to W_E
    "W_E[:] = 0": lambda m: m.W_E.__setitem__(slice(None), 0.0),
    "W_E.data[:] = 0": lambda m: m.W_E.data.__setitem__(slice(None), 0.0),
    "embed.W_E[0] = 1": lambda m: m.embed.W_E.__setitem__(0, 1.0),
    "W_E.zero_()": lambda m: m.W_E.zero_(),
    "W_E += 1": lambda m: m.W_E.add_(1.0),
    "nn.init.normal_": lambda m: torch.nn.init.normal_(m.W_E),
    "W_E.detach()[0] = 1": lambda m: m.W_E.detach().__setitem__(0, 1.0),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_writes_into_a_pair_models_w_e_raise_and_change_nothing(write):
    from interp.core import constructions

    for model in (models.build_model(3, 4, 4, seed=0), constructions.build(2, 4)):
        tables = [t.detach().clone() for t in models.pair_tables(model)]
        with pytest.raises(models.ReadOnlyWeightError, match="pair_tables"):
            with torch.no_grad():
                WRITES[write](model)
        assert all(torch.equal(a, b) for a, b in zip(tables, models.pair_tables(model)))


def test_reads_of_a_pair_models_w_e_are_plain_and_keep_gradients():
    model = models.build_model(3, 4, 4, seed=0)
    tokens, _ = tasks.sample(3, 4, 8)
    assert type(model.W_E * 2) is torch.Tensor and type(model.W_E[tokens]) is torch.Tensor
    model(tokens)[:, -1].sum().backward()  # gradients reach the tables through the read-only W_E
    key, value = models.pair_tables(model)
    assert key.grad is not None and key.grad.abs().sum() > 0
    assert value.grad is not None and value.grad.abs().sum() > 0


def test_assigning_a_whole_w_e_writes_through_only_with_the_pair_structure():
    model = models.build_model(2, 4, 3, seed=0)
    new_key, new_value = torch.randn(4, 3), torch.randn(4, 3)
    plain = torch.cat([torch.cat([new_key.repeat_interleave(4, 0), new_value.repeat(4, 1)], 1),
                       torch.cat([new_key, torch.zeros(4, 3)], 1)])  # built by hand, not by the class
    model.embed.W_E = plain
    assert torch.equal(models.pair_tables(model)[0], new_key)
    assert torch.equal(models.pair_tables(model)[1], new_value)
    assert torch.equal(model.W_E, plain)
    broken = plain.clone()
    broken[5, 0] += 1.0  # row 1*4 + 1 no longer [key[1], value[1]]
    with pytest.raises(ValueError, match="row 5 of the new W_E breaks the pair structure"):
        model.embed.W_E = broken
    assert torch.equal(models.pair_tables(model)[0], new_key)  # nothing was written
