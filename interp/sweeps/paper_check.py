"""Is a paper's reported max and mean over its seeds consistent with our per-seed distribution?
A test per table cell with a noise model (issue 53), pure functions of numbers.

The null of :func:`predictive_p`: the paper's ``seeds`` seeds are independent draws from our
per-seed distribution, estimated by our N seeds with weight 1/N each. A statistic s (the max or
the mean of the draws) has at a value v the two-sided tail ``t_s(v) = min(P(S <= v + tol),
P(S >= v - tol))``; a draw is *at least as far from ours as the paper* when
``min(t_max(its max), t_mean(its mean)) <= min(t_max(M), t_mean(A))``. The p-value is that
draw's probability, computed exactly over every multiset of ``seeds`` of our N seeds (with its
multinomial weight) while there are at most :data:`EXACT_LIMIT` of them, else by
:data:`MONTE_CARLO_DRAWS` seeded draws (said in the result). It takes our N seeds as the
distribution, so it is anti-conservative when N is small: :func:`fisher_p` checks the success
rate with the uncertainty of both samples.

Success counts (a seed at >= :data:`SUCCESS` %) and at-chance counts (below
:func:`chance_line`) come with exact Clopper-Pearson intervals (:func:`clopper_pearson`);
:func:`holm` adjusts a family of p-values. Accuracies are in percent, as in the paper.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

SUCCESS = 99.0  # a seed "learns" at >= 99% (the project's success threshold)
TOLERANCE = 1.0  # points within which two accuracies count as equal (experiments/paper-check/DESIGN.md)
EXACT_LIMIT = 2_000_000  # multisets enumerated exactly; above it, Monte Carlo
MONTE_CARLO_DRAWS = 200_000
LEVEL = 0.95


def _check_accuracies(ours: Sequence[float], what: str = "ours") -> list[float]:
    values = [float(x) for x in ours]
    if not values:
        raise ValueError(f"{what}: no per-seed accuracies; accepted: one or more numbers in [0, 100]")
    bad = [x for x in values if not (0.0 <= x <= 100.0)]  # NaN fails too
    if bad:
        raise ValueError(f"{what}: accuracies {bad} outside [0, 100] (percent)")
    return values


def _check_paper(paper_max: float, paper_avg: float, seeds: int) -> None:
    if not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds={seeds!r}; accepted: a positive int (the paper's seeds per cell)")
    for name, v in (("paper_max", paper_max), ("paper_avg", paper_avg)):
        if not (0.0 <= float(v) <= 100.0):
            raise ValueError(f"{name}={v!r}; accepted: a number in [0, 100] (percent)")
    if float(paper_avg) > float(paper_max) + 0.01:  # printed to 2 decimals
        raise ValueError(f"paper_avg={paper_avg!r} above paper_max={paper_max!r}: no {seeds} seeds give that")


def chance_line(chance: float) -> float:
    """A seed is *at chance* below this accuracy: a tenth of the way from chance to 100%."""
    if not (0.0 < chance < 100.0):
        raise ValueError(f"chance={chance!r}; accepted: 100/n for n >= 2, in (0, 100)")
    return chance + (100.0 - chance) / 10.0


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided ``level`` interval for a rate seen k times in n."""
    from scipy.stats import beta

    if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k <= n):
        raise ValueError(f"k={k!r}, n={n!r}; accepted: ints with 0 <= k <= n and n >= 1")
    if not (0.0 < level < 1.0):
        raise ValueError(f"level={level!r}; accepted: a number in (0, 1)")
    a = (1.0 - level) / 2.0
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - a, k + 1, n - k))
    return lo, hi


