"""A task model's weights out to a plain ``HookedTransformer`` and back.

A state dict holds weights only. What a task model holds beside them is lost by a plain
``HookedTransformer(cfg)`` that loads it: the attention modes (hard attention, softmax with
beta != 1) and residual="embed" are permanent hooks (:mod:`interp.core.attention`,
:mod:`interp.core.residual`), the frozen tensors of a :class:`~interp.core.models.ModelSpec`
are a ``requires_grad`` flag, and the task's tokenizer, input check and loss are attributes
(:mod:`interp.core.tokens`). :func:`extras` names them, as the keywords of
:func:`from_state_dict`, which gives them back::

    vanilla = models.to_vanilla(model)      # warns when a plain model's logits would differ
    back = roundtrip.from_state_dict(vanilla.cfg, vanilla.state_dict(), **roundtrip.extras(model))

``interp.save`` / ``interp.load`` keep all of it (the checkpoint's config.json).
"""

from __future__ import annotations

import copy
from typing import Mapping

from interp.core import attention as attn
from interp.core import models


def extras(model) -> dict:
    """What ``model`` holds beside its state dict, as the keywords of :func:`from_state_dict`:
    ``case`` (its task: the tokenizer, input check and task loss; None when unknown),
    ``attention`` (every layer's :class:`interp.core.attention.LayerMode`) and ``spec`` (its
    :class:`~interp.core.models.ModelSpec`: residual="embed" hooks, frozen tensors; or None)."""
    task = getattr(model, "task", None)
    return dict(case=None if task is None else task.case, attention=attn.modes(model),
                spec=models.spec_of(model))


def layer_modes(attention, n_layers: int) -> list[attn.LayerMode]:
    """``attention`` as one LayerMode per layer: None (softmax), one mode name for every layer,
    or ``n_layers`` entries (LayerMode, a ``(mode, beta, tie_rtol, tie_atol)`` tuple or a name)."""
    if attention is None:
        return [attn.LayerMode()] * n_layers
    if isinstance(attention, str):
        attention = [attention] * n_layers
    if not isinstance(attention, (list, tuple)) or len(attention) != n_layers or \
            not all(isinstance(m, (str, tuple, list)) for m in attention):
        raise ValueError(f"attention={attention!r}; accepted: None (softmax), a mode name for every layer, "
                         f"or {n_layers} per layer (LayerMode or (mode, beta, tie_rtol, tie_atol))")
    modes = [attn.LayerMode(m) if isinstance(m, str) else attn.LayerMode(*m) for m in attention]
    for m in modes:
        attn.check_mode(m.mode, m.beta)
    return modes


def from_state_dict(cfg, state: Mapping, *, case: int | None, attention=None, spec=None):
    """A task model of ``cfg`` (a ``HookedTransformerConfig``, copied) holding the weights
    ``state`` (the state dict of a model built here, of its ``models.to_vanilla`` copy, or of a
    plain HookedTransformer), with what a state dict does not hold given back: the task of
    ``case`` (None: unknown), the attention modes (``attention``, see :func:`layer_modes`) and
    ``spec``'s residual hooks and frozen tensors (its fixed values are checked against
    ``state``). :func:`extras` of the source model gives all three keywords. Every refusal is a
    ValueError before any model is built, or naming the tensor that does not fit."""
    if not isinstance(cfg, models.HookedTransformerConfig):
        raise ValueError(f"cfg is a {type(cfg).__name__}; accepted: a HookedTransformerConfig")
    if not isinstance(state, Mapping):
        raise ValueError(f"state is a {type(state).__name__}; accepted: a state dict (model.state_dict())")
    modes = layer_modes(attention, cfg.n_layers)
    if spec is not None and (not isinstance(spec, models.ModelSpec) or spec.case != case):
        raise ValueError(f"spec={spec!r}; accepted: None or a ModelSpec of case={case!r}")
    model = models.new_model(copy.deepcopy(cfg), case)
    if any(k.startswith("embed.parametrizations.") for k in state):
        models.tie_pair_embedding(model, cfg.d_vocab_out)  # a pair model's own state (not to_vanilla's)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"the state dict does not fit cfg: {e}") from None
    if spec is not None:
        models.attach_spec(model, spec, fix=False)
        models.check_spec(model)  # the state holds the spec's fixed values; they stay frozen
        for name in models.fixed_weights(model, spec):
            model.get_parameter(name).requires_grad_(False)
    for layer, m in enumerate(modes):
        if m[:2] != ("softmax", 1.0):
            attn.set_attention(model, m.mode, beta=m.beta, layers=[layer], tie_rtol=m.tie_rtol,
                               tie_atol=m.tie_atol)
    return model.eval()
