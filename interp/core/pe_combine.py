"""How case 1 combines a position's token embedding with its learned position embedding
(``ModelSpec.pe_combine``).

The paper fixes the width of cases 2-5 (same-position cases concatenate the key's and the
value's embeddings, d = 2 d_token; consecutive cases have d = d_token) but of case 1 says only
that "each input position directly encodes the function's value". Two readings fit:

* ``"add"`` (the default, what every table here trained): d_model = d_token, ``W_E[t] + W_pos[p]``;
* ``"concat"``: the same-position layout with the position in the key's place, d_model =
  2 d_token: ``W_E`` writes the first d_token coordinates, ``W_pos`` the last d_token, each zero
  in the other block (issue 53's screen, ``experiments/paper-check/SCREEN-pe.md``).

"concat" lives in the model's own tensors: W_E and W_pos are d_model wide with their other
block zero (set at build, checked by :func:`check`), and two permanent hooks multiply what
``hook_embed`` and ``hook_pos_embed`` carry by the 0/1 mask of the block each writes. Since the
blocks are zero the hooks change no value; they make the blocks' gradient exactly zero, so Adam
(zero moments, zero step) keeps them at zero through training. :mod:`interp.core.forward` and the
fast engine multiply by the same masks, so every path computes the same bits and gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor

PE_COMBINES = ("add", "concat")


def masks(spec) -> tuple[Tensor, Tensor] | None:
    """The (token, position) 0/1 masks over d_model of ``spec``'s "concat"; None for "add"."""
    if getattr(spec, "pe_combine", "add") != "concat":
        return None
    half = torch.arange(spec.d_model) < spec.d_token
    return half.float(), (~half).float()


def install(model, spec) -> None:
    """Multiply what ``hook_embed`` and ``hook_pos_embed`` carry by their masks."""
    token, position = masks(spec)
    model.hook_embed.register_forward_hook(_Mask(token))
    model.hook_pos_embed.register_forward_hook(_Mask(position))


def installed(model) -> bool:
    return any(isinstance(fn, _Mask) for fn in model.hook_embed._forward_hooks.values())


@torch.no_grad()
def zero_blocks(model, spec) -> None:
    """Set the blocks outside each table's mask to zero (the build; they stay trainable)."""
    token, position = masks(spec)
    model.embed.W_E.masked_fill_(token.to(model.embed.W_E.device) == 0, 0.0)  # +0.0, where mul_ keeps -0.0
    model.pos_embed.W_pos.masked_fill_(position.to(model.pos_embed.W_pos.device) == 0, 0.0)


def check(model, spec) -> None:
    """A ValueError naming the tensor or hook when a "concat" model is no longer what it says."""
    if masks(spec) is None:
        if installed(model):
            raise ValueError("pe_combine='add', but hook_embed carries a pe_combine mask")
        return
    token, position = masks(spec)
    for name, w, keep in (("embed.W_E", model.embed.W_E, token), ("pos_embed.W_pos", model.pos_embed.W_pos, position)):
        if bool((w.detach() * (1 - keep.to(w))).any()):
            raise ValueError(f"{name} is not zero outside its block (pe_combine='concat' fixes the other "
                             f"{spec.d_token} coordinates at zero); restore it or build with pe_combine='add'")
    if not installed(model):
        raise ValueError("pe_combine='concat', but the hook_embed / hook_pos_embed masks are gone")


def apply(x: Tensor, mask: Tensor | None) -> Tensor:
    """``x`` times ``mask`` (over its last axis), as the hooks multiply; ``x`` when None."""
    return x if mask is None else x * mask.to(x)


class _Mask:
    def __init__(self, mask: Tensor):
        self.mask = mask

    def __call__(self, module, inputs, output):
        return apply(output, self.mask)
