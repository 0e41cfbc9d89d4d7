"""The fast engine's two-layer arithmetic: layer 0 at every query in basis-row coefficients.

Layer 0 needs every query, but its inputs are table rows, so its score for query i and key j
is ``H2[(t_i, i), t_j] + H[(t_i, i), j]``, two small tables indexed by the query's (token,
position): :func:`_layer0_scores`. Its output is kept as coefficients over the basis rows

    Xb = [T (V rows) | W_pos (P rows, if learned) | T W_V W_O | W_pos W_V W_O | c0]   [seed, R, d]

(c0 = b_V W_O + b_O of layer 0): x1_p = x0_p + sum_j A_pj (y_j) + c0, never a [batch, pos,
d_model] tensor. Position p holds its token rows J[k, p], its position row, the layer-0
pattern A[p, j] times the VO rows of every j, and c0 with coefficient 1. The last layer's
scores are then ``C_last GG`` with GG the basis rows' q.k table. The [batch, pos, pos] pattern
A is used three ways (last row, ``A @ r``, ``a @ A``); :mod:`interp.training.fast_autograd`
forms its gradient from their rank-one factors in one product.

MLP after every attention (:func:`final_logits_2_mlp`, mlp="every"). Layer 0's MLP runs at
every position, since the last layer's keys and values read them all, and its ReLU breaks the
basis-row form; the last layer sees ``x2_p = x1_p + h_p W_out + b_out`` with x1_p = C_p Xb in
the basis rows and the hidden activations ``h = relu(u)`` [batch, pos, d_mlp] as coefficients
of the d_mlp rows of W_out. No [batch, pos, d_model] tensor is formed:

    u_p = x1_p W_in + b_in = C_p (Xb W_in) + b_in
        = (own token and position rows of Xb W_in) + [A_tok | A]_p (VO rows of Xb W_in) + c0 W_in + b_in

with ``A_tok[p, v] = sum_j A[p, j] [position j reads token row v]`` (one gather and one
[batch * pos, V + P] x [V + P, d_mlp] product; :func:`_mlp_input`). The last layer's final
query ``q = x2_last W_Q + b_Q`` needs ``x2_last = x1_last + MLP(x1_last)`` only; with
``kq = W_K q / attn_scale`` its scores are ``x2_p . kq = C_p (Xb kq) + h_p . (W_out kq)`` plus
``(c0 + b_out) . kq``, the same for every key (left out, like b_K), and its mixed value is
``sum_p a_p x2_p = C_mix Xb + (a h) W_out + b_out`` (``sum a = 1``). h is read two ways
(``h @ W_out kq``, ``a @ h``), whose gradients ``fast_autograd.Relu`` combines. Per input this
costs O(pos (V + P) d_mlp) for layer 0's MLP, instead of TransformerLens's O(pos d_model d_mlp)
per MLP plus O(pos d_model^2) per attention.

MLP after the last attention only (mlp="last", :func:`final_logits_2`): layer 0 as without
MLPs (its MLP's weights are fixed at zero and add exactly 0), and the last layer's MLP acts on
the final position's residual after attention, formed in d_model ([batch, d_model], cheap).

Residual "embed" (``resid_mid_1 = x_0 + attn_1(x_1)``): the last layer's queries, keys and
values read x1 as above; only the residual it is added to changes, from x1_last (or x2_last)
to the final position's embedding x0_last (its own token and position rows: :func:`_x0_last`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.training import fast_autograd as ag
from interp.training import fast_tables as tb


def _layer0_scores(T: Tensor, pos, ws: dict, J: Tensor, scale: float) -> Tensor:
    """Layer 0's scaled scores for every query, [S, B, query_pos, key_pos].

    ``q_i . k_j`` with ``q_i = T[t_i] W_Q + W_pos[i] W_Q + b_Q`` and ``k_j = T[t_j] W_K +
    W_pos[j] W_K`` (``q_i . b_K`` is the same for every key j and cancels in the softmax).
    With one token per position, the score is ``H2[(t_i, i), t_j] + H[(t_i, i), j]`` for two
    small tables indexed by the query's (token, position) pair:
    ``H2[(t, i)] = (T_q[t] + P_q[i]) T_k^T`` and ``H[(t, i)] = (T_q[t] + P_q[i]) P_k^T``.
    """
    S, V, d = T.shape
    K, _, B, P = J.shape
    TQ = (T @ ws["W_Q"]) * (1.0 / scale)  # [S, V, d_head]
    PQ = ws["b_Q"][:, None] * (1.0 / scale)  # [S, 1 or P, d_head]
    if pos is not None:
        PQ = PQ + (pos @ ws["W_Q"]) * (1.0 / scale)
    TK = T @ ws["W_K"]  # [S, V, d_head]
    if K > 1:  # pair tables: form q and k per position (not on the tables' fast path)
        q = tb.rows(TQ, J.flatten(2)).view(S, B, P, -1) + PQ[:, None]
        k = tb.rows(TK, J.flatten(2)).view(S, B, P, -1)
        if pos is not None:
            k = k + (pos @ ws["W_K"])[:, None]
        return q @ k.transpose(-1, -2)
    t = J[0]  # [S, B, P]
    Pq = PQ.shape[1]
    H2 = (TQ @ TK.transpose(1, 2))[:, :, None] + (PQ @ TK.transpose(1, 2))[:, None]  # [S,V,Pq,V]
    ar = torch.arange(max(P, S), device=t.device)
    row = t * Pq + (ar[:P] if Pq > 1 else 0) + ar[:S, None, None] * (V * Pq)
    row = row.reshape(-1)  # [S*B*P]: the (token, position) row of each query
    rows2 = H2.reshape(S * V * Pq, V).index_select(0, row).view(S, B, P, V)
    scores = rows2.gather(-1, t[:, :, None, :].expand(S, B, P, P))
    if pos is not None:
        PK = pos @ ws["W_K"]  # [S, P, d_head]
        H = (TQ @ PK.transpose(1, 2))[:, :, None] + (PQ @ PK.transpose(1, 2))[:, None]  # [S,V,P,P]
        scores = scores + H.reshape(S * V * P, P).index_select(0, row).view(S, B, P, P)
    return scores


def final_logits_2(p: dict, J: Tensor) -> Tensor:
    """Two layers without an MLP after layer 0 (module docstring): layer 0 for every query,
    then the last layer's final query in the coefficients of the basis rows, and with
    mlp="last" the last layer's MLP at the final position."""
    A, Xb, box, V, Pp = _layer0_basis(p, J)
    _, R, d = Xb.shape
    ws, scale = p["layers"][-1], p["scale"][-1]
    # q of the basis rows (the last row, the constant c, also carries b_Q) and k of all rows
    # but c: every key holds c once, and q . (c W_K + b_K) is the same for every key, so it
    # cancels in the softmax (b_K is left out, as in one layer).
    Qb = torch.cat([Xb[:, :-1] @ ws["W_Q"], Xb[:, -1:] @ ws["W_Q"] + ws["b_Q"][:, None]], 1)
    Kb = Xb[:, :-1] @ ws["W_K"]  # [S, R - 1, d_head]
    # The final query's coefficients over the basis rows, and its row of scores Rl.
    J_last = J[..., -1]  # [K, S, B]
    C_last = _coefficients(ag.LastRow.apply(A, box), J, V, Pp, R, J_last=J_last)
    if 2 * Qb.shape[-1] < R:  # small d_head: through q = C_last Qb
        Rl = (C_last @ Qb) @ Kb.transpose(1, 2)  # [S, B, R - 1]
    else:  # through the rows' q.k table
        Rl = C_last @ (Qb @ Kb.transpose(1, 2))  # [S, B, R - 1]
    a = torch.softmax(_last_scores(Rl, J, V, Pp, A, box) / scale, dim=-1)  # [S, B, key_pos]
    # Values: mix the basis rows by a (and a A), then W_V W_O (W_U).
    C_mix = _coefficients(a, J, V, Pp, R, A=A, box=box)
    W_U, embed = p["W_U"], p["residual"] == "embed"
    c = ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]  # [S, 1, d]
    if "W_in" in ws:  # mlp="last": the residual after attention in d_model, then the MLP
        x = _x0_last(Xb, J_last, V, Pp) if embed else C_last @ Xb  # [S, B, d]
        resid = x + (C_mix @ Xb) @ (ws["W_V"] @ ws["W_O"]) + c
        return (resid + tb.mlp(ws, resid)) @ W_U + p["b_U"][:, None]
    W_VOU = ws["W_V"] @ (ws["W_O"] @ W_U)  # [S, d, n]
    if embed:  # the residual is x_0 (own token and position rows), not x1
        x_part = _x0_last(Xb, J_last, V, Pp) @ W_U
        m_part = C_mix @ (Xb @ W_VOU) if W_U.shape[-1] <= d else (C_mix @ Xb) @ W_VOU
    elif W_U.shape[-1] <= d:  # project the basis rows first
        x_part = C_last @ (Xb @ W_U)
        m_part = C_mix @ (Xb @ W_VOU)
    else:  # mix in d_model space first
        x_part = (C_last @ Xb) @ W_U
        m_part = (C_mix @ Xb) @ W_VOU
    return x_part + m_part + (c @ W_U + p["b_U"][:, None])



