"""interp.theory.lower_bounds: the bounds by hand, error rates against TransformerLens's forward and
the plain-Python evaluator, and the measured precision against the hooked rounded model."""

import math

import pytest
import torch

from interp.theory import lower_bounds as LB
from interp.core import models, tasks
from interp.theory import softmax_construction
from interp.theory import precision as P


def test_bounds_by_hand():
    assert LB.theorem_3_4_bound(8) == pytest.approx(8.0)  # 8 * 3 / 3
    b = LB.theorem_3_7_bound(16, 1, 2, 10)  # R = 16 * 4 - 60 = 4
    assert b["R"] == pytest.approx(4.0) and b["bound"] == pytest.approx(4 / 192)
    assert LB.theorem_3_7_bound(8, 1, 8, 10)["bound"] == 0.0  # R < 0: vacuous


def test_theorem_3_7_inputs():
    tokens, answers = LB.theorem_3_7_inputs(6, 50, torch.Generator().manual_seed(0))
    for t, a in zip(tokens.tolist(), answers.tolist(), strict=True):
        keys, values, target = tasks.decode(5, 6, t)
        assert target == 0 and tasks.evaluate(5, 6, t) == a


def test_report_on_a_random_model():
    n = 6
    model = models.build_model(5, n, 3, seed=2)
    row = LB.report(model, count=512, n_random=32)
    tokens, answers = tasks.sample(5, n, 512, generator=torch.Generator().manual_seed(0), function="permutation")
    with torch.no_grad():
        err = float((model(tokens)[:, -1].argmax(-1) != answers).float().mean())
    assert row["error_permutation"] == pytest.approx(err)
    assert (row["h"], row["d"]) == (1, 3)
    for kind in ("fixed", "float"):
        p = row[f"p_{kind}"]
        assert row[f"c_size_{kind}"] == 3 * p
        assert row[f"R_{kind}"] == pytest.approx(n * math.log2(n) - 9 * p)
    # p preserves the model's own predictions on the probe inputs, p - 1 does not (hooked forward)
    probes = P.ProbeSet(5, n, shifts=(0, 1), n_random=32)
    tokens = torch.cat([t for t, _ in probes])
    base = P.as_float64(model)
    ref = base(tokens)[:, -1].argmax(-1)
    r = P.least_precision(model, probes, "fixed", reference=True)
    assert r.bits == row["p_fixed"]
    for bits, same in [(r.bits, True), (r.bits - 1, False)]:
        fmt = P.Format("fixed", bits, r.int_bits)
        logits = P.hooked_final_logits(P.as_float64(model, fmt), tokens, P.at_every_hook(fmt.round_hook))
        assert bool(P.strict_correct(logits, ref).all()) == same


def test_an_exact_model_respects_theorem_3_4():
    # Theorem 3.5's model is exact: its measured c-size must be >= n log2 n / 3.
    model = softmax_construction.build(6)
    row = LB.report(model, kinds=("fixed",), count=256, n_random=32)
    assert row["error_permutation"] == 0 and row["error_theorem37"] == 0
    assert row["c_size_fixed"] >= row["bound_3_4"] and row["bound_3_7_fixed"] == 0


def test_rejects_other_shapes():
    with pytest.raises(ValueError, match="one-layer case-5"):
        LB.report(models.build_model(5, 4, 4, n_layers=2, seed=0))


def test_cli_trains(capsys):
    import json

    from interp.cli import main

    assert main(["lower-bounds", "--train", "--n", "4", "--d-token", "2", "--steps", "20", "--kind", "float", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["source"] == "trained" and rows[0]["p_float"] is not None
    assert main(["lower-bounds"]) == 2
