"""Attention read through TransformerLens hooks, and where the paper's constructions attend.

Every analysis in :mod:`interp.inspect.probes`, :mod:`interp.inspect.circuits` and :mod:`interp.inspect.patching` takes
any HookedTransformer of ours (an analytic construction from :func:`interp.core.constructions.build`,
a trained checkpoint, or a fresh :func:`interp.core.models.build_model`) together with the ``(case, n)``
it is for, reads activations with ``run_with_cache`` / ``run_with_hooks`` (temporary hooks that
TransformerLens removes on exit; permanent attention-mode hooks stay as they are), and returns
data. Nothing here changes a weight, a flag or a hook of the model.

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

A one-layer model must read the answer from the position that carries f(i*), so for a model of
any depth the last layer's final query is compared with the slot whose key is i*. For case 5
with two layers, layer 1 is compared at every query position with the key position 2 (p // 2)
(the final position 2n attends to itself there: no other position has pair index n).

Axis names follow TransformerLens: ``layer``, ``batch``, ``pos``, ``query_pos``, ``key_pos``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import forward, tasks


def check_model(model, case: int, n: int) -> None:
    """Raise ValueError unless ``model`` has the shapes of a (case, n) task model."""
    tasks.check_case(case), tasks.check_n(n)
    cfg = model.cfg
    want = dict(n_ctx=tasks.seq_len(case, n), d_vocab=tasks.d_vocab(case, n), d_vocab_out=n)
    for name, value in want.items():
        got = getattr(cfg, name)
        if got != value:
            raise ValueError(
                f"model has {name}={got}, but case {case} with n={n} needs {name}={value}; "
                "pass the (case, n) the model was built for"
            )


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
    tokens[:, -1] = targets + (n * n if case in tasks.SAME_POSITION else 0)
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
    tasks.check_case(case), tasks.check_n(n)
    return 2 * torch.arange(n) + 1 if case in tasks.CONSECUTIVE else torch.arange(n)


def slot_positions_at(case: int, n: int, at: str = "value") -> Int[Tensor, "n"]:
    """Slot j's value position (``at="value"``: :func:`slot_positions`) or, in the
    consecutive cases 4-5, its key position 2j (``at="key"``)."""
    if at not in ("value", "key"):
        raise ValueError(f"at={at!r}; accepted: 'value' or 'key'")
    if at == "key" and case not in tasks.CONSECUTIVE:
        raise ValueError(f"at='key' needs keys at their own positions (cases 4, 5); got case {case}")
    return slot_positions(case, n) - (1 if at == "key" else 0)


def read(case: int, n: int, tokens) -> TaskView:
    """Split a batch of (valid) tokens into keys, values and target, as :func:`tasks.decode`."""
    tokens = tasks.check_tokens(case, n, tokens)
    batch = tokens.shape[0]
    if case == 1:
        keys = torch.arange(n).expand(batch, n)
        values, target = tokens[:, :n], tokens[:, n]
    elif case in tasks.SAME_POSITION:
        if (tokens[:, :n] >= n * n).any() or (tokens[:, n] < n * n).any():
            raise ValueError(f"case {case} needs n pair tokens < {n * n} then a query token >= {n * n}")
        keys, values = tokens[:, :n] // n, tokens[:, :n] % n
        target = tokens[:, n] - n * n
    else:
        keys, values = tokens[:, 0 : 2 * n : 2], tokens[:, 1 : 2 * n : 2]
        target = tokens[:, 2 * n]
    if not (keys.sort(dim=1).values == torch.arange(n)).all():
        raise ValueError(f"the keys of some input are not a permutation of 0..{n - 1}")
    return TaskView(case, n, tokens, keys, values, target, slot_positions(case, n))


def construction_targets(
    case: int, n: int, n_layers: int, tokens
) -> Int[Tensor, "layer batch query_pos"]:
    """Per layer and query position, the key position the construction attends (-1: no claim).

    The last layer claims only the final query (the slot with k_j = i*); for case 5 with two
    layers, layer 0 claims every query p -> 2 (p // 2). Other layers make no claim.
    """
    view = read(case, n, tokens)
    batch, pos = view.tokens.shape
    out = torch.full((n_layers, batch, pos), -1, dtype=torch.long)
    out[-1, :, -1] = view.attended
    if case == 5 and n_layers == 2:
        out[0] = (2 * (torch.arange(pos) // 2)).expand(batch, pos)
    return out


def attention_patterns(
    model, tokens, *, head: int = 0
) -> Float[Tensor, "layer batch query_pos key_pos"]:
    """The attention pattern of every layer, read from ``blocks.L.attn.hook_pattern``.

    The cache holds the pattern actually used: hard attention modes installed by
    :func:`interp.core.attention.set_attention` replace the softmax at that hook before caching.
    """
    if not 0 <= head < model.cfg.n_heads:
        raise ValueError(f"head={head}; accepted: 0..{model.cfg.n_heads - 1}")
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("attn.hook_pattern")
        )
    return patterns_from_cache(cache, model.cfg.n_layers, head)


def patterns_from_cache(cache, n_layers: int, head: int = 0) -> Float[Tensor, "layer batch query_pos key_pos"]:
    """The stacked ``blocks.L.attn.hook_pattern`` of one head from an ActivationCache."""
    return torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"][:, head].float()
                        for layer in range(n_layers)])


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


def attention_report(
    model, case: int, n: int, tokens=None, *, batch_size: int = 512, seed: int = 0
) -> AttentionReport:
    """Attention patterns through hooks and the construction's positions for ``tokens``.

    ``tokens`` defaults to :func:`sample_inputs` (``batch_size``, ``seed``).
    """
    check_model(model, case, n)
    tokens = sample_inputs(case, n, batch_size, seed=seed) if tokens is None else tokens
    tokens = tasks.check_tokens(case, n, tokens)
    patterns = attention_patterns(model, tokens)
    targets = construction_targets(case, n, model.cfg.n_layers, tokens)
    return AttentionReport(case, n, patterns, targets)


def predictions(model, tokens) -> Int[Tensor, "batch"]:
    """The model's answers: :func:`interp.core.forward.predictions` (the package's one evaluation
    pass; equal to ``model(tokens)[:, -1].argmax(-1)``, tested)."""
    return forward.predictions(model, tokens)


def accuracy(model, case: int, n: int, tokens=None, *, batch_size: int = 512, seed: int = 0) -> float:
    """Fraction of inputs answered f(i*) (answers from :func:`read`, not from the model)."""
    check_model(model, case, n)
    tokens = sample_inputs(case, n, batch_size, seed=seed) if tokens is None else tokens
    view = read(case, n, tokens)
    return float((predictions(model, view.tokens) == view.answer).float().mean())
