"""The fast engine's arithmetic: a HookedTransformer's final-position logits, regrouped.

The loss reads only ``logits[:, -1]``, so this module computes exactly that function (and, by
autograd, exactly its gradients) of the HookedTransformer's own parameters, regrouped so that
the last layer never forms a ``[batch, pos, d_model]`` tensor. Axis names: ``seed`` (runs that
differ only in seed), ``batch``, ``pos``, ``d_model``, ``d_head``, ``n``; V is the number of
token-table rows, P the number of positions, K the number of table rows a position reads.

Embedding as table rows. Position p holds ``x0[p] = sum_k T[J[k, p]] + W_pos[p]``:

* cases 1, 4, 5: ``T = W_E`` ([n, d_model]) and J[0] is the token (K = 1);
* cases 2, 3: ``T = [[key, 0], [0, value], [0, 0]]`` ([2n+1, d_model], from the model's own key
  and value tables), K = 2: pair token ``k*n + v`` reads rows k and n + v, the query token
  ``n*n + i*`` reads row i* and the zero row 2n. This is ``models.PairEmbedding`` row by row,
  without its [n*n + n, d_model] table; products with T are taken by halves.

TransformerLens computes ``q = x W_Q + b_Q``, ``k = x W_K + b_K``, ``v = x W_V + b_V``, scores
``q.k / attn_scale`` (no mask), ``out = softmax(scores) v W_O + b_O``, then ``(x + out) W_U + b_U``.

One layer (:func:`_final_logits_1`), final query only, with ``x`` = the final position:

    score_p = q . k_p = sum_k Gtok[J[k, last], J[k, p]] + Gpos[J[0, last], p]   (+ q . b_K)
        Gtok = (T W_Q + q_c) (T W_K)^T / attn_scale,  Gpos = (T W_Q + q_c) (W_pos W_K)^T / ...
    logits  = x W_U + m (W_V W_O W_U) + (b_V W_O + b_O) W_U + b_U,   m = sum_p a_p x0[p]

where q_c = b_Q + W_pos[last] W_Q and ``sum_p a_p = 1``. With an MLP (``d_mlp > 0``) the final
position's residual after attention, ``r = x + m W_V W_O + b_V W_O + b_O``, is
formed in d_model ([batch, d_model], cheap) and ``(relu(r W_in + b_in) W_out + b_out) W_U`` is
added to the logits: the MLP acts position-wise, so the final position's is the only one the
loss reads (two layers with an MLP: the last paragraph). ``q . b_K`` is the same for every key
and cancels in the softmax, so b_K is left out (its exact gradient is 0; TransformerLens's is
rounding noise); likewise in layer 0. ``m`` is ``a`` scattered onto the table rows times T, plus
``a W_pos``. Per input this costs gathers and O((V + P) d_model) products; everything of size
d_model x d_model is a product of parameters, once per step.

Two layers (:func:`_final_logits_2`). Layer 0 needs every query, but its inputs are table rows,
so its score for query i and key j is ``H2[(t_i, i), t_j] + H[(t_i, i), j]``, two small tables
indexed by the query's (token, position): :func:`_layer0_scores`. Its output is kept as
coefficients over the basis rows ``[T; W_pos; T W_V W_O; W_pos W_V W_O; c]`` (x1_p = x0_p +
sum_j A_pj (y_j) + c), never as [batch, pos, d_model]; the last layer's scores are then
``C_last GG`` with GG the basis rows' q.k table. The [batch, pos, pos] pattern A is used three
ways (last row, ``A @ r``, ``a @ A``); :class:`_Pattern` forms its gradient from their rank-one
factors in one product.

Two layers with an MLP after each attention (:func:`_final_logits_2_mlp`). Layer 0's MLP runs
at every position, since the last layer's keys and values read them all, and its ReLU breaks
the basis-row form; the last layer sees ``x2_p = x1_p + h_p W_out + b_out`` with x1_p = C_p Xb
in the basis rows as above and the hidden activations ``h = relu(u)`` [batch, pos, d_mlp] as
coefficients of the d_mlp rows of W_out. No [batch, pos, d_model] tensor is formed:

    u_p = x1_p W_in + b_in = C_p (Xb W_in) + b_in
        = (own token and position rows of Xb W_in) + [A_tok | A]_p (VO rows of Xb W_in) + c0 W_in + b_in

with ``A_tok[p, v] = sum_j A[p, j] [position j reads token row v]`` (one gather and one
[batch * pos, V + P] x [V + P, d_mlp] product; :func:`_mlp_input`). The last layer's final
query ``q = x2_last W_Q + b_Q`` needs ``x2_last = x1_last + MLP(x1_last)`` only; with
``kq = W_K q / attn_scale`` its scores are ``x2_p . kq = C_p (Xb kq) + h_p . (W_out kq)`` plus
``(c0 + b_out) . kq``, the same for every key (left out, like b_K), and its mixed value is
``sum_p a_p x2_p = C_mix Xb + (a h) W_out + b_out`` (``sum a = 1``). h is read two ways
(``h @ W_out kq``, ``a @ h``), and :class:`_Relu` forms its gradient from their rank-one
factors as :class:`_Pattern` does for A. The last layer's own MLP acts on the final position
only, as with one layer. Per input this costs O(pos (V + P) d_mlp) for layer 0's MLP, instead
of TransformerLens's O(pos d_model d_mlp) per MLP plus O(pos d_model^2) per attention.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

# ---------------------------------------------------------------------------------------------
# The forward pass (final position), batched over seeds.
#
# Basis rows. Every residual vector the last layer sees is a combination of the rows of
#   Xb = [T (V rows) | W_pos (P rows, if learned) | T W_V W_O | W_pos W_V W_O | c]   [seed, R, d]
# (the middle two only with two layers; c = b_V W_O + b_O of layer 0, or 0 with one layer).
# Position p holds its token rows J[k, p], its position row, and (two layers) the layer-0
# pattern A[p, j] times the VO rows of every j; every position holds c with coefficient 1.


def _gsum(table: Tensor, J: Tensor, offset: int = 0) -> Tensor:
    """sum_k table[..., offset + J[k]] along the last axis: [S, B, V'] x [K, S, B, P] -> [S, B, P]."""
    out = None
    for k in range(J.shape[0]):
        idx = J[k] if offset == 0 else J[k] + offset
        g = table.gather(-1, idx.expand(*table.shape[:-1], idx.shape[-1]))
        out = g if out is None else out + g
    return out


def _scatter(a: Tensor, J: Tensor, width: int) -> Tensor:
    """Weights a [S, B, P] summed onto rows J[k] of a [S, B, width] coefficient vector."""
    out = a.new_zeros(*a.shape[:-1], width)
    for k in range(J.shape[0]):
        out.scatter_add_(-1, J[k], a)
    return out


def _rows(table: Tensor, J: Tensor) -> Tensor:
    """sum_k table[J[k]] for a table [S, R, c] and J [K, S, B]: [S, B, c]."""
    S, R, c = table.shape
    flat = table.reshape(S * R, c)
    base = torch.arange(S, device=table.device)[:, None] * R
    out = None
    for k in range(J.shape[0]):
        g = flat.index_select(0, (J[k] + base).reshape(-1)).view(S, -1, c)
        out = g if out is None else out + g
    return out


def _T_at(p: dict, W: Tensor, rows: str = "all") -> Tensor:
    """T @ W [S, V, c]; for pair tables by halves ([key W_top; value W_bottom; 0]).

    ``rows="keys"``: only the key rows of a pair table ([S, n, c]).
    """
    if p["pairs"] is None:
        return p["T"] @ W
    key, value = p["pairs"]
    dt = key.shape[-1]
    if rows == "keys":
        return key @ W[:, :dt]
    return torch.cat([key @ W[:, :dt], value @ W[:, dt:], W.new_zeros(W.shape[0], 1, W.shape[-1])], 1)


def _full_T(p: dict) -> Tensor:
    if p["pairs"] is None:
        return p["T"]
    key, value = p["pairs"]
    S, n, dt = key.shape
    z = key.new_zeros(S, n, dt)
    return torch.cat([torch.cat([key, z], -1), torch.cat([z, value], -1), key.new_zeros(S, 1, 2 * dt)], 1)


def final_logits(p: dict, J: Int[Tensor, "K seed batch pos"]) -> Float[Tensor, "seed batch n"]:
    """The models' ``logits[:, -1]`` for token-row indices ``J`` (see :func:`token_indices`)."""
    if len(p["layers"]) == 1:
        return _final_logits_1(p, J)
    if "W_in" in p["layers"][0]:
        return _final_logits_2_mlp(p, J)
    return _final_logits_2(p, J)


def _final_logits_1(p: dict, J: Tensor) -> Tensor:
    """One layer, final query only; every product with an embedding is taken with the tables.

    Scores: the final query is ``q = x_last W_Q + b_Q`` with ``x_last`` = its token row (+
    position P-1), so ``q . k_p`` for every key is a row of the small matrices
    ``Gtok = (T_q W_Q + q_c) (T W_K)^T`` (query-side token rows x all token rows) and
    ``Gpos = (T_q W_Q + q_c) (W_pos W_K)^T``, gathered per input: no [batch, pos, d] tensor.
    ``q . b_K`` is the same for every key and cancels in the softmax, so b_K is left out (its
    exact gradient is 0; TransformerLens's is rounding noise).
    Values: ``sum_p a_p x_p`` = a scattered onto the token rows times T, plus ``a W_pos``.
    """
    pos, ws, W_U = p["pos"], p["layers"][0], p["W_U"]
    K, S, B, P = J.shape
    W_Q, W_K = ws["W_Q"], ws["W_K"]
    qc = ws["b_Q"][:, None]  # [S, 1, d_head]: what every final query holds besides its token
    uc = p["b_U"][:, None] + (ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]) @ W_U
    if pos is not None:
        qc = qc + pos[:, -1:] @ W_Q
        uc = uc + pos[:, -1:] @ W_U  # [S, 1, n]
    J_last, q_table = _query_rows(p, J)  # [K', S, B]; rows the final token reads
    inv = 1.0 / p["scale"][0]
    Q = (_T_at(p, W_Q, rows=q_table) + qc) * inv  # [S, Vq, d_head], scaled
    Rl = _rows(Q @ _T_at(p, W_K).transpose(1, 2), J_last[:1])  # [S, B, V]
    if pos is not None:
        Rp = _rows(Q @ (pos @ W_K).transpose(1, 2), J_last[:1])  # [S, B, P]
    if J_last.shape[0] > 1:  # a pair token at the final position: its value row too
        Qv = _T_at(p, W_Q) * inv
        Rl = Rl + _rows(Qv @ _T_at(p, W_K).transpose(1, 2), J_last[1:])
        if pos is not None:
            Rp = Rp + _rows(Qv @ (pos @ W_K).transpose(1, 2), J_last[1:])
    scores = _gsum(Rl, J)  # [S, B, key_pos]
    if pos is not None:
        scores = scores + Rp
    a = torch.softmax(scores, dim=-1)  # [S, B, key_pos]
    m = _mix_tables(p, a, J)  # sum_p a_p x_p, [S, B, d_model]
    if pos is not None:
        m = m + a @ pos
    W_VOU = ws["W_V"] @ (ws["W_O"] @ W_U)  # [S, d_model, n]
    x = _rows(_T_at(p, W_U, rows=q_table) + uc, J_last[:1])  # x_last W_U + constants
    if J_last.shape[0] > 1:
        x = x + _rows(_T_at(p, W_U), J_last[1:])
    logits = x + m @ W_VOU
    if "W_in" in ws:  # the MLP at the final position, on the residual stream after attention
        resid = _rows(_full_T(p), J_last) + m @ (ws["W_V"] @ ws["W_O"])  # [S, B, d_model]
        c = ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]  # [S, 1, d_model]
        if pos is not None:
            c = c + pos[:, -1:]
        logits = logits + _mlp(ws, resid + c) @ W_U
    return logits


