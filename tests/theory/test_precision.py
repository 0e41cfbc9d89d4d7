"""interp.theory.precision: number formats against exact rational arithmetic, the fast path against
TransformerLens's hooks, and the least p against the hooked model at p and p - 1."""

from fractions import Fraction

import pytest
import torch

from interp.core import attention, constructions, forward, models, tasks
from interp.theory import softmax_construction
from interp.theory import precision as P


def _fixed_reference(x: float, bits: int, int_bits: int) -> float:
    """Round half to even on the grid 2^-F with saturation, in exact rationals."""
    F = bits - 1 - int_bits
    q = Fraction(x) * 2**F
    r = round(q)  # Python's round of a Fraction: half to even
    r = max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, r))
    return float(Fraction(r, 2**F))


def _float_reference(x: float, bits: int) -> float:
    if x == 0:
        return 0.0
    q = Fraction(x)
    e = 0
    while abs(q) >= 1:
        q, e = q / 2, e + 1
    while abs(q) < Fraction(1, 2):
        q, e = q * 2, e - 1
    return float(Fraction(round(q * 2**bits), 2**bits) * Fraction(2) ** e)


def test_formats_match_exact_rational_rounding():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(300, generator=g, dtype=torch.float64) * 3,
                   torch.tensor([0.375, -0.375, 0.125, 5.0, -5.0, 1.0, 0.0], dtype=torch.float64)])
    for bits, I in [(4, 1), (8, 2), (13, 0)]:
        got = P.Format("fixed", bits, I).round(x)
        assert got.tolist() == [_fixed_reference(v, bits, I) for v in x.tolist()]
    for bits in [1, 3, 11]:
        got = P.Format("float", bits).round(x)
        assert got.tolist() == [_float_reference(v, bits) for v in x.tolist()]


def test_hand_values_and_float32():
    fx = P.Format("fixed", 4, 1)  # 1 sign + 1 integer + 2 fractional bits: multiples of 1/4 in [-2, 1.75]
    assert fx.round(torch.tensor([0.3, 0.375, 0.625, 5.0, -5.0], dtype=torch.float64)).tolist() == [0.25, 0.5, 0.5, 1.75, -2.0]
    x = torch.randn(1000, dtype=torch.float64)
    assert torch.equal(P.Format("float", 24).round(x), x.float().double())  # float32 = 24 mantissa bits
    assert [P.int_bits_for(v) for v in (0.5, 1.0, 1.9, 2.0, 7.9)] == [0, 1, 1, 2, 3]
    with pytest.raises(ValueError, match="bits=3"):
        P.Format("fixed", 3, 2)


def _models():
    yield "case1", constructions.build(1, 5, check_precision=False), 1, 5
    yield "case3", constructions.build(3, 5, check_precision=False), 3, 5
    yield "case4", constructions.build(4, 5, check_precision=False), 4, 5
    yield "case5-2layer", constructions.build(5, 5, check_precision=False), 5, 5
    yield "theorem35", softmax_construction.build(4), 5, 4
    for mode in ("leftmost", "average", "softmax"):
        m = models.build_model(5, 5, 6, n_layers=2, seed=3)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if name.split(".")[-1].startswith("b_"):
                    p.normal_(0, 0.3)
        attention.set_attention(m, mode, beta=2.0)
        yield f"random-2layer-{mode}", m, 5, 5
    yield "random-pairs", models.build_model(3, 5, 4, seed=1), 3, 5


@pytest.mark.parametrize("kind,bits", [("fixed", 7), ("float", 10)])
def test_fast_path_equals_transformer_lens_hooks(kind, bits):
    for label, model, case, n in _models():
        m = P.as_float64(model)
        tokens, _ = tasks.sample(case, n, 12, function="any")
        # unrounded: the fast path is TransformerLens's forward
        torch.testing.assert_close(forward.final_logits(m, tokens), m(tokens)[:, -1], rtol=0, atol=1e-12)
        fmt = P.Format(kind, bits, 3 if kind == "fixed" else 0)
        mr = P.as_float64(m, fmt)
        fast = forward.final_logits(mr, tokens, fwd_hooks=P.at_every_hook(fmt.round_hook))
        hooked = P.hooked_final_logits(mr, tokens, P.at_every_hook(fmt.round_hook))
        assert torch.equal(fast, hooked), label
        assert not any(h for hp in mr.hook_dict.values() for h in hp.fwd_hooks if not h.is_permanent)