def _x0_last(Xb: Tensor, J_last: Tensor, V: int, Pp: int) -> Tensor:
    """The final position's embedding x_0 [S, B, d_model] (residual="embed"): its token rows of
    Xb, plus its position row when W_pos is learned."""
    x0 = tb.rows(Xb[:, :V], J_last)
    return x0 + Xb[:, V + Pp - 1 : V + Pp] if Pp else x0


def _layer0_basis(p: dict, J: Tensor) -> tuple:
    """Layer 0 of a two-layer model: its pattern A [S, B, qpos, kpos] (a :class:`~interp.training.fast_autograd.Pattern`, with
    the ``box`` its uses fill), the basis rows Xb = [T; W_pos; T W_V W_O; W_pos W_V W_O; c0]
    [S, R, d_model], and V and Pp (the numbers of token and position rows)."""
    T, pos, ws = tb.full_T(p), p["pos"], p["layers"][0]
    V, Pp = T.shape[1], (0 if pos is None else J.shape[-1])
    X0 = T if pos is None else torch.cat([T, pos], 1)  # [S, R0, d]
    box: list = []  # low-rank gradient factors of A, filled by its three uses (see fast_autograd.Pattern)
    A = ag.Pattern.apply(_layer0_scores(T, pos, ws, J, p["scale"][0]), box)  # [S,B,qpos,kpos]
    XVO = (X0 @ ws["W_V"]) @ ws["W_O"]  # [S, R0, d]
    c0 = ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]  # [S, 1, d]
    return A, torch.cat([X0, XVO, c0], 1), box, V, Pp  # Xb: [S, 2 R0 + 1, d]