def _mlp(ws: dict, x: Tensor) -> Tensor:
    """A block's MLP at one position per input, ``relu(x W_in + b_in) W_out + b_out`` [S, B, d]."""
    hidden = torch.relu(x @ ws["W_in"] + ws["b_in"][:, None])  # [S, B, d_mlp]
    return hidden @ ws["W_out"] + ws["b_out"][:, None]


def seed_losses(p: dict, J: Tensor, answers: Int[Tensor, "seed batch"]) -> Float[Tensor, "seed"]:
    """Each seed's mean cross-entropy over its own batch (the training loss), [seed]."""
    logits = final_logits(p, J)
    S, B, n = logits.shape
    return F.cross_entropy(
        logits.reshape(S * B, n), answers.reshape(S * B), reduction="none"
    ).view(S, B).mean(1)


def _mix_tables(p: dict, a: Tensor, J: Tensor) -> Tensor:
    """sum_p a_p (token rows of position p), [S, B, d_model], by the tables."""
    S, B, _ = a.shape
    if p["pairs"] is None:
        T = p["T"]
        w = a.new_zeros(S, B, T.shape[1]).scatter_add_(-1, J[0], a)
        return w @ T
    key, value = p["pairs"]
    n = key.shape[1]
    wk = a.new_zeros(S, B, n).scatter_add_(-1, J[0], a)
    wv = a.new_zeros(S, B, n + 1).scatter_add_(-1, J[1] - n, a)  # row n: "no value"
    value_ext = torch.cat([value, value.new_zeros(S, 1, value.shape[-1])], 1)
    return torch.cat([wk @ key, wv @ value_ext], -1)


