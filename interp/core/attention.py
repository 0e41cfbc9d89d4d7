"""Attention modes (the paper's Section 2) installed through TransformerLens hooks.

A HookedTransformer always computes ``pattern = softmax(attn_scores)``. We install two permanent
hooks per layer: one on ``hook_attn_scores`` that remembers the scores (unchanged, so the cache
shows the real scores), and one on ``hook_pattern`` that replaces the softmax pattern with the
pattern of the chosen mode, computed from those scores. ``run_with_cache`` therefore caches the
pattern actually used, and ``model.reset_hooks()`` leaves the mode in place, even with
``including_permanent=True`` (they are torch hooks on the HookPoints, which TransformerLens does
not track); :func:`remove_attention` takes it off. Each time the layer runs, the scores hook is
moved behind every other hook of ``hook_attn_scores`` and the pattern hook in front of every
other hook of ``hook_pattern``: a user's hook that edits the scores (``run_with_hooks`` or
``add_hook``, prepended or not) changes the pattern the mode computes, and a pattern hook sees
the mode's pattern.

Modes, for one query row of scores s (``M`` = positions tied with the maximum, see below):

* ``leftmost``:  weight 1 on min M (ties go to the earlier position), 0 elsewhere.
* ``rightmost``: weight 1 on max M.
* ``average``:   weight 1/|M| on every position of M.
* ``softmax``:   softmax(beta * s), beta the inverse temperature (beta = 1 is TransformerLens's own).

**The tie rule.** ``M = {j : s_j >= max(s) - tol}`` with ``tol = atol + rtol * |max(s)|``.
The paper's definitions compare scores exactly, but a computed score is exact only up to the
summation order of the kernel that computed it: the same q.k in two columns of one batched
product, or on two CPUs (MKL's AVX-512 and AVX2 paths), can differ in the last bit, and a tie
the construction relies on (cases 2-3: the query token carries the matching pair's key;
Appendix B's s_4 = s_1) then goes the wrong way. Exact equality would make the answer a
property of the kernel. The default ``rtol = atol = TIE_ULPS * eps(dtype)`` (``TIE_ULPS`` = 8:
9.5e-7 in float32, 1.8e-15 in float64) is ~8 ulps of a score near 1, far above the rounding of
these few-term dot products (an ulp or two), and far below the smallest score gap
``(1 - cos(2 pi / N)) / sqrt(d_hid)`` of every construction at every n that ``build`` accepts
(1.4e-5 at n = 1000 in float32; ``build`` refuses n where the gap is not above twice the
tolerance, see :mod:`interp.core.constructions`). Pass ``tie_rtol``/``tie_atol`` to
:func:`set_attention` (0, 0 gives exact equality back). Axes: ``[batch, head_index, query_pos,
key_pos]``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from jaxtyping import Float
from torch import Tensor

MODES = ("softmax", "leftmost", "rightmost", "average")
HARD_MODES = ("leftmost", "rightmost", "average")
TIE_ULPS = 8.0


class LayerMode(NamedTuple):
    """One layer's attention: ``mode``, ``beta`` (softmax only) and the tie tolerances (hard
    modes only; ``None`` = the dtype's default, see :func:`tie_tolerance`)."""

    mode: str = "softmax"
    beta: float = 1.0
    tie_rtol: float | None = None
    tie_atol: float | None = None


def modes(model) -> list[LayerMode]:
    """The attention of every layer of ``model`` (softmax with beta 1 where none was set)."""
    names = getattr(model, "attention_modes", None) or [("softmax", 1.0)] * model.cfg.n_layers
    ties = getattr(model, "attention_ties", None) or [(None, None)] * model.cfg.n_layers
    return [LayerMode(m, b, r, a) for (m, b), (r, a) in zip(names, ties, strict=True)]


def tie_tolerance(dtype: torch.dtype, rtol: float | None = None, atol: float | None = None):
    """``(rtol, atol)`` with the defaults of ``dtype`` filled in (``TIE_ULPS * eps``)."""
    eps = torch.finfo(dtype).eps
    return (TIE_ULPS * eps if rtol is None else rtol, TIE_ULPS * eps if atol is None else atol)


def _check_tol(name: str, value) -> None:
    if value is not None and not (isinstance(value, (int, float)) and 0 <= value < float("inf")):
        raise ValueError(f"{name}={value!r}; accepted: None (the dtype's default) or a finite number >= 0")


def check_mode(mode: str, beta: float = 1.0) -> None:
    if mode not in MODES:
        raise ValueError(f"attention={mode!r}; accepted: one of {MODES}")
    if mode == "softmax" and not (isinstance(beta, (int, float)) and beta > 0 and beta < float("inf")):
        raise ValueError(f"beta={beta!r}; accepted: a finite inverse temperature > 0")


