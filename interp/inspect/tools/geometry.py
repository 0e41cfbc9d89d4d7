"""Is a circuit a circle? Geometry read through the scores, blind to labels, basis and scale.

Axis vocabulary. A score matrix ``S[row, col]`` is square, [n, n]. For QK (:func:`qk_circle`) a
row is a target a (the final query) and a column a stored key b: ``circuits.qk_matrix``, the mean
score from target a to the slot holding key b, through every embedding the circuit reads (the
pair tables in cases 2-3, tokens and positions in cases 1, 4, 5). For OV (:func:`ov_circle`) a
row is a value token v and a column an output u: ``circuits.ov_matrix``.

Why not the probes. Keys are interchangeable symbols: a trained model may put them on a circle
in any order, so the cos/sin probes of :mod:`interp.inspect.tools.probes` score a perfect circle with
scrambled labels below 0. The order-free ``probes.circle_test`` reads the top-2 principal plane
of the vectors, which need not be the plane the circuit reads: keys ``[cs(b), x_b]`` whose x the
queries never read fail it, while the scores are exactly the construction's.

The test (:func:`score_circle`), in float64:

1. Double centring, ``S~ = S - row means - column means + grand mean``. Softmax over keys
   ignores a constant per row (per target), so row offsets go as the model drops them. Column
   offsets (one bias per key, the same for every target) do move attention, but say nothing
   about *which* key matches which target: they leave the geometry and are reported as
   ``col_bias``, their share of the row-centred energy. The constructions' ``cos(theta_a -
   theta_b)`` stays rank 2 (with N = n + 1 angles the centred points still lie on a circle,
   about a shifted centre, which the circle fit finds).
2. SVD ``S~ = U diag(s) V^T``: ``top2 = (s1^2 + s2^2) / sum s^2`` and ``balance = s2 / s1``.
3. Points in the gauge where the score is a dot product: target a at ``U[a, :2] sqrt(s[:2])``,
   key b at ``V[b, :2] sqrt(s[:2])`` (unique up to one orthogonal map of the plane, which keeps
   circles). A circle is fitted to each side (Kasa's algebraic fit, centre free): ``row_rcv`` and
   ``col_rcv`` are the std / mean of the radii about it.
4. The key angles psi_b about their centre, sorted, are the relabeling (``order``, for a circle
   of one frequency the best one). ``spacing``: rms distance of the sorted angles (from the
   widest gap on) to their least-squares even steps, in units of 2 pi / n (0: even; N = n + 1
   angles, the paper's cases 1 and 5, are even too).
5. ``fit``: R^2 of ``S~ ~ c cos(psi_a - psi_b)`` (the template double-centred like S), with the
   *key* angle psi_a standing for target a too: high only when each target sits where its own
   key sits, i.e. the match is on the diagonal after relabeling. ``inverted``: c < 0 (with
   every criterion met, ``inverted_circle``: an anti-matcher on a circle, not a ``circle``).

``circle`` is top2, both radius spreads, spacing and fit inside the thresholds below, and not
``inverted``. :func:`disguise` makes the positive controls: a model with relabelled keys, an
extra embedding direction the scores ignore, a random basis and scale, and noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core import attention, models, tasks
from interp.inspect.tools import circuits, hooks

# Thresholds of the verdict, read off experiments/analysis/geometry_null.py (geometry-null.md):
# a null of 720 QK and OV matrices of random models (init_model over cases 1-5, n 10-100,
# d_token 4-32, both inits) and 600 shuffled construction matrices (rows and columns permuted
# apart; one key coordinate shuffled), against 270 positive controls (every construction,
# n 10-100, through disguise(), noise up to 1%). FIT_MIN lies above each null's 99th percentile
# (0.34 random, 0.32 permuted, 0.66 coordinate; largest 0.80) and below the controls' least fit
# (0.999); RCV_MAX below the random models' 1st percentile (0.32; least 0.25) and above the
# controls' largest (0.022). TOP2_MIN and SPACING_MAX reject no null alone (random scores are
# often nearly rank 2, and at n = 10 random points are as even as these criteria can tell):
# they are necessary conditions, with a margin beyond the controls' worst (1.000, 0.40).
# No null matrix passes all four; every control does.
TOP2_MIN = 0.9
RCV_MAX = 0.15
SPACING_MAX = 1.0
FIT_MIN = 0.9
#: the smallest n tested: after double centring any 3 points lie on a circle in a rank-2 plane
MIN_N = 4


@dataclass(frozen=True)
class CircuitCircle:
    """The circle test of one score matrix (module docstring, steps 1-5)."""

    name: str
    n: int
    top2: float  # share of the double-centred energy in the top-2 singular values (1: rank 2)
    balance: float  # s2 / s1 (1: an isotropic bilinear form on a full circle)
    row_rcv: float  # radius std / mean of the row points (targets, or values)
    col_rcv: float  # radius std / mean of the column points (keys, or outputs)
    spacing: float  # rms deviation of the sorted key angles from even steps, in 2 pi / n
    fit: float  # R^2 of S~ against c cos(psi_a - psi_b) with the keys' angles
    inverted: bool  # c < 0 (meaningful where fit is high: see inverted_circle)
    col_bias: float  # share of the row-centred energy in the per-column offsets
    order: tuple[int, ...]  # columns sorted by angle: the relabeling, up to rotation/reflection

    def _on_circle(self) -> bool:
        """Every criterion inside its threshold, the sign of c aside (NaN fails)."""
        return bool(self.top2 >= TOP2_MIN and max(self.row_rcv, self.col_rcv) <= RCV_MAX
                    and self.spacing <= SPACING_MAX and self.fit >= FIT_MIN)

    @property
    def circle(self) -> bool:
        """The verdict: a matcher on a circle, each target at its own key's angle."""
        return self._on_circle() and not self.inverted

    @property
    def inverted_circle(self) -> bool:
        """A circle whose scores peak at the far side from each target's own key (c < 0)."""
        return self._on_circle() and self.inverted

    def summary(self, prefix: str = "") -> dict:
        """The verdict and its numbers as flat columns, e.g. ``qk_circle``, ``qk_top2``."""
        p = f"{prefix}_" if prefix else ""
        return {f"{p}circle": self.circle, f"{p}top2": self.top2, f"{p}balance": self.balance,
                f"{p}rcv": max(self.row_rcv, self.col_rcv), f"{p}spacing": self.spacing,
                f"{p}fit": self.fit, f"{p}inverted": self.inverted_circle, f"{p}bias": self.col_bias}


