"""The three token layouts of the five presentations, and reading and writing tokens in them.

:class:`Layout` holds what every presentation does the same way (encode, check, read back,
answer, label); its three subclasses hold where the tokens go: :class:`NoKeys` (case 1: values
only), :class:`PairTokens` (cases 2-3: one token per key-value pair) and :class:`Consecutive`
(cases 4-5: key and value at 2j and 2j + 1). A :class:`interp.core.tasks.Task` is one of these
plus its case, name, key order (``permuted``) and constructions; use it through
:mod:`interp.core.tasks` (the layout table is in its docstring).

A layout is the one source of position facts: :meth:`Layout.key_positions`,
:meth:`Layout.value_positions`, :meth:`Layout.query_pos` and, for the constructions' named
mechanisms, :meth:`Layout.construction_targets` (where each layer attends). The fast engine's
data, hooks, probes and views read them; a new family (or a subclass that moves a token) says
them once here.
"""

from __future__ import annotations

import abc
import numbers
from typing import ClassVar, Literal, Sequence

import torch
from jaxtyping import Int
from torch import Tensor

FUNCTIONS = ("permutation", "any")
Function = Literal["permutation", "any"]


def check_n(n: int, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < minimum:
        raise ValueError(f"n={n!r} is not a table size; accepted: an integer >= {minimum}")
    return n


def check_function(function: str) -> str:
    if function not in FUNCTIONS:
        raise ValueError(f"function={function!r}; accepted: one of {FUNCTIONS}")
    return function


def as_long(x, name: str) -> Tensor:
    """``x`` as a long tensor; a ValueError naming ``name`` for floats, bools or non-arrays."""
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


def check_range(t: Tensor, name: str, n: int) -> None:
    if t.numel() and (t.min() < 0 or t.max() >= n):
        bad = t[(t < 0) | (t >= n)][0].item()
        raise ValueError(f"{name} holds {bad}, outside the accepted range 0..{n - 1}")


def check_permutations(keys: Tensor, n: int) -> None:
    ok = (keys.sort(dim=-1).values == torch.arange(n, device=keys.device)).all(dim=-1)
    if not ok.all():
        row = int((~ok).nonzero()[0, 0])
        raise ValueError(f"keys row {row} = {keys[row].tolist()} is not a permutation of 0..{n - 1}")


class Layout(abc.ABC):
    """What every presentation does alike; a subclass says where the tokens go.

    The object it belongs to has ``case`` and ``permuted`` (keys in a fresh order per input).
    Methods take the table size ``n``. Slot j is the j-th (key, value) pair of the table.
    """

    case: int
    permuted: bool
    same_position: ClassVar[bool] = False  # key and value in one pair token (cases 2-3)
    # key and value in tokens of their own at consecutive positions (cases 4-5: 2j and 2j + 1;
    # which comes first is key_pos / value_pos's to say, never this flag's)
    consecutive: ClassVar[bool] = False

    # ---- where things are (the subclasses)

    @abc.abstractmethod
    def seq_len(self, n: int) -> int:
        ...

    def d_vocab(self, n: int) -> int:
        return check_n(n)

    def d_model(self, d_token: int) -> int:
        """The paper's residual width for token width d_token (pair tokens: key + value)."""
        return d_token

    @abc.abstractmethod
    def value_pos(self, n: int, j: int) -> int:
        """Position of the token holding slot j's value."""

    @abc.abstractmethod
    def key_pos(self, n: int, j: int) -> int | None:
        """Position of the token holding slot j's key (the pair token itself in cases 2-3);
        None when no token holds it (case 1: the position is the key)."""

    def query_token(self, n: int, target):
        """The token id (or ids) of target key(s) i* at the query position."""
        return target

    @abc.abstractmethod
    def layout(self, n: int, keys: Tensor, values: Tensor, target: Tensor) -> Int[Tensor, "batch pos"]:
        """Tokens of [batch, n] keys and values and [batch] targets, unchecked."""

    @abc.abstractmethod
    def split(self, n: int, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(keys [batch, n], values [batch, n], target [batch])`` of tokens of the right shape
        and vocabulary; keys are not checked."""

    @abc.abstractmethod
    def _decode(self, n: int, toks: list[int]) -> tuple[list[int], list[int], int]:
        ...

    @abc.abstractmethod
    def _labels(self, n: int, keys: list[int], values: list[int]) -> list[str]:
        ...

    # ---- derived

    def query_pos(self, n: int) -> int:
        """Position of the target key i*: the last one in the paper's five presentations; a
        layout that moves it overrides this, and every reader (the input check and tokenizer,
        both engines, probes, interchange inputs, views) takes it from here."""
        return self.seq_len(n) - 1

    def answer_pos(self, n: int) -> int:
        """Position whose logits are the answer: the final one, for every presentation (the
        engines, the evaluation pass and the task loss read ``logits[:, -1]``). Not a choice a
        presentation makes: :meth:`check_layout` refuses a layout that says otherwise."""
        return self.seq_len(n) - 1

    def _slot(self, n: int, j: int) -> int:
        if isinstance(j, bool) or not isinstance(j, numbers.Integral) or not 0 <= j < check_n(n):
            raise ValueError(f"slot j={j!r}; accepted: an integer in 0..{n - 1}")
        return int(j)

    def value_positions(self, n: int) -> Int[Tensor, "n"]:
        """:meth:`value_pos` of every slot."""
        return torch.tensor([self.value_pos(n, j) for j in range(check_n(n))], dtype=torch.long)

    def key_positions(self, n: int) -> Int[Tensor, "n"] | None:
        """:meth:`key_pos` of every slot (None in case 1)."""
        pos = [self.key_pos(n, j) for j in range(check_n(n))]
        return None if pos[0] is None else torch.tensor(pos, dtype=torch.long)

    def moves_keys_first(self, n_layers: int) -> bool:
        """Does the construction with ``n_layers`` layers first move each key onto its value's
        position (layer 0) before the last layer matches? Permuted keys in tokens of their own
        and two layers: Theorem 3.8 (case 5)."""
        return self.permuted and self.consecutive and n_layers == 2

    def key_move_positions(self, n: int) -> Int[Tensor, "pos"]:
        """Per query position, where a keys-first layer 0 attends: the key position of the slot
        the position belongs to (its key's or its value's token); the query attends itself.
        Case 5: ``2 * (p // 2)``."""
        out = torch.arange(self.seq_len(n))
        keys = self.key_positions(n)
        if keys is not None:
            out[self.value_positions(n)] = keys
        return out

    def construction_targets(self, n: int, n_layers: int, keys: Int[Tensor, "batch n"],
                             target: Int[Tensor, "batch"]) -> Int[Tensor, "layer batch query_pos"]:
        """Per layer and query position, the position the construction attends (-1: no claim).

        The last layer claims the final query only: the value position of the slot whose key is
        the target. With :meth:`moves_keys_first`, layer 0 claims every query
        (:meth:`key_move_positions`). Other layers make no claim."""
        batch, pos, dev = target.shape[0], self.seq_len(n), target.device
        out = torch.full((n_layers, batch, pos), -1, dtype=torch.long, device=dev)
        slot = (keys == target[:, None]).int().argmax(dim=1)
        out[-1, :, -1] = self.value_positions(n).to(dev)[slot]
        if self.moves_keys_first(n_layers):
            out[0] = self.key_move_positions(n).to(dev).expand(batch, pos)
        return out

    @property
    def keys_by_position(self) -> bool:
        """A slot's position alone says its key: keys in order and not inside the value's token
        (cases 1 and 4, the cases with a positional QK circuit)."""
        return not self.permuted and not self.same_position

    def token_label(self, n: int, token_id: int, *, query: bool = False) -> str:
        """What :class:`interp.core.tokens.TaskTokenizer` prints for a token id: ``'t'``, or
        ``'i*=t'`` for the token at the query position (``query``; the tokenizer knows it when it
        sees a whole input). Pair-token layouts label by the id alone (their query ids differ)."""
        vocab = self.d_vocab(n)
        if not 0 <= token_id < vocab:
            raise ValueError(f"token id {token_id}; accepted: 0..{vocab - 1} (case {self.case}, n={n})")
        return f"i*={token_id}" if query else str(token_id)

    def position_labels(self, n: int, tokens) -> list[str]:
        """Labels of one input's positions by role, e.g. ``'k2'``, ``'(2,7)'``, ``'i*=4'``
        (the query's at :meth:`query_pos`, the table's in position order around it)."""
        keys, values, target = self.decode(n, self.check_tokens(n, tokens)[0].tolist())
        labels = self._labels(n, keys, values)
        labels.insert(self.query_pos(n), f"i*={target}")
        return labels

    # ---- writing and reading tokens

    def encode(self, keys, values, target) -> Int[Tensor, "batch pos"]:
        """Lay out key-value tables and target keys as tokens.

        ``values`` is ``[n]`` or ``[batch, n]`` (``values[..., j]`` is the value stored with
        ``keys[..., j]``); ``keys`` has the same shape, or is None (0..n-1; refused for permuted
        keys). ``target`` is an int or ``[batch]``. Returns ``[batch, pos]``.
        """
        values = as_long(values, "values")
        if values.ndim not in (1, 2):
            raise ValueError(f"values has shape {tuple(values.shape)}; accepted: [n] or [batch, n]")
        values = values[None] if values.ndim == 1 else values
        batch, n = values.shape
        check_n(n)
        check_range(values, "values", n)
        ordered = torch.arange(n, device=values.device).expand(batch, n)
        if keys is None:
            if self.permuted:
                raise ValueError(f"case {self.case} has permuted keys: keys=None is not accepted")
            keys = ordered
        else:
            keys = as_long(keys, "keys").to(values.device)
            keys = keys[None].expand(batch, -1) if keys.ndim == 1 else keys
            if keys.shape != (batch, n):
                raise ValueError(f"keys has shape {tuple(keys.shape)}; accepted: the shape of values "
                                 f"{(batch, n)}")
            check_range(keys, "keys", n)
            if not self.permuted and not (keys == ordered).all():
                raise ValueError(f"case {self.case} needs keys 0..{n - 1} in order; "
                                 f"got {keys[0].tolist()}")
            check_permutations(keys, n)
        target = as_long(target, "target").to(values.device)
        target = target.expand(batch) if target.ndim == 0 else target
        if target.shape != (batch,):
            raise ValueError(f"target has shape {tuple(target.shape)}; accepted: () or ({batch},)")
        check_range(target, "target", n)
        return self.layout(n, keys, values, target)

    def check_tokens(self, n: int, tokens) -> Int[Tensor, "batch pos"]:
        """Validate a batch of tokens: dtype, shape and vocabulary range."""
        tokens = as_long(tokens, "tokens")
        tokens = tokens[None] if tokens.ndim == 1 else tokens
        L = self.seq_len(n)
        if tokens.ndim != 2 or tokens.shape[1] != L:
            raise ValueError(f"tokens has shape {tuple(tokens.shape)}; accepted: [batch, {L}] "
                             f"for case {self.case} with n={n}")
        check_range(tokens, "tokens", self.d_vocab(n))
        return tokens

    def read(self, n: int, tokens) -> tuple[Tensor, Tensor, Tensor]:
        """Vectorised :meth:`decode`: ``(keys, values, target)`` of a batch, validated."""
        keys, values, target = self.split(n, self.check_tokens(n, tokens))
        check_permutations(keys, n)
        if not self.permuted and not (keys == torch.arange(n, device=keys.device)).all():
            raise ValueError(f"case {self.case} needs keys 0..{n - 1} in order")
        return keys, values, target

    def answers(self, n: int, tokens) -> Int[Tensor, "batch"]:
        """Vectorised reference: f(i*) for each row of tokens, read off the table in the tokens
        (the batched twin of :meth:`evaluate`, tested against it)."""
        keys, values, target = self.read(n, tokens)
        hit = (keys == target[:, None]).int().argmax(1, keepdim=True)
        return values.gather(1, hit)[:, 0]

    def decode(self, n: int, tokens: Sequence[int]) -> tuple[list[int], list[int], int]:
        """Read one input back as plain Python (keys, values, target); validates the layout."""
        toks = [int(t) for t in tokens]
        L, vocab = self.seq_len(n), self.d_vocab(n)
        if len(toks) != L:
            raise ValueError(f"an input of case {self.case} with n={n} has length {L}; got {len(toks)}")
        for t in toks:
            if not 0 <= t < vocab:
                raise ValueError(f"token {t} is outside the vocabulary 0..{vocab - 1}")
        keys, values, target = self._decode(n, toks)
        if sorted(keys) != list(range(n)) or (not self.permuted and keys != list(range(n))):
            raise ValueError(f"keys {keys} are not valid for case {self.case} with n={n}")
        return keys, values, target

    def evaluate(self, n: int, tokens: Sequence[int]) -> int:
        """Plain-Python reference: the answer f(i*) of one input, by looking the key up."""
        keys, values, target = self.decode(n, tokens)
        for k, v in zip(keys, values):
            if k == target:
                return v
        raise AssertionError("unreachable: keys are a permutation")  # pragma: no cover


class NoKeys(Layout):
    """Case 1: the values in key order, then i*; position j is slot j's key."""

    def seq_len(self, n):
        return check_n(n) + 1

    def value_pos(self, n, j):
        return self._slot(n, j)

    def key_pos(self, n, j):
        self._slot(n, j)
        return None

    def layout(self, n, keys, values, target):
        return torch.cat([values, target[:, None]], dim=1)

    def split(self, n, tokens):
        keys = torch.arange(n, device=tokens.device).expand(tokens.shape[0], n)
        return keys, tokens[:, :n], tokens[:, n]

    def _decode(self, n, toks):
        return list(range(n)), toks[:n], toks[n]

    def _labels(self, n, keys, values):
        return [f"f({k})={v}" for k, v in zip(keys, values)]


class PairTokens(Layout):
    """Cases 2-3: pair token k*n + v at position j, then the query token n*n + i*."""

    same_position: ClassVar[bool] = True

    def seq_len(self, n):
        return check_n(n) + 1

    def d_vocab(self, n):
        return check_n(n) * n + n

    def d_model(self, d_token):
        return 2 * d_token

    def value_pos(self, n, j):
        return self._slot(n, j)

    def key_pos(self, n, j):
        return self._slot(n, j)

    def query_token(self, n, target):
        return n * n + target

    def token_label(self, n, token_id, *, query=False):
        super().token_label(n, token_id)  # the range check
        return f"({token_id // n},{token_id % n})" if token_id < n * n else f"i*={token_id - n * n}"

    def layout(self, n, keys, values, target):
        return torch.cat([keys * n + values, (n * n + target)[:, None]], dim=1)

    def split(self, n, tokens):
        pairs, target = tokens[:, :n], tokens[:, n] - n * n
        if (pairs >= n * n).any() or (target < 0).any():
            raise ValueError(self._misplaced(n))
        return pairs // n, pairs % n, target

    def _decode(self, n, toks):
        if any(t >= n * n for t in toks[:n]) or toks[n] < n * n:
            raise ValueError(self._misplaced(n))
        return [t // n for t in toks[:n]], [t % n for t in toks[:n]], toks[n] - n * n

    def _labels(self, n, keys, values):
        return [f"({k},{v})" for k, v in zip(keys, values)]

    def _misplaced(self, n) -> str:
        return f"case {self.case} needs n pair tokens < {n * n} then a query token >= {n * n}"


class Consecutive(Layout):
    """Cases 4-5: key at 2j, value at 2j + 1, i* at 2n."""

    consecutive: ClassVar[bool] = True

    def seq_len(self, n):
        return 2 * check_n(n) + 1

    def value_pos(self, n, j):
        return 2 * self._slot(n, j) + 1

    def key_pos(self, n, j):
        return 2 * self._slot(n, j)

    def layout(self, n, keys, values, target):
        pairs = torch.stack([keys, values], dim=2).flatten(1)  # [batch, 2n]: k0 v0 k1 v1 ...
        return torch.cat([pairs, target[:, None]], dim=1)

    def split(self, n, tokens):
        return tokens[:, 0 : 2 * n : 2], tokens[:, 1 : 2 * n : 2], tokens[:, 2 * n]

    def _decode(self, n, toks):
        return toks[0 : 2 * n : 2], toks[1 : 2 * n : 2], toks[2 * n]

    def _labels(self, n, keys, values):
        return [label for k, v in zip(keys, values) for label in (f"k{k}", f"v{v}")]
