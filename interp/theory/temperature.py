"""The softmax temperature law: how large an inverse temperature the constructions need.

The paper's footnote conjectures that its hard-attention constructions convert to softmax
attention with an inverse temperature polynomial in n. Here each construction runs with
``softmax(beta * scores)`` (:func:`interp.core.attention.set_attention`) and we find the least beta at
which it is exact (the answer is the unique argmax on every probe input), on random inputs and
on adversarial ones (:class:`interp.theory.precision.ProbeSet` with ``others`` set: every non-target
value of f one fixed distance from the answer on the circle).

Why a polynomial beta suffices (cases 1-4, one layer). Let t be the attended (target) position
and Delta_j = s_t - s_j >= 0 the score gap of every other position j. Softmax gives
alpha_j / alpha_t = exp(-beta Delta_j). The read-out coordinates hold

    out = alpha_t cs(a) + sum_{j != t} alpha_j w_j,     a = f(i*),

where w_j is what position j writes (a unit vector cs(v_j) in cases 2-4; in case 1 the
value-minus-key trick writes cs(t) - cs(j) + cs(v_j), of norm <= 1 + 2 sin(pi |j - t| / N)).
W_U holds the N points cs_N(u), so the prediction is the point nearest to out's angle: it is
right iff out's angle is within pi/N of a's (the output margin). out / alpha_t = cs(a) + e with
|e| <= rho(beta) = sum_j C_j exp(-beta Delta_j), and an angle error of at most arcsin |e|, so

    rho(beta) < sin(pi / N)   is sufficient                      (:func:`beta_sufficient`).

The smallest gap is the score gap g = (1 - cos(2 pi / N)) / sqrt(d_head) (the neighbouring keys);
with all L - 1 other positions at that gap and C = C_max this gives the closed form

    beta_crude = ln((L - 1) C_max / sin(pi / N)) / g  =  O(n^2 log n)    (:func:`beta_crude`).

The adversary that meets the bound puts every non-target value at a + N/4 (perpendicular to
the answer): then e is one vector of length rho at angle ~pi/2 and the angle error is
atan(rho), so beta_min on that family is where rho(beta) = tan(pi/N) (for cases 2 and 3,
:func:`beta_adversarial` predicts it to the bisection tolerance).

Case 5 (two layers). In layer 1 the positions 2k and 2k+1 carry the same pair index and tie
exactly; leftmost attention picks the key at 2k, but softmax splits the weight 1/2-1/2 for every
beta, so the copied key is mixed with the value and the construction is not exact at any beta.
:func:`tiebroken_case5` adds a bias to layer 1's query (a fixed extra score c at even key
positions, c = 1 - cos(2 pi / N), so every competitor is at least c / sqrt 3 below the key) that
changes nothing under leftmost attention and makes the softmax limit exact.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import torch

from interp.core import attention, tasks
from interp.theory import precision as P

FAMILIES = ("random", "perpendicular", "opposite", "neighbour")
VARIANTS = ("paper", "tiebroken")


# --------------------------------------------------------------------------------------------
# models


def tiebroken_case5(n: int, *, dtype: torch.dtype = torch.float64):
    """Case 5's two-layer construction with layer 1's 2k / 2k+1 tie broken towards the key.

    Layer 1 uses head dims 0-1 for the pair index (coords 4-5); head dim 2 is free. We set
    W_K1[coord 6 -> dim 2] = -1 (coord 6 is -1 at even positions, so k[2] = 1 at keys, 0 at
    values) and b_Q1[dim 2] = c: every even key position gains c / sqrt 3. With
    c = 1 - cos(2 pi / N) the attended key 2k scores (1 + c)/sqrt 3 and every competitor
    (2k + 1 at 1/sqrt 3, keys of the neighbouring pairs at (cos(2 pi/N) + c)/sqrt 3 = 1/sqrt 3)
    is exactly c/sqrt 3 below. Under leftmost attention the argmax is the same position as in
    the paper's construction (so it stays exact); under softmax the tie is gone.
    """
    from interp.core import constructions

    model = constructions.build(5, n, dtype=dtype, check_precision=False)
    N = n + 1
    c = 1 - math.cos(2 * math.pi / N)
    a1 = model.blocks[0].attn
    with torch.no_grad():
        a1.W_K.data[0, 6, 2] = -1.0
        a1.b_Q.data[0, 2] = c
    model.construction = dict(model.construction, variant="tiebroken", tie_bias=c)
    return model


@tasks.register_builder("tiebroken", 5)
def make_tiebroken(task: tasks.Task, n: int, dtype: torch.dtype = torch.float64):
    """:func:`tiebroken_case5` as the task's ``"tiebroken"`` builder."""
    return tiebroken_case5(n, dtype=dtype)