def _as_matrix(scores) -> Tensor:
    if isinstance(scores, circuits.CircuitMatrix):
        scores = scores.matrix
    S = scores.detach().cpu() if isinstance(scores, Tensor) else torch.as_tensor(np.asarray(scores))
    S = S.double()
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"scores has shape {tuple(S.shape)}; accepted: a square [n, n] matrix")
    if S.shape[0] < MIN_N:
        raise ValueError(f"scores is {S.shape[0]} x {S.shape[0]}; accepted: n >= {MIN_N} "
                         "(after double centring any 3 points lie on a circle)")
    if not torch.isfinite(S).all():
        bad = tuple(int(i) for i in torch.nonzero(~torch.isfinite(S))[0])
        raise ValueError(f"scores{list(bad)} = {float(S[bad])}; accepted: finite entries only")
    return S


def double_centre(S: Float[Tensor, "row col"]) -> Float[Tensor, "row col"]:
    """``S - row means - column means + grand mean`` (zero row and column sums)."""
    return S - S.mean(1, keepdim=True) - S.mean(0, keepdim=True) + S.mean()


def fit_circle(points: Float[Tensor, "n 2"]) -> tuple[Tensor, Tensor]:
    """Kasa's fit ``x^2 + y^2 = 2 a x + 2 b y + c``: (centre [2], radii [n] about it). The
    package's one circle fit (``probes.circle_plane`` calls it too)."""
    A = torch.cat([2 * points, torch.ones(len(points), 1, dtype=points.dtype)], dim=1)
    sol = torch.linalg.lstsq(A, points.pow(2).sum(1, keepdim=True), driver="gelsd").solution[:, 0]
    centre = sol[:2]
    return centre, (points - centre).norm(dim=1)


def _rcv(radii: Tensor) -> float:
    mean = float(radii.mean())
    return float(radii.std() / mean) if mean > 0 else math.nan


def angle_gaps(angles: Float[Tensor, "n"]) -> tuple[Tensor, Tensor]:
    """``(order, gaps)``: the points sorted by angle, and the angle from each sorted point to the
    next (the last gap wraps round to the first point; the gaps sum to 2 pi). The package's one
    angle-gap code (``probes.circle_test`` calls it too)."""
    order = angles.argsort()
    a = angles[order]
    return order, torch.diff(torch.cat([a, a[:1] + 2 * math.pi]))


