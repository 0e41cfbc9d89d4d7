"""Pair tokens (cases 2 and 3): W_E as the concatenation of a key table and a value table.

The paper embeds a (key, value) pair as the concatenation ``[key_table[k], value_table[v]]``
(d_model = 2 d_token). We keep two small learned tables, ``embed.parametrizations.W_E.original0``
(key table, [n, d_token]) and ``...original1`` (value table, [n, d_token]), and expose their
concatenation as ``embed.W_E`` through ``torch.nn.utils.parametrize``; ``hook_embed``, caches and
``model.W_E`` work as usual. The query token ``n*n + i*`` embeds as ``[key_table[i*], 0]``: it
carries the target key in the key half and nothing in the value half, as in Theorem 3.1's
x_n = [cs(i*), 0]. ``model.W_E`` is computed from the tables on every read, so a write into it
could change nothing: it raises :class:`ReadOnlyWeightError` instead (``W_E[:] = 0``,
``W_E.data[:] = 0``, ``W_E.zero_()``, ``nn.init.*_``). Assigning a whole matrix,
``model.embed.W_E = M``, writes through to the tables when ``M`` has the pair structure and
raises otherwise. Edit :func:`pair_tables`, or take ``interp.core.models.to_vanilla`` (a
materialised, plain W_E). ``interp.core.models`` re-exports every name here.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils import parametrize

class ReadOnlyWeightError(RuntimeError):
    """A write into a weight that is computed on every read (a pair-token model's W_E)."""


_NOT_WRITES = ("requires_grad_", "retain_grad", "share_memory_")


class _ComputedWeight(torch.Tensor):
    """The W_E a pair-token model computes from its tables: reads behave as usual (results are
    plain tensors, autograd intact); writes raise :class:`ReadOnlyWeightError`, since the
    next read recomputes W_E and would silently drop them. ``.data`` and ``.detach()`` keep
    the guard, so ``W_E.data[:] = 0`` raises too."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        attr = getattr(getattr(func, "__self__", None), "__name__", "")
        in_place = name.endswith("_") and not name.startswith("__") and name not in _NOT_WRITES
        if (name == "__setitem__" or in_place
                or (name == "__set__" and attr == "data")):
            raise ReadOnlyWeightError(
                f"{name}{'' if name != '__set__' else ' of .data'} on W_E of a pair-token model "
                "(cases 2-3): W_E is computed from the key and value tables on every read, so "
                "the write would change nothing. Edit the tables: `key, value = "
                "interp.models.pair_tables(model)` then `with torch.no_grad(): key[3] = ...`; "
                "or assign a whole pair-structured matrix (`model.embed.W_E = M`); or take "
                "`interp.models.to_vanilla(model)`, whose W_E is a plain parameter")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if (name == "__get__" and attr == "data") or name == "detach":
            return out.as_subclass(cls)
        return out


class PairEmbedding(nn.Module):
    """W_E[k*n + v] = [key[k], value[v]] for pair tokens; W_E[n*n + i] = [key[i], 0].

    A ``torch.nn.utils.parametrize`` parametrization: the trainable tensors are the key table
    ``original0`` [n, d_token] and the value table ``original1`` [n, d_token].
    """

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.check_structure = False  # set once registered: the first right_inverse is the init

    def forward(self, key_table: torch.Tensor, value_table: torch.Tensor) -> torch.Tensor:
        n, d = key_table.shape
        pairs = torch.cat(
            [key_table.repeat_interleave(n, dim=0), value_table.repeat(n, 1)], dim=1
        )  # [n*n, 2 d_token]: row k*n + v
        queries = torch.cat([key_table, torch.zeros_like(value_table)], dim=1)  # [n, 2 d_token]
        return torch.cat([pairs, queries], dim=0).as_subclass(_ComputedWeight)  # [d_vocab, d_model]

    def right_inverse(self, W_E: torch.Tensor):
        """``model.embed.W_E = M``: the tables read off M (rows k*n + 0 and 0*n + v); once
        registered, M must have the pair structure exactly, or nothing is written."""
        n = self.n
        d = W_E.shape[1] // 2
        key_table = W_E[: n * n : n, :d].detach().clone()  # rows k*n + 0
        value_table = W_E[:n, d:].detach().clone()  # rows 0*n + v
        if self.check_structure:
            with torch._C.DisableTorchFunctionSubclass():
                rebuilt = self.forward(key_table, value_table)
                W = torch.as_tensor(W_E).to(rebuilt.dtype)
            if W.shape != rebuilt.shape:
                raise ValueError(f"W_E of shape {tuple(W.shape)}; accepted: {tuple(rebuilt.shape)}")
            bad = (W != rebuilt).any(dim=1).nonzero()
            if len(bad):
                raise ValueError(
                    f"row {int(bad[0])} of the new W_E breaks the pair structure (row k*n + v "
                    "= [key[k], value[v]], row n*n + i = [key[i], 0]), so it cannot be written "
                    "to the key and value tables; nothing was written. Edit "
                    "interp.models.pair_tables(model), or use interp.models.to_vanilla(model)")
        return key_table, value_table


def tie_pair_embedding(model: HookedTransformer, n: int) -> HookedTransformer:
    """Make embed.W_E the concatenation of a key table and a value table (cases 2 and 3)."""
    pair = PairEmbedding(n)
    parametrize.register_parametrization(model.embed, "W_E", pair)
    pair.check_structure = True
    return model


def has_pair_embedding(model: HookedTransformer) -> bool:
    return parametrize.is_parametrized(model.embed, "W_E")


def pair_tables(model: HookedTransformer) -> tuple[nn.Parameter, nn.Parameter]:
    """The trainable ``(key_table, value_table)`` [n, d_token] behind a pair-token model's W_E
    (cases 2-3). Edit these, not ``W_E``: W_E is computed from them on every read."""
    if not has_pair_embedding(model):
        raise ValueError("this model has no pair embedding (cases 2-3 only; see tie_pair_embedding)")
    tables = model.embed.parametrizations.W_E
    return tables.original0, tables.original1


def check_decodable(model, ids) -> None:
    """Raise a ValueError when ``model.to_string`` / ``to_str_tokens`` would label output classes as
    pair tokens: in cases 2-3 class k is not token k (token k is the pair ``(0,k)``), so ids that
    are all below n and are not a whole input (n pairs, then a query) read as classes as well
    as tokens; the refusal says how to print either. Other cases label id t as ``t``, the class's
    own name, and anything that holds an id >= n is no class; both decode as usual."""
    tokenizer = getattr(model, "tokenizer", None)
    task, n = getattr(tokenizer, "task", None), getattr(tokenizer, "n", None)
    if task is None or not task.same_position or isinstance(ids, str):
        return
    try:
        t = torch.as_tensor(ids)
    except (TypeError, ValueError, RuntimeError):
        return  # a list of strings or tensors: TransformerLens reads it as it does
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() == 0:
        return
    rows = t.reshape(1, -1) if t.dim() < 2 else t.reshape(-1, t.shape[-1])
    for row in rows.tolist():
        whole = len(row) == tokenizer.n_ctx and all(i < n * n for i in row[:-1]) and row[-1] >= n * n
        if not whole and all(0 <= i < n for i in row):
            raise ValueError(
                f"ids {row[:8]}{' ...' if len(row) > 8 else ''} are all below n = {n}: as output classes "
                f"(logits.argmax(-1)) they are {row[:8]}, but a pair-token model (case {task.case}) labels "
                f"token k as the pair '(0,k)'; print a prediction as its class (prediction.tolist()), and "
                "label tokens from a whole input (n pairs, then the query) or with model.tokenizer.label(id)")
