"""Attention through hooks against plain-Python references (tasks.decode / tasks.evaluate)."""

import pytest
import torch

from interp.core import constructions, models, tasks
from interp.inspect.tools import hooks

CASES = [1, 2, 3, 4, 5]


def plain_attended(case, n, tokens):
    """Where the construction's last layer attends, from tasks.decode (plain Python)."""
    keys, values, target = tasks.decode(case, n, tokens)
    j = keys.index(target)
    return 2 * j + 1 if case in tasks.CONSECUTIVE else j


@pytest.mark.parametrize("case", CASES)
def test_read_matches_plain_decode(case):
    n = 5
    tokens = hooks.sample_inputs(case, n, 40, seed=1)
    view = hooks.read(case, n, tokens)
    for b in range(len(tokens)):
        keys, values, target = tasks.decode(case, n, tokens[b])
        assert view.keys[b].tolist() == keys
        assert view.values[b].tolist() == values
        assert int(view.target[b]) == target
        assert int(view.answer[b]) == tasks.evaluate(case, n, tokens[b])
        assert int(view.attended[b]) == plain_attended(case, n, tokens[b])


def test_sample_inputs_cover_every_target():
    tokens = hooks.sample_inputs(3, 7, 70, seed=0)
    targets = hooks.read(3, 7, tokens).target
    assert torch.bincount(targets, minlength=7).tolist() == [10] * 7


@pytest.mark.parametrize("case", CASES)
def test_constructions_put_all_attention_on_the_construction_position(case):
    n = 7
    model = constructions.build(case, n)
    report = hooks.attention_report(model, batch_size=64)
    for layer in range(model.cfg.n_layers):
        assert report.mass(layer) == 1.0
        assert report.hit_rate(layer) == 1.0
        assert report.entropy(layer) == pytest.approx(0.0, abs=1e-6)
    # the final row of the last layer, input by input, against the plain-Python position
    final = report.final[-1]
    for b in range(8):
        expected = [0.0] * tasks.seq_len(case, n)
        expected[plain_attended(case, n, report_tokens(case, n, 64)[b])] = 1.0
        assert final[b].tolist() == expected


def report_tokens(case, n, batch):
    return hooks.sample_inputs(case, n, batch, seed=0)