def _spacing(angles: Float[Tensor, "n"]) -> tuple[float, tuple[int, ...]]:
    """rms distance of the sorted angles to least-squares even steps (in 2 pi / n), and the
    order of the points from the widest gap on."""
    n = len(angles)
    order, gaps = angle_gaps(angles)
    start = (int(gaps.argmax()) + 1) % n
    order = order.roll(-start)
    unwrapped = (angles[order] - angles[order[0]]) % (2 * math.pi)  # 0 = first, increasing
    r = torch.arange(n, dtype=torch.float64)
    X = torch.stack([torch.ones(n, dtype=torch.float64), r], dim=1)
    resid = unwrapped - X @ torch.linalg.lstsq(X, unwrapped[:, None]).solution[:, 0]
    return float(resid.pow(2).mean().sqrt() / (2 * math.pi / n)), tuple(int(i) for i in order)


def _fit(St: Tensor, angles: Tensor) -> tuple[float, bool]:
    """R^2 of St against c * double-centred cos(angles[a] - angles[b]), and whether c < 0."""
    T = double_centre(torch.cos(angles[:, None] - angles[None, :]))
    tt, st, ss = float((T * T).sum()), float((St * T).sum()), float((St * St).sum())
    if tt == 0 or ss == 0:
        return math.nan, False
    return st * st / (tt * ss), st < 0


def score_circle(scores, *, name: str = "S") -> CircuitCircle:
    """The circle test of a square score matrix (torch, numpy or a ``CircuitMatrix``).

    Blind to relabeling the rows and columns together, to row offsets, to a positive scale, and
    to anything the scores do not contain. A NaN criterion (an all-constant matrix) fails.
    """
    S = _as_matrix(scores)
    n = S.shape[0]
    row_centred = S - S.mean(1, keepdim=True)
    St = double_centre(S)
    energy = float(row_centred.pow(2).sum())
    bias = float((row_centred - St).pow(2).sum()) / energy if energy > 0 else math.nan
    U, s, Vh = torch.linalg.svd(St)
    total = float(s.pow(2).sum())
    if total <= 1e-24 * float(S.pow(2).sum()):  # no interaction left (constant rows/columns)
        nan = math.nan
        return CircuitCircle(name, n, nan, nan, nan, nan, nan, nan, False, bias, tuple(range(n)))
    root = s[:2].sqrt()
    rows, cols = U[:, :2] * root, Vh[:2].T * root  # [n, 2]: rows @ cols.T = rank-2 part of St
    _, row_r = fit_circle(rows)
    centre, col_r = fit_circle(cols)
    angles = torch.atan2(cols[:, 1] - centre[1], cols[:, 0] - centre[0])
    spacing, order = _spacing(angles)
    fit, inverted = _fit(St, angles)
    return CircuitCircle(
        name, n, float(s[:2].pow(2).sum()) / total, float(s[1] / s[0]), _rcv(row_r), _rcv(col_r),
        spacing, fit, inverted, bias, order)


# ----------------------------------------------------------------------------- models


@tasks.reads_task
def qk_circle(model, tokens=None, *, case: int | None = None, n: int | None = None,
              layer: int = -1, head: int | None = None, batch_size: int = 1024, seed: int = 0) -> CircuitCircle:
    """:func:`score_circle` of ``circuits.qk_matrix``: targets (rows) against stored keys."""
    qk = circuits.qk_matrix(model, tokens, case=case, n=n, layer=layer, head=head,
                            batch_size=batch_size, seed=seed)
    return score_circle(qk.matrix, name="QK")


@tasks.reads_task
def ov_circle(model, *, case: int | None = None, n: int | None = None, layer: int = -1,
              head: int | None = None) -> CircuitCircle:
    """:func:`score_circle` of ``circuits.ov_matrix``: value tokens (rows) against outputs."""
    ov = circuits.ov_matrix(model, case=case, n=n, layer=layer, head=head)
    return score_circle(ov.matrix, name="OV")


