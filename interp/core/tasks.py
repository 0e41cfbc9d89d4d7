"""The five presentations of function evaluation (Strobl, Angluin & Frank, Section 1), one
:class:`Task` object each.

A function f: [n] -> [n] is given as a key-value table plus a target key i*; the answer is
f(i*). Slot j of the table holds key k_j and value v_j = f(k_j). The token layout is a contract
that every model, construction and probe relies on:

==== ============================== ========== ============ =====================================
case presentation                   length     d_vocab      position j holds
==== ============================== ========== ============ =====================================
1    no keys                        n + 1      n            f(j) for j < n; i* at n
2    same position, ordered keys    n + 1      n*n + n      pair token k_j*n + v_j (k_j = j); n*n + i* at n
3    same position, permuted keys   n + 1      n*n + n      pair token k_j*n + v_j (keys permuted); n*n + i* at n
4    consecutive, ordered keys      2n + 1     n            k at 2j, v at 2j+1 (k_j = j); i* at 2n
5    consecutive, permuted keys     2n + 1     n            k at 2j, v at 2j+1 (keys permuted); i* at 2n
==== ============================== ========== ============ =====================================

Where slot j sits (:meth:`Task.key_pos`, :meth:`Task.value_pos`): its value at j (cases 1-3) or
2j + 1 (cases 4-5); its key at 2j (cases 4-5), at j in the pair token that also holds the value
(cases 2-3: ``key_pos == value_pos``), and in no token at all in case 1 (``key_pos`` is None:
position j is the key).

Each presentation is one :class:`Task` (:data:`TASKS`, :func:`get`): its layout family
(:mod:`interp.core.layouts`: positions, vocabulary, token labels, encode/answers/decode/evaluate),
its key order (``permuted``), sampling and enumeration, the paper's construction (:class:`Paper`)
and the builders registered for it (:func:`register_builder`; :mod:`interp.core.constructions`
registers the paper's, tracr-style, one ``make_*`` per program). Every model built or loaded
carries its task as ``model.task``; :func:`of` reads it. The module-level functions
(``seq_len(case, n)``, ``encode(case, ...)``, ...) are ``get(case).<method>(...)``.

The prediction of a model is ``logits[:, -1].argmax(-1)`` over the n outputs.
Axis names follow TransformerLens: ``batch``, ``pos``, ``n`` (table size).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from typing import Callable, Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from interp.core import layouts, positions
from interp.core.calls import reads_task  # noqa: F401 - re-exported: tasks.reads_task
from interp.core.layouts import FUNCTIONS, Function, check_function, check_n  # noqa: F401 - re-exported

#: how permuted keys are ordered across a batch (``Task.sample``'s ``key_order``)
KEY_ORDERS = ("sequence", "batch")


def check_key_order(key_order: str) -> str:
    if key_order not in KEY_ORDERS:
        raise ValueError(f"key_order={key_order!r}; accepted: one of {KEY_ORDERS}")
    return key_order

#: the registered presentations' case numbers (the paper's 1-5, then :func:`register`'s)
CASES: tuple[int, ...] = (1, 2, 3, 4, 5)


class UnknownCase(ValueError):
    """A case number no registered presentation holds (here: maybe one a module registers)."""


#: how a presentation of one's own is made known, for every refusal of an unknown case
REGISTER_HINT = ("a presentation of your own is registered by interp.tasks.register; for the shell's "
                 "commands, set INTERP_TASKS to the module that registers it")


def check_case(case: int) -> int:
    if isinstance(case, bool) or not isinstance(case, int) or case not in CASES:
        hint = f" ({REGISTER_HINT})" if isinstance(case, int) and not isinstance(case, bool) and case > 5 else ""
        raise UnknownCase(f"case={case!r} is not a presentation; accepted: one of {CASES}{hint}")
    return case


@dataclass(frozen=True)
class Paper:
    """The paper's hard-attention construction of a presentation (its weights:
    :mod:`interp.core.constructions`): theorem, layers, residual width, and why no fewer layers."""

    theorem: str
    layers: int
    d_model: int
    note: str = ""


#: per case, construction name -> ``builder(task, n, dtype) -> HookedTransformer``
_BUILDERS: dict[int, dict[str, Callable]] = {}


def register_builder(name: str, *cases: int):
    """Decorator: ``fn(task, n, dtype)`` builds construction ``name`` for these cases. The module
    that defines a construction registers it, so :attr:`Task.builders` lists it once that
    module is imported (:mod:`interp.core.constructions` for ``"paper"``)."""

    def register(fn):
        for case in cases:
            old = _BUILDERS.setdefault(check_case(case), {}).get(name)
            same = old is not None and (old.__module__, old.__qualname__) == (fn.__module__, fn.__qualname__)
            if old is not None and not same:  # (a module imported twice registers itself again)
                raise ValueError(f"case {case} already has a construction {name!r} ({old.__qualname__})")
            _BUILDERS[case][name] = fn
        return fn

    return register


@dataclass(frozen=True, repr=False)
class Task(layouts.Layout):
    """One presentation: a layout family (:mod:`interp.core.layouts`) with its case, name, key
    order and constructions. Methods take the table size ``n`` (a model's ``cfg.d_vocab_out``)."""

    case: int
    name: str
    permuted: bool  # keys in a fresh random order per input (else k_j = j, or no keys)
    paper: Paper | None = None  # None: no construction (verify, precision and run skip it)

    def sample_keys(self, n: int, batch: int, *, generator=None, device=None,
                    key_order: str = "sequence") -> Int[Tensor, "batch n"]:
        """Each input's keys: a random order (permuted; fresh per input with key_order="sequence",
        one order for the whole batch with "batch") or 0..n-1."""
        if self.permuted:
            rows = batch if check_key_order(key_order) == "sequence" else 1
            return torch.rand((rows, n), generator=generator, device=device).argsort(dim=1).expand(batch, n)
        return torch.arange(n, device=device).expand(batch, n)

    def sample(self, n: int, batch_size: int, *, generator: torch.Generator | None = None,
               function: Function = "permutation", device=None, key_order: str = "sequence"):
        """Random inputs ``[batch, pos]`` and their answers f(i*) ``[batch]``.

        f is a uniformly random permutation of [n] (the paper's experiments) or, with
        ``function="any"``, a uniformly random function [n] -> [n] (the theorems). Permuted
        keys are a fresh random permutation per input (``key_order="sequence"``) or one random
        permutation shared by the batch (``"batch"``: one row of draws instead of ``batch``;
        the paper states f per input but not the key order). The target key is uniform on [n].
        """
        check_n(n), check_function(function), check_key_order(key_order)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r}; accepted: an integer >= 1")
        g = generator
        dev = g.device if g is not None else device
        shape = (batch_size, n)
        if function == "permutation":
            values = torch.rand(shape, generator=g, device=dev).argsort(dim=1)
        else:
            values = torch.randint(0, n, shape, generator=g, device=dev)
        keys = self.sample_keys(n, batch_size, generator=g, device=dev, key_order=key_order)
        target = torch.randint(0, n, (batch_size,), generator=g, device=dev)
        answers = values.gather(1, (keys == target[:, None]).int().argmax(1, keepdim=True))[:, 0]
        return self.layout(n, keys, values, target), answers

    def count_inputs(self, n: int, function: Function = "any") -> int:
        """Number of distinct inputs: (#functions) x (#key orders) x n targets."""
        check_n(n), check_function(function)
        functions = math.factorial(n) if function == "permutation" else n**n
        return functions * (math.factorial(n) if self.permuted else 1) * n

    def enumerate_inputs(self, n: int, function: Function = "any", *, limit: int = 5_000_000):
        """Every input ``[batch, pos]`` (for small n) and its answer ``[batch]``, in a fixed order."""
        total = self.count_inputs(n, function)
        if total > limit:
            raise ValueError(f"case {self.case}, n={n}, function={function!r} has {total} inputs; "
                             f"accepted: at most limit={limit} (use sample() for larger n)")
        if function == "permutation":
            fs = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
        else:
            fs = torch.tensor(list(itertools.product(range(n), repeat=n)), dtype=torch.long)
        orders = (torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long)
                  if self.permuted else torch.arange(n)[None])
        # values stored with key k_j are f(k_j): gather f along the key order.
        F, O, T = fs.shape[0], orders.shape[0], n
        keys = orders[None, :, None, :].expand(F, O, T, n).reshape(-1, n)
        vals = fs[:, None, None, :].expand(F, O, T, n).reshape(-1, n).gather(1, keys)
        target = torch.arange(n)[None, None, :].expand(F, O, T).reshape(-1)
        answers = fs[:, None, None, :].expand(F, O, T, n).reshape(-1, n).gather(1, target[:, None])
        return self.layout(n, keys, vals, target), answers[:, 0]

    def check_config(self, cfg) -> int:
        """n of a HookedTransformerConfig shaped for this task (``n_ctx`` and ``d_vocab`` for
        n = ``d_vocab_out``); a ValueError naming both shapes otherwise."""
        n = check_n(cfg.d_vocab_out)
        if (cfg.n_ctx, cfg.d_vocab) != (self.seq_len(n), self.d_vocab(n)):
            raise ValueError(
                f"case {self.case} ({self.name}) with n={n} needs n_ctx={self.seq_len(n)} and "
                f"d_vocab={self.d_vocab(n)}; the model has n_ctx={cfg.n_ctx}, d_vocab={cfg.d_vocab}")
        return n

    @property
    def builders(self) -> dict[str, Callable]:
        """The constructions registered for this task (:func:`register_builder`), by name."""
        return dict(_BUILDERS.get(self.case, {}))

    def builder(self, name: str = "paper") -> Callable:
        """The registered construction ``name``; a ValueError listing the registered ones."""
        if name not in self.builders:
            raise ValueError(f"case {self.case} has no construction {name!r}; accepted: one of "
                             f"{sorted(self.builders)}")
        return _BUILDERS[self.case][name]

    def __repr__(self) -> str:
        return f"Task(case={self.case}, {self.name!r})"

    def __reduce__(self):
        """pickle and deepcopy give back the registry's object: the paper's by case number, a
        registered one by value, registered again where it is unpickled (a sweep's worker)."""
        if _PAPER.get(self.case) is self:
            return get, (self.case,)
        return _registered, (type(self), tuple(getattr(self, f.name) for f in fields(self)))


