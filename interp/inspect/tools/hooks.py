"""Attention read through TransformerLens hooks, and where the paper's constructions attend.

Every analysis in :mod:`interp.inspect.tools.probes`, :mod:`interp.inspect.tools.circuits` and
:mod:`interp.inspect.tools.interventions` takes any HookedTransformer of ours (an analytic construction
from :func:`interp.core.constructions.build`, a trained checkpoint, or a fresh
:func:`interp.core.models.build_model`) and reads its task from it: ``model.task`` and
``n = model.cfg.d_vocab_out`` (:func:`check_model`; ``case=`` / ``n=`` are accepted as keywords
and checked against the model's). It reads activations with ``run_with_cache`` /
``run_with_hooks`` (temporary hooks that TransformerLens removes on exit; permanent
attention-mode hooks stay as they are) and returns data. Nothing here changes a weight, a flag
or a hook of the model. The functions below that take ``(case, n)`` and no model describe inputs
only.

Slots. An input of any case stores n (key, value) *slots*: slot j holds key ``keys[j]`` and value
``values[j]``, and its value is carried by the token at position ``slot_pos[j]``:

==== ============== ============================ ===================================
case slot_pos[j]    keys[j]                      where the construction attends
==== ============== ============================ ===================================
1    j              j (no key token: position)   i* (Theorem 3.2)
2, 3 j              token // n                   the j with k_j = i* (Theorem 3.1)
4    2j + 1         j (token at 2j, ignored)     2 i* + 1 (Theorem 3.3)
5    2j + 1         token at 2j                  layer 1: every p to 2 (p // 2) (its key);
                                                 last layer: 2j + 1 with k_j = i* (Thm 3.8)
==== ============== ============================ ===================================

The table is what :class:`interp.core.tasks.Task` says (``value_positions``, ``key_positions``,
``construction_targets``): nothing here computes a position of its own, so a presentation
registered from outside the package (:func:`interp.core.tasks.register`) is read the same way.

A one-layer model must read the answer from the position that carries f(i*), so for a model of
any depth the last layer's final query is compared with the slot whose key is i*. For case 5
with two layers, layer 1 is compared at every query position with the key position 2 (p // 2)
(the final position 2n attends to itself there: no other position has pair index n).

Axis names follow TransformerLens: ``layer``, ``batch``, ``pos``, ``query_pos``, ``key_pos``.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import forward, tasks


@tasks.reads_task
def check_model(model, *, case: int | None = None, n: int | None = None) -> tuple[tasks.Task, int]:
    """The model's ``(task, n)`` (:func:`interp.core.tasks.of`: ``model.task`` and
    ``cfg.d_vocab_out``; ``case=`` / ``n=`` checked against them), after checking that the
    model's context and vocabulary are that task's: a ValueError otherwise."""
    held = _CHECKED.get()
    if held is not None and held[0] is model and case in (None, held[1].case) and n in (None, held[2]):
        return held[1], held[2]  # inside checked(model): validated once already
    task, n = tasks.of(model, case=case, n=n)
    task.check_config(model.cfg)
    return task, n


#: (model, task, n) of the innermost :func:`checked` block, else None
_CHECKED: ContextVar = ContextVar("interp_checked_model", default=None)


@contextmanager
def checked(model, *, case: int | None = None, n: int | None = None):
    """Validate ``model`` once (:func:`check_model`; the measures read one head per layer, so a
    model of several heads is refused by name, :func:`one_head`) and yield ``(task, n)``; inside the block,
    every :func:`check_model` of the same model object (the measures a caller runs on it) takes
    that answer instead of reading the model again. A different model, or a ``case``/``n``
    that disagrees, is checked as usual."""
    task, n = check_model(model, case=case, n=n)
    one_head(model.cfg.n_heads, "measuring a model's mechanism (its measures and labels)")
    token = _CHECKED.set((model, task, n))
    try:
        yield task, n
    finally:
        _CHECKED.reset(token)


def moves_keys_first(task: tasks.Task, n_layers: int) -> bool:
    """Does the construction's first layer move each key onto its value's position before the
    last layer matches (case 5 with two layers, Theorem 3.8)? :meth:`tasks.Task.moves_keys_first`."""
    return task.moves_keys_first(n_layers)


def sample_inputs(
    case: int,
    n: int,
    batch_size: int = 512,
    *,
    seed: int = 0,
    function: tasks.Function = "permutation",
) -> Int[Tensor, "batch pos"]:
    """Random inputs whose targets cycle through 0..n-1 (every target appears when batch >= n).

    Tables and key orders come from :func:`interp.core.tasks.sample` with a seeded generator; only
    the target token is replaced, so per-target averages (QK rows) are never empty.
    """
    g = torch.Generator().manual_seed(seed)
    tokens, _ = tasks.sample(case, n, batch_size, generator=g, function=function)
    targets = torch.arange(batch_size) % n
    targets = targets[torch.randperm(batch_size, generator=g)]
    task = tasks.get(case)
    tokens[:, task.query_pos(n)] = task.query_token(n, targets)  # where the task puts its query
    return tokens


@dataclass(frozen=True)
class TaskView:
    """A batch of inputs read back as slots (vectorised :func:`interp.core.tasks.decode`)."""

    case: int
    n: int
    tokens: Int[Tensor, "batch pos"]
    keys: Int[Tensor, "batch n"]  # key of slot j
    values: Int[Tensor, "batch n"]  # value of slot j
    target: Int[Tensor, "batch"]  # i*
    slot_pos: Int[Tensor, "n"]  # position carrying slot j's value

    @property
    def slot_of_target(self) -> Int[Tensor, "batch"]:
        """The slot j with k_j = i*."""
        return (self.keys == self.target[:, None]).int().argmax(dim=1)

    @property
    def answer(self) -> Int[Tensor, "batch"]:
        """f(i*), the value stored in the target's slot."""
        return self.values.gather(1, self.slot_of_target[:, None])[:, 0]

    @property
    def attended(self) -> Int[Tensor, "batch"]:
        """The position the construction's last layer attends from the final position."""
        return self.slot_pos[self.slot_of_target]