def _query_rows(p: dict, J: Tensor) -> tuple[Tensor, str]:
    """Token rows of the final position [K', S, B], and which query-side rows are needed.

    For pair tables the query token ``n*n + i*`` reads key row i* and the zero row 2n, which
    adds nothing: then only the key rows are needed ("keys"). Otherwise all rows ("all").
    """
    J_last = J[..., -1]
    if p["pairs"] is not None:
        if bool((J_last[1] == 2 * p["pairs"][0].shape[1]).all()):
            return J_last[:1], "keys"
    return J_last, "all"


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
        q = _rows(TQ, J.flatten(2)).view(S, B, P, -1) + PQ[:, None]
        k = _rows(TK, J.flatten(2)).view(S, B, P, -1)
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


def _vec_mat(w: Tensor, A: Tensor) -> Tensor:
    """w @ A for [S, B, P] x [S, B, P, P] as batched row-vector products (the fast kernel)."""
    return (w[..., None, :] @ A)[..., 0, :]


class _Pattern(torch.autograd.Function):
    """A = softmax(scores) over keys, whose gradient arrives as low-rank factors.

    The pattern [S, B, P, P] is the largest tensor of a two-layer step, and the last layer uses
    it three ways: its last row, ``A @ r`` and ``a @ A``. Each use (``_LastRow``, ``_MatVec``,
    ``_VecMat``) hands back its gradient with respect to A as a rank-one pair, dA += U V^T,
    together with ``A V`` (which each use has at hand), in ``box`` instead of a dense tensor.
    Autograd runs this backward after all of them (it depends on their results), and the
    softmax backward ``dS = A * (dA - rowsum(A * dA))`` becomes
    ``dS = A * (U V^T - sum_k U_k * (A V)_k)``: one product and two passes over [S, B, P, P].
    """

    @staticmethod
    def forward(ctx, scores, box):
        A = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(A)
        ctx.box = box
        ctx.set_materialize_grads(False)
        return A

    @staticmethod
    def backward(ctx, dA):
        (A,) = ctx.saved_tensors
        U = torch.stack([u for u, _, _ in ctx.box], -1)  # [S, B, P, k]
        Vf = torch.stack([v for _, v, _ in ctx.box], -1)  # [S, B, P, k]
        rowcorr = sum(u * av for u, _, av in ctx.box)  # rowsum(A * U V^T), [S, B, P]
        ctx.box.clear()
        M = U @ Vf.transpose(-1, -2)  # [S, B, P, P]: the uses' dA
        if dA is not None:  # A was also used directly somewhere: add its dense gradient
            M = M + dA
            rowcorr = rowcorr + (dA * A).sum(-1)
        return M.sub_(rowcorr[..., None]).mul_(A), None