def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score two-sided ``level`` interval for a rate seen k times in n (scipy's);
    (nan, nan) for n = 0, where no rate was seen."""
    from scipy.stats import binomtest

    if n == 0:
        return float("nan"), float("nan")
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def paper_successes(paper_max: float, paper_avg: float, seeds: int = 5) -> tuple[int, int]:
    """The range (inclusive) of the paper's seeds at >= :data:`SUCCESS` that its max and mean allow.
    None when the max is below it. Else at least one, and more than ``seeds * avg - seeds *
    SUCCESS`` over ``100 - SUCCESS`` (the seeds sum to ``seeds * avg``, failures below SUCCESS,
    successes at most 100); at most ``floor(seeds * avg / SUCCESS)`` (successes at least SUCCESS)."""
    _check_paper(paper_max, paper_avg, seeds)
    if paper_max < SUCCESS:
        return 0, 0
    total = seeds * float(paper_avg)
    hi = min(seeds, math.floor(total / SUCCESS + 1e-9))
    lo = min(seeds, max(1, math.floor((total - seeds * SUCCESS) / (100.0 - SUCCESS)) + 1))
    if hi < 1:
        raise ValueError(f"paper_max={paper_max!r} with paper_avg={paper_avg!r}: a seed at >= {SUCCESS}% "
                         f"puts the mean of {seeds} seeds at >= {SUCCESS / seeds:.2f}")
    return lo, hi


def fisher_p(k: int, n: int, paper_range: tuple[int, int], seeds: int = 5) -> float:
    """Fisher's exact two-sided p for our k of n successes against the paper's s of ``seeds``,
    the largest over the paper's possible s (``paper_range``, inclusive): conservative."""
    from scipy.stats import fisher_exact

    lo, hi = paper_range
    if not (0 <= lo <= hi <= seeds):
        raise ValueError(f"paper_range={paper_range!r}; accepted: 0 <= lo <= hi <= seeds={seeds}")
    clopper_pearson(k, n)  # validates k and n
    return max(float(fisher_exact([[k, n - k], [s, seeds - s]]).pvalue) for s in range(lo, hi + 1))


@dataclass(frozen=True)
class Predictive:
    p: float
    exact: bool  # False: Monte Carlo with MONTE_CARLO_DRAWS draws
    t_max: float  # the paper's max's two-sided tail under ours
    t_avg: float  # the paper's mean's
    median_max: float  # the median, under ours, of the max of ``seeds`` draws
    median_avg: float  # and of their mean


def _draws(n: int, seeds: int):
    """(index array draws x seeds, weight per draw): every multiset exactly, or Monte Carlo."""
    import numpy as np

    count = math.comb(n + seeds - 1, seeds)
    if count <= EXACT_LIMIT:
        idx = np.array(list(itertools.combinations_with_replacement(range(n), seeds)), dtype=np.int64)
        counts = np.stack([(idx == j).sum(axis=1) for j in range(n)], axis=1)
        log_w = (math.lgamma(seeds + 1) - np.vectorize(math.lgamma)(counts + 1).sum(axis=1)
                 - seeds * math.log(n))
        return idx, np.exp(log_w), True
    rng = np.random.default_rng(0)
    return rng.integers(0, n, size=(MONTE_CARLO_DRAWS, seeds)), np.full(MONTE_CARLO_DRAWS,
                                                                          1.0 / MONTE_CARLO_DRAWS), False


def _tails(values, weights, tol: float):
    """t(v) for every v in ``values`` and a function for any other v: min of the two tails."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.concatenate([[0.0], np.cumsum(w)])
    total = cum[-1]

    def t(x):
        x = np.asarray(x, dtype=float)
        below = cum[np.searchsorted(v, x + tol, side="right")]  # P(S <= x + tol)
        above = total - cum[np.searchsorted(v, x - tol, side="left")]  # P(S >= x - tol)
        return np.minimum(below, above)
    return t


def predictive_p(ours: Sequence[float], paper_max: float, paper_avg: float, seeds: int = 5,
                 tol: float = TOLERANCE) -> Predictive:
    """The predictive check of the module docstring: p of a draw of ``seeds`` from ``ours`` at
    least as far from ours as the paper's (max, mean)."""
    import numpy as np

    x = np.asarray(_check_accuracies(ours), dtype=float)
    _check_paper(paper_max, paper_avg, seeds)
    if not (tol >= 0.0):
        raise ValueError(f"tol={tol!r}; accepted: a number >= 0 (points)")
    idx, w, exact = _draws(len(x), seeds)
    mx, avg = x[idx].max(axis=1), x[idx].mean(axis=1)
    t_mx, t_avg = _tails(mx, w, tol), _tails(avg, w, tol)
    depth = np.minimum(t_mx(mx), t_avg(avg))
    paper_t_max, paper_t_avg = float(t_mx(paper_max)), float(t_avg(paper_avg))
    paper_depth = min(paper_t_max, paper_t_avg)
    p = float(w[depth <= paper_depth + 1e-12].sum())
    return Predictive(p=min(1.0, p), exact=exact, t_max=min(1.0, paper_t_max), t_avg=min(1.0, paper_t_avg),
                      median_max=_median(mx, w), median_avg=_median(avg, w))


def _median(values, weights) -> float:
    """The lower weighted median."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0)])


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order (NaN stays NaN, not counted)."""
    ps = [float(p) for p in pvalues]
    if any(not math.isnan(p) and not (0.0 <= p <= 1.0) for p in ps):
        raise ValueError(f"pvalues {ps}: accepted numbers in [0, 1] (or NaN for untested)")
    tested = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    m, out, running = len(tested), list(ps), 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


@dataclass(frozen=True)
class CellCheck:
    """One cell's check: our seeds' counts with their intervals, the paper's possible successes,
    the predictive check and Fisher's test, each Holm-adjusted over the family's informative cells."""

    n_seeds: int
    successes: int  # our seeds at >= SUCCESS
    success_ci: tuple[float, float]
    at_chance: int  # our seeds below chance_line
    chance_ci: tuple[float, float]
    paper_range: tuple[int, int]  # the paper's seeds at >= SUCCESS that its max and mean allow
    predictive: Predictive
    fisher: float
    informative: bool
    p_holm: float | None = None  # None: a non-informative cell, outside the family
    fisher_holm: float | None = None
    alpha: float = 0.05

    @property
    def outside(self) -> bool:
        """The paper lies outside our distribution (Holm-adjusted predictive p below alpha)."""
        return self.p_holm is not None and self.p_holm < self.alpha

    @property
    def rate_differs(self) -> bool:
        return self.fisher_holm is not None and self.fisher_holm < self.alpha


def check_cell(accuracies: Sequence[float], paper_max: float, paper_avg: float, chance: float, *,
               informative: bool = True, seeds: int = 5, tol: float = TOLERANCE) -> CellCheck:
    """Everything but the correction, for one cell (accuracies in %, chance = 100/n)."""
    ours = _check_accuracies(accuracies)
    k = sum(a >= SUCCESS for a in ours)
    c = sum(a < chance_line(chance) for a in ours)
    paper_range = paper_successes(paper_max, paper_avg, seeds)
    return CellCheck(n_seeds=len(ours), successes=k, success_ci=clopper_pearson(k, len(ours)), at_chance=c,
                     chance_ci=clopper_pearson(c, len(ours)), paper_range=paper_range,
                     predictive=predictive_p(ours, paper_max, paper_avg, seeds, tol),
                     fisher=fisher_p(k, len(ours), paper_range, seeds), informative=bool(informative))


def corrected(checks: Sequence[CellCheck | None], alpha: float = 0.05) -> list[CellCheck | None]:
    """The checks with Holm's adjustment over the informative ones (None: an untested cell)."""
    import dataclasses

    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha={alpha!r}; accepted: a number in (0, 1)")
    family = [i for i, c in enumerate(checks) if c is not None and c.informative]
    p = holm([checks[i].predictive.p for i in family])
    f = holm([checks[i].fisher for i in family])
    out = list(checks)
    for i, pi, fi in zip(family, p, f):
        out[i] = dataclasses.replace(checks[i], p_holm=pi, fisher_holm=fi, alpha=alpha)
    return out


def informative_config(config) -> bool:
    """False where any model of the family is at chance by construction (DESIGN.md section 1 of
    experiments/paper-check): cases 1 and 4 without positional embeddings on permutations, whose
    final position sees the same multiset of other tokens in every input."""
    return not (config.case in (1, 4) and config.pos_embed == "none" and config.function == "permutation")