class NoKeys(layouts.NoKeys, Task):
    """Case 1."""


class PairTokens(layouts.PairTokens, Task):
    """Cases 2 and 3."""


class Consecutive(layouts.Consecutive, Task):
    """Cases 4 and 5."""


#: the paper's five presentations
_PAPER: dict[int, Task] = {
    1: NoKeys(1, "no keys", False, Paper("3.2", 1, 4)),
    2: PairTokens(2, "same position, ordered keys", False, Paper("3.1", 1, 4)),
    3: PairTokens(3, "same position, permuted keys", True, Paper("3.1", 1, 4)),
    4: Consecutive(4, "consecutive, ordered keys", False, Paper("3.3", 1, 4)),
    5: Consecutive(5, "consecutive, permuted keys", True, Paper(
        "3.8", 2, 7, "Theorem 3.6: no one-layer hard-attention transformer does case 5 for n >= 4")),
}
#: every registered presentation by case: the paper's, then :func:`register`'s
TASKS: dict[int, Task] = dict(_PAPER)
#: Cases whose keys are permuted per input (the others have keys 0..n-1 in order, or none).
PERMUTED = tuple(c for c, t in TASKS.items() if t.permuted)
#: Cases that store key and value in one token (pair tokens).
SAME_POSITION = tuple(c for c, t in TASKS.items() if t.same_position)
#: Cases that store key and value in tokens of their own at consecutive positions.
CONSECUTIVE = tuple(c for c, t in TASKS.items() if t.consecutive)