class _LastRow(torch.autograd.Function):
    """A[..., -1, :] (the final query's layer-0 pattern); dA = e_last g^T."""

    @staticmethod
    def forward(ctx, A, box):
        last = A[..., -1, :].clone()
        ctx.save_for_backward(last)
        ctx.box = box
        return last

    @staticmethod
    def backward(ctx, g):
        (last,) = ctx.saved_tensors
        e = torch.zeros_like(g)
        e[..., -1] = 1.0
        av = torch.zeros_like(g)
        av[..., -1] = (last * g).sum(-1)  # (A g) is needed at the last row only
        ctx.box.append((e, g, av))
        return None, None


class _MatVec(torch.autograd.Function):
    """A @ r, [S, B, P]; dA = g r^T (with A r, the output), dr = A^T g."""

    @staticmethod
    def forward(ctx, A, r, box):
        out = _vec_mat(r, A.transpose(-1, -2))
        ctx.save_for_backward(A, r, out)
        ctx.box = box
        return out

    @staticmethod
    def backward(ctx, g):
        A, r, out = ctx.saved_tensors
        ctx.box.append((g, r, out))
        return None, _vec_mat(g, A), None


class _VecMat(torch.autograd.Function):
    """w @ A, [S, B, P]; dA = w g^T (with A g), dw = A g."""

    @staticmethod
    def forward(ctx, w, A, box):
        ctx.save_for_backward(w, A)
        ctx.box = box
        return _vec_mat(w, A)

    @staticmethod
    def backward(ctx, g):
        w, A = ctx.saved_tensors
        Ag = _vec_mat(g, A.transpose(-1, -2))
        ctx.box.append((w, g, Ag))
        return Ag, None, None


