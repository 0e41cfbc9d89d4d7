"""The fast engine's data: what :func:`interp.core.tasks.sample` draws, as table rows.

:func:`sample_indices` draws exactly what :func:`interp.core.tasks.sample` draws (same
generator calls, same permutations, ties included, with a faster argsort) and returns the rows
of the token table each position reads instead of tokens (:func:`token_indices` for given
tokens). Used by :mod:`interp.training.fast_ensemble` and :mod:`interp.training.fast_graph`.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import tasks

# ---------------------------------------------------------------------------------------------
# Data: tasks.sample, exactly, with a faster argsort.


def _argsort_rows(r: Float[Tensor, "batch n"]) -> Int[Tensor, "batch n"]:
    """``r.argsort(dim=1)`` for ``torch.rand`` float32 output, bit for bit.

    torch.rand's float32 values are k / 2**24 with integer k < 2**24, so
    ``key = k << b | column`` (b bits for the column) is an integer with no ties whose order is
    k's order with ties broken by column. numpy sorts integer rows fast (SIMD), and the sorted
    keys carry the permutation in their low bits. Rows where k ties (about 3e-4 per row of
    100) are redone with ``torch.argsort`` itself, whose tie order is its own (and row by row
    the same as in a batch).
    """
    batch, n = r.shape
    bits = max(1, (n - 1).bit_length())
    dtype = np.int32 if 24 + bits <= 31 else np.int64
    key = (r.numpy() * np.float32(2**24)).astype(dtype) << dtype(bits)
    key |= np.arange(n, dtype=dtype)
    key.sort(axis=1)
    out = torch.from_numpy((key & dtype((1 << bits) - 1)).astype(np.int64))
    k = key >> dtype(bits)
    ties = (k[:, 1:] == k[:, :-1]).any(axis=1)
    if ties.any():
        rows = torch.from_numpy(np.nonzero(ties)[0])
        out[rows] = r[rows].argsort(dim=1)
    return out


def _argsort_np(r: Tensor) -> np.ndarray:
    return _argsort_rows(r).numpy()


def sample_indices(
    case: int,
    n: int,
    batch_size: int,
    *,
    generator: torch.Generator,
    function: str = "permutation",
    key_order: str = "sequence",
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[Int[Tensor, "K batch pos"], Int[Tensor, "batch"]]:
    """``token_indices`` of ``tasks.sample``'s batch and its answers (same draws), no tokens.

    ``out`` (optional): numpy views ``(J [K, batch, pos], answers [batch])`` to fill in place.
    """
    g, task = generator, tasks.get(case)
    shape = (batch_size, n)
    if function == "permutation":
        values = _argsort_np(torch.rand(shape, generator=g))
    else:
        values = torch.randint(0, n, shape, generator=g).numpy()
    keys = None
    if task.permuted:
        rows = batch_size if tasks.check_key_order(key_order) == "sequence" else 1
        keys = np.broadcast_to(_argsort_np(torch.rand((rows, n), generator=g)), shape)
    target = torch.randint(0, n, (batch_size,), generator=g).numpy()
    K = 2 if task.same_position else 1
    P = tasks.seq_len(case, n)
    if out is None:
        J, answers = np.empty((K, batch_size, P), np.int64), np.empty(batch_size, np.int64)
    else:
        J, answers = out
    rows = np.arange(batch_size)
    if keys is None:
        answers[:] = values[rows, target]
        keys = np.broadcast_to(np.arange(n), shape)
    else:
        answers[:] = values[rows, np.argmax(keys == target[:, None], axis=1)]
    if task.same_position:
        J[0, :, :n] = keys
        J[1, :, :n] = values + n
        J[1, :, n] = 2 * n
    elif task.consecutive:
        J[0, :, 0 : 2 * n : 2] = keys
        J[0, :, 1 : 2 * n : 2] = values
    else:  # no keys (case 1): the values in slot order
        J[0, :, :n] = values
    J[0, :, P - 1] = target
    if out is None:
        return torch.from_numpy(J), torch.from_numpy(answers)
    return out


def token_indices(pairs: bool, n: int, tokens: Int[Tensor, "... pos"]) -> Int[Tensor, "K ... pos"]:
    """Rows of the token table T read by each position (``pairs``: cases 2 and 3)."""
    if not pairs:
        return tokens[None]
    pair = tokens < n * n
    key = torch.where(pair, tokens // n, tokens - n * n)
    value = torch.where(pair, n + tokens % n, torch.full_like(tokens, 2 * n))
    return torch.stack([key, value])
