"""pe_combine="concat" (issue 53's screen, interp.core.pe_combine): case 1's value embedding
concatenated with a learned position embedding, d_model = 2 d_token.

The reference is a hand-written forward of the convention (``[W_E_value[t] | W_pos_pos[p]]``,
one softmax head, residual, unembedding) from the model's own blocks; the fast engine and the
evaluation pass are checked against TransformerLens's forward and backward, and training
against a plain TransformerLens loop, the blocks staying exactly zero in both.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from interp.core import forward, models, tasks
from interp.training import fast_train as ft
from interp.training.trainer import TrainConfig, generator, init_model, one_thread, train, trainable


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def _perturbed(config):
    """config's model with every trainable parameter pushed off its init, the blocks kept zero."""
    model = init_model(config)
    g = torch.Generator().manual_seed(config.seed + 100)
    with torch.no_grad():
        for p in trainable(model):
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    models.attach_spec(model, config.spec, fix=True)  # the blocks back at zero (hooks already there)
    return model


def _by_hand(model, tokens):
    """The convention written out: position p holds [value table row | position table row]."""
    d = model.spec.d_token
    value, position = model.embed.W_E[:, :d], model.pos_embed.W_pos[:, d:]
    L = tokens.shape[1]
    x = torch.cat([value[tokens], position[:L].expand(len(tokens), L, d)], dim=-1)
    a = model.blocks[0].attn
    q = x @ a.W_Q[0] + a.b_Q[0]
    k = x @ a.W_K[0] + a.b_K[0]
    v = x @ a.W_V[0] + a.b_V[0]
    pattern = torch.softmax(q @ k.transpose(1, 2) / a.attn_scale, dim=-1)
    resid = x + (pattern @ v) @ a.W_O[0] + a.b_O
    return (resid @ model.unembed.W_U + model.unembed.b_U)[:, -1]


def test_the_model_is_the_concatenation_and_every_path_computes_it():
    config = TrainConfig(case=1, n=7, d_token=3, pe_combine="concat", init="pytorch")
    model = _perturbed(config)
    assert model.cfg.d_model == 6 and model.embed.W_E.shape[1] == 6 and model.pos_embed.W_pos.shape[1] == 6
    assert not model.embed.W_E[:, 3:].any() and not model.pos_embed.W_pos[:, :3].any()
    assert model.embed.W_E[:, :3].all() and model.pos_embed.W_pos[:, 3:].all()
    tokens, _ = tasks.sample(1, 7, 32, generator=torch.Generator().manual_seed(0))
    want = _by_hand(model, tokens)
    torch.testing.assert_close(model(tokens)[:, -1], want, atol=1e-5, rtol=0)
    torch.testing.assert_close(forward.final_logits(model, tokens), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(ft.model_final_logits(model, tokens), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("n_layers, d_mlp", [(1, 0), (2, 0), (1, 12)])
def test_the_blocks_get_no_gradient_in_either_engine(n_layers, d_mlp):
    config = TrainConfig(case=1, n=6, d_token=4, n_layers=n_layers, d_mlp=d_mlp, pe_combine="concat")
    model = _perturbed(config)
    tokens, answers = tasks.sample(1, 6, 32, generator=torch.Generator().manual_seed(1))
    F.cross_entropy(model(tokens)[:, -1], answers).backward()
    ref = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    F.cross_entropy(ft.model_final_logits(model, tokens), answers).backward()
    for name, p in model.named_parameters():
        if p.requires_grad and not name.endswith("b_K"):  # b_K: exact gradient 0, left out by the engine
            torch.testing.assert_close(p.grad, ref[name], atol=1e-5, rtol=0, msg=name)
    for grads in (ref, {k: p.grad for k, p in model.named_parameters() if p.grad is not None}):
        assert not grads["embed.W_E"][:, 4:].any() and not grads["pos_embed.W_pos"][:, :4].any()
        assert grads["embed.W_E"][:, :4].any() and grads["pos_embed.W_pos"][:, 4:].any()


def test_training_follows_the_plain_loop_and_keeps_the_blocks_zero():
    config = TrainConfig(case=1, n=6, d_token=4, pe_combine="concat", init="pytorch", max_steps=150,
                         stop_loss=0.0, curve_every=1, eval_batches=1, batch_size=64)
    model = init_model(config)
    opt = torch.optim.Adam(trainable(model), lr=config.lr)
    g = generator(config.seed, "train")
    losses = []
    for _ in range(150):  # TransformerLens's own loop, its hooks masking the blocks' gradient
        tokens, answers = tasks.sample(1, 6, 64, generator=g)
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    result = train(config)
    torch.testing.assert_close(torch.tensor([v for _, v in result.curve]), torch.tensor(losses), atol=1e-4, rtol=0)
    for m in (model, result.model):
        assert not m.embed.W_E[:, 4:].any() and not m.pos_embed.W_pos[:, :4].any()
        models.check_spec(m, trainable=True)
    start = init_model(config)  # the free blocks moved: the test is not of a frozen model
    assert not torch.equal(start.embed.W_E[:, :4], model.embed.W_E[:, :4])
    assert not torch.equal(start.pos_embed.W_pos[:, 4:], model.pos_embed.W_pos[:, 4:])
    assert result.model.spec == config.spec and result.config.name() != config.replace(pe_combine="add").name()


def test_refused_outside_case_1_with_learned_positions_and_when_a_block_is_edited():
    with pytest.raises(ValueError, match=r"^pe_combine='concat' with case=4, pos_embed='learned': .*accepted: case=1"):
        models.ModelSpec(4, 5, 3, pe_combine="concat")
    with pytest.raises(ValueError, match=r"^pe_combine='concat' with case=1, pos_embed='none'"):
        models.ModelSpec(1, 5, 3, 1, "none", pe_combine="concat")
    with pytest.raises(ValueError, match=r"^pe_combine='sum'; accepted: one of \('add', 'concat'\)$"):
        models.ModelSpec(1, 5, 3, pe_combine="sum")
    config = TrainConfig(case=1, n=5, d_token=3, pe_combine="concat")
    model = init_model(config)
    with torch.no_grad():
        model.pos_embed.W_pos[2, 1] = 0.5
    with pytest.raises(ValueError, match=r"pos_embed\.W_pos is not zero outside its block"):
        ft.check_model(model)
    with pytest.raises(ValueError, match=r"pos_embed\.W_pos is not zero outside its block"):
        forward.final_logits(model, tasks.sample(1, 5, 2)[0])
    model = init_model(config)
    model.hook_embed._forward_hooks.clear()
    with pytest.raises(ValueError, match=r"the hook_embed / hook_pos_embed masks are gone"):
        models.check_spec(model)


def test_a_readings_mlp_is_as_wide_as_the_concatenated_model():
    """f14's d_mlp = 4 d_model: 4 x 2 d_token under "concat" (the paper preset reads the width)."""
    assert TrainConfig.paper(1, 5, 3, reading="f14", pe_combine="concat").d_mlp == 24
    assert TrainConfig.paper(1, 5, 3, reading="f14").d_mlp == 12
