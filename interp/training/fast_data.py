"""The fast engine's data: what :func:`interp.core.tasks.sample` draws, as table rows.

:func:`sample_indices` draws exactly what :func:`interp.core.tasks.sample` draws (same
generator calls, same permutations, ties included, with a faster argsort) and returns the rows
of the token table each position reads instead of tokens (:func:`token_indices` for given
tokens). A registered presentation with a ``sample`` of its own is drawn by it, its tokens read
as table rows, so every engine trains on the task's sampler (:func:`mirrors`). Used by
:mod:`interp.training.fast_ensemble` and :mod:`interp.training.fast_graph`.
"""

from __future__ import annotations

import functools

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

    A presentation whose own ``sample`` (or ``sample_keys``) is not :class:`tasks.Task`'s draws
    with it, and its tokens become table rows (:func:`token_indices`): the engine trains on
    the batches the reference loop and the evaluation draw, whatever the sampler does.
    ``out`` (optional): numpy views ``(J [K, batch, pos], answers [batch])`` to fill in place.
    """
    g, task = generator, tasks.get(case)
    if not mirrors(task):
        return _own_sample(task, n, batch_size, g, function, key_order, out)
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
    _fill(J, _positions(task, n), task.same_position, n, keys, values, target)
    if out is None:
        return torch.from_numpy(J), torch.from_numpy(answers)
    return out


def mirrors(task: tasks.Task) -> bool:
    """Whether ``task`` draws with :meth:`tasks.Task.sample`'s own draws, which
    :func:`sample_indices` repeats without tokens (else it calls the task's sampler)."""
    cls = type(task)
    return cls.sample is tasks.Task.sample and cls.sample_keys is tasks.Task.sample_keys


def _own_sample(task, n, batch_size, g, function, key_order, out):
    """The task's own ``sample``, as table rows (and its answers), checked as the trainer checks
    it before training (:func:`interp.training.runs.check_sampler`)."""
    from interp.training.runs import check_sample

    tokens, answers = check_sample(task, n, batch_size, task.sample(
        n, batch_size, generator=g, function=function, key_order=key_order))
    J = token_indices(task.same_position, n, tokens)
    if out is None:
        return J, answers
    out[0][...] = J.numpy()
    out[1][...] = answers.numpy()
    return out


def _fill(J: np.ndarray, positions: tuple, pairs: bool, n: int, keys, values, target) -> None:
    """Write the rows of keys, values and target at the task's positions into J [K, batch, pos]:
    a pair token's key row in the key table and its value row after n (query: row 2n), or a
    token of its own, whose id is the row."""
    key_pos, value_pos, query = positions
    if pairs:
        J[0][:, key_pos] = keys
        J[1][:, value_pos] = values + n
        J[1, :, query] = 2 * n
    else:
        if key_pos is not None:
            J[0][:, key_pos] = keys
        J[0][:, value_pos] = values
    J[0, :, query] = target


@functools.lru_cache(maxsize=None)
def _positions(task: tasks.Task, n: int) -> tuple[np.ndarray | None, np.ndarray, int]:
    """The task's key positions (None: no key tokens), value positions and query position
    (:class:`tasks.Task`, the one source), once per (task, n); checked against the task's own
    tokens of one table, so a layout whose tokens are not its keys and values at those
    positions (nor pair tokens) is refused by name, never trained on the wrong data."""
    keys = task.key_positions(n)
    out = (None if keys is None else keys.numpy(), task.value_positions(n).numpy(), task.query_pos(n))
    k = (torch.arange(n).roll(1) if task.permuted else torch.arange(n))[None]
    v = (torch.arange(n) * 7 + 3)[None] % n
    J = np.zeros((2 if task.same_position else 1, 1, task.seq_len(n)), np.int64)
    _fill(J, out, task.same_position, n, k.numpy(), v.numpy(), n - 1)
    tokens = task.layout(n, k, v, torch.tensor([n - 1]))
    if not np.array_equal(J, token_indices(task.same_position, n, tokens).numpy()):
        raise ValueError(f"{task!r}: its tokens are not its keys and values at key_positions / "
                         "value_positions (nor pair tokens), which the fast engine reads; train "
                         "it with engine='reference'")
    return out


def token_indices(pairs: bool, n: int, tokens: Int[Tensor, "... pos"]) -> Int[Tensor, "K ... pos"]:
    """Rows of the token table T read by each position (``pairs``: cases 2 and 3)."""
    if not pairs:
        return tokens[None]
    pair = tokens < n * n
    key = torch.where(pair, tokens // n, tokens - n * n)
    value = torch.where(pair, n + tokens % n, torch.full_like(tokens, 2 * n))
    return torch.stack([key, value])
