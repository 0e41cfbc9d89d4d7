"""Point sets and models of known figure: the geometry label's positives, near misses and nulls.

``experiments/calibration/PREDICTIONS-geometry.md`` declares the families and their parameters;
:func:`draw` makes one figure ``[n, k]`` (k its own dimension) and :func:`disguise` hides it as a
model's code table would hold it: a global scale, a random orthonormal map into a wider width,
small per-point noise and per-context noise, the class means taken as
:func:`interp.inspect.mechanism.codes.code_table` takes them. No anisotropic scaling: a figure's
norms and angles are its identity (:mod:`~interp.inspect.mechanism.figures`, "Frame").

:func:`lookup_with_values` builds a lookup model whose values are written as given points of any
dimension (the one-hot lookup of :func:`controls.one_hot_lookup` with its value table replaced
and a nearest-point read-out), and :func:`widen_orthonormal` hides a model in a wider residual
stream by orthonormal maps only.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from interp.inspect.mechanism import shapes

F64 = torch.float64


def _u(g, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=g, dtype=F64))


def _pick(g, options):
    return options[int(torch.randint(len(options), (), generator=g))]


def _orthonormal(k: int, D: int, g) -> Tensor:
    """[k, D] random orthonormal rows (k <= D)."""
    Q, _ = torch.linalg.qr(torch.randn(D, k, generator=g, dtype=F64))
    return Q.T


def simplex(n, g):
    """The regular simplex: n unit points, pairwise cosines -1/(n-1), in n - 1 dimensions."""
    E = torch.eye(n, dtype=F64) - 1.0 / n
    U, s, _ = torch.linalg.svd(E)
    P = U[:, : n - 1] * s[: n - 1].sqrt()
    return P / P.norm(dim=1, keepdim=True)


def orthoplex(n, g):
    """+-e_i, i = 1..n/2 (even n)."""
    I = torch.eye(n // 2, dtype=F64)
    return torch.cat([I, -I])


def codebook(n, g, widths=(8, 16, 32)):
    return torch.randn(n, _pick(g, widths), generator=g, dtype=F64)


def _from_gram(G: Tensor) -> Tensor:
    vals, vecs = torch.linalg.eigh((G + G.T) / 2)
    keep = vals > 1e-9
    P = vecs[:, keep] * vals[keep].sqrt()
    return P / P.norm(dim=1, keepdim=True)


def _perturbed(P: Tensor, g) -> Tensor:
    """Gram of ``P`` with its off-diagonal entries moved by N(0, delta^2), delta ~ U(0.08, 0.15),
    made PSD, factored, rows at unit norm: equal norms, angles off."""
    n = len(P)
    E = torch.randn(n, n, generator=g, dtype=F64) * _u(g, 0.08, 0.15)
    E = torch.triu(E, 1)
    return _from_gram(P @ P.T + E + E.T)


def etf_angles(n, g):
    return _perturbed(simplex(n, g), g)


def etf_norms(n, g):
    a = _u(g, 0.25, 0.5)
    return simplex(n, g) * (1 + a * (2 * torch.rand(n, 1, generator=g, dtype=F64) - 1))


def orthoplex_missing(n, g):
    """The orthoplex with max(1, n // 10) of its -e_i replaced by new orthogonal directions."""
    m, k = n // 2, max(1, n // 10)
    P = torch.cat([orthoplex(n, g), torch.zeros(n, k, dtype=F64)], 1)
    for j, i in enumerate(torch.randperm(m, generator=g)[:k].tolist()):
        P[m + i] = 0.0
        P[m + i, m + j] = 1.0
    return P


def orthoplex_angles(n, g):
    return _perturbed(orthoplex(n, g), g)


def correlated(n, g):
    """A codebook with max(1, n // 10) pairs made near-duplicates (+15% noise)."""
    P = codebook(n, g)
    k = max(1, n // 10)
    idx = torch.randperm(n, generator=g)[: 2 * k].view(k, 2)
    for a, b in idx.tolist():
        noise = torch.randn(P.shape[1], generator=g, dtype=F64)
        P[b] = P[a] + 0.15 * P[a].norm() * noise / noise.norm()
    return P


def blob(n, g):
    return torch.randn(n, _pick(g, (2, 3)), generator=g, dtype=F64)


def box(n, g):
    return 2 * torch.rand(n, _pick(g, (2, 3)), generator=g, dtype=F64) - 1


def anisotropic(n, g):
    return torch.randn(n, 16, generator=g, dtype=F64) * 2.0 ** (-torch.arange(16, dtype=F64) / 2)


def _circle(name):
    return lambda n, g: shapes.FAMILIES[name](n, g)


#: family -> (figure it is a positive of, or None, generator); even-n-only families in EVEN_ONLY
FAMILIES = {
    "simplex": ("simplex", simplex), "orthoplex": ("orthoplex", orthoplex),
    "exact": ("circle", _circle("exact")), "noisy": ("circle", _circle("noisy")),
    "codebook": ("codebook", codebook),
    "etf-angles": (None, etf_angles), "etf-norms": (None, etf_norms),
    "orthoplex-missing": (None, orthoplex_missing), "orthoplex-angles": (None, orthoplex_angles),
    "correlated": (None, correlated),
    **{name: (None, _circle(name)) for name in shapes.NEAR_MISSES},
    "blob": (None, blob), "box": (None, box), "anisotropic": (None, anisotropic),
}
EVEN_ONLY = ("orthoplex", "orthoplex-missing", "orthoplex-angles")
#: draws per family and n (PREDICTIONS-geometry.md)
DRAWS = {"simplex": 300, "orthoplex": 300, "exact": 150, "noisy": 150, "codebook": 300,
         "etf-angles": 100, "etf-norms": 100, "orthoplex-missing": 100, "orthoplex-angles": 100,
         "correlated": 100, **dict.fromkeys(shapes.NEAR_MISSES, 34),
         "blob": 150, "box": 150, "anisotropic": 150}


def families_at(n: int) -> list[str]:
    """The families drawn at table size ``n`` (the orthoplex's only at even n)."""
    return [f for f in FAMILIES if n % 2 == 0 or f not in EVEN_ONLY]


def draw(family: str, n: int, seed: int) -> Float[Tensor, "n k"]:
    """One figure of ``family`` (:data:`FAMILIES`) with ``n`` points, the same for the same seed."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r}; accepted: one of {sorted(FAMILIES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 3:
        raise ValueError(f"n={n!r}; accepted: an integer >= 3")
    if family in EVEN_ONLY and n % 2:
        raise ValueError(f"family={family!r} at n={n}; accepted: an even n (an orthoplex pairs its points)")
    return FAMILIES[family][1](n, torch.Generator().manual_seed(seed))


def disguise(P: Float[Tensor, "n k"], *, seed: int, widths=(16, 32, 64), point_noise: float = 0.02,
             context_noise: float = 0.1, contexts: int = 16) -> tuple[Tensor, Tensor]:
    """``(means [n, D], per_context [contexts, n, D])``: ``P`` scaled by 10^U(-1, 1), mapped by a
    random orthonormal map into D = max(k, w) (w from ``widths``), each point moved by isotropic
    noise of ``point_noise`` times the figure's RMS (centred) norm, each context adding isotropic
    noise of ``context_noise``; each context centred over the symbols, the means averaged."""
    g = torch.Generator().manual_seed(seed)
    P = torch.as_tensor(P, dtype=F64)
    n, k = P.shape
    D = max(k, _pick(g, widths))
    rms = float((P - P.mean(0)).pow(2).sum(1).mean().sqrt())
    X = P @ _orthonormal(k, D, g) * 10 ** _u(g, -1, 1)
    rms *= float(X.norm() / P.norm()) if float(P.norm()) > 0 else 1.0
    X = X + point_noise * rms / math.sqrt(D) * torch.randn(n, D, generator=g, dtype=F64)
    V = X + context_noise * rms / math.sqrt(D) * torch.randn(contexts, n, D, generator=g, dtype=F64)
    V = V - V.mean(1, keepdim=True)
    return V.mean(0), V


def lookup_with_values(n: int, points, *, case: int = 3, beta: float = 8.0):
    """The one-hot lookup of ``case`` 2 or 3 (:func:`controls.one_hot_lookup`: pair tokens, the
    query attends the matching slot) with its values written as ``points`` [n, k] (k <= n,
    distinct points) instead of e_v: the value table holds the points (padded with zeros to the
    token width n), ``W_V`` and ``W_O`` copy them, and the read-out is nearest-point: the query
    ties with the matching slot (half of the attention each, the query's value half zero), so the
    final value half holds p_v / 2 and ``W_U`` = 2 P^T, ``b_U`` = -|p_u|^2 / 2 give logit_u =
    -|p_u - p_v|^2 / 2 + |p_v|^2 / 2, highest at u = v."""
    from interp.core import models
    from interp.inspect.mechanism import controls

    P = torch.as_tensor(points, dtype=F64)
    if P.ndim != 2 or P.shape[0] != n or not 1 <= P.shape[1] <= n or not torch.isfinite(P).all():
        raise ValueError(f"points of shape {tuple(P.shape)}; accepted: finite [n={n}, k] with 1 <= k <= n")
    if case not in (2, 3):
        raise ValueError(f"case={case}; accepted: 2 or 3 (the pair-token lookups)")
    model = controls.one_hot_lookup(case, n, beta=beta, dtype=torch.float64)
    table = torch.zeros(n, n, dtype=F64)
    table[:, : P.shape[1]] = P
    with torch.no_grad():
        _, value_table = models.pair_tables(model)
        value_table.copy_(table)
        W_U = torch.zeros_like(model.unembed.W_U)
        W_U[n:] = 2 * table.T  # the value half (OUT = VALUE with pair tokens)
        model.unembed.W_U.copy_(W_U)
        model.unembed.b_U.copy_(-table.pow(2).sum(1) / 2)
    return model


def widen_orthonormal(model, d_token: int, *, seed: int = 0):
    """``model`` (attention-only, one head) hidden in a residual of token width ``d_token`` by
    random orthonormal maps (and a random relabelling of the symbols), the scores and logits
    unchanged: :func:`controls.widen` without its random non-orthogonal basis and scale, which
    would change the figure the code draws in the stream (:mod:`figures`, "Frame")."""
    from interp.inspect.mechanism import controls

    return controls.widen(model, d_token, seed=seed, mix=False)