def _last_scores(Rl: Tensor, J: Tensor, V: int, Pp: int, A: Tensor, box: list) -> Tensor:
    """The last layer's scores [S, B, key_pos] from ``Rl`` [S, B, R - 1], the final query's
    score against every basis row but c: key p holds its token rows, its position row and
    ``sum_j A[p, j]`` times the VO rows of j."""
    R0 = V + Pp
    scores = tb.gsum(Rl, J)
    if Pp:
        scores = scores + Rl[..., V:R0]
    r = tb.gsum(Rl, J, offset=R0)
    if Pp:
        r = r + Rl[..., R0 + V : 2 * R0]
    return scores + ag.MatVec.apply(A, r, box)  # A @ r


def _coefficients(w, J, V, Pp, R, *, A=None, J_last=None, box=None) -> Tensor:
    """Coefficients over the two-layer basis rows of sum_p w_p x1_p, or of x1_last (J_last).

    x1_p = [token rows J[:, p]] + [position row p] + sum_j A[p, j] ([VO token rows of j] +
    [VO position row j]) + c; the coefficient vector is laid out as the basis:
    [tokens (V) | positions (Pp) | VO tokens (V) | VO positions (Pp) | c (1)], R entries.
    For the final query, w is A's last row and its own part is one-hot.
    """
    S, B, P = w.shape
    if J_last is not None:
        ones = w.new_ones(S, B, 1)
        own_tok = tb.scatter(ones, J_last[..., None], V)
        own_pos = F.pad(ones, (P - 1, 0)) if Pp else None
        vo = w  # the last query's layer-0 pattern row
    else:
        own_tok = tb.scatter(w, J, V)
        own_pos = w if Pp else None
        vo = ag.VecMat.apply(w, A, box)  # w @ A, [S, B, key_pos]
    parts = [own_tok, own_pos, tb.scatter(vo, J, V), vo if Pp else None, w.new_ones(S, B, 1)]
    return torch.cat([t for t in parts if t is not None], -1)  # [S, B, R]