def _final_logits_2(p: dict, J: Tensor) -> Tensor:
    """Two layers (see the basis-row comment above): layer 0 for every query, then the last
    layer's final query in the coefficients of the basis rows."""
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
    C_last = _coefficients(_LastRow.apply(A, box), J, V, Pp, R, J_last=J_last)
    if 2 * Qb.shape[-1] < R:  # small d_head: through q = C_last Qb
        Rl = (C_last @ Qb) @ Kb.transpose(1, 2)  # [S, B, R - 1]
    else:  # through the rows' q.k table
        Rl = C_last @ (Qb @ Kb.transpose(1, 2))  # [S, B, R - 1]
    a = torch.softmax(_last_scores(Rl, J, V, Pp, A, box) / scale, dim=-1)  # [S, B, key_pos]
    # Values: mix the basis rows by a (and a A), then W_V W_O W_U.
    C_mix = _coefficients(a, J, V, Pp, R, A=A, box=box)
    W_U = p["W_U"]
    n = W_U.shape[-1]
    W_VOU = ws["W_V"] @ (ws["W_O"] @ W_U)  # [S, d, n]
    if n <= d:  # project the basis rows first
        XbU = Xb @ W_U
        x_part = C_last @ XbU
        m_part = C_mix @ (Xb @ W_VOU)
    else:  # mix in d_model space first
        x_part = (C_last @ Xb) @ W_U
        m_part = (C_mix @ Xb) @ W_VOU
    c = (ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]) @ W_U + p["b_U"][:, None]
    return x_part + m_part + c


def _layer0_basis(p: dict, J: Tensor) -> tuple:
    """Layer 0 of a two-layer model: its pattern A [S, B, qpos, kpos] (a :class:`_Pattern`, with
    the ``box`` its uses fill), the basis rows Xb = [T; W_pos; T W_V W_O; W_pos W_V W_O; c0]
    [S, R, d_model], and V and Pp (the numbers of token and position rows)."""
    T, pos, ws = _full_T(p), p["pos"], p["layers"][0]
    V, Pp = T.shape[1], (0 if pos is None else J.shape[-1])
    X0 = T if pos is None else torch.cat([T, pos], 1)  # [S, R0, d]
    box: list = []  # low-rank gradient factors of A, filled by its three uses (see _Pattern)
    A = _Pattern.apply(_layer0_scores(T, pos, ws, J, p["scale"][0]), box)  # [S,B,qpos,kpos]
    XVO = (X0 @ ws["W_V"]) @ ws["W_O"]  # [S, R0, d]
    c0 = ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]  # [S, 1, d]
    return A, torch.cat([X0, XVO, c0], 1), box, V, Pp  # Xb: [S, 2 R0 + 1, d]


def _last_scores(Rl: Tensor, J: Tensor, V: int, Pp: int, A: Tensor, box: list) -> Tensor:
    """The last layer's scores [S, B, key_pos] from ``Rl`` [S, B, R - 1], the final query's
    score against every basis row but c: key p holds its token rows, its position row and
    ``sum_j A[p, j]`` times the VO rows of j."""
    R0 = V + Pp
    scores = _gsum(Rl, J)
    if Pp:
        scores = scores + Rl[..., V:R0]
    r = _gsum(Rl, J, offset=R0)
    if Pp:
        r = r + Rl[..., R0 + V : 2 * R0]
    return scores + _MatVec.apply(A, r, box)  # A @ r


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
        own_tok = _scatter(ones, J_last[..., None], V)
        own_pos = F.pad(ones, (P - 1, 0)) if Pp else None
        vo = w  # the last query's layer-0 pattern row
    else:
        own_tok = _scatter(w, J, V)
        own_pos = w if Pp else None
        vo = _VecMat.apply(w, A, box)  # w @ A, [S, B, key_pos]
    parts = [own_tok, own_pos, _scatter(vo, J, V), vo if Pp else None, w.new_ones(S, B, 1)]
    return torch.cat([t for t in parts if t is not None], -1)  # [S, B, R]