def slot_positions(case: int, n: int) -> Int[Tensor, "n"]:
    """The position carrying slot j's value: j (cases 1-3) or 2j + 1 (cases 4, 5)."""
    return tasks.get(case).value_positions(n)


def slot_positions_at(case: int, n: int, at: str = "value") -> Int[Tensor, "n"]:
    """Slot j's value position (``at="value"``: :func:`slot_positions`) or, in the
    consecutive cases 4-5, its key position 2j (``at="key"``)."""
    if at not in ("value", "key"):
        raise ValueError(f"at={at!r}; accepted: 'value' or 'key'")
    task = tasks.get(case)
    if at == "key" and not task.consecutive:
        raise ValueError(f"at='key' needs keys at their own positions (cases 4, 5); got case {case}")
    return task.key_positions(n) if at == "key" else task.value_positions(n)


def read(case: int, n: int, tokens) -> TaskView:
    """Split a batch of (valid) tokens into keys, values and target (:meth:`tasks.Task.read`,
    the vectorised :func:`tasks.decode`)."""
    task = tasks.get(case)
    tokens = task.check_tokens(n, tokens)
    keys, values, target = task.read(n, tokens)
    return TaskView(case, n, tokens, keys, values, target, task.value_positions(n))


def construction_targets(
    case: int, n: int, n_layers: int, tokens
) -> Int[Tensor, "layer batch query_pos"]:
    """Per layer and query position, the key position the construction attends (-1: no claim):
    :meth:`tasks.Task.construction_targets` of the tokens' keys and targets.

    The last layer claims only the final query (the slot with k_j = i*); for case 5 with two
    layers, layer 0 claims every query p -> 2 (p // 2). Other layers make no claim.
    """
    view = read(case, n, tokens)
    return tasks.get(case).construction_targets(n, n_layers, view.keys, view.target)


def attention_patterns(
    model, tokens, *, head: int | None = None
) -> Float[Tensor, "layer batch query_pos key_pos"]:
    """The attention pattern of every layer, read from ``blocks.L.attn.hook_pattern``.

    The cache holds the pattern actually used: hard attention modes installed by
    :func:`interp.core.attention.set_attention` replace the softmax at that hook before caching.
    ``head``: which head (None: the one head; a model with several must name it).
    """
    head = one_head(model.cfg.n_heads, "attention_patterns") if head is None else head
    if not 0 <= head < model.cfg.n_heads:
        raise ValueError(f"head={head}; accepted: 0..{model.cfg.n_heads - 1}")
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("attn.hook_pattern")
        )
    return patterns_from_cache(cache, model.cfg.n_layers, head)


def patterns_from_cache(cache, n_layers: int, head: int | None = None) -> Float[Tensor, "layer batch query_pos key_pos"]:
    """One head's ``blocks.L.attn.hook_pattern`` of layers 0..n_layers-1 from an ActivationCache:
    TransformerLens's ``cache.stack_activation("pattern", n_layers)[:, :, head]``, in float32
    (``head`` None: the one head; a cache of several heads must name it)."""
    stacked = cache.stack_activation("pattern", n_layers)
    head = one_head(stacked.shape[2], "patterns_from_cache") if head is None else head
    return stacked[:, :, head].float()


