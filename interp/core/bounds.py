"""The paper's lower bounds for one-layer case-5 transformers, as plain formulas.

Kept in :mod:`interp.core` (no torch, no TransformerLens) so that both the theory package
(:mod:`interp.theory.precision`, :mod:`interp.theory.lower_bounds`, which test them on models) and
the inspect package (:mod:`interp.inspect.studies.atlas`, which draws them on the atlas) read the same
definition. ``h`` heads per layer, ``d`` the embedding dimension d_model, ``p`` bits of precision.
"""

from __future__ import annotations

import math


def theorem_3_4_bound(n: int) -> float:
    """Theorem 3.4: a one-layer case-5 transformer that is always right has hdp >= n log2(n) / 3."""
    return n * math.log2(n) / 3 if n > 1 else 0.0


def theorem_3_7_bound(n: int, h: int, d: int, p: int) -> dict:
    """Theorem 3.7: with R = n log2 n - 3hdp, the error on its distribution (f any function, keys
    permuted, target key 0) is at least max(0, R / (3 n log2 n))."""
    nlogn = n * math.log2(n)
    R = nlogn - 3 * h * d * p
    return dict(R=R, bound=max(0.0, R / (3 * nlogn)) if nlogn > 0 else 0.0)
