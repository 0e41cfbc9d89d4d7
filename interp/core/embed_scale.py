"""The token embedding's scale (``ModelSpec.embed_scale``) as a permanent hook.

embed_scale="sqrt_d_model" makes the model read ``sqrt(d_model) * W_E[t] + W_pos`` instead of
``W_E[t] + W_pos``: the original Transformer's "we multiply those weights by sqrt(d_model)"
(Vaswani et al. 2017, Section 3.4), also in PyTorch's transformer tutorial. The parameter stays
W_E; the scale is a forward hook on ``hook_embed`` registered when the model is built, before
any user hook, so caches and patches of ``hook_embed`` see the scaled embedding, and
``reset_hooks(including_permanent=True)`` keeps it (a torch hook on the module, as
:mod:`interp.core.residual`'s). :mod:`interp.core.forward` and the fast engine multiply by the
same Python float, so every path computes the same bits.
"""

from __future__ import annotations

import math


def factor(spec) -> float:
    """The multiplier of ``spec.embed_scale`` (1.0 or sqrt(d_model))."""
    return math.sqrt(spec.d_model) if spec.embed_scale == "sqrt_d_model" else 1.0


def install(model, scale: float) -> None:
    """Multiply what ``hook_embed`` carries by ``scale``."""
    model.hook_embed.register_forward_hook(_Scale(scale))


def installed(model) -> bool:
    return any(isinstance(fn, _Scale) for fn in model.hook_embed._forward_hooks.values())


class _Scale:
    def __init__(self, scale: float):
        self.scale = scale

    def __call__(self, module, inputs, output):
        return output * self.scale
