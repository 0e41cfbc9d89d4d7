"""The five presentations of function evaluation (Strobl, Angluin & Frank, Section 1).

A function f: [n] -> [n] is given as a key-value table plus a target key i*; the answer is
f(i*). The token layout is a contract that every model, construction and probe relies on:

==== ============================== ========== ============ =====================================
case presentation                   length     d_vocab      position j holds
==== ============================== ========== ============ =====================================
1    no keys                        n + 1      n            f(j) for j < n; i* at n
2    same position, ordered keys    n + 1      n*n + n      pair token k_j*n + v_j (k_j = j); n*n + i* at n
3    same position, permuted keys   n + 1      n*n + n      pair token k_j*n + v_j (keys permuted); n*n + i* at n
4    consecutive, ordered keys      2n + 1     n            k at 2j, v at 2j+1 (k_j = j); i* at 2n
5    consecutive, permuted keys     2n + 1     n            k at 2j, v at 2j+1 (keys permuted); i* at 2n
==== ============================== ========== ============ =====================================

The prediction of a model is ``logits[:, -1].argmax(-1)`` over the n outputs.

Axis names follow TransformerLens: ``batch``, ``pos``, ``n`` (table size).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
import math
from typing import Literal, Sequence

import torch
from jaxtyping import Int
from torch import Tensor

CASES = (1, 2, 3, 4, 5)
FUNCTIONS = ("permutation", "any")
Function = Literal["permutation", "any"]

#: Cases whose keys are permuted per input (the others have keys 0..n-1 in order, or none).
PERMUTED = (3, 5)
#: Cases that store key and value in one token (pair tokens).
SAME_POSITION = (2, 3)
#: Cases that store key and value in consecutive positions.
CONSECUTIVE = (4, 5)


def check_case(case: int) -> int:
    if isinstance(case, bool) or not isinstance(case, int) or case not in CASES:
        raise ValueError(f"case={case!r} is not a presentation; accepted: one of {CASES}")
    return case


def check_n(n: int, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum:
        raise ValueError(f"n={n!r} is not a table size; accepted: an integer >= {minimum}")
    return n


def check_function(function: str) -> str:
    if function not in FUNCTIONS:
        raise ValueError(f"function={function!r}; accepted: one of {FUNCTIONS}")
    return function


def seq_len(case: int, n: int) -> int:
    """Length of an input: n + 1 for cases 1-3, 2n + 1 for cases 4-5."""
    check_case(case), check_n(n)
    return 2 * n + 1 if case in CONSECUTIVE else n + 1


def d_vocab(case: int, n: int) -> int:
    """Input vocabulary: n*n pair tokens plus n query tokens in cases 2-3, else n."""
    check_case(case), check_n(n)
    return n * n + n if case in SAME_POSITION else n


def query_pos(case: int, n: int) -> int:
    """Position of the target key i* (always the last one)."""
    return seq_len(case, n) - 1


def _as_long(x, name: str) -> Tensor:
    if isinstance(x, Tensor):
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise ValueError(f"{name} has dtype {x.dtype}; accepted: an integer tensor")
        return x.long()
    try:
        t = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"{name}={x!r} is not an integer array: {e}") from None
    if t.numel() == 0:
        return t.long()
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name}={x!r} is not an integer array; accepted: integers")
    return t.long()


def _check_range(t: Tensor, name: str, n: int) -> None:
    if t.numel() and (t.min() < 0 or t.max() >= n):
        bad = t[(t < 0) | (t >= n)][0].item()
        raise ValueError(f"{name} holds {bad}, outside the accepted range 0..{n - 1}")


def _check_permutations(keys: Tensor, n: int) -> None:
    ok = (keys.sort(dim=-1).values == torch.arange(n, device=keys.device)).all(dim=-1)
    if not ok.all():
        row = int((~ok).nonzero()[0, 0])
        raise ValueError(
            f"keys row {row} = {keys[row].tolist()} is not a permutation of 0..{n - 1}"
        )


def encode(
    case: int,
    keys: Sequence[int] | Tensor | None,
    values: Sequence[int] | Tensor,
    target: int | Sequence[int] | Tensor,
) -> Int[Tensor, "batch pos"]:
    """Lay out key-value tables and target keys as tokens.

    ``values`` is ``[n]`` or ``[batch, n]`` (``values[..., j]`` is the value stored with
    ``keys[..., j]``); ``keys`` has the same shape, or is None (case 1 ignores keys; cases 2
    and 4 then use 0..n-1). ``target`` is an int or ``[batch]``. Returns ``[batch, pos]``.
    """
    check_case(case)
    values = _as_long(values, "values")
    if values.ndim not in (1, 2):
        raise ValueError(f"values has shape {tuple(values.shape)}; accepted: [n] or [batch, n]")
    if values.ndim == 1:
        values = values[None]
    batch, n = values.shape
    check_n(n)
    _check_range(values, "values", n)
    ordered = torch.arange(n, device=values.device).expand(batch, n)
    if keys is None:
        if case in PERMUTED:
            raise ValueError(f"case {case} has permuted keys: keys=None is not accepted")
        keys = ordered
    else:
        keys = _as_long(keys, "keys").to(values.device)
        if keys.ndim == 1:
            keys = keys[None].expand(batch, -1)
        if keys.shape != (batch, n):
            raise ValueError(
                f"keys has shape {tuple(keys.shape)}; accepted: the shape of values {(batch, n)}"
            )
        _check_range(keys, "keys", n)
        if case in (1, 2, 4) and not (keys == ordered).all():
            raise ValueError(f"case {case} needs keys 0..{n - 1} in order; got {keys[0].tolist()}")
        _check_permutations(keys, n)
    target = _as_long(target, "target").to(values.device)
    if target.ndim == 0:
        target = target.expand(batch)
    if target.shape != (batch,):
        raise ValueError(f"target has shape {tuple(target.shape)}; accepted: () or ({batch},)")
    _check_range(target, "target", n)
    return _layout(case, n, keys, values, target)


def _layout(case: int, n: int, keys: Tensor, values: Tensor, target: Tensor) -> Tensor:
    """Token layout without checks (the caller guarantees valid input)."""
    if case == 1:
        return torch.cat([values, target[:, None]], dim=1)
    if case in SAME_POSITION:
        return torch.cat([keys * n + values, (n * n + target)[:, None]], dim=1)
    pairs = torch.stack([keys, values], dim=2).flatten(1)  # [batch, 2n]: k0 v0 k1 v1 ...
    return torch.cat([pairs, target[:, None]], dim=1)


def sample(
    case: int,
    n: int,
    batch_size: int,
    *,
    generator: torch.Generator | None = None,
    function: Function = "permutation",
    device: torch.device | str | None = None,
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch"]]:
    """Random inputs and their answers f(i*).

    f is a uniformly random permutation of [n] (the paper's experiments) or, with
    ``function="any"``, a uniformly random function [n] -> [n] (the theorems). Keys are a fresh
    random permutation per input in cases 3 and 5. The target key is uniform on [n].
    """
    check_case(case), check_n(n), check_function(function)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: an integer >= 1")
    g = generator
    dev = g.device if g is not None else device
    shape = (batch_size, n)
    if function == "permutation":
        values = torch.rand(shape, generator=g, device=dev).argsort(dim=1)
    else:
        values = torch.randint(0, n, shape, generator=g, device=dev)
    if case in PERMUTED:
        keys = torch.rand(shape, generator=g, device=dev).argsort(dim=1)
    else:
        keys = torch.arange(n, device=dev).expand(shape)
    target = torch.randint(0, n, (batch_size,), generator=g, device=dev)
    answers = values.gather(1, (keys == target[:, None]).int().argmax(1, keepdim=True))[:, 0]
    return _layout(case, n, keys, values, target), answers


def count_inputs(case: int, n: int, function: Function = "any") -> int:
    """Number of distinct inputs: (#functions) x (#key orders) x n targets."""
    check_case(case), check_n(n), check_function(function)
    functions = math.factorial(n) if function == "permutation" else n**n
    orders = math.factorial(n) if case in PERMUTED else 1
    return functions * orders * n


def enumerate_inputs(
    case: int, n: int, function: Function = "any", *, limit: int = 5_000_000
) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch"]]:
    """Every input of the task (for small n) and its answer, in a fixed order."""
    total = count_inputs(case, n, function)
    if total > limit:
        raise ValueError(
            f"case {case}, n={n}, function={function!r} has {total} inputs; accepted: at most "
            f"limit={limit} (use sample() for larger n)"
        )
    if function == "permutation":
        fs = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
    else:
        fs = torch.tensor(list(itertools.product(range(n), repeat=n)), dtype=torch.long)
    if case in PERMUTED:
        orders = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
    else:
        orders = torch.arange(n)[None]
    # values stored with key k_j are f(k_j): gather f along the key order.
    F, O, T = fs.shape[0], orders.shape[0], n
    keys = orders[None, :, None, :].expand(F, O, T, n).reshape(-1, n)
    vals = fs[:, None, None, :].expand(F, O, T, n).reshape(-1, n).gather(1, keys)
    target = torch.arange(n)[None, None, :].expand(F, O, T).reshape(-1)
    answers = fs[:, None, None, :].expand(F, O, T, n).reshape(-1, n).gather(1, target[:, None])
    return _layout(case, n, keys, vals, target), answers[:, 0]


def decode(case: int, n: int, tokens: Sequence[int]) -> tuple[list[int], list[int], int]:
    """Read one input back as plain Python (keys, values, target); validates the layout."""
    check_case(case), check_n(n)
    toks = [int(t) for t in tokens]
    if len(toks) != seq_len(case, n):
        raise ValueError(
            f"an input of case {case} with n={n} has length {seq_len(case, n)}; got {len(toks)}"
        )
    vocab = d_vocab(case, n)
    for t in toks:
        if not 0 <= t < vocab:
            raise ValueError(f"token {t} is outside the vocabulary 0..{vocab - 1}")
    if case == 1:
        if toks[-1] >= n:
            raise ValueError(f"target token {toks[-1]} is outside 0..{n - 1}")
        return list(range(n)), toks[:n], toks[n]
    if case in SAME_POSITION:
        if any(t >= n * n for t in toks[:n]) or toks[n] < n * n:
            raise ValueError(f"case {case} needs n pair tokens < {n * n} then a query token >= {n * n}")
        keys, values, target = [t // n for t in toks[:n]], [t % n for t in toks[:n]], toks[n] - n * n
    else:
        keys, values, target = toks[0 : 2 * n : 2], toks[1 : 2 * n : 2], toks[2 * n]
    if sorted(keys) != list(range(n)) or (case not in PERMUTED and keys != list(range(n))):
        raise ValueError(f"keys {keys} are not valid for case {case} with n={n}")
    return keys, values, target


def evaluate(case: int, n: int, tokens: Sequence[int]) -> int:
    """Plain-Python reference: the answer f(i*) of one input, by looking the key up."""
    keys, values, target = decode(case, n, tokens)
    for k, v in zip(keys, values):
        if k == target:
            return v
    raise AssertionError("unreachable: keys are a permutation")  # pragma: no cover


def check_tokens(case: int, n: int, tokens) -> Int[Tensor, "batch pos"]:
    """Validate a batch of tokens for (case, n): dtype, shape and vocabulary range."""
    check_case(case), check_n(n)
    tokens = _as_long(tokens, "tokens")
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[1] != seq_len(case, n):
        raise ValueError(
            f"tokens has shape {tuple(tokens.shape)}; accepted: [batch, {seq_len(case, n)}] "
            f"for case {case} with n={n}"
        )
    _check_range(tokens, "tokens", d_vocab(case, n))
    return tokens


def answers(case: int, n: int, tokens) -> Int[Tensor, "batch"]:
    """Vectorised reference: f(i*) for each row of tokens, read off the table in the tokens.

    The batched twin of :func:`evaluate` (tested against it); validates shape and vocabulary.
    """
    tokens = check_tokens(case, n, tokens)
    if case == 1:
        values, target = tokens[:, :n], tokens[:, n]
        if (target >= n).any():
            raise ValueError(f"case 1 target tokens must be in 0..{n - 1}")
        return values.gather(1, target[:, None])[:, 0]
    if case in SAME_POSITION:
        pairs, target = tokens[:, :n], tokens[:, n] - n * n
        if (pairs >= n * n).any() or (target < 0).any():
            raise ValueError(f"case {case} needs n pair tokens < {n * n} then a query token >= {n * n}")
        keys, values = pairs // n, pairs % n
    else:
        keys, values, target = tokens[:, 0 : 2 * n : 2], tokens[:, 1 : 2 * n : 2], tokens[:, 2 * n]
    _check_permutations(keys, n)
    if case not in PERMUTED and not (keys == torch.arange(n)).all():
        raise ValueError(f"case {case} needs keys 0..{n - 1} in order")
    hit = (keys == target[:, None]).int().argmax(1, keepdim=True)
    return values.gather(1, hit)[:, 0]


@dataclass(frozen=True)
class Task:
    """One presentation of function evaluation, looked up by case number (:func:`get`).

    Every model built or loaded by ``interp`` carries its task as ``model.task``; the table
    size is ``model.cfg.d_vocab_out``. :func:`of` reads both.
    """

    case: int
    name: str

    @property
    def permuted(self) -> bool:
        return self.case in PERMUTED

    @property
    def same_position(self) -> bool:
        return self.case in SAME_POSITION

    @property
    def consecutive(self) -> bool:
        return self.case in CONSECUTIVE

    def seq_len(self, n: int) -> int:
        return seq_len(self.case, n)

    def d_vocab(self, n: int) -> int:
        return d_vocab(self.case, n)

    def query_pos(self, n: int) -> int:
        return query_pos(self.case, n)

    def sample(self, n: int, batch: int, **kw) -> Int[Tensor, "batch pos"]:
        return sample(self.case, n, batch, **kw)

    def answers(self, n: int, tokens) -> Int[Tensor, "batch"]:
        return answers(self.case, n, tokens)

    def __repr__(self) -> str:
        return f"Task(case={self.case}, {self.name!r})"


TASKS = {
    1: Task(1, "no keys"),
    2: Task(2, "same position, ordered keys"),
    3: Task(3, "same position, permuted keys"),
    4: Task(4, "consecutive, ordered keys"),
    5: Task(5, "consecutive, permuted keys"),
}


def get(case: int) -> Task:
    """The presentation with this case number (1-5)."""
    return TASKS[check_case(case)]


def of(model, case: int | None = None, n: int | None = None) -> tuple[Task, int]:
    """``(task, n)`` of a model: its ``model.task`` and ``model.cfg.d_vocab_out``.

    ``case=`` and ``n=`` are still accepted and checked against the model's (a ValueError
    names both on a mismatch); a model without a task (built outside ``interp``) needs
    ``case=``.
    """
    own = getattr(model, "task", None)
    model_n = model.cfg.d_vocab_out
    if n is not None and check_n(n) != model_n:
        raise ValueError(f"n={n!r} but the model's table size is n={model_n} (cfg.d_vocab_out)")
    if own is None:
        if case is None:
            raise ValueError("this model carries no task (model.task is missing: built outside "
                             "interp?); pass case= (one of 1-5) or use interp.models.build_model")
        return get(case), model_n
    if case is not None and check_case(case) != own.case:
        raise ValueError(f"case={case!r} but the model was built for case {own.case} ({own.name})")
    return own, model_n