def test_every_hook_is_visited():
    m = P.as_float64(softmax_construction.build(3))
    tokens, _ = tasks.sample(5, 3, 4)
    seen_fast, seen_hooks = P.MaxAbs(), P.MaxAbs()
    forward.final_logits(m, tokens, fwd_hooks=P.at_every_hook(seen_fast))
    P.hooked_final_logits(m, tokens, P.at_every_hook(seen_hooks))
    assert set(seen_fast.per_hook) == set(seen_hooks.per_hook)
    assert {"hook_embed", "blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern", "blocks.0.mlp.hook_pre",
            "blocks.0.hook_resid_mid", "unembed.hook_out"} <= set(seen_hooks.per_hook)


def test_scores_are_rounded_before_the_hard_mode_reads_them():
    # Two scores 1 and 1 + 2^-10 differ in float64 and tie at 6 fractional bits: leftmost then
    # attends to the first, and the hooked and fast forwards must agree on that.
    m = P.as_float64(constructions.build(3, 5, check_precision=False))
    fmt = P.Format("fixed", 8, 1)
    seen = {}

    def record(act, hook):
        seen[hook.name] = fmt.round(act)
        return seen[hook.name]

    tokens, _ = tasks.sample(3, 5, 8)
    P.hooked_final_logits(P.as_float64(m, fmt), tokens, P.at_every_hook(record))
    scores = seen["blocks.0.attn.hook_attn_scores"]
    assert torch.equal(scores, fmt.round(scores))  # what the mode saw was on the 2^-6 grid
    expected = attention.pattern_from_scores(scores, "leftmost")
    assert torch.equal(seen["blocks.0.attn.hook_pattern"], expected)


@pytest.mark.parametrize("case,others", [(3, "random"), (5, "perpendicular"), (1, "opposite")])
def test_probe_set(case, others):
    n = 7
    probes = P.ProbeSet(case, n, shifts=(0, 2), n_random=10, chunk=5, others=others)
    tokens = torch.cat([t for t, _ in probes])
    answers = torch.cat([a for _, a in probes])
    assert len(tokens) == len(probes) == 2 * n + 10
    assert answers.tolist() == [tasks.evaluate(case, n, t) for t in tokens.tolist()]
    structured = tokens[: 2 * n].tolist()
    targets = [tasks.decode(case, n, t)[2] for t in structured]
    assert sorted(set(targets)) == list(range(n))
    assert sorted(set(answers[: 2 * n].tolist())) == list(range(n))
    if case == 5:
        for t in structured:
            keys, values, target = tasks.decode(5, n, t)
            assert keys[-1] == target and set(keys[:2]) == {(target - 1) % n, (target + 1) % n}
            answer = values[-1]
            assert all(v == (answer + 2) % n for v in values[:-1])  # perpendicular: n/4 -> 2
    assert torch.equal(torch.cat([t for t, _ in probes]), tokens)  # the same inputs every time


@pytest.mark.parametrize("case,n,kind", [(3, 8, "fixed"), (5, 4, "float")])
def test_least_precision_against_hooked_model(case, n, kind):
    model = constructions.build(case, n, dtype=torch.float64, check_precision=False)
    probes = P.ProbeSet(case, n, n_random=16)
    r = P.least_precision(model, probes, kind)
    assert r.bits is not None and r.evaluated[r.bits] and not r.evaluated[r.bits - 1]
    tokens = torch.cat([t for t, _ in probes])
    answers = torch.tensor([tasks.evaluate(case, n, t) for t in tokens.tolist()])
    for bits, exact in [(r.bits, True), (r.bits - 1, False)]:  # TransformerLens with hooks, from scratch
        fmt = P.Format(kind, bits, r.int_bits)
        logits = P.hooked_final_logits(P.as_float64(model, fmt), tokens, P.at_every_hook(fmt.round_hook))
        assert bool(P.strict_correct(logits, answers).all()) == exact
    assert P.least_precision(model, probes, kind, method="hooks", int_bits=r.int_bits).bits == r.bits


def test_precision_grows_with_n_and_reference_mode():
    small = P.measure(2, 8, "fixed")
    large = P.measure(2, 128, "fixed")
    assert large["bits"] > small["bits"] and large["c_size"] == 4 * large["bits"]
    model = models.build_model(5, 4, 4, seed=0)  # a random model: not exact, but it has a behaviour
    r = P.least_precision(model, P.ProbeSet(5, 4, n_random=16), "float", reference=True)
    assert r.bits is not None and r.bits <= 24


def test_cli_json(capsys):
    import json

    from interp.cli import main

    assert main(["precision", "--case", "4", "--n", "4", "8", "--kind", "float", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["n"] for r in out["rows"]] == [4, 8] and all(r["bits"] for r in out["rows"])
    assert main(["precision", "--case", "-1", "--n", "4"]) == 2