@tasks.reads_task
def summary(model, tokens=None, *, case: int | None = None, n: int | None = None,
            qk: circuits.CircuitMatrix | None = None, seed: int = 0) -> dict:
    """``qk_*`` and ``ov_*`` columns (:meth:`CircuitCircle.summary`) for ``analysis.measure``.

    ``qk``: a QK matrix already computed (``circuits.qk_from_vectors`` of the measure's cache),
    else it is computed from ``tokens``. For n < :data:`MIN_N` every column is None (a circle is
    no constraint there).
    """
    task, n = hooks.check_model(model, case=case, n=n)
    if n < MIN_N:
        keys = ("circle", "top2", "balance", "rcv", "spacing", "fit", "inverted", "bias")
        return {f"{p}_{k}": None for p in ("qk", "ov") for k in keys}
    qk = circuits.qk_matrix(model, tokens, case=task.case, n=n, seed=seed) if qk is None else qk
    return {**score_circle(qk.matrix, name="QK").summary("qk"),
            **ov_circle(model, case=task.case, n=n).summary("ov")}


# ----------------------------------------------------------------------------- controls

_LAYER_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


def _weights(model) -> dict[str, Tensor]:
    """Every weight in float64, head axis dropped: W_Q [layer, d_model, d_head], b_O [layer,
    d_model], W_U [d_model, n]; the embedding as ``key`` / ``value`` tables or ``E``."""
    W = {name: getattr(model, name).detach().double().clone() for name in _LAYER_WEIGHTS}
    W = {k: v[:, 0] if k != "b_O" else v for k, v in W.items()}
    if models.has_pair_embedding(model):
        W["key"], W["value"] = (t.detach().double().clone() for t in models.pair_tables(model))
    else:
        W["E"] = model.W_E.detach().double().clone()
    W["pos"] = model.W_pos.detach().double().clone()
    W["W_U"], W["b_U"] = model.W_U.detach().double().clone(), model.b_U.detach().double().clone()
    return W


def _relabel(W: dict, task: tasks.Task, n: int, perm: Tensor) -> None:
    """Symbol k takes the vectors of symbol perm[k]: tables, key positions, output columns."""
    for name in ("key", "value", "E"):
        if name in W:
            W[name] = W[name][perm]
    if task.keys_by_position:  # the position is the key
        slots = hooks.slot_positions(task.case, n)
        W["pos"][slots] = W["pos"][slots[perm]]
    W["W_U"], W["b_U"] = W["W_U"][:, perm], W["b_U"][perm]


def _extra(W: dict, scale: float, g: torch.Generator) -> None:
    """One more residual coordinate, random in the embedding, read by W_K into one more head
    dimension that no query reads (pair models: one more column in each table)."""
    pair = "key" in W
    d, h = W["W_Q"].shape[1:]
    t = d // 2
    # P [d, d + 1 (+1)]: old coordinates into the new residual; e: the extra key coordinate
    P = torch.zeros(d, d + 1 + pair, dtype=torch.float64)
    idx = torch.arange(d)
    P[idx, idx + (pair & (idx >= t))] = 1.0
    e = t if pair else d
    table = W["key"] if pair else W["E"]
    sd = scale * float(table.pow(2).sum(1).mean().sqrt())
    rand = lambda rows: sd * torch.randn(rows, 1, generator=g, dtype=torch.float64)
    if pair:
        W["key"], W["value"] = (torch.cat([T, rand(len(T))], 1) for T in (W["key"], W["value"]))
    else:
        W["E"] = torch.cat([W["E"], rand(len(W["E"]))], 1)
    pos_used = bool(W["pos"].abs().max() > 0)
    W["pos"] = W["pos"] @ P
    if pos_used:
        W["pos"][:, e] = rand(len(W["pos"]))[:, 0]
    pad = lambda x: torch.cat([x, torch.zeros(*x.shape[:-1], 1, dtype=x.dtype)], -1)
    W["W_Q"] = pad(P.T @ W["W_Q"]) * math.sqrt((h + 1) / h)  # same scores under sqrt(d_head + 1)
    W["W_K"] = pad(P.T @ W["W_K"])
    W["W_K"][:, e, h] = 1.0
    W["W_V"] = pad(P.T @ W["W_V"])
    W["W_O"] = torch.cat([W["W_O"], torch.zeros_like(W["W_O"][:, :1])], 1) @ P
    W["b_O"], W["W_U"] = W["b_O"] @ P, P.T @ W["W_U"]
    for name in ("b_Q", "b_K", "b_V"):
        W[name] = pad(W[name])


def _basis(d: int, g: torch.Generator) -> Tensor:
    """A random rotation times a random diagonal scale in [1/2, 2]."""
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return Q * 2.0 ** (2 * torch.rand(d, generator=g, dtype=torch.float64) - 1)


