"""interp.inspect.interventions, each against a TransformerLens computation done by hand."""

import pytest
import torch

from interp.core import constructions, models, tasks
from interp.inspect import interventions as iv


def _batch(case, n, count=12, seed=0):
    return tasks.sample(case, n, count, generator=torch.Generator().manual_seed(seed), function="any")[0]


def test_zero_and_mean_ablation_equal_the_hand_computation():
    model = models.build_model(3, 6, 4, seed=0)
    tokens, reference = _batch(3, 6), _batch(3, 6, 40, seed=1)
    _, cache = model.run_with_cache(tokens)
    _, ref_cache = model.run_with_cache(reference)
    resid = cache["blocks.0.hook_resid_pre"][:, -1]
    attn = model.blocks[0].attn
    # zero: the head writes only b_O
    by_hand = (resid + attn.b_O) @ model.W_U + model.b_U
    torch.testing.assert_close(iv.ablate(model, tokens, layer=0), by_hand, atol=1e-5, rtol=0)
    # mean: z at the final position is its mean over the reference inputs
    z_mean = ref_cache["blocks.0.attn.hook_z"][:, -1].mean(0)  # [head, d_head]
    by_hand = (resid + torch.einsum("hd,hdm->m", z_mean, attn.W_O) + attn.b_O) @ model.W_U + model.b_U
    got = iv.ablate(model, tokens, layer=0, kind="mean", reference=reference)
    torch.testing.assert_close(got, by_hand, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="kind="):
        iv.ablate(model, tokens, layer=0, kind="half")


@pytest.mark.parametrize("case", [2, 5])
def test_direct_logit_attribution_adds_up_and_points_at_the_attended_slot(case):
    model = constructions.build(case, 6)
    tokens = _batch(case, 6)
    d = iv.direct_logit_attribution(model, tokens, case)
    answers = torch.tensor([tasks.evaluate(case, 6, t) for t in tokens.tolist()])
    assert torch.equal(d["answers"], answers)
    torch.testing.assert_close(d["total"], model(tokens)[torch.arange(12), -1, answers])
    torch.testing.assert_close(d["per_position"].sum(-1) + d["residual"] + d["bias"], d["total"], atol=1e-5, rtol=0)
    from interp.inspect import hooks

    attended = hooks.construction_targets(case, 6, model.cfg.n_layers, tokens)[-1, :, -1]
    elsewhere = torch.ones_like(d["per_position"], dtype=torch.bool)
    elsewhere[torch.arange(12), attended] = False
    assert (d["per_position"][elsewhere] == 0).all()  # hard attention: only the attended slot writes
    assert (d["per_position"][torch.arange(12), attended] != 0).any()


def test_logit_lens_ends_at_the_logits_and_starts_at_the_embedding():
    model = models.build_model(5, 5, 6, n_layers=2, seed=0)
    tokens = _batch(5, 5)
    lens = iv.logit_lens(model, tokens)
    assert lens.shape == (3, 12, 5)
    torch.testing.assert_close(lens[-1], model(tokens)[:, -1])
    embed = model.W_E[tokens[:, -1]] + model.W_pos[tokens.shape[1] - 1]
    torch.testing.assert_close(lens[0], embed @ model.W_U + model.b_U)


def test_path_patching_all_inputs_plus_the_direct_path_is_full_patching():
    """Patching layer 0 -> layer 1 through q, k and v, plus layer 0's direct path to the logits,
    is exactly patching layer 0's whole output (TransformerLens's run_with_hooks)."""
    model = models.build_model(5, 5, 6, n_layers=2, seed=3)
    clean, corrupt = _batch(5, 5), _batch(5, 5, seed=7)
    _, cc = model.run_with_cache(clean)
    _, kc = model.run_with_cache(corrupt)
    full = model.run_with_hooks(clean, fwd_hooks=[("blocks.0.hook_attn_out", lambda a, hook: kc["blocks.0.hook_attn_out"])])[:, -1]
    direct = (kc["blocks.0.hook_attn_out"][:, -1] - cc["blocks.0.hook_attn_out"][:, -1]) @ model.W_U
    paths = iv.path_patch(model, clean, corrupt, into=("q", "k", "v"))
    torch.testing.assert_close(paths + direct, full, atol=1e-4, rtol=0)
    torch.testing.assert_close(iv.path_patch(model, clean, clean, into="k"), model(clean)[:, -1], atol=1e-5, rtol=0)
    k_only = iv.path_patch(model, clean, corrupt, into="k")
    assert not torch.allclose(k_only, model(clean)[:, -1])  # the path carries something


def test_attribution_patching_is_exact_where_the_metric_is_linear():
    """At the last residual stream the logits are linear, so the gradient estimate equals real
    patching; positions before the last do not reach the logits (0)."""
    model = models.build_model(3, 6, 4, seed=0)
    clean, corrupt = _batch(3, 6), _batch(3, 6, seed=2)
    name = "blocks.0.hook_resid_post"
    attr = iv.attribution_patching(model, clean, corrupt, 3, hook_name=name)
    answers = tasks.answers(3, 6, clean)
    _, kc = model.run_with_cache(corrupt)

    def metric(logits):
        return logits[torch.arange(12), answers] - logits.mean(-1)

    def patch_last(act, hook):
        act = act.clone()
        act[:, -1] = kc[name][:, -1]
        return act

    real = metric(model.run_with_hooks(clean, fwd_hooks=[(name, patch_last)])[:, -1]) - metric(model(clean)[:, -1])
    torch.testing.assert_close(attr[:, -1], real, atol=1e-4, rtol=0)
    assert torch.equal(attr[:, :-1], torch.zeros_like(attr[:, :-1]))
