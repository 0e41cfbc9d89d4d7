"""interp.inspect.tools.interventions, each against a TransformerLens computation done by hand
(``run_with_cache`` / ``run_with_hooks``) or the plain-Python evaluator."""

import pytest
import torch

from interp.core import constructions, models, tasks
from interp.inspect.tools import hooks
from interp.inspect.tools import interventions as iv


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
def test_slot_logit_attribution_adds_up_and_points_at_the_attended_slot(case):
    model = constructions.build(case, 6)
    tokens = _batch(case, 6)
    d = iv.slot_logit_attribution(model, tokens)
    answers = torch.tensor([tasks.evaluate(case, 6, t) for t in tokens.tolist()])
    assert torch.equal(d["answers"], answers)
    torch.testing.assert_close(d["total"], model(tokens)[torch.arange(12), -1, answers])
    torch.testing.assert_close(d["per_position"].sum(-1) + d["residual"] + d["bias"], d["total"], atol=1e-5, rtol=0)
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
    attr = iv.attribution_patching(model, clean, corrupt, hook_name=name)
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


# ----------------------------------------------------------------------------- the engine


def _hand_patch(model, tokens, name, write):
    """TransformerLens's run_with_hooks with a hand-written hook: the reference."""
    def hook(act, hook):
        act = act.clone()
        write(act)
        return act

    return model.run_with_hooks(tokens, fwd_hooks=[(name, hook)])[:, -1]


def test_each_setter_equals_a_hand_written_run_with_hooks():
    model = models.build_model(5, 5, 6, n_layers=2, seed=1)
    clean, other = _batch(5, 5), _batch(5, 5, seed=9)
    _, cache = model.run_with_cache(other)
    resid, z = "blocks.1.hook_resid_pre", "blocks.0.attn.hook_z"
    src, zsrc = cache[resid], cache[z]
    got = iv.patch_positions(model, clean, {resid: src}, [1, 3])
    ref = _hand_patch(model, clean, resid, lambda a: a.__setitem__((slice(None), [1, 3]), src[:, [1, 3]]))
    torch.testing.assert_close(got, ref, atol=0, rtol=0)
    got = iv.patch_head(model, clean, {z: zsrc}, (slice(2, 6), 0))
    ref = _hand_patch(model, clean, z, lambda a: a.__setitem__((slice(None), slice(2, 6), 0), zsrc[:, 2:6, 0]))
    torch.testing.assert_close(got, ref, atol=0, rtol=0)
    mask = torch.rand(clean.shape, generator=torch.Generator().manual_seed(0)) < 0.3
    got = iv.patch_mask(model, clean, {resid: src}, mask)
    ref = _hand_patch(model, clean, resid, lambda a: a.__setitem__(mask, src[mask]))
    torch.testing.assert_close(got, ref, atol=0, rtol=0)
    assert not torch.allclose(got, model(clean)[:, -1])  # the patch changed something
    with pytest.raises(ValueError, match="blocks.9.hook_resid_pre"):
        iv.patch_positions(model, clean, {"blocks.9.hook_resid_pre": src}, 0)


# ----------------------------------------------------------------------------- the attended position


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_corrupt_keeps_keys_and_target_and_changes_the_answer(case):
    n = 6
    tokens = hooks.sample_inputs(case, n, 30, seed=3)
    bad = iv.corrupt(case, n, tokens, seed=4)
    for t, c in zip(tokens, bad, strict=True):
        k1, v1, i1 = tasks.decode(case, n, t)
        k2, v2, i2 = tasks.decode(case, n, c)
        assert (k1, i1) == (k2, i2)
        assert sorted(v1) == sorted(v2)  # a swap: still a permutation
        assert sum(a != b for a, b in zip(v1, v2, strict=True)) == 2
        assert tasks.evaluate(case, n, c) != tasks.evaluate(case, n, t)


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("hook", ["resid_pre", "v"])
def test_constructions_follow_the_attended_position(case, hook):
    n = 7
    model = constructions.build(case, n)
    r = iv.patch_attended(model, hook=hook, batch_size=128)
    assert (r.clean_acc, r.corrupt_acc, r.follow, r.control_keep, r.changed) == (1.0,) * 5
    assert r.hook_name.startswith(f"blocks.{model.cfg.n_layers - 1}.")


def test_patched_prediction_is_the_corrupted_evaluator_answer():
    """By hand for a few inputs: patch resid_pre at the attended position, compare with evaluate."""
    case, n = 3, 5
    model = constructions.build(case, n)
    tokens = hooks.sample_inputs(case, n, 8, seed=1)
    bad = iv.corrupt(case, n, tokens, seed=2)
    _, cache = model.run_with_cache(bad)
    for b in range(len(tokens)):
        keys, _, target = tasks.decode(case, n, tokens[b])
        j = keys.index(target)

        def hook(act, hook, b=b, j=j):
            act = act.clone()
            act[b, j] = cache["blocks.0.hook_resid_pre"][b, j]
            return act

        logits = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_pre", hook)])
        assert int(logits[b, -1].argmax()) == tasks.evaluate(case, n, bad[b])


