"""interp.theory.temperature: the least beta against the closed-form adversarial prediction, the
sufficient bound checked through TransformerLens's own forward, and case 5's tie."""

import math

import pytest
import torch

from interp.core import attention, constructions, tasks
from interp.theory import precision as P
from interp.theory import temperature as T


def _tl_exact(model, beta, tokens, answers) -> bool:
    """Exactness under softmax(beta * scores) through TransformerLens's forward and hooks."""
    m = P.as_float64(model)
    attention.set_attention(m, "softmax", beta=beta)
    with torch.no_grad():
        return bool(P.strict_correct(m(tokens)[:, -1], answers).all())


@pytest.mark.parametrize("case,n", [(2, 8), (3, 6), (3, 13)])
def test_perpendicular_adversary_meets_the_prediction(case, n):
    row = T.measure(case, n, "perpendicular", rel=0.002)
    pred = T.beta_adversarial(case, n)
    assert row["below"] < pred * 1.001 and row["beta"] > pred / 1.001  # bracket holds the prediction
    # and independently, through TransformerLens on the same inputs: wrong just below, right just above
    probes = P.ProbeSet(case, n, n_random=0, others="perpendicular")
    tokens = torch.cat([t for t, _ in probes])
    answers = torch.tensor([tasks.evaluate(case, n, t) for t in tokens.tolist()])
    model = constructions.build(case, n, check_precision=False)
    assert not _tl_exact(model, pred * 0.99, tokens, answers)
    assert _tl_exact(model, pred * 1.01, tokens, answers)


@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_sufficient_bound_holds(case):
    n = 9
    suff, crude = T.beta_sufficient(case, n), T.beta_crude(case, n)
    assert suff <= crude
    for family in ("random", "perpendicular", "opposite"):
        row = T.measure(case, n, family, n_random=128)
        assert row["beta"] <= suff * 1.001, family
    tokens, answers = tasks.sample(case, n, 512, function="any", generator=torch.Generator().manual_seed(5))
    assert _tl_exact(constructions.build(case, n, check_precision=False), suff * 1.001, tokens, answers)


def test_crude_bound_is_the_closed_form():
    n = 20  # case 3: 19 other keys, C = 1, d_head = 2
    g = (1 - math.cos(2 * math.pi / n)) / math.sqrt(2)
    assert T.beta_crude(3, n) == pytest.approx(math.log(19 / math.sin(math.pi / n)) / g)


def test_case5_tie_and_its_fix():
    n = 5
    tokens, answers = tasks.sample(5, n, 256, function="any", generator=torch.Generator().manual_seed(1))
    paper = constructions.build(5, n, check_precision=False)
    fixed = T.tiebroken_case5(n)
    assert not _tl_exact(paper, 1e6, tokens, answers)  # layer 1 splits 2k / 2k+1 for every beta
    assert _tl_exact(fixed, 1e4, tokens, answers)
    m = P.as_float64(fixed)
    attention.set_attention(m, "leftmost")  # the fix changes nothing under hard attention
    all_tokens, all_answers = tasks.enumerate_inputs(5, 3, "any")
    m3 = T.tiebroken_case5(3)
    attention.set_attention(m3, "leftmost")
    assert bool((m3(all_tokens)[:, -1].argmax(-1) == all_answers).all())
    assert bool((m(tokens)[:, -1].argmax(-1) == answers).all())
    row = T.measure(5, n, "random", variant="paper", beta_max=1e6)
    assert row["beta"] is None
    assert T.measure(5, n, "random", variant="tiebroken")["beta"] is not None


def test_least_beta_brackets():
    model = constructions.build(4, 6, check_precision=False)
    probes = P.ProbeSet(4, 6, n_random=32)
    r = T.least_beta(model, probes, start=1.0, rel=0.01)
    assert r.evaluated[r.beta] and not r.evaluated[r.below] and r.beta / r.below <= 1.01


def test_cli_json(capsys):
    import json

    from interp.cli import main

    assert main(["temperature", "--case", "3", "--n", "4", "8", "--family", "perpendicular", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["n"] for r in out["rows"]] == [4, 8]
