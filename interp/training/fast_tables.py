"""The fast engine's table arithmetic: products and gathers over the token table T.

Shared by one layer (:mod:`interp.training.fast_math`) and two
(:mod:`interp.training.fast_two_layers`). Axes as there: ``S`` seeds, ``B`` inputs, ``P``
positions, ``K`` table rows a position reads, ``V`` table rows; ``J`` [K, S, B, P] holds the
row indices (see :func:`interp.training.fast_train.token_indices`). ``p`` is the parameter
dict of :func:`interp.training.fast_train.stack_params`: ``T`` [S, V, d_model], or ``pairs``
(key, value) tables [S, n, d_token] for cases 2-3, whose T is ``[[key, 0], [0, value], [0, 0]]``
(:func:`full_T`) and whose products with T are taken by halves (:func:`T_at`).
"""

from __future__ import annotations

import torch
from torch import Tensor


def gsum(table: Tensor, J: Tensor, offset: int = 0) -> Tensor:
    """sum_k table[..., offset + J[k]] along the last axis: [S, B, V'] x [K, S, B, P] -> [S, B, P]."""
    out = None
    for k in range(J.shape[0]):
        idx = J[k] if offset == 0 else J[k] + offset
        g = table.gather(-1, idx.expand(*table.shape[:-1], idx.shape[-1]))
        out = g if out is None else out + g
    return out


def scatter(a: Tensor, J: Tensor, width: int) -> Tensor:
    """Weights a [S, B, P] summed onto rows J[k] of a [S, B, width] coefficient vector."""
    out = a.new_zeros(*a.shape[:-1], width)
    for k in range(J.shape[0]):
        out.scatter_add_(-1, J[k], a)
    return out


def rows(table: Tensor, J: Tensor) -> Tensor:
    """sum_k table[J[k]] for a table [S, R, c] and J [K, S, B]: [S, B, c]."""
    S, R, c = table.shape
    flat = table.reshape(S * R, c)
    base = torch.arange(S, device=table.device)[:, None] * R
    out = None
    for k in range(J.shape[0]):
        g = flat.index_select(0, (J[k] + base).reshape(-1)).view(S, -1, c)
        out = g if out is None else out + g
    return out


def T_at(p: dict, W: Tensor, which: str = "all") -> Tensor:
    """T @ W [S, V, c]; for pair tables by halves ([key W_top; value W_bottom; 0]).

    ``which="keys"``: only the key rows of a pair table ([S, n, c]).
    """
    if p["pairs"] is None:
        return p["T"] @ W
    key, value = p["pairs"]
    dt = key.shape[-1]
    if which == "keys":
        return key @ W[:, :dt]
    return torch.cat([key @ W[:, :dt], value @ W[:, dt:], W.new_zeros(W.shape[0], 1, W.shape[-1])], 1)


def full_T(p: dict) -> Tensor:
    """The token table T [S, V, d_model] itself (pair tables: [[key, 0], [0, value], [0, 0]])."""
    if p["pairs"] is None:
        return p["T"]
    key, value = p["pairs"]
    S, n, dt = key.shape
    z = key.new_zeros(S, n, dt)
    return torch.cat([torch.cat([key, z], -1), torch.cat([z, value], -1), key.new_zeros(S, 1, 2 * dt)], 1)


def mix_tables(p: dict, a: Tensor, J: Tensor) -> Tensor:
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


def query_rows(p: dict, J: Tensor) -> tuple[Tensor, str]:
    """Token rows of the final position [K', S, B], and which query-side rows are needed.

    For pair tables the query token ``n*n + i*`` reads key row i* and the zero row 2n, which
    adds nothing: then only the key rows are needed ("keys"). Otherwise all rows ("all").
    ``p["final_query"]`` (set by a caller whose inputs all end in a query token: the training
    batches of a task whose ``query_pos`` is last) says so without reading J back from the device.
    """
    J_last = J[..., -1]
    if p["pairs"] is not None:
        if p.get("final_query") or bool((J_last[1] == 2 * p["pairs"][0].shape[1]).all()):
            return J_last[:1], "keys"
    return J_last, "all"


def mlp(ws: dict, x: Tensor) -> Tensor:
    """A block's MLP at one position per input, ``relu(x W_in + b_in) W_out + b_out`` [S, B, d]."""
    hidden = torch.relu(x @ ws["W_in"] + ws["b_in"][:, None])  # [S, B, d_mlp]
    return hidden @ ws["W_out"] + ws["b_out"][:, None]