@pytest.mark.parametrize("hook, name", [("resid_pre", "blocks.1.hook_resid_pre"), ("v", "blocks.1.attn.hook_v")])
def test_patch_attended_fractions_equal_hand_patching(hook, name):
    """A random two-layer case-5 model (fractions strictly between 0 and 1): follow and
    control_keep recomputed input by input with TransformerLens's run_with_hooks and the
    plain-Python evaluator."""
    case, n = 5, 5
    model = models.build_model(case, n, 6, n_layers=2, seed=2)
    tokens = hooks.sample_inputs(case, n, 40, seed=5)
    r = iv.patch_attended(model, tokens, hook=hook, seed=5)
    bad = iv.corrupt(case, n, tokens, seed=6)  # patch_attended corrupts with seed + 1
    _, cache = model.run_with_cache(bad)
    follow, keep = [], []
    for b in range(len(tokens)):
        keys, _, target = tasks.decode(case, n, tokens[b])
        j = keys.index(target)
        for where, out in (([2 * j + 1], follow), ([2 * k + 1 for k in range(n) if k != j], keep)):
            def write(act, b=b, where=where):
                act[b, where] = cache[name][b, where]
            said = int(_hand_patch(model, tokens, name, write)[b].argmax())
            clean, corrupted = tasks.evaluate(case, n, tokens[b]), tasks.evaluate(case, n, bad[b])
            out.append(said == (corrupted if out is follow else clean))
    assert r.follow == pytest.approx(sum(follow) / len(follow), abs=1e-6)  # a float32 mean
    assert r.control_keep == pytest.approx(sum(keep) / len(keep), abs=1e-6)
    assert 0 < r.follow < 1 or 0 < r.control_keep < 1  # the check can tell


def test_random_model_does_not_follow():
    model = models.build_model(2, 10, 8, pos_embed="none", seed=0)
    r = iv.patch_attended(model, batch_size=256)
    assert r.follow < 0.5


def test_patching_leaves_no_hooks():
    model = constructions.build(1, 5)
    before = {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()}
    iv.patch_attended(model, batch_size=20)
    iv.ablate(model, hooks.sample_inputs(1, 5, 4), layer=0)
    assert {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()} == before


def test_bad_hook_is_refused():
    with pytest.raises(ValueError, match="hook='z'"):
        iv.patch_attended(constructions.build(1, 5), hook="z")


def test_patching_at_the_key_position_checks_where_the_model_reads():
    """Case 5's construction reads the value position 2j + 1 (layer 0 copied the key there):
    patching it moves the answer; patching the key position 2j (``at="key"``, the mirror
    mechanism's check) moves nothing, and the other slots' key positions keep it."""
    model = constructions.build(5, 6)
    value = iv.patch_attended(model, batch_size=128, seed=0)
    key = iv.patch_attended(model, batch_size=128, seed=0, at="key")
    assert value.follow == 1.0 and value.control_keep == 1.0
    assert key.follow == 0.0 and key.control_keep == 1.0
    assert hooks.slot_positions_at(5, 6, "key").tolist() == [0, 2, 4, 6, 8, 10]
    with pytest.raises(ValueError, match="at='key' needs keys at their own positions"):
        hooks.slot_positions_at(3, 6, "key")
    with pytest.raises(ValueError, match="accepted: 'value' or 'key'"):
        iv.patch_attended(model, at="query")


def test_slot_logit_attribution_reads_the_task_of_trained_and_loaded_models(tmp_path):
    """No case passed: a trained model and its checkpoint, loaded back, carry their task; the
    attribution still adds up to TransformerLens's logit of the evaluator's answer."""
    from interp.training import checkpoints
    from interp.training.trainer import TrainConfig, train

    result = train(TrainConfig(case=2, n=4, d_token=4, pos_embed="none", seed=0, max_steps=20, eval_batches=1))
    loaded = checkpoints.load(checkpoints.save(result, tmp_path / "run"))
    tokens = _batch(2, 4)
    answers = torch.tensor([tasks.evaluate(2, 4, t) for t in tokens.tolist()])
    for model in (result.model, loaded):
        d = iv.slot_logit_attribution(model, tokens)
        assert torch.equal(d["answers"], answers)
        torch.testing.assert_close(d["total"], model(tokens)[torch.arange(12), -1, answers])
        torch.testing.assert_close(d["per_position"].sum(-1) + d["residual"] + d["bias"], d["total"],
                                   atol=1e-5, rtol=0)
