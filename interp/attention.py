"""Attention modes (the paper's Section 2) installed through TransformerLens hooks.

A HookedTransformer always computes ``pattern = softmax(attn_scores)``. We install two permanent
hooks per layer: one on ``hook_attn_scores`` that remembers the scores (unchanged, so the cache
shows the real scores), and one on ``hook_pattern`` that replaces the softmax pattern with the
pattern of the chosen mode, computed from those scores. ``run_with_cache`` therefore caches the
pattern actually used, and ``model.reset_hooks()`` leaves the mode in place (permanent hooks);
:func:`remove_attention` takes it off.

Modes, for one query row of scores s (``M`` = positions with the maximal score):

* ``leftmost``:  weight 1 on min M (ties go to the earlier position), 0 elsewhere.
* ``rightmost``: weight 1 on max M.
* ``average``:   weight 1/|M| on every position of M.
* ``softmax``:   softmax(beta * s), beta the inverse temperature (beta = 1 is TransformerLens's own).

Maxima are compared exactly (``s == s.max()``), as the definitions ask: two keys whose scores
agree to the last bit tie. Axes: ``[batch, head_index, query_pos, key_pos]``.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

MODES = ("softmax", "leftmost", "rightmost", "average")
HARD_MODES = ("leftmost", "rightmost", "average")


def check_mode(mode: str, beta: float = 1.0) -> None:
    if mode not in MODES:
        raise ValueError(f"attention={mode!r}; accepted: one of {MODES}")
    if mode == "softmax" and not (isinstance(beta, (int, float)) and beta > 0 and beta < float("inf")):
        raise ValueError(f"beta={beta!r}; accepted: a finite inverse temperature > 0")


def pattern_from_scores(
    scores: Float[Tensor, "... key_pos"], mode: str, beta: float = 1.0
) -> Float[Tensor, "... key_pos"]:
    """The attention weights of ``mode`` for rows of scores (last axis: key positions)."""
    check_mode(mode, beta)
    if mode == "softmax":
        return torch.softmax(beta * scores, dim=-1)
    is_max = scores == scores.max(dim=-1, keepdim=True).values
    if mode == "average":
        return is_max.to(scores.dtype) / is_max.sum(dim=-1, keepdim=True).to(scores.dtype)
    if mode == "rightmost":
        is_max = is_max.flip(-1)
    first = is_max.to(torch.int8).argmax(dim=-1, keepdim=True)  # argmax returns the first max
    one_hot = torch.zeros_like(scores).scatter_(-1, first, 1.0)
    return one_hot.flip(-1) if mode == "rightmost" else one_hot


class _ModeHooks:
    """The pair of hooks of one layer; tagged so that only ours are ever removed."""

    interp_attention = True

    def __init__(self, mode: str, beta: float):
        self.mode, self.beta, self.scores = mode, beta, None

    def keep_scores(self, scores, hook):
        self.scores = scores
        return None  # leave the scores (and the cache) as they are

    def replace_pattern(self, pattern, hook):
        scores, self.scores = self.scores, None
        return pattern_from_scores(scores, self.mode, self.beta).to(pattern.dtype)

    def __repr__(self) -> str:
        return f"interp.attention({self.mode}, beta={self.beta})"


def _ours(handle) -> bool:
    fn = getattr(handle, "user_hook", None)
    return getattr(getattr(fn, "__self__", None), "interp_attention", False)


def remove_attention(model) -> None:
    """Take off the attention-mode hooks installed by :func:`set_attention` (others stay)."""
    for layer in range(model.cfg.n_layers):
        attn = model.blocks[layer].attn
        for hp in (attn.hook_attn_scores, attn.hook_pattern):
            keep = []
            for handle in hp.fwd_hooks:
                if _ours(handle):
                    handle.hook.remove()
                else:
                    keep.append(handle)
            hp.fwd_hooks = keep
    model.attention_modes = [("softmax", 1.0)] * model.cfg.n_layers


def set_attention(model, mode: str = "leftmost", *, beta: float = 1.0, layers=None):
    """Install attention ``mode`` on ``layers`` (default all) as permanent hooks; returns model.

    Replaces any mode set before. ``softmax`` with beta = 1 installs nothing on that layer.
    The mode per layer is recorded in ``model.attention_modes`` as ``(mode, beta)`` pairs.
    """
    check_mode(mode, beta)
    layers = range(model.cfg.n_layers) if layers is None else list(layers)
    for layer in layers:
        if not 0 <= layer < model.cfg.n_layers:
            raise ValueError(f"layer {layer}; accepted: 0..{model.cfg.n_layers - 1}")
    modes = list(getattr(model, "attention_modes", [("softmax", 1.0)] * model.cfg.n_layers))
    remove_attention(model)
    for layer in layers:
        modes[layer] = (mode, float(beta) if mode == "softmax" else 1.0)
    for layer, (name, b) in enumerate(modes):
        if (name, b) == ("softmax", 1.0):
            continue
        hooks = _ModeHooks(name, b)
        attn = model.blocks[layer].attn
        attn.hook_attn_scores.add_hook(hooks.keep_scores, is_permanent=True)
        attn.hook_pattern.add_hook(hooks.replace_pattern, is_permanent=True)
    model.attention_modes = modes
    return model
