"""Two-dimensional point sets of known shape: the circle test's positives and near misses.

Each family draws ``n`` points ``[n, 2]`` (float64) from a seeded generator. ``exact`` and
``noisy`` are the paper's evenly spaced circle cs(k) (``noisy``: angles jittered by 5% of a
step, radii by 3%); the rest are shapes that are *almost* such a circle, or not at all, that the
code test must not call ``circle`` (``experiments/calibration/PREDICTIONS-circle.md`` declares
them and their parameters). :func:`hide` maps a point set into a wider width by a random linear
map, as a model's code table would hold it; :func:`interp.inspect.mechanism.controls.recode_values`
builds a model whose values are written as these points.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

TAU = 2 * math.pi


def _u(g, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=g, dtype=torch.float64))


def _even(n: int, g) -> Tensor:
    return torch.arange(n, dtype=torch.float64) * TAU / n + _u(g, 0, TAU)


def _on_circle(angles: Tensor, radii: Tensor | float = 1.0) -> Tensor:
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=1) * torch.as_tensor(radii).reshape(-1, 1)


def exact(n, g):
    return _on_circle(_even(n, g))


def noisy(n, g):
    a = _even(n, g) + 0.05 * (TAU / n) * torch.randn(n, generator=g, dtype=torch.float64)
    return _on_circle(a, 1 + 0.03 * torch.randn(n, generator=g, dtype=torch.float64))


def alternating(n, g):
    step, small = TAU / n, _u(g, 0.5, 0.7)
    gaps = torch.tensor([small if k % 2 == 0 else 2 - small for k in range(n - 1)], dtype=torch.float64)
    a = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(gaps, 0)]) * step  # the last gap: the rest
    return _on_circle(a + _u(g, 0, TAU))


def square(n, g):
    a, turn = _even(n, g), _u(g, 0, TAU)
    rel = a - turn
    return _on_circle(a, 1 / torch.maximum(torch.cos(rel).abs(), torch.sin(rel).abs()))


def spiral(n, g):
    return _on_circle(_even(n, g), torch.linspace(1, _u(g, 1.4, 1.6), n, dtype=torch.float64))


def arc(n, g):
    span = _u(g, 0.4, 0.75) * TAU
    return _on_circle(torch.linspace(0, span, n, dtype=torch.float64) + _u(g, 0, TAU))


def triangle(n, g):
    corners = _on_circle(torch.arange(3, dtype=torch.float64) * TAU / 3 + _u(g, 0, TAU))
    t = (torch.arange(n, dtype=torch.float64) / n * 3 + _u(g, 0, 3)) % 3  # along the perimeter
    side = t.floor().long()
    frac = (t - side).reshape(-1, 1)
    return corners[side] * (1 - frac) + corners[(side + 1) % 3] * frac


def parabola(n, g):
    x = torch.linspace(-1, 1, n, dtype=torch.float64)
    return torch.stack([x, x.pow(2)], dim=1)


def plane(n, g):
    return torch.randn(n, 2, generator=g, dtype=torch.float64)


def uneven(n, g):
    return _on_circle(TAU * torch.rand(n, generator=g, dtype=torch.float64))


def ellipse_uneven(n, g):
    P = uneven(n, g)
    return P * torch.tensor([_u(g, 1.5, 3.0), 1.0], dtype=torch.float64)


POSITIVES = {"exact": exact, "noisy": noisy}
NEAR_MISSES = {"alternating": alternating, "square": square, "spiral": spiral, "arc": arc,
               "triangle": triangle, "parabola": parabola, "plane": plane, "uneven": uneven,
               "ellipse-uneven": ellipse_uneven}
FAMILIES = {**POSITIVES, **NEAR_MISSES}


def draw(family: str, n: int, seed: int) -> Float[Tensor, "n 2"]:
    """``n`` points of ``family`` (:data:`FAMILIES`), the same for the same seed."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r}; accepted: one of {sorted(FAMILIES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 3:
        raise ValueError(f"n={n!r}; accepted: an integer >= 3")
    return FAMILIES[family](n, torch.Generator().manual_seed(seed))


def hide(points: Float[Tensor, "n 2"], width: int = 32, *, seed: int = 0) -> Float[Tensor, "n width"]:
    """``points`` mapped into ``width`` dimensions by a random Gaussian [2, width] map and a random
    orthogonal one: a code table whose whitened top-2 plane holds ``points`` up to a linear map."""
    if isinstance(width, bool) or not isinstance(width, int) or width < 2:
        raise ValueError(f"width={width!r}; accepted: an integer >= 2")
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(2, width, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(width, width, generator=g, dtype=torch.float64))
    return points.to(torch.float64) @ A @ Q