def _refresh() -> None:
    global CASES, PERMUTED, SAME_POSITION, CONSECUTIVE
    CASES = tuple(sorted(TASKS))
    PERMUTED = tuple(c for c in CASES if TASKS[c].permuted)
    SAME_POSITION = tuple(c for c in CASES if TASKS[c].same_position)
    CONSECUTIVE = tuple(c for c in CASES if TASKS[c].consecutive)


def register(task: Task) -> Task:
    """Add a presentation from outside the package: a :class:`Task` of a layout family here
    (:class:`NoKeys`, :class:`PairTokens`, :class:`Consecutive`, or a subclass of one that moves
    its tokens, the query included) or of a new one (a :class:`interp.core.layouts.Layout`
    subclass mixed with Task), under a case number >= 1 that no other holds. Its position methods
    are checked against its own tokens first (:func:`interp.core.positions.check_layout`: a
    layout the readers would misread is refused by name). Every engine trains and evaluates it
    with its own ``sample`` (a sweep's worker registers it again when it unpickles it); a
    checkpoint names it by module and class, so loading asks for the same registration
    (``INTERP_TASKS`` in the shell). Without a construction (``paper=None``) verify, precision and
    run skip it. :func:`unregister` undoes it."""
    if not isinstance(task, Task):
        raise ValueError(f"task={task!r}; accepted: an interp.core.tasks.Task")
    case = task.case
    if isinstance(case, bool) or not isinstance(case, int) or case < 1:
        raise ValueError(f"task.case={case!r}; accepted: an integer >= 1")
    if case in TASKS:
        if TASKS[case] == task:
            return TASKS[case]
        raise ValueError(f"case {case} is already {TASKS[case]!r}; accepted: a case number not in "
                         f"{CASES}")
    positions.check_layout(task)
    TASKS[case] = task
    _refresh()
    return task