def one_head(n_heads: int, reader: str) -> int:
    """0, the head a reader of "the" head reads, when there is one; a ValueError naming the
    reader and the head count otherwise (which head carries the answer is not known, so no
    reader assumes head 0)."""
    if n_heads != 1:
        raise ValueError(f"{reader} reads one head per layer and this model has n_heads={n_heads}: which head "
                         "carries the answer is not known here, so none is assumed; accepted: n_heads=1, or "
                         "name the head (head=) where the reader takes one")
    return 0


@dataclass(frozen=True)
class AttentionReport:
    """Attention of a model on a batch, beside where the construction attends."""

    case: int
    n: int
    patterns: Float[Tensor, "layer batch query_pos key_pos"]
    targets: Int[Tensor, "layer batch query_pos"]  # -1 where the construction makes no claim

    @property
    def final(self) -> Float[Tensor, "layer batch key_pos"]:
        """The final position's attention row in every layer."""
        return self.patterns[:, :, -1, :]

    def _claimed(self, layer: int):
        t = self.targets[layer]
        mask = t >= 0
        p = self.patterns[layer][mask]  # [claims, key_pos]
        return p, t[mask]

    def mass(self, layer: int = -1) -> float:
        """Mean attention weight on the construction's position (1.0 for the construction)."""
        p, t = self._claimed(layer)
        return float(p.gather(1, t[:, None]).mean()) if len(t) else math.nan

    def self_mass(self, layer: int = -1) -> float:
        """Mean weight the final position puts on itself. In cases 2-3 the query token carries
        the target key like the matching slot, so softmax attention can split between the two
        (the construction's leftmost rule breaks that tie towards the slot)."""
        return float(self.final[layer][:, -1].mean())

    def hit_rate(self, layer: int = -1) -> float:
        """Fraction of claimed queries whose largest weight is on the construction's position."""
        p, t = self._claimed(layer)
        return float((p.argmax(1) == t).float().mean()) if len(t) else math.nan

    def entropy(self, layer: int = -1) -> float:
        """Mean entropy of the claimed rows over log(seq_len): 0 one-hot, 1 uniform."""
        p, t = self._claimed(layer)
        if not len(t):
            return math.nan
        h = -(p * p.clamp_min(1e-30).log()).sum(1)
        return float(h.mean() / math.log(p.shape[1]))

    def summary(self):
        """One row per layer: the queries claimed, mass, final position's mass on itself, hit
        rate, normalised entropy."""
        import pandas as pd

        rows = []
        for layer in range(self.patterns.shape[0]):
            claimed = int((self.targets[layer] >= 0).any(0).sum())
            rows.append(
                dict(
                    layer=layer,
                    queries="none" if claimed == 0 else ("final" if claimed == 1 else "all"),
                    mass=self.mass(layer),
                    self_mass=self.self_mass(layer),
                    hit_rate=self.hit_rate(layer),
                    entropy=self.entropy(layer),
                )
            )
        return pd.DataFrame(rows)


@tasks.reads_task
def attention_report(
    model, tokens=None, *, case: int | None = None, n: int | None = None, batch_size: int = 512,
    seed: int = 0,
) -> AttentionReport:
    """Attention patterns through hooks and the construction's positions for ``tokens``.

    ``tokens`` defaults to :func:`sample_inputs` (``batch_size``, ``seed``).
    """
    task, n = check_model(model, case=case, n=n)
    tokens = sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    tokens = tasks.check_tokens(task.case, n, tokens)
    patterns = attention_patterns(model, tokens)
    targets = construction_targets(task.case, n, model.cfg.n_layers, tokens)
    return AttentionReport(task.case, n, patterns, targets)


def predictions(model, tokens) -> Int[Tensor, "batch"]:
    """The model's answers: :func:`interp.core.forward.predictions` (the package's one evaluation
    pass; equal to ``model(tokens)[:, -1].argmax(-1)``, tested)."""
    return forward.predictions(model, tokens)


@tasks.reads_task
def accuracy(model, tokens=None, *, case: int | None = None, n: int | None = None,
             batch_size: int = 512, seed: int = 0) -> float:
    """Fraction of inputs answered f(i*) (answers from :func:`read`, not from the model;
    predictions from :func:`predictions`, the package's one evaluation pass)."""
    task, n = check_model(model, case=case, n=n)
    tokens = sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    view = read(task.case, n, tokens)
    return float((predictions(model, view.tokens) == view.answer).float().mean())
