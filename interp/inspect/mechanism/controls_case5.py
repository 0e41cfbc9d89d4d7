"""Two-layer case-5 controls whose mechanism is known by construction (issue 42).

Case 5 (:mod:`interp.core.tasks`): key k_j at position 2j, value v_j = f(k_j) at 2j + 1, keys
permuted, the target i* at 2n; attention is bidirectional. Two layers, softmax attention (no
hard-attention hooks), attention-only; both are refused outside :data:`N_RANGE`:

* :func:`mirror_lookup`: the paper's construction (Theorem 3.8) run backwards. Layer 0 moves
  each *value* onto its *key* position (2j attends 2j + 1 and copies the value's code into
  COPY); layer 1's final query attends the key position 2j whose token is i* (never a value
  position, never itself) and reads the copied value. Keys and values are on the paper's
  circle cs_N (N = n + 1, :func:`interp.core.constructions.cs`). Expected labels: routing
  ``mirror`` (measured ``at="key"``), mechanism ``mirror``.
* :func:`one_hot_case5`: the paper's routing with **one-hot** keys and values. Layer 0 moves
  each key onto its value position (2j + 1 attends 2j and copies the key into COPY); layer 1's
  final query attends the value position whose COPY is i* (never an even position) and reads
  the value. Expected labels: routing ``lookup``, code ``codebook``, mechanism
  ``lookup-codebook``, ``at="value"``. ``inverted=True``: layer 1 avoids the matching value
  position (it spreads over the other n - 1) and OV writes minus the value, right whenever f is
  a permutation (expected routing ``inverted``).

These are not :func:`interp.inspect.mechanism.controls.one_hot_lookup`'s cases: its
``ONE_HOT_CASES`` (1-4) stay the cases one attention layer reads.

``beta`` is the least **score margin** in nats, in both layers: every position other than the
one attended scores at least ``beta`` below it (``beta = 30``: off-target mass below
2n e^-30 ~ 1e-11). Scores are scaled by s = beta / gap, gap the smallest difference of the
unscaled scores, so the attention is as hard at n = 50 as at n = 3.

Residual blocks, named as :mod:`interp.core.constructions` names its slices (biases zero except
``b_Q``, the constant in the query's last head dimension):

* mirror (d_model 10, d_head 3): ``TOKEN`` [0, 1] the token cs_N(t); ``COPY`` [2, 3] where
  layer 0 writes the attended value (cs_N(v_j) at key position 2j); ``PAIR`` [4, 5] the pair
  index cs_N(p // 2) of position p (cs_N(n) at the query); ``EVEN`` [6] -1 at even positions
  (keys, the query), 0 at values; ``IS_QUERY`` [7] 1 at the query position 2n; ``OUT`` [8, 9]
  where layer 1 writes, read by ``W_U`` (column u = cs_N(u)).
  Layer 0: s0 (PAIR . PAIR + g/2 [odd key]) with g = 1 - cos(2 pi / N), s0 = 2 beta / g: every
  position p attends 2 (p // 2) + 1, the query (no partner) itself; OV copies TOKEN into COPY.
  Layer 1: s1 (cs(t_p) . cs(i*) + [p a key position]) with the key-position term read from
  EVEN + IS_QUERY (-1 at the keys, 0 at the values and the query), s1 = beta / min(g, 1): the
  key position 2j with k_j = i* scores 2 s1, other keys <= (2 - g) s1, values and the query
  <= s1. OV copies COPY into OUT, so OUT = cs_N(f(i*)) at the final position.
* one-hot (d_model 3n + 4, d_head n + 1): ``TOKEN`` [0, n) e_t; ``COPY`` [n, 2n) where layer 0
  writes the attended key (e_{k_j} at both positions of slot j, e_{i*} at the query); ``OUT``
  [2n, 3n) where layer 1 writes, read by ``W_U`` (the identity); ``PAIR`` [3n, 3n + 1]
  cs_N(p // 2); ``EVEN`` [3n + 2] as above. Layer 0: s0 (PAIR . PAIR + g [even key]), s0 = beta
  / g: every p attends 2 (p // 2), the construction's layer 0; OV copies TOKEN into COPY.
  Layer 1: s1 (COPY_p . e_{i*} + [p odd]) (the odd term read from EVEN), s1 = beta: the
  matching value position scores 2 s1, everything else <= s1. OV copies TOKEN (the value e_v)
  into OUT. Inverted: the COPY term and W_O negated.
"""