def _mix(W: dict, g: torch.Generator) -> None:
    """A random basis and scale of the residual stream (block-diagonal over a pair model's
    halves) and of the head, undone inside the weights: every score and logit is unchanged."""
    d, h = W["W_Q"].shape[1:]
    if "key" in W:
        A1, A2 = _basis(d // 2, g), _basis(d // 2, g)
        W["key"], W["value"] = W["key"] @ A1, W["value"] @ A2
        A = torch.block_diag(A1, A2)
    else:
        A = _basis(d, g)
        W["E"] = W["E"] @ A
    Ai = torch.linalg.inv(A)
    H, G = _basis(h, g), _basis(h, g)  # key-side and value-side head bases
    Hit, Gi = torch.linalg.inv(H).T, torch.linalg.inv(G)
    W["pos"] = W["pos"] @ A
    W["W_Q"], W["b_Q"] = Ai @ W["W_Q"] @ Hit, W["b_Q"] @ Hit
    W["W_K"], W["b_K"] = Ai @ W["W_K"] @ H, W["b_K"] @ H
    W["W_V"], W["b_V"] = Ai @ W["W_V"] @ G, W["b_V"] @ G
    W["W_O"], W["b_O"] = Gi @ W["W_O"] @ A, W["b_O"] @ A
    W["W_U"] = Ai @ W["W_U"]


def _load(model, task: tasks.Task, n: int, W: dict):
    """A new model of the same kind holding W (widths read off W), attention modes copied."""
    L, d, h = W["W_Q"].shape
    new = models.new_model(models.make_config(task.case, n, d, L, d_head=h, dtype=model.cfg.dtype), task.case)
    if "key" in W:
        models.tie_pair_embedding(new, n)
    if not model.pos_embed.W_pos.requires_grad:
        models.disable_pos_embed(new)
    with torch.no_grad():
        if "key" in W:
            for param, value in zip(models.pair_tables(new), (W["key"], W["value"])):
                param.copy_(value)
        else:
            new.embed.W_E.copy_(W["E"])
        new.pos_embed.W_pos.copy_(W["pos"])
        for layer, block in enumerate(new.blocks):
            for name in _LAYER_WEIGHTS:
                value = W[name][layer]
                getattr(block.attn, name).copy_(value if name == "b_O" else value[None])
        new.unembed.W_U.copy_(W["W_U"])
        new.unembed.b_U.copy_(W["b_U"])
    for layer, m in enumerate(attention.modes(model)):
        if m[:2] != ("softmax", 1.0):
            attention.set_attention(new, m.mode, beta=m.beta, layers=[layer],
                                    tie_rtol=m.tie_rtol, tie_atol=m.tie_atol)
    return new.eval()


@tasks.reads_task
def disguise(model, *, case: int | None = None, n: int | None = None, seed: int = 0,
             relabel: bool = True, extra: float = 1.0, mix: bool = True, noise: float = 0.0):
    """A copy of an attention-only model with the same circuit geometry, hidden from the probes.

    ``relabel``: symbol k takes the vectors of a random symbol perm[k] (the key positions too in
    cases 1 and 4, and the output columns), so a circle goes round in a scrambled order;
    ``extra`` > 0: one more residual coordinate with random entries of std ``extra`` times the
    embedding's rms row norm, which W_K carries into one more head dimension that the queries
    do not read; ``mix``: a random rotation and scale of the residual stream and of the head
    (undone inside the weights); ``noise``: Gaussian noise of ``noise`` times each weight
    tensor's rms. Without noise every score and logit is unchanged up to the relabeling.
    """
    task, n = hooks.check_model(model, case=case, n=n)
    if not model.cfg.attn_only:
        raise ValueError("model has MLPs (d_mlp > 0); accepted: attention-only models")
    if not (extra >= 0 and noise >= 0 and math.isfinite(extra) and math.isfinite(noise)):
        raise ValueError(f"extra={extra!r}, noise={noise!r}; accepted: finite numbers >= 0")
    g = torch.Generator().manual_seed(seed)
    W = _weights(model)
    if relabel:
        _relabel(W, task, n, torch.randperm(n, generator=g))
    if extra > 0:
        _extra(W, extra, g)
    if mix:
        _mix(W, g)
    for name in ("key", "value", "E", "pos", "W_Q", "W_K", "W_V", "W_O", "W_U"):
        if noise > 0 and name in W and bool(W[name].abs().max() > 0):
            rms = float(W[name].pow(2).mean().sqrt())
            W[name] = W[name] + noise * rms * torch.randn(W[name].shape, generator=g, dtype=torch.float64)
    return _load(model, task, n, W)