def pattern_from_scores(
    scores: Float[Tensor, "... key_pos"],
    mode: str,
    beta: float = 1.0,
    *,
    tie_rtol: float | None = None,
    tie_atol: float | None = None,
) -> Float[Tensor, "... key_pos"]:
    """The attention weights of ``mode`` for rows of scores (last axis: key positions).

    Hard modes treat scores within ``tie_atol + tie_rtol * |max|`` of the row's maximum as
    tied (module docstring); ``None`` takes the dtype's default."""
    check_mode(mode, beta)
    if mode == "softmax":
        return torch.softmax(beta * scores, dim=-1)
    rtol, atol = tie_tolerance(scores.dtype, tie_rtol, tie_atol)
    top = scores.max(dim=-1, keepdim=True).values
    is_max = scores >= top - (atol + rtol * top.abs())
    if mode == "average":
        return is_max.to(scores.dtype) / is_max.sum(dim=-1, keepdim=True).to(scores.dtype)
    if mode == "rightmost":
        is_max = is_max.flip(-1)
    first = is_max.to(torch.int8).argmax(dim=-1, keepdim=True)  # argmax returns the first max
    one_hot = torch.zeros_like(scores).scatter_(-1, first, 1.0)
    return one_hot.flip(-1) if mode == "rightmost" else one_hot


class _ModeHooks:
    """The pair of hooks of one layer (torch forward hooks on the two HookPoints); tagged so
    that only ours are ever removed."""

    interp_attention = True

    def __init__(self, layer_mode: LayerMode):
        self.mode, self.beta, self.rtol, self.atol = layer_mode
        self.scores = None

    def keep_scores(self, module, inputs, scores):
        self.scores = scores
        return None  # leave the scores (and the cache) as they are

    def order(self, attn, inputs):
        """Before the layer's attention runs: :meth:`keep_scores` after every other hook on
        hook_attn_scores (a user's scores hook, prepended or not, changes what the mode reads)
        and :meth:`replace_pattern` before every other hook on hook_pattern (they see the mode's
        pattern), whenever they were added."""
        for hooks, last in ((attn.hook_attn_scores._forward_hooks, True), (attn.hook_pattern._forward_hooks, False)):
            for key in [k for k, fn in hooks.items() if getattr(fn, "__self__", None) is self]:
                hooks.move_to_end(key, last=last)

    def replace_pattern(self, module, inputs, pattern):
        scores, self.scores = self.scores, None
        return pattern_from_scores(
            scores, self.mode, self.beta, tie_rtol=self.rtol, tie_atol=self.atol
        ).to(pattern.dtype)

    def __repr__(self) -> str:
        return f"interp.core.attention({self.mode}, beta={self.beta})"


def _ours(fn) -> bool:
    return getattr(getattr(fn, "__self__", None), "interp_attention", False)


def remove_attention(model) -> None:
    """Take off the attention-mode hooks installed by :func:`set_attention` (others stay)."""
    for layer in range(model.cfg.n_layers):
        attn = model.blocks[layer].attn
        for hooks in (attn.hook_attn_scores._forward_hooks, attn.hook_pattern._forward_hooks, attn._forward_pre_hooks):
            for key in [k for k, fn in hooks.items() if _ours(fn)]:
                del hooks[key]
    model.attention_modes = [("softmax", 1.0)] * model.cfg.n_layers
    model.attention_ties = [(None, None)] * model.cfg.n_layers


def set_attention(
    model,
    mode: str = "leftmost",
    *,
    beta: float = 1.0,
    layers=None,
    tie_rtol: float | None = None,
    tie_atol: float | None = None,
):
    """Install attention ``mode`` on ``layers`` (default all) as permanent hooks; returns model.

    Replaces any mode set before. ``softmax`` with beta = 1 installs nothing on that layer.
    ``tie_rtol``/``tie_atol``: the hard modes' tie tolerance (module docstring; ``None`` = the
    dtype's default ``TIE_ULPS * eps``). The mode per layer is recorded in
    ``model.attention_modes`` as ``(mode, beta)`` pairs and the tolerances in
    ``model.attention_ties``; read both with :func:`modes`.
    """
    check_mode(mode, beta)
    _check_tol("tie_rtol", tie_rtol)
    _check_tol("tie_atol", tie_atol)
    layers = range(model.cfg.n_layers) if layers is None else list(layers)
    for layer in layers:
        if not 0 <= layer < model.cfg.n_layers:
            raise ValueError(f"layer {layer}; accepted: 0..{model.cfg.n_layers - 1}")
    current = modes(model)
    remove_attention(model)
    for layer in layers:
        if mode == "softmax":
            current[layer] = LayerMode("softmax", float(beta))
        else:
            current[layer] = LayerMode(mode, 1.0, tie_rtol, tie_atol)
    for layer, layer_mode in enumerate(current):
        if layer_mode[:2] == ("softmax", 1.0):
            continue
        hooks = _ModeHooks(layer_mode)
        attn = model.blocks[layer].attn
        # torch hooks on the HookPoints, not TransformerLens's add_hook: reset_hooks (even with
        # including_permanent=True) leaves them; hooks.order keeps a user's scores hooks before
        # the mode and pattern hooks after it, in the order TransformerLens documents
        attn.hook_attn_scores.register_forward_hook(hooks.keep_scores)
        attn.hook_pattern.register_forward_hook(hooks.replace_pattern)
        attn.register_forward_pre_hook(hooks.order)
    model.attention_modes = [(m.mode, m.beta) for m in current]
    model.attention_ties = [(m.tie_rtol, m.tie_atol) for m in current]
    return model
