"""P1-P9 of experiments/atlas/PREDICTIONS.md on hand-made atlas tables whose verdict follows from
the definition: each prediction confirmed, refuted and untested, at and beside its thresholds."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from interp.inspect.studies import atlas_predictions as ap

ATTN, MLP = ap.ATTN, ap.MLP  # "mlp-4x[f14]": the reading the atlas runs (Amended 6)


def seed(case=1, n=10, d_token=8, n_layers=1, architecture=ATTN, function="permutation",
         outcome="success", label="construction", accuracy=None, **measures) -> dict:
    acc = {"success": 1.0, "partial": 0.5, "failed": 0.0}[outcome] if accuracy is None else accuracy
    return dict(case=case, n=n, d_token=d_token, n_layers=n_layers, architecture=architecture,
                function=function, outcome=outcome, label=label, accuracy=acc, **measures)


def table(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["seed"] = range(len(df))  # seeds only name rows here
    return df


# ----------------------------------------------------------------------------- P1


def test_p1_confirmed_refuted_untested():
    permutation_inverted = seed(label="inverted")  # not an "any" seed: does not count
    failed_any = seed(function="any", outcome="failed", label="failed")
    ok = [seed(function="any", n=5 + i % 3) for i in range(30)]
    assert ap.p1(table(ok + [permutation_inverted, failed_any]))["verdict"] == "confirmed"
    bad = ok[:29] + [seed(function="any", label="inverted", case=3, n=20)]
    r = ap.p1(table(bad))
    assert r["verdict"] == "refuted" and r["numbers"]["inverted"] == 1
    assert r["offending"] == ["case 3, n=20, d_token=8, 1 layer, attention-only, any, seed 29"]
    # 29 successful any seeds: below 30, untested, even with an inverted seed among them
    assert ap.p1(table(ok[:29] + [failed_any]))["verdict"] == "untested"
    r = ap.p1(table(ok[:28] + [seed(function="any", label="inverted")]))
    assert r["verdict"] == "untested" and len(r["offending"]) == 1


# ----------------------------------------------------------------------------- P2


def mirrors(n, successes, mirror, extra=()):
    """Two-layer case-5 attention-only permutation seeds at ``n``: ``mirror`` of ``successes``
    labelled mirror, the rest construction."""
    return [seed(case=5, n=n, n_layers=2, label="mirror" if i < mirror else "construction")
            for i in range(successes)] + list(extra)


@pytest.mark.parametrize("per_n, verdict", [
    ({3: (5, 0), 5: (5, 1), 10: (5, 3)}, "confirmed"),            # 0, 0.2, 0.6
    ({3: (10, 5), 5: (5, 2), 10: (5, 5)}, "confirmed"),           # a drop of exactly 0.10 is allowed
    ({3: (5, 2), 5: (5, 1), 10: (5, 5)}, "refuted"),              # 0.4 -> 0.2: drops by 0.2
    ({3: (5, 0), 5: (5, 1), 10: (5, 1)}, "refuted"),              # rises by 0.2 < 0.30
    ({3: (5, 0), 5: (5, 1), 10: (4, 4)}, "untested"),             # n = 10 has 4 successes: 2 such n
])
def test_p2(per_n, verdict):
    rows = [r for n, (k, m) in per_n.items() for r in mirrors(n, k, m)]
    # seeds outside the population change nothing: one layer, mlp-4x, any, failed
    rows += [seed(case=5, n=3, n_layers=1, label="mirror"), seed(case=5, n=3, n_layers=2, function="any"),
             seed(case=5, n=3, n_layers=2, architecture=MLP), seed(case=5, n=3, n_layers=2, outcome="failed",
                                                                 label="failed")]
    r = ap.p2(table(rows))
    assert r["verdict"] == verdict, r
    assert r["verdict"] != "refuted" or r["offending"]


# ----------------------------------------------------------------------------- P3


def circles(count, qk=(), ov=(), n=10, d_token=8):
    return [seed(n=n, d_token=d_token, qk_circle=i in qk, ov_circle=i in ov) for i in range(count)]


def test_p3_confirmed_refuted_untested():
    assert ap.p3(table(circles(40, qk={0})))["verdict"] == "confirmed"      # 1/40 = 2.5%
    r = ap.p3(table(circles(40, qk={0}, ov={1})))                           # 2/40 = 5%: at 5%
    assert r["verdict"] == "refuted" and r["numbers"]["all successful seeds"] == "2/40 (5.0%)"
    assert ap.p3(table(circles(39, qk={0, 1, 2})))["verdict"] == "untested"  # no slice of 40
    failed = [seed(outcome="failed", label="failed", qk_circle=True) for _ in range(5)]
    assert ap.p3(table(circles(40, qk={0}) + failed))["verdict"] == "confirmed"  # failed seeds not counted
    # values back from a CSV: "True"/"False" text and NaN (n < 4: no circle test)
    back = table(circles(40)).astype({"qk_circle": object, "ov_circle": object})
    back.loc[0, "qk_circle"], back.loc[1, "ov_circle"], back.loc[2, "qk_circle"] = "True", "True", math.nan
    assert ap.p3(back)["verdict"] == "refuted"


def test_p3_slices_n_from_5_and_every_d_token():
    rows = circles(20, n=4, d_token=4) + circles(20, n=10, d_token=8, qk={0})
    r = ap.p3(table(rows + circles(20, n=10, d_token=4)))
    # n = 4 is no slice; n = 10 (40 seeds) and d_token = 4 (40) and all (60) are
    assert "n=4" not in r["numbers"] and set(r["numbers"]) >= {"n=10", "d_token=4", "all successful seeds"}
    assert "d_token=8" not in r["numbers"] and r["verdict"] == "confirmed"
    # 2 of the 40 seeds at n = 4 pass (5%), but n = 4 is no slice, d_token 2 and 4 hold 20 each
    # and all 80 seeds hold 2.5%: confirmed
    rows = circles(20, n=4, d_token=2, qk={0}) + circles(20, n=4, d_token=4, ov={0}) + circles(40)
    assert ap.p3(table(rows))["verdict"] == "confirmed"
    assert ap.p3(table(rows + circles(20, n=4, d_token=2, qk={1})))["verdict"] == "refuted"  # d_token 2: 2/40


# ----------------------------------------------------------------------------- P4


def widths(case, n, least, run=(2, 4, 8, 16, 32)):
    """Attention-only permutation seeds of (case, n): success from ``least`` up (None: never)."""
    return [seed(case=case, n=n, d_token=d, outcome="success" if least and d >= least else "failed",
                 label="construction" if least and d >= least else "failed") for d in run]


def test_p4_confirmed_refuted_untested():
    # g(1) = log2 32 - log2 4 = 3, g(4) = log2 64 - log2 8 = 3, g(2) = 2, g(3) = 1
    base = {(1, 5): 4, (1, 50): 32, (4, 5): 8, (4, 50): None, (2, 5): 2, (2, 50): 8, (3, 5): 2, (3, 50): 4}
    rows = [r for (c, n), least in base.items() for r in widths(c, n, least)]
    # outside d_min's population: an mlp-4x success and an "any" success at d_token 2
    rows += [seed(case=1, n=50, d_token=2, architecture=MLP), seed(case=1, n=50, d_token=2, function="any")]
    r = ap.p4(table(rows))
    assert r["verdict"] == "confirmed", r
    assert r["numbers"]["d_min"]["case 4, n=50"] == 64 and r["numbers"]["d_min"]["case 1, n=50"] == 32
    assert (r["numbers"]["(g(2)+g(3))/2"], r["numbers"]["(g(1)+g(4))/2"]) == (1.5, 3.0)
    swapped = {(1, 5): 2, (1, 50): 4, (4, 5): 2, (4, 50): 4, (2, 5): 4, (2, 50): 32, (3, 5): 8, (3, 50): None}
    rows = [r for (c, n), least in swapped.items() for r in widths(c, n, least)]
    assert ap.p4(table(rows))["verdict"] == "refuted"
    equal = {(c, n): 4 for c in (1, 2, 3, 4) for n in (5, 50)}  # every g = 0: "refuted if >="
    assert ap.p4(table([r for (c, n), v in equal.items() for r in widths(c, n, v)]))["verdict"] == "refuted"
    few = {(1, 5): 4, (2, 5): 2}  # two d_min <= 32, six never succeed (64)
    r = ap.p4(table([r for (c, n), v in few.items() for r in widths(c, n, v)] + widths(3, 50, None)))
    assert r["verdict"] == "untested" and r["numbers"]["d_min <= 32"] == 2


# ----------------------------------------------------------------------------- P5


def test_p5_confirmed_refuted_untested():
    one = dict(case=5, n_layers=1, outcome="partial", label="none")
    others = [seed(case=5, n_layers=2, accuracy=0.99), seed(case=5, n_layers=1, architecture=MLP, accuracy=0.99),
              seed(case=5, n_layers=1, function="any", outcome="partial", accuracy=0.9)]
    assert ap.p5(table([seed(accuracy=0.75, **one), seed(accuracy=0.76, **one)] + others))["verdict"] == "confirmed"
    r = ap.p5(table([seed(accuracy=0.75, **one), seed(accuracy=0.7601, n=5, **one)] + others))
    assert r["verdict"] == "refuted" and len(r["offending"]) == 1 and "n=5" in r["offending"][0]
    assert ap.p5(table(others))["verdict"] == "untested"


# ----------------------------------------------------------------------------- P6


def mlp5(n=5, d_token=16, outcome="success", **measures):
    return seed(case=5, n=n, d_token=d_token, architecture=MLP, outcome=outcome,
                label="none" if outcome != "failed" else "failed", **measures)


GOOD = dict(entropy=0.6, acc_mean_mlp=0.25)  # n = 5: chance 0.2, + 10 points = 0.30


def test_p6_a_and_b():
    narrow_failed = mlp5(d_token=8, outcome="failed")  # 8 < 2 * 5 + 2: (a)'s population
    good = [mlp5(**GOOD) for _ in range(3)]
    r = ap.p6(table(good + [narrow_failed]))
    assert r["verdict"] == "confirmed" and r["numbers"]["(a) verdict"] == "confirmed"
    # (a): a success at d_token 8 < 12 refutes; at d_token 12 = 2n + 2 it does not
    r = ap.p6(table(good + [mlp5(d_token=8, **GOOD)]))
    assert r["verdict"] == "refuted" and r["numbers"]["(a) verdict"] == "refuted"
    assert ap.p6(table(good + [narrow_failed, mlp5(d_token=12, **GOOD)]))["verdict"] == "confirmed"
    # (b): one seed with focused attention, or an MLP the answer needs too little
    for bad in (dict(entropy=0.49, acc_mean_mlp=0.25), dict(entropy=0.6, acc_mean_mlp=0.31)):
        r = ap.p6(table(good + [narrow_failed, mlp5(**bad)]))
        assert r["verdict"] == "refuted" and r["numbers"]["(b) verdict"] == "refuted", bad
    # attn_entropy, where present, is the entropy read
    r = ap.p6(table(good + [narrow_failed, mlp5(entropy=0.4, attn_entropy=0.7, acc_mean_mlp=0.25)]))
    assert r["verdict"] == "confirmed"
    # (b) below 3 successful seeds at n >= 5 (n = 3 does not count): untested
    r = ap.p6(table(good[:2] + [mlp5(n=3, d_token=8, **GOOD), narrow_failed]))
    assert r["verdict"] == "untested" and r["numbers"]["(a) verdict"] == "confirmed"
    # without acc_mean_mlp (not measured): untested, not refuted
    r = ap.p6(table([mlp5(entropy=0.6) for _ in range(3)] + [narrow_failed]))
    assert r["numbers"]["(b) verdict"] == "untested" and r["verdict"] == "untested"
    # no seed at d_token < 2n + 2: (a) untested
    assert ap.p6(table(good))["numbers"]["(a) verdict"] == "untested"
    # (a) is one-layer mlp-4x only: narrow successes of two layers or attention-only do not refute
    others = [mlp5(d_token=8, n_layers=2, **GOOD), dict(mlp5(d_token=8, **GOOD), architecture=ATTN)]
    assert ap.p6(table(good + [narrow_failed] + others))["verdict"] == "confirmed"


# ----------------------------------------------------------------------------- P7


def mlp14(label="construction", kept=0.95, case=1):
    return seed(case=case, architecture=MLP, label=label, acc_mean_mlp=kept)


def test_p7_confirmed_refuted_untested():
    ok = [mlp14(case=1 + i % 4) for i in range(6)] + [mlp14(label="inverted")] * 2
    rows = ok + [mlp14(label="none", kept=0.5)] * 2  # 8 of 10 on both counts: 80%
    outside = [seed(case=5, architecture=MLP, label="none", acc_mean_mlp=0.1), seed(label="none"),
               seed(case=4, n_layers=2, architecture=MLP, label="none", acc_mean_mlp=0.1)]  # two layers
    assert ap.p7(table(rows + outside))["verdict"] == "confirmed"
    assert ap.p7(table(ok[:7] + [mlp14(label="none")] * 3))["verdict"] == "refuted"  # labels 7/10
    assert ap.p7(table(ok[:7] + [mlp14(kept=0.89)] * 3))["verdict"] == "refuted"  # kept 7/10
    assert ap.p7(table(rows[:9]))["verdict"] == "untested"  # 9 successful seeds
    no_ablation = table(rows).drop(columns="acc_mean_mlp")
    assert ap.p7(no_ablation)["verdict"] == "untested"
    # some not measured: undecided unless the measured ones already sink the share
    assert ap.p7(table([mlp14()] * 9 + [mlp14(kept=math.nan)]))["verdict"] == "untested"
    sunk = [mlp14(kept=0.5)] * 5 + [mlp14(kept=math.nan)] + [mlp14()] * 4  # at most 5/10 keep
    assert ap.p7(table(sunk))["verdict"] == "refuted"


def test_p7_reads_the_routing_on_a_two_level_atlas():
    """Issue 42: the two-level label ``lookup-codebook`` is the old ``construction``'s routing
    (``routing`` lookup), so P7 counts it; an old row (no routing) is read by its label."""
    two = [dict(mlp14(label="lookup-codebook"), routing="lookup") for _ in range(8)]
    two += [dict(mlp14(label="other"), routing="other")] * 2
    r = ap.p7(table(two))
    assert r["verdict"] == "confirmed" and r["numbers"]["construction or inverted"].startswith("8 ")
    mixed = two[:7] + [dict(mlp14(label="construction"), routing=None)] + two[8:]
    assert ap.p7(table(mixed))["numbers"]["construction or inverted"].startswith("8 ")
    strict = [dict(mlp14(label="lookup-codebook"), routing="other") for _ in range(3)] + two[3:]
    assert ap.p7(table(strict))["verdict"] == "refuted"  # 5 of 10 route like the construction


# ----------------------------------------------------------------------------- P8


def pair(n, d, k2, k3, arch=ATTN):
    """Five seeds of case 2 with ``k2`` successes and five of case 3 with ``k3``."""
    return [seed(case=c, n=n, d_token=d, architecture=arch, outcome="success" if i < k else "failed",
                 label="construction" if i < k else "failed")
            for c, k in ((2, k2), (3, k3)) for i in range(5)]


def test_p8_confirmed_refuted_untested():
    cells = [pair(n, d, 3, 4) for n in (5, 10) for d in (2, 4, 8, 16)] + [pair(20, 2, 0, 0)]
    assert ap.p8(table([r for c in cells + [pair(20, 4, 5, 3)] for r in c]))["verdict"] == "confirmed"  # 9/10
    r = ap.p8(table([r for c in cells[:8] + [pair(20, 4, 5, 3), pair(20, 8, 0, 2)] for r in c]))
    assert r["verdict"] == "refuted" and r["numbers"]["within 1"] == 8 and len(r["offending"]) == 2
    only3 = [r for r in pair(5, 2, 0, 5) if r["case"] == 3]
    assert ap.p8(table(only3))["verdict"] == "untested"
    anyf = [dict(r, function="any") for r in pair(5, 2, 0, 5)]  # "any" is not P8's population
    assert ap.p8(table(anyf))["verdict"] == "untested"


# ----------------------------------------------------------------------------- P9


def row(case, n, succ, run=(2, 4, 8, 16, 32), arch=ATTN, function="permutation"):
    return [seed(case=case, n=n, d_token=d, architecture=arch, function=function,
                 outcome="success" if d in succ else "failed", label="construction" if d in succ else "failed")
            for d in run]


def test_p9_confirmed_refuted_untested():
    closed = [row(1, n, {8, 16, 32}) for n in (3, 5, 10, 20, 50)]
    closed += [row(2, n, {16, 32}, run=(4, 8, 16, 32), arch=MLP) for n in (10, 50)]
    closed += [row(3, 3, {32}), row(4, 3, {4, 8, 16, 32}, function="any")]
    never = [row(4, 50, set())]  # no success: not a row of P9
    broken = [row(3, 5, {8, 32})]
    assert ap.p9(table([r for x in closed + never + broken for r in x]))["verdict"] == "confirmed"  # 1/10
    r = ap.p9(table([r for x in closed[:8] + broken + [row(3, 10, {4})] for r in x]))
    assert r["verdict"] == "refuted" and r["numbers"]["not upward-closed"] == 2  # 2/10
    assert ap.p9(table([r for x in never for r in x]))["verdict"] == "untested"
    case5 = [row(5, 10, {8})]  # case 5 is not P9's
    assert ap.p9(table([r for x in case5 for r in x]))["verdict"] == "untested"


def test_predictions_returns_p1_to_p9_with_a_verdict_each():
    out = ap.predictions(table([seed()]))
    assert [p["name"] for p in out] == [f"P{i}" for i in range(1, 10)]
    assert all(p["verdict"] in ap.VERDICTS and isinstance(p["numbers"], dict) for p in out)


# ----------------------------------------------------------------------------- readings fixed on review


def test_unmeasured_successes_count_neither_for_nor_against_a_mechanism():
    """A successful seed without its checkpoint (label "unmeasured", no measures) is left out:
    40 of them would otherwise confirm P1 and P3, and refute P7."""
    unmeasured_any = [seed(function="any", n=10 + i % 3, label="unmeasured") for i in range(40)]
    r = ap.p1(table(unmeasured_any))
    assert r["verdict"] == "untested" and r["numbers"]["unmeasured (left out)"] == 40
    assert ap.p3(table(unmeasured_any))["verdict"] == "untested"  # no circle test to count
    mlp = [seed(case=1, architecture=MLP, acc_mean_mlp=0.99) for _ in range(10)]
    assert ap.p7(table(mlp + [seed(case=2, architecture=MLP, label="unmeasured")] * 10))["verdict"] == "confirmed"


def test_p3_leaves_out_seeds_without_a_circle_test():
    """n = 3 has no circle test (None): 3 circles among the d_token 32 slice's 42 tested seeds
    are 7.1%, refuted, though with its 20 untested seeds counted it would read 3/62 = 4.8%."""
    tested = [seed(n=5 + i % 2, d_token=32, qk_circle=i < 3, ov_circle=False) for i in range(42)]
    no_test = [seed(n=3, d_token=32, qk_circle=None, ov_circle=None) for _ in range(20)]
    many = [seed(n=20, d_token=8, qk_circle=False, ov_circle=False) for _ in range(40)]
    r = ap.p3(table(tested + no_test + many))
    assert r["verdict"] == "refuted" and r["numbers"]["successful seeds without a circle test (left out)"] == 20
    assert r["numbers"]["d_token=32"].startswith("3/42")
    assert ap.p3(table([dict(s, qk_circle="False") for s in tested] + many))["verdict"] == "confirmed"  # CSV text


def test_p4_and_p9_keep_one_and_two_layers_apart():
    """The full grid runs case 4 at two layers too: another model, not more widths of one."""
    two = [seed(case=4, n=50, d_token=2, n_layers=2)]
    one = [seed(case=4, n=50, d_token=d, outcome="failed", label="failed") for d in (2, 4, 8, 16, 32)]
    assert ap.d_min(table(one + two), 4, 50) == 64
    closed_one = [seed(case=4, n=10, d_token=d, outcome="success" if d >= 16 else "failed") for d in (4, 8, 16, 32)]
    closed_two = [seed(case=4, n=10, n_layers=2, d_token=d, outcome="success" if d in (4, 8) else "failed")
                  for d in (4, 8, 16)]  # not closed on its own: 4, 8 succeed, 16 fails
    r = ap.p9(table(closed_one + closed_two))
    assert r["numbers"]["rows with a success"] == 2 and r["numbers"]["not upward-closed"] == 1
    # the runs P4 reports behind d_min(4, 50) are the five one-layer runs d_min read, not the two-layer one
    assert ap.p4(table(one + two))["numbers"]["runs behind each d_min"]["case 4, n=50"] == 5


def test_p5_leaves_out_runs_without_an_accuracy():
    """A run whose training failed has no accuracy (NaN): it cannot confirm "no seed passes 76%"."""
    crashed = [seed(case=5, n=5, outcome="failed", label="failed", accuracy=math.nan) for _ in range(3)]
    r = ap.p5(table(crashed))
    assert r["verdict"] == "untested" and r["numbers"]["without an accuracy (left out)"] == 3
    assert ap.p5(table(crashed + [seed(case=5, n=5, outcome="partial", accuracy=0.7)]))["verdict"] == "confirmed"
    assert ap.p5(table(crashed + [seed(case=5, n=5, outcome="partial", accuracy=0.77)]))["verdict"] == "refuted"


def test_p2_counts_measured_successes_toward_its_five_per_n():
    """4 measured and 1 unmeasured success at n = 10: that n has 4, below P2's 5, so only two n
    qualify and P2 is untested; with the fifth measured it is confirmed."""
    per_n = mirrors(3, 5, 0) + mirrors(5, 5, 2) + mirrors(10, 4, 4)
    unmeasured = seed(case=5, n=10, n_layers=2, label="unmeasured")
    r = ap.p2(table(per_n + [unmeasured]))
    assert r["verdict"] == "untested" and r["numbers"]["measured successful seeds per n"][10] == 4
    assert ap.p2(table(per_n + [dict(unmeasured, label="mirror")]))["verdict"] == "confirmed"


def test_every_prediction_states_its_reading_and_the_atlas_prints_them():
    """Each prediction's reading of its declaration reaches the output (atlas.md), as does every
    shared reading, so a reader sees how an ambiguous definition was read without the code."""
    from interp.inspect.studies import atlas

    preds = ap.predictions(table([seed()]))
    assert all(len(p["reading"]) > 40 and "``" not in p["reading"] for p in preds)
    assert "one layer only" in preds[3]["reading"] and "inverted circle" in preds[2]["reading"]
    shared = ap.shared_readings()
    assert len(shared) == 5 and shared[-1].startswith("Fractions are compared exactly")
    text = "\n".join(atlas.predictions_markdown(preds))
    assert all(f"- {p['name']}: {p['reading']}" in text for p in preds)
    assert all(f"- {t}" in text for t in shared)


def test_every_prediction_takes_a_table_without_successes():
    """A small grid where nothing succeeds (make run's demo can be one): every verdict untested."""
    none = table([seed(outcome="failed", label="failed", qk_circle=None, ov_circle=None)])
    assert {r["verdict"] for r in ap.predictions(none)} <= {"untested", "confirmed"}
    assert ap.p3(none)["verdict"] == "untested"