def test_case5_layer0_each_position_attends_its_key():
    n = 6
    model = constructions.build(5, n)
    tokens = hooks.sample_inputs(5, n, 16)
    patterns = hooks.attention_patterns(model, tokens)  # [layer, batch, q, k]
    for p in range(2 * n + 1):
        assert (patterns[0, :, p, 2 * (p // 2)] == 1.0).all()
    summary = hooks.attention_report(model, tokens).summary()
    assert summary.queries.tolist() == ["all", "final"]


def test_worked_example_through_hooks():
    """Appendix B: keys (0, 2, 1, 3), values (2, 3, 2, 1), i* = 2: attends position 1, f(2) = 3."""
    model = constructions.build(3, 4)
    tokens = tasks.encode(3, [0, 2, 1, 3], [2, 3, 2, 1], 2)
    report = hooks.attention_report(model, tokens)
    assert report.final[0, 0].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert report.mass() == 1.0
    assert hooks.predictions(model, tokens).tolist() == [3]


@pytest.mark.parametrize("case", CASES)
def test_random_model_is_not_ideal(case):
    n = 10
    model = models.build_model(case, n, 8, n_layers=2 if case == 5 else 1, seed=0)
    report = hooks.attention_report(model, batch_size=256)
    assert report.mass() < 0.3
    assert report.entropy() > 0.8
    assert hooks.accuracy(model, batch_size=256) < 0.3


def test_accuracy_of_construction_uses_reference_answers():
    model = constructions.build(4, 6)
    tokens = hooks.sample_inputs(4, 6, 50)
    preds = hooks.predictions(model, tokens).tolist()
    assert preds == [tasks.evaluate(4, 6, t) for t in tokens]
    assert hooks.accuracy(model, tokens) == 1.0


def test_analysis_leaves_hooks_and_weights_alone():
    model = constructions.build(3, 5)
    seen = []
    model.blocks[0].hook_resid_pre.add_hook(lambda x, hook: seen.append(1))  # a user's hook
    before = {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()}
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    hooks.attention_report(model, batch_size=20)
    after = {name: len(hp.fwd_hooks) for name, hp in model.hook_dict.items()}
    assert after == before
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert model.attention_modes == [("leftmost", 1.0)]


def test_wrong_model_for_case_is_refused():
    model = constructions.build(3, 5)
    with pytest.raises(ValueError, match="case=4 but the model was built for case 3"):
        hooks.attention_report(model, case=4)
    with pytest.raises(ValueError, match="n=6 but the model's table size is n=5"):
        hooks.attention_report(model, n=6)


def test_average_attention_splits_between_slot_and_query_in_cases_2_3():
    """constructions.py: the query's own key ties with the target's slot; 'average' gives 1/2-1/2."""
    model = constructions.build(2, 6, attention="average")
    report = hooks.attention_report(model, batch_size=60)
    assert report.mass() == 0.5 and report.self_mass() == 0.5
    leftmost = hooks.attention_report(constructions.build(2, 6), batch_size=60)
    assert leftmost.self_mass() == 0.0


def test_the_case_comes_from_the_model_and_case_is_checked_when_given():
    model = constructions.build(4, 6)
    tokens = hooks.sample_inputs(4, 6, 50)
    assert hooks.accuracy(model, tokens) == hooks.accuracy(model, tokens, case=4, n=6) == 1.0
    with pytest.raises(ValueError, match="case=5 but the model was built for case 4"):
        hooks.accuracy(model, tokens, case=5)
    bare = constructions.build(4, 6)
    bare.task = None  # as a HookedTransformer built outside interp
    with pytest.raises(ValueError, match="carries no task"):
        hooks.accuracy(bare, tokens)
    assert hooks.accuracy(bare, tokens, case=4) == 1.0
    with pytest.raises(ValueError, match="needs n_ctx=7"):  # case 2's shape is not this model's
        hooks.accuracy(bare, case=2)


def _old_calls(tmp_path):
    """Calls in the old convention, ``f(model, case, n, ...)`` (and ``case`` after tokens)."""
    from interp.inspect.studies import analysis
    from interp.inspect.tools import circuits, geometry, interventions, notebook, probes, viz

    m, t = constructions.build(3, 5), hooks.sample_inputs(3, 5, 8)
    return {
        "attention_report": lambda: hooks.attention_report(m, 3, 5),
        "accuracy": lambda: hooks.accuracy(m, 3, 5, t),
        "accuracy tokens=3": lambda: hooks.accuracy(m, 3),
        "check_model": lambda: hooks.check_model(m, 3, 5),
        "qk_matrix": lambda: circuits.qk_matrix(m, 3, 5),
        "ov_matrix": lambda: circuits.ov_matrix(m, 3, 5),
        "circuit_summary": lambda: circuits.circuit_summary(m, 3, 5, t),
        "probe_model": lambda: probes.probe_model(m, 3, 5),
        "probe_resid": lambda: probes.probe_resid(m, 3, 5, "hook_embed"),
        "circle_report": lambda: probes.circle_report(m, 3, 5),
        "qk_circle": lambda: geometry.qk_circle(m, 3, 5),
        "disguise": lambda: geometry.disguise(m, 3, 5),
        "attention_html": lambda: viz.attention_html(m, 3, 5),
        "save_attention_html": lambda: viz.save_attention_html(tmp_path / "a.html", m, 3, 5),
        "plot_circles": lambda: viz.plot_circles(m, 3, 5),
        "write_all": lambda: viz.write_all(m, 3, 5, tmp_path / "out"),
        "notebook.attention": lambda: notebook.attention(m, 3, 5),
        "measure": lambda: analysis.measure(m, 3, 5),
        "slot_logit_attribution": lambda: interventions.slot_logit_attribution(m, t, 3),
        "attribution_patching": lambda: interventions.attribution_patching(m, t, t, 3, hook_name="hook_embed"),
        "patch_attended": lambda: interventions.patch_attended(m, 3, 5),
    }


@pytest.mark.parametrize("name", list(_old_calls(None)))
def test_an_old_positional_case_is_refused_not_misread(name, tmp_path):
    with pytest.raises(ValueError, match="case and n come from the model") as e:
        _old_calls(tmp_path)[name]()
    assert "=3" in str(e.value) or "positional arguments" in str(e.value)  # names what it got
    assert not (tmp_path / "a.html").exists() and not (tmp_path / "out").exists()  # refused before work