def final_logits_2_mlp(p: dict, J: Tensor) -> Tensor:
    """Two layers with an MLP after each attention (derived in the module docstring): layer 0
    in the basis rows as without MLPs, its MLP's hidden activations h at every position, then
    the last layer and its MLP at the final query."""
    w0, w1 = p["layers"]
    A, Xb, box, V, Pp = _layer0_basis(p, J)
    R = Xb.shape[1]
    hbox: list = []  # rank-one gradient factors of h, filled by its two uses (see fast_autograd.Relu)
    h = ag.Relu.apply(_mlp_input(Xb @ w0["W_in"], w0["b_in"], A, J, V, Pp), hbox)  # [S,B,P,d_mlp]
    C_last = _coefficients(ag.LastRow.apply(A, box), J, V, Pp, R, J_last=J[..., -1])
    x1_last = C_last @ Xb  # [S, B, d]: the final position after layer 0's attention
    x2_last = x1_last + tb.mlp(w0, x1_last)  # ... and its MLP
    q = x2_last @ w1["W_Q"] + w1["b_Q"][:, None]  # [S, B, d_head]
    kq = (q @ w1["W_K"].transpose(1, 2)) * (1.0 / p["scale"][-1])  # [S, B, d]
    scores = _last_scores(kq @ Xb[:, :-1].transpose(1, 2), J, V, Pp, A, box)  # c: a constant
    scores = scores + ag.MatVec.apply(h, kq @ w0["W_out"].transpose(1, 2), hbox)  # h_p . W_out kq
    a = torch.softmax(scores, dim=-1)  # [S, B, key_pos]
    C_mix = _coefficients(a, J, V, Pp, R, A=A, box=box)
    mixed = C_mix @ Xb + ag.VecMat.apply(a, h, hbox) @ w0["W_out"] + w0["b_out"][:, None]
    c1 = w1["b_V"][:, None] @ w1["W_O"] + w1["b_O"][:, None]  # [S, 1, d]
    x = _x0_last(Xb, J[..., -1], V, Pp) if p["residual"] == "embed" else x2_last
    resid = x + mixed @ (w1["W_V"] @ w1["W_O"]) + c1  # [S, B, d]: after the last attention
    resid = resid + tb.mlp(w1, resid)
    return resid @ p["W_U"] + p["b_U"][:, None]


def _mlp_input(XbW: Tensor, b_in: Tensor, A: Tensor, J: Tensor, V: int, Pp: int) -> Tensor:
    """Layer 0's MLP pre-activation ``u_p = x1_p W_in + b_in`` for every position [S, B, P,
    d_mlp], from the basis rows times W_in (``XbW`` [S, R, d_mlp]).

    u_p = (own token and position rows of XbW) + sum_j A[p, j] (VO rows of j) + XbW[c] + b_in.
    The own rows are one gather from the table of (token, position) sums (one token per
    position), or of token rows plus the position rows; the A part is one product of A
    scattered onto the token rows, [A_tok | A] [B * P, V + Pp], with the VO rows of XbW.
    """
    K, S, B, P = J.shape
    R0 = V + Pp
    const = XbW[:, -1:] + b_in[:, None]  # [S, 1, d_mlp]
    extra = const if not Pp else XbW[:, V:R0] + const  # [S, 1 or P, d_mlp]
    if K == 1:
        own = XbW[:, :V, None] + extra[:, None]  # [S, V, 1 or P, d_mlp]
        Pt = own.shape[2]
        idx = J[0] * Pt + (torch.arange(P, device=J.device) if Pt > 1 else 0)  # [S, B, P]
        u = tb.rows(own.reshape(S, V * Pt, -1), idx.reshape(1, S, B * P))  # [S, B*P, d_mlp]
    else:  # pair tables: key row + value row, then the position rows
        u = (tb.rows(XbW[:, :V], J.flatten(2)).view(S, B, P, -1) + extra[:, None]).view(S, B * P, -1)
    A_tok = A.new_zeros(S, B, P, V)  # A_tok[p, v] = sum_j A[p, j] [token row v in position j]
    for k in range(K):
        A_tok = A_tok.scatter_add(-1, J[k][:, :, None, :].expand(S, B, P, P), A)
    coef = A_tok if not Pp else torch.cat([A_tok, A], -1)  # [S, B, P, R0]
    return torch.baddbmm(u, coef.view(S, B * P, R0), XbW[:, R0 : 2 * R0]).view(S, B, P, -1)