def _final_logits_2_mlp(p: dict, J: Tensor) -> Tensor:
    """Two layers with an MLP after each attention (derived in the module docstring): layer 0
    in the basis rows as without MLPs, its MLP's hidden activations h at every position, then
    the last layer and its MLP at the final query."""
    w0, w1 = p["layers"]
    A, Xb, box, V, Pp = _layer0_basis(p, J)
    R = Xb.shape[1]
    hbox: list = []  # rank-one gradient factors of h, filled by its two uses (see _Relu)
    h = _Relu.apply(_mlp_input(Xb @ w0["W_in"], w0["b_in"], A, J, V, Pp), hbox)  # [S,B,P,d_mlp]
    C_last = _coefficients(_LastRow.apply(A, box), J, V, Pp, R, J_last=J[..., -1])
    x1_last = C_last @ Xb  # [S, B, d]: the final position after layer 0's attention
    x2_last = x1_last + _mlp(w0, x1_last)  # ... and its MLP
    q = x2_last @ w1["W_Q"] + w1["b_Q"][:, None]  # [S, B, d_head]
    kq = (q @ w1["W_K"].transpose(1, 2)) * (1.0 / p["scale"][-1])  # [S, B, d]
    scores = _last_scores(kq @ Xb[:, :-1].transpose(1, 2), J, V, Pp, A, box)  # c: a constant
    scores = scores + _MatVec.apply(h, kq @ w0["W_out"].transpose(1, 2), hbox)  # h_p . W_out kq
    a = torch.softmax(scores, dim=-1)  # [S, B, key_pos]
    C_mix = _coefficients(a, J, V, Pp, R, A=A, box=box)
    mixed = C_mix @ Xb + _VecMat.apply(a, h, hbox) @ w0["W_out"] + w0["b_out"][:, None]
    c1 = w1["b_V"][:, None] @ w1["W_O"] + w1["b_O"][:, None]  # [S, 1, d]
    resid = x2_last + mixed @ (w1["W_V"] @ w1["W_O"]) + c1  # [S, B, d]: after the last attention
    resid = resid + _mlp(w1, resid)
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
        u = _rows(own.reshape(S, V * Pt, -1), idx.reshape(1, S, B * P))  # [S, B*P, d_mlp]
    else:  # pair tables: key row + value row, then the position rows
        u = (_rows(XbW[:, :V], J.flatten(2)).view(S, B, P, -1) + extra[:, None]).view(S, B * P, -1)
    A_tok = A.new_zeros(S, B, P, V)  # A_tok[p, v] = sum_j A[p, j] [token row v in position j]
    for k in range(K):
        A_tok = A_tok.scatter_add(-1, J[k][:, :, None, :].expand(S, B, P, P), A)
    coef = A_tok if not Pp else torch.cat([A_tok, A], -1)  # [S, B, P, R0]
    return torch.baddbmm(u, coef.view(S, B * P, R0), XbW[:, R0 : 2 * R0]).view(S, B, P, -1)


class _Relu(torch.autograd.Function):
    """h = relu(u) [S, B, P, d_mlp], whose gradient arrives as rank-one factors.

    The last layer reads layer 0's hidden activations two ways, ``h @ w`` (its scores) and
    ``a @ h`` (its mixed value), through :class:`_MatVec` and :class:`_VecMat`, which hand back
    dh = U V^T pairs in ``box`` as they do for :class:`_Pattern`. The gradient with respect to
    u, ``(sum_k U_k V_k^T) * (u > 0)``, is then formed in one [S, B, P, d_mlp] tensor, instead
    of autograd's dense outer product per use and their sum.
    """

    @staticmethod
    def forward(ctx, u, box):
        h = torch.relu(u)
        ctx.save_for_backward(h)
        ctx.box = box
        ctx.set_materialize_grads(False)
        return h

    @staticmethod
    def backward(ctx, dh):
        (h,) = ctx.saved_tensors
        du = None if dh is None else dh.clone()
        for U, Vf, _ in ctx.box:  # U [S, B, P], Vf [S, B, d_mlp]
            if du is None:
                du = U[..., None] * Vf[..., None, :]
            else:
                du.addcmul_(U[..., None], Vf[..., None, :])
        ctx.box.clear()
        # relu's gradient: du where h > 0, else 0 (one fused pass; masked_fill_ with an
        # (h <= 0) mask wrote the same values at twice the time and a bool tensor more)
        return torch.ops.aten.threshold_backward(du, h, 0.0), None
