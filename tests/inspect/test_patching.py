"""Activation patching against the plain-Python evaluator."""

import pytest

from interp.core import constructions, models, tasks
from interp.inspect import hooks, patching


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_corrupt_keeps_keys_and_target_and_changes_the_answer(case):
    n = 6
    tokens = hooks.sample_inputs(case, n, 30, seed=3)
    bad = patching.corrupt(case, n, tokens, seed=4)
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
    r = patching.patch_attended(model, case, n, hook=hook, batch_size=128)
    assert (r.clean_acc, r.corrupt_acc, r.follow, r.control_keep, r.changed) == (1.0,) * 5
    assert r.hook_name.startswith(f"blocks.{model.cfg.n_layers - 1}.")


def test_patched_prediction_is_the_corrupted_evaluator_answer():
    """By hand for a few inputs: patch resid_pre at the attended position, compare with evaluate."""
    case, n = 3, 5
    model = constructions.build(case, n)
    tokens = hooks.sample_inputs(case, n, 8, seed=1)
    bad = patching.corrupt(case, n, tokens, seed=2)
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


def test_random_model_does_not_follow():
    model = models.build_model(2, 10, 8, pos_embed="none", seed=0)
    r = patching.patch_attended(model, 2, 10, batch_size=256)
    assert r.follow < 0.5


def test_patching_leaves_no_hooks():
    model = constructions.build(1, 5)
    before = {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()}
    patching.patch_attended(model, 1, 5, batch_size=20)
    assert {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()} == before


def test_bad_hook_is_refused():
    with pytest.raises(ValueError, match="hook='z'"):
        patching.patch_attended(constructions.build(1, 5), 1, 5, hook="z")


def test_patching_at_the_key_position_checks_where_the_model_reads():
    """Case 5's construction reads the value position 2j + 1 (layer 0 copied the key there):
    patching it moves the answer; patching the key position 2j (``at="key"``, the mirror
    mechanism's check) moves nothing, and the other slots' key positions keep it."""
    model = constructions.build(5, 6)
    value = patching.patch_attended(model, 5, 6, batch_size=128, seed=0)
    key = patching.patch_attended(model, 5, 6, batch_size=128, seed=0, at="key")
    assert value.follow == 1.0 and value.control_keep == 1.0
    assert key.follow == 0.0 and key.control_keep == 1.0
    assert hooks.slot_positions_at(5, 6, "key").tolist() == [0, 2, 4, 6, 8, 10]
    with pytest.raises(ValueError, match="at='key' needs keys at their own positions"):
        hooks.slot_positions_at(3, 6, "key")
    with pytest.raises(ValueError, match="accepted: 'value' or 'key'"):
        patching.patch_attended(model, 5, 6, at="query")