def default_variant(case: int) -> str:
    """The variant measured unless one is named: the tie-broken one where the task has it."""
    return "tiebroken" if "tiebroken" in tasks.get(case).builders else "paper"


def build(case: int, n: int, variant: str = "paper"):
    """The construction measured (float64): the paper's, or a variant registered for the task
    (case 5's tie-broken one)."""
    from interp.core import constructions

    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}; accepted: one of {VARIANTS}")
    if variant == "paper":
        return constructions.build(case, n, dtype=torch.float64, check_precision=False)
    task = tasks.get(case)
    return task.builder(variant)(task, n, torch.float64)


def with_softmax(model, beta: float):
    """A float64 copy of model with softmax(beta * scores) on every layer."""
    m = P.as_float64(model)
    attention.set_attention(m, "softmax", beta=float(beta))
    return m


# --------------------------------------------------------------------------------------------
# the least beta


@dataclass(frozen=True)
class BetaResult:
    beta: float | None  # least exact beta found (within rel); None: not exact up to beta_max
    below: float | None  # largest beta found not exact
    inputs: int
    evaluated: dict[float, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["evaluated"] = {f"{k:.6g}": v for k, v in sorted(self.evaluated.items())}
        return d


def least_beta(
    model, probes, *, start: float | None = None, rel: float = 0.01, beta_max: float = 1e15
) -> BetaResult:
    """Least inverse temperature at which ``model`` under softmax is exact on ``probes``.

    Brackets from ``start`` by factors of 2, then bisects geometrically until hi/lo < 1 + rel.
    Assumes exactness is monotone in beta (``evaluated`` records every beta tried).
    """
    if not rel > 0:
        raise ValueError(f"rel={rel!r}; accepted: > 0")
    P.check_probes(model, probes)
    t0 = time.perf_counter()
    base = P.as_float64(model)
    evaluated: dict[float, bool] = {}

    def ok(beta: float) -> bool:
        if beta not in evaluated:
            evaluated[beta] = P.check(with_softmax(base, beta), probes).exact
        return evaluated[beta]

    b = float(start or 1.0)
    if ok(b):
        hi = b
        while ok(hi / 2):
            hi /= 2
            if hi < 1e-12:
                return BetaResult(hi, None, len(probes), evaluated, time.perf_counter() - t0)
        lo = hi / 2
    else:
        lo = b
        while not ok(lo * 2):
            lo *= 2
            if lo > beta_max:
                return BetaResult(None, lo, len(probes), evaluated, time.perf_counter() - t0)
        hi = lo * 2
    while hi / lo > 1 + rel:
        mid = math.sqrt(hi * lo)
        hi, lo = (mid, lo) if ok(mid) else (hi, mid)
    return BetaResult(hi, lo, len(probes), evaluated, time.perf_counter() - t0)


# --------------------------------------------------------------------------------------------
# bounds (one-layer cases 1-4)


def _circle_gaps(N: int, dh: int = 2) -> list[float]:
    """Score gaps (1 - cos(2 pi m / N)) / sqrt(d_head) of the keys m = 1..N-1 steps away."""
    m = torch.arange(1, N, dtype=torch.float64)
    return ((1 - torch.cos(2 * math.pi * m / N)) / math.sqrt(dh)).tolist()


def _profile_no_keys(n: int):
    """Theorem 3.2's construction (case 1): N = n + 1 angles; the value-minus-key trick writes
    cs(t) - cs(j) + cs(v_j), of norm <= 1 + 2 sin(pi |j - t| / N)."""
    N = n + 1
    C = (1 + 2 * torch.sin(math.pi * torch.arange(1, N, dtype=torch.float64) / N)).tolist()
    return list(zip(_circle_gaps(N), C)), N, 2


def _profile_pairs(n: int):
    """Theorem 3.1's construction (cases 2-3): n angles, unit values."""
    return [(g, 1.0) for g in _circle_gaps(n)], n, 2


def _profile_consecutive(n: int):
    """Theorem 3.3's construction (case 4): the pairs' profile, plus the n key positions and
    the query, which score 0: gap 1/sqrt 2, unit values."""
    prof, N, dh = _profile_pairs(n)
    return prof + [(1 / math.sqrt(dh), 1.0)] * (n + 1), N, dh


#: The one-layer constructions whose softmax bound is derived here, per case.
_PROFILES = {1: _profile_no_keys, 2: _profile_pairs, 3: _profile_pairs, 4: _profile_consecutive}


def _profile(case: int, n: int) -> tuple[list[tuple[float, float]], int, int]:
    """(gap Delta_j, weight bound C_j) of every non-target position, N, d_head."""
    profile = _PROFILES.get(tasks.check_case(case))
    if profile is None:
        raise ValueError(f"case={case}: the bound is derived for the one-layer constructions "
                         f"(cases {sorted(_PROFILES)})")
    return profile(n)


def _solve(f, target: float) -> float:
    """Least beta > 0 with f(beta) < target, f decreasing (geometric bisection to 1e-6)."""
    lo, hi = 1e-9, 1.0
    while f(hi) >= target:
        lo, hi = hi, hi * 2
    while hi / lo > 1 + 1e-6:
        mid = math.sqrt(hi * lo)
        lo, hi = (mid, hi) if f(mid) >= target else (lo, mid)
    return hi


def beta_sufficient(case: int, n: int) -> float:
    """Least beta with rho(beta) = sum_j C_j exp(-beta Delta_j) < sin(pi / N): exact above it."""
    prof, N, _ = _profile(case, n)
    margin = math.sin(math.pi / N)
    return _solve(lambda b: sum(C * math.exp(-b * g) for g, C in prof), margin)


def beta_crude(case: int, n: int) -> float:
    """ln((L - 1) C_max / sin(pi/N)) / g with g = (1 - cos(2 pi/N)) / sqrt(d_head): O(n^2 log n)."""
    prof, N, dh = _profile(case, n)
    g = (1 - math.cos(2 * math.pi / N)) / math.sqrt(dh)
    C = max(c for _, c in prof)
    return math.log(len(prof) * C / math.sin(math.pi / N)) / g


def beta_adversarial(case: int, n: int) -> float:
    """Cases 2-3, "perpendicular" family: the beta at which the angle error reaches pi/n.

    Every non-target value is u = a + off (off = round(n/4)), so e = rho0 cs(phi) with
    rho0 = sum_m exp(-beta Delta_m), phi = 2 pi off / n, and the angle error is
    atan2(rho0 sin phi, 1 + rho0 cos phi); a tie at exactly pi/n already counts as wrong.
    """
    if not tasks.get(case).same_position:
        raise ValueError(f"case={case}: the exact adversarial prediction is for the pair-token "
                         f"cases {tasks.SAME_POSITION}")
    prof, N, _ = _profile(case, n)
    phi = 2 * math.pi * max(1, round(n / 4)) / n

    def err(b):
        r = sum(math.exp(-b * g) for g, _ in prof)
        return math.atan2(r * math.sin(phi), 1 + r * math.cos(phi))

    return _solve(err, math.pi / N)


# --------------------------------------------------------------------------------------------
# the law over n


def measure(
    case: int,
    n: int,
    family: str,
    *,
    variant: str = "paper",
    targets: int | None = 256,
    n_random: int = 256,
    rel: float = 0.01,
    seed: int = 0,
    beta_max: float = 1e15,
) -> dict:
    """One row: least beta on one input family, with the bounds (cases 1-4)."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r}; accepted: one of {FAMILIES}")
    model = build(case, n, variant)
    L = tasks.seq_len(case, n)
    chunk = max(1, min(512, 2_000_000 // (L * (L if model.cfg.n_layers > 1 else 8))))
    if family == "random":
        probes = P.ProbeSet(case, n, shifts=(), n_random=n_random, seed=seed, chunk=chunk)
    else:
        probes = P.ProbeSet(case, n, n_random=0, seed=seed, chunk=chunk, others=family, targets=targets)
    bounds, task = {}, tasks.get(case)
    if model.cfg.n_layers == 1 and variant == "paper":
        bounds = dict(beta_sufficient=beta_sufficient(case, n), beta_crude=beta_crude(case, n))
        if task.same_position:
            bounds["beta_adversarial"] = beta_adversarial(case, n)
    start = bounds.get("beta_sufficient", 4.0 * n * n)
    r = least_beta(model, probes, start=start, rel=rel, beta_max=beta_max)
    return dict(
        case=case, n=n, variant=variant, layers=model.cfg.n_layers, family=family, beta=r.beta,
        below=r.below, inputs=r.inputs, **bounds, evaluated=len(r.evaluated), seconds=round(r.seconds, 2),
    )


def fit_power(rows: list[dict], min_n: int = 16) -> dict:
    """log beta = a log n + b per (case, variant, family): the exponent a."""
    out = {}
    for key in sorted({(r["case"], r["variant"], r["family"]) for r in rows}):
        pts = [(math.log(r["n"]), math.log(r["beta"])) for r in rows
               if (r["case"], r["variant"], r["family"]) == key and r["n"] >= min_n and r["beta"]]
        if len(pts) < 2:
            continue
        x = torch.tensor([p[0] for p in pts], dtype=torch.float64)
        y = torch.tensor([p[1] for p in pts], dtype=torch.float64)
        A = torch.stack([x, torch.ones_like(x)], dim=1)
        a, b = torch.linalg.lstsq(A, y[:, None]).solution[:, 0].tolist()
        out[f"case{key[0]}/{key[1]}/{key[2]}"] = dict(exponent=a, log_coefficient=b, points=len(pts))
    return out