from __future__ import annotations

import math

import torch

from interp.core import constructions, models

#: the table sizes built (the tests check exactness in float32 across this range)
N_RANGE = (2, 100)
DTYPES = (torch.float32, torch.float64)


def _check(n, beta, dtype) -> int:
    lo, hi = N_RANGE
    if isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi:
        raise ValueError(f"n={n!r}; accepted: an integer {lo}..{hi}")
    if isinstance(beta, bool) or not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta={beta!r}; accepted: a finite number > 0 (the score margin in nats)")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}; accepted: one of {DTYPES}")
    return n


def _zeros(*shape) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.float64)


def _positions(n: int, d: int, pair: list[int], even: int, is_query: int | None) -> torch.Tensor:
    """W_pos: PAIR = cs_N(p // 2), EVEN = -1 at even p, IS_QUERY = 1 at 2n."""
    p = torch.arange(2 * n + 1)
    pos = _zeros(2 * n + 1, d)
    pos[:, pair] = constructions.cs(p // 2, n + 1)
    pos[0::2, even] = -1.0
    if is_query is not None:
        pos[2 * n, is_query] = 1.0
    return pos


def _load(n: int, dtype, E, pos, layers, W_U):
    """A case-5 two-layer attention-only model holding ``E``, ``pos``, ``W_U`` and per layer
    ``(W_Q, b_Q, W_K, W_V, W_O)`` (float64 [d, h], [h], [d, h], [d, h], [h, d]); other biases 0."""
    d, h = layers[0][0].shape
    model = models.new_model(models.make_config(5, n, d, 2, d_head=h, dtype=dtype), 5)
    constructions._zero_biases(model)
    with torch.no_grad():
        model.embed.W_E.copy_(E.to(dtype))
        model.pos_embed.W_pos.copy_(pos.to(dtype))
        for block, (W_Q, b_Q, W_K, W_V, W_O) in zip(model.blocks, layers, strict=True):
            a = block.attn
            a.W_Q.copy_(W_Q[None].to(dtype))
            a.b_Q.copy_(b_Q[None].to(dtype))
            a.W_K.copy_(W_K[None].to(dtype))
            a.W_V.copy_(W_V[None].to(dtype))
            a.W_O.copy_(W_O[None].to(dtype))
        model.unembed.W_U.copy_(W_U.to(dtype))
    return model.eval()


def mirror_lookup(n: int, *, beta: float = 30.0, dtype: torch.dtype = torch.float32):
    """The case-5 construction run backwards (module docstring): layer 0 moves each value onto
    its key position, layer 1's final query attends the key position 2j with k_j = i* and reads
    the copied value; keys and values on the circle cs_N. Expected routing: ``mirror``."""
    n = _check(n, beta, dtype)
    N, d, h = n + 1, 10, 3
    TOKEN, COPY, PAIR, EVEN, IS_QUERY, OUT = [0, 1], [2, 3], [4, 5], 6, 7, [8, 9]
    g = 1.0 - math.cos(2 * math.pi / N)
    s0, s1 = 2 * beta / g, beta / min(g, 1.0)
    r = math.sqrt(h)  # TransformerLens divides scores by sqrt(d_head)
    E = _zeros(n, d)
    E[:, TOKEN] = constructions.cs(torch.arange(n), N)
    pos = _positions(n, d, PAIR, EVEN, IS_QUERY)
    W_Q0, W_K0, b_Q0 = _zeros(d, h), _zeros(d, h), _zeros(h)
    W_Q0[PAIR, [0, 1]], W_K0[PAIR, [0, 1]] = r * s0, 1.0
    W_K0[EVEN, 2], b_Q0[2] = 1.0, r * s0 * g / 2  # keys: -1 at even, 0 at odd: odd positions + s0 g / 2
    W_Q1, W_K1, b_Q1 = _zeros(d, h), _zeros(d, h), _zeros(h)
    W_Q1[TOKEN, [0, 1]], W_K1[TOKEN, [0, 1]] = r * s1, 1.0
    W_K1[[EVEN, IS_QUERY], 2], b_Q1[2] = 1.0, -r * s1  # key positions (-1) + s1, values, query 0
    W_V0, W_O0 = _zeros(d, h), _zeros(h, d)
    W_V0[TOKEN, [0, 1]], W_O0[[0, 1], COPY] = 1.0, 1.0
    W_V1, W_O1 = _zeros(d, h), _zeros(h, d)
    W_V1[COPY, [0, 1]], W_O1[[0, 1], OUT] = 1.0, 1.0
    W_U = _zeros(d, n)
    W_U[OUT] = constructions.cs(torch.arange(n), N).T
    return _load(n, dtype, E, pos, [(W_Q0, b_Q0, W_K0, W_V0, W_O0), (W_Q1, b_Q1, W_K1, W_V1, W_O1)], W_U)


def one_hot_case5(n: int, *, inverted: bool = False, beta: float = 30.0,
                  dtype: torch.dtype = torch.float32):
    """The paper's case-5 routing with one-hot keys and values (module docstring): layer 0 moves
    each key onto its value position, layer 1's final query attends the value position whose
    copied key is i* and reads the value. Expected: routing ``lookup``, code ``codebook``;
    ``inverted``: the matching slot avoided and minus the value written (routing ``inverted``)."""
    n = _check(n, beta, dtype)
    N, d, h = n + 1, 3 * n + 4, n + 1
    TOKEN, COPY, OUT = torch.arange(n), torch.arange(n, 2 * n), torch.arange(2 * n, 3 * n)
    PAIR, EVEN = [3 * n, 3 * n + 1], 3 * n + 2
    g = 1.0 - math.cos(2 * math.pi / N)
    s0, s1 = beta / g, beta
    r, sign = math.sqrt(h), (-1.0 if inverted else 1.0)
    heads, eye = torch.arange(n), torch.eye(n, dtype=torch.float64)
    E = _zeros(n, d)
    E[:, TOKEN] = eye
    pos = _positions(n, d, PAIR, EVEN, None)
    W_Q0, W_K0, b_Q0 = _zeros(d, h), _zeros(d, h), _zeros(h)
    W_Q0[PAIR, [0, 1]], W_K0[PAIR, [0, 1]] = r * s0, 1.0
    W_K0[EVEN, 2], b_Q0[2] = 1.0, -r * s0 * g  # keys: -1 at even: even positions + s0 g
    W_Q1, W_K1, b_Q1 = _zeros(d, h), _zeros(d, h), _zeros(h)
    W_Q1[TOKEN, heads], W_K1[COPY, heads] = sign * r * s1, 1.0
    W_K1[EVEN, n], b_Q1[n] = 1.0, r * s1  # even positions (-1): s1 below the odd ones
    W_V0, W_O0 = _zeros(d, h), _zeros(h, d)
    W_V0[TOKEN, heads], W_O0[heads, COPY] = 1.0, 1.0
    W_V1, W_O1 = _zeros(d, h), _zeros(h, d)
    W_V1[TOKEN, heads], W_O1[heads, OUT] = 1.0, sign
    W_U = _zeros(d, n)
    W_U[OUT, heads] = 1.0
    return _load(n, dtype, E, pos, [(W_Q0, b_Q0, W_K0, W_V0, W_O0), (W_Q1, b_Q1, W_K1, W_V1, W_O1)], W_U)