def unregister(case: int) -> Task:
    """Remove a presentation added by :func:`register` (and its constructions); the paper's
    five stay. Returns the task removed."""
    if check_case(case) in _PAPER:
        raise ValueError(f"case {case} is one of the paper's presentations; accepted: a case "
                         f"added by register(), one of {tuple(c for c in CASES if c not in _PAPER)}")
    _BUILDERS.pop(case, None)
    task = TASKS.pop(case)
    _refresh()
    return task


def added() -> dict[int, Task]:
    """The presentations :func:`register` added (not the paper's five), by case: what a
    sweep hands its worker processes, and what a pickled TrainConfig carries."""
    return {case: task for case, task in TASKS.items() if case not in _PAPER}


def _registered(cls, values: tuple) -> Task:
    """Unpickle a registered task: the registry's object, registering it where it is missing."""
    return register(cls(*values))


def get(case: int) -> Task:
    """The presentation with this case number (1-5, or one :func:`register` added)."""
    return TASKS[check_case(case)]


def of(model, case: int | None = None, n: int | None = None, *,
       only: int | None = None) -> tuple[Task, int]:
    """``(task, n)`` of a model: its ``model.task`` and ``model.cfg.d_vocab_out``.

    ``case=`` and ``n=`` are still accepted and checked against the model's (a ValueError
    names both on a mismatch). A model without a task (built outside ``interp``) needs
    ``case=`` and must have that case's shape. ``only``: the one case the caller handles (a
    model of another case is refused; a model without a task is taken to be of that case).
    """
    cfg = getattr(model, "cfg", None)
    if cfg is None:
        raise ValueError(f"a {type(model).__name__} is not a task model; accepted: a HookedTransformer")
    model_n = cfg.d_vocab_out
    if n is not None and check_n(n) != model_n:
        raise ValueError(f"n={n!r} but the model's table size is n={model_n} (cfg.d_vocab_out)")
    if case is not None and only is not None and check_case(case) != only:
        raise ValueError(f"case={case!r}; accepted here: only case {only} ({get(only).name})")
    own = getattr(model, "task", None)
    if own is None:
        if case is None and only is None:
            raise ValueError("this model carries no task (model.task is missing: built outside "
                             "interp?); pass case= (one of 1-5) or use interp.models.build_model")
        task = get(case if case is not None else only)
        task.check_config(cfg)
    elif not isinstance(own, Task):
        raise ValueError(f"model.task={own!r} is not a Task; set it with "
                         "interp.core.tokens.attach_task(model, case)")
    elif case is not None and check_case(case) != own.case:
        raise ValueError(f"case={case!r} but the model was built for case {own.case} ({own.name})")
    else:
        task = own
    if only is not None and task.case != only:
        raise ValueError(f"only case {only} ({get(only).name}) is accepted here; the model was "
                         f"built for case {task.case} ({task.name})")
    return task, model_n


# ---- the module-level API: get(case).<method>(...)


def seq_len(case: int, n: int) -> int:
    """Length of an input: n + 1 for cases 1-3, 2n + 1 for cases 4-5."""
    return get(case).seq_len(n)


def d_vocab(case: int, n: int) -> int:
    """Input vocabulary: n*n pair tokens plus n query tokens in cases 2-3, else n."""
    return get(case).d_vocab(n)


def query_pos(case: int, n: int) -> int:
    return get(case).query_pos(n)


def encode(case: int, keys, values, target) -> Int[Tensor, "batch pos"]:
    return get(case).encode(keys, values, target)


def sample(case: int, n: int, batch_size: int, **kw):
    return get(case).sample(n, batch_size, **kw)


def count_inputs(case: int, n: int, function: Function = "any") -> int:
    return get(case).count_inputs(n, function)


def enumerate_inputs(case: int, n: int, function: Function = "any", *, limit: int = 5_000_000):
    return get(case).enumerate_inputs(n, function, limit=limit)


def decode(case: int, n: int, tokens: Sequence[int]) -> tuple[list[int], list[int], int]:
    return get(case).decode(n, tokens)


def evaluate(case: int, n: int, tokens: Sequence[int]) -> int:
    return get(case).evaluate(n, tokens)


def check_tokens(case: int, n: int, tokens) -> Int[Tensor, "batch pos"]:
    return get(case).check_tokens(n, tokens)


def answers(case: int, n: int, tokens) -> Int[Tensor, "batch"]:
    return get(case).answers(n, tokens)
