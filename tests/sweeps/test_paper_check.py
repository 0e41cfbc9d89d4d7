"""The per-cell test of the paper's numbers (interp.sweeps.paper_check).

References, each computed here independently of the module: the predictive p by brute force over
every ordered tuple of draws (plain Python, the definition read literally), Clopper-Pearson's
bounds by the binomial tails they must hit (scipy.stats.binom), Fisher's p from the
hypergeometric law written with math.comb, Holm by hand, the paper's possible successes by
enumerating seed values on a grid. The synthetic tables: paper numbers drawn from our
distribution must pass; numbers drawn elsewhere must be flagged.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from interp.sweeps import paper_check as pc


def brute_p(ours, paper_max, paper_avg, seeds=5, tol=1.0) -> float:
    """The predictive p by the definition, over all N**seeds ordered draws (each 1/N**seeds)."""
    draws = [(max(d), sum(d) / seeds) for d in itertools.product(ours, repeat=seeds)]
    w = 1.0 / len(draws)

    def tail(index, v):
        below = sum(w for d in draws if d[index] <= v + tol)
        above = sum(w for d in draws if d[index] >= v - tol)
        return min(below, above)

    memo = {}
    def depth(mx, avg):
        key = (mx, avg)
        if key not in memo:
            memo[key] = min(tail(0, mx), tail(1, avg))
        return memo[key]
    paper = depth(paper_max, paper_avg)
    return sum(w for mx, avg in draws if depth(mx, avg) <= paper + 1e-12)


@pytest.mark.parametrize("ours, paper", [
    ([3.33, 98.97, 99.08, 3.47, 96.11], (100.0, 62.5)),   # bimodal, paper inside
    ([1.0, 1.2, 0.9, 40.0, 2.0], (99.9, 61.7)),            # paper far above
    ([100.0, 100.0, 99.5, 12.0], (100.0, 99.9)),           # ties at the ceiling, N = 4
    ([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], (35.0, 20.0)),  # the mean low, the max typical
])
def test_predictive_p_equals_the_definition_by_brute_force(ours, paper):
    got = pc.predictive_p(ours, *paper, seeds=4 if len(ours) == 6 else 5)
    assert got.exact
    assert got.p == pytest.approx(brute_p(ours, *paper, seeds=4 if len(ours) == 6 else 5), abs=1e-9)


def test_monte_carlo_agrees_with_the_exact_enumeration(monkeypatch):
    ours = [2.0, 5.0, 97.0, 99.5, 100.0, 45.0, 3.0]
    exact = pc.predictive_p(ours, 99.9, 70.0)
    monkeypatch.setattr(pc, "EXACT_LIMIT", 0)
    mc = pc.predictive_p(ours, 99.9, 70.0)
    assert not mc.exact and mc.p == pytest.approx(exact.p, abs=0.01)


def test_predictive_p_is_valid_when_the_paper_draws_from_our_seeds():
    """Under the null exactly (the paper's 5 seeds drawn from ours), P(p <= a) <= a."""
    rng = random.Random(7)
    ours = [1.0, 1.5, 2.0, 30.0, 60.0, 98.0, 99.5, 100.0, 100.0, 4.0]
    ps = []
    for _ in range(300):
        draw = [rng.choice(ours) for _ in range(5)]
        ps.append(pc.predictive_p(ours, max(draw), sum(draw) / 5).p)
    for a in (0.05, 0.1, 0.2):
        assert sum(p <= a for p in ps) / len(ps) <= a + 0.04


def test_clopper_pearson_hits_its_binomial_tails():
    from scipy.stats import binom

    for k, n in ((0, 5), (3, 10), (15, 15), (1, 7)):
        lo, hi = pc.clopper_pearson(k, n)
        if k > 0:
            assert binom.sf(k - 1, n, lo) == pytest.approx(0.025, abs=1e-9)  # P(X >= k | lo)
        else:
            assert lo == 0.0
        if k < n:
            assert binom.cdf(k, n, hi) == pytest.approx(0.025, abs=1e-9)  # P(X <= k | hi)
        else:
            assert hi == 1.0
    assert pc.clopper_pearson(0, 5)[1] == pytest.approx(1 - 0.025 ** (1 / 5))


def hypergeometric_two_sided(a, b, c, d) -> float:
    """Fisher's two-sided p of [[a, b], [c, d]]: tables with the margins no more likely than it."""
    row, col, total = a + b, a + c, a + b + c + d
    prob = lambda x: math.comb(col, x) * math.comb(total - col, row - x) / math.comb(total, row)  # noqa: E731
    seen = prob(a)
    return sum(prob(x) for x in range(max(0, row + col - total), min(row, col) + 1) if prob(x) <= seen * (1 + 1e-7))


def test_fisher_p_takes_the_largest_over_the_papers_possible_successes():
    for k, n, rng in ((0, 15, (1, 3)), (12, 15, (5, 5)), (2, 10, (0, 0)), (5, 10, (1, 4))):
        want = max(hypergeometric_two_sided(k, n - k, s, 5 - s) for s in range(rng[0], rng[1] + 1))
        assert pc.fisher_p(k, n, rng) == pytest.approx(want, rel=1e-9)


def test_holm_by_hand():
    got = pc.holm([0.01, 0.04, 0.03, float("nan"), 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 (m = 4): 0.04, max(0.04, 0.09), max(0.09, 0.08), max(0.09, 0.5)
    assert got[0] == pytest.approx(0.04) and got[2] == pytest.approx(0.09)
    assert got[1] == pytest.approx(0.09) and math.isnan(got[3]) and got[4] == pytest.approx(0.5)


def test_paper_successes_contain_every_count_the_numbers_allow():
    grid = [0.0, 10.0, 50.0, 98.9, 99.0, 99.5, 100.0]
    for seeds in itertools.combinations_with_replacement(grid, 5):
        mx, avg = max(seeds), round(sum(seeds) / 5, 2)
        lo, hi = pc.paper_successes(mx, avg)
        assert lo <= sum(s >= 99.0 for s in seeds) <= hi, (seeds, lo, hi)


@pytest.mark.parametrize("call, words", [
    (lambda: pc.predictive_p([], 50, 40), "no per-seed accuracies"),
    (lambda: pc.predictive_p([0.5, 101.0], 50, 40), "outside [0, 100]"),
    (lambda: pc.predictive_p([50.0], 50, 60), "above paper_max"),
    (lambda: pc.clopper_pearson(6, 5), "0 <= k <= n"),
    (lambda: pc.paper_successes(99.5, 10.0), "puts the mean"),
    (lambda: pc.holm([0.2, 1.5]), "[0, 1]"),
])
def test_bad_input_is_named(call, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        call()


def mixture(rng, rate, n):
    """Seeds of a bimodal cell: at 99.5-100 with probability ``rate``, else near chance."""
    return [round(rng.uniform(99.5, 100.0), 2) if rng.random() < rate else round(rng.uniform(0.8, 3.0), 2)
            for _ in range(n)]


def synthetic_table(rng, paper_rates):
    """Six cells with success rates 0.1-0.9: ours 15 seeds; the paper's 5 seeds drawn at
    ``paper_rates`` (ours when they are the same)."""
    rates = (0.1, 0.3, 0.5, 0.7, 0.9, 0.0)
    checks = []
    for ours_rate, paper_rate in zip(rates, paper_rates):
        ours, paper = mixture(rng, ours_rate, 15), mixture(rng, paper_rate, 5)
        checks.append(pc.check_cell(ours, max(paper), sum(paper) / 5, chance=1.0))
    return pc.corrected(checks)


def test_a_synthetic_table_drawn_from_our_distribution_passes():
    rng = random.Random(53)
    table = synthetic_table(rng, (0.1, 0.3, 0.5, 0.7, 0.9, 0.0))
    assert not any(c.outside or c.rate_differs for c in table)


def test_a_synthetic_table_drawn_elsewhere_is_flagged():
    rng = random.Random(53)
    table = synthetic_table(rng, (1.0, 1.0, 0.0, 0.0, 0.0, 1.0))  # all learned where ours rarely do, ...
    flagged = [i for i, c in enumerate(table) if c.outside]
    assert {0, 4, 5} <= set(flagged)  # rate 0.1 vs 1, 0.9 vs 0, 0 vs 1
    assert table[5].rate_differs and table[4].rate_differs  # 0 of 15 against 5 of 5; ~13 of 15 against 0


def test_non_informative_cells_stay_out_of_the_family():
    a = pc.check_cell([1.0, 1.1, 0.9], 1.1, 1.0, chance=1.0, informative=False)
    b = pc.check_cell([1.0, 1.1, 0.9], 99.0, 99.0, chance=1.0)
    got = pc.corrected([a, None, b])
    assert got[0].p_holm is None and got[1] is None and got[2].p_holm == pytest.approx(b.predictive.p)


def test_wilson_matches_the_closed_form_and_says_nothing_at_n_0():
    """Wilson's score interval, computed here from its closed form (Wilson 1927), and nan at n = 0."""
    import math

    for k, n in ((0, 10), (3, 10), (10, 10), (56, 70)):
        p, z = k / n, 1.959963984540054
        centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        want = ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n))
        assert pc.wilson(k, n) == pytest.approx(want, abs=1e-9)
    assert all(math.isnan(x) for x in pc.wilson(0, 0))
