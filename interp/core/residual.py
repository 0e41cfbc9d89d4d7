"""The residual form "embed" (``ModelSpec.residual``) as permanent hooks.

residual="embed" makes block ``l >= 1`` compute ``resid_mid_l = x_0 + attn_out_l`` (without
MLPs: ``resid_post_l``) instead of TransformerLens's ``x_l + attn_out_l``: the paper's "sum of
the input embedding and the attention layer's output" in every layer. Block 0 is the same
either way.

Block l computes ``hook_resid_mid(x_l + attn_out_l)``; the hook on that point returns
``x_0 + attn_out_l`` instead, with x_0 what layer 0 reads (caught as it enters ``blocks.0.ln1``,
the identity here, so after every hook on ``hook_resid_pre``) and attn_out_l what leaves
``blocks.{l}.hook_attn_out`` (caught by a hook there that is moved behind every other hook of
that point each time block l runs, so it sees their patches). The sum is the same operation
the evaluator and the fast engine compute, bit for bit; caches keep meaning what they say
(``blocks.{l}.hook_resid_pre``: the layer's input x_l, ``hook_attn_out``: its attention output,
``hook_resid_mid``: x_0 + attn_out), and gradients reach x_0 and attn_out only. The hooks are
torch hooks on the modules, as :mod:`interp.core.attention`'s, so
``reset_hooks(including_permanent=True)`` keeps them.
"""

from __future__ import annotations


def hook_point(model, layer: int):
    """The HookPoint that carries x_0 + attn_out of block ``layer``."""
    block = model.blocks[layer]
    return block.hook_resid_post if model.cfg.attn_only else block.hook_resid_mid


def install(model, layer: int) -> None:
    """Make block ``layer`` (>= 1) add its attention output to x_0 instead of its input."""
    hooks, block = _EmbedResidual(), model.blocks[layer]
    model.blocks[0].ln1.register_forward_hook(hooks.keep_x0)
    block.hook_attn_out.register_forward_hook(hooks.keep_attn_out)
    block.register_forward_pre_hook(hooks.last_on_attn_out)
    hook_point(model, layer).register_forward_hook(hooks.replace)


def installed(model, layer: int) -> bool:
    return any(getattr(getattr(fn, "__self__", None), "interp_residual", False)
               for fn in hook_point(model, layer)._forward_hooks.values())


class _EmbedResidual:
    """One block's hooks: remember x_0 and attn_out, then put x_0 + attn_out in the residual."""

    interp_residual = True

    def __init__(self):
        self.x0 = self.attn_out = None

    def keep_x0(self, module, inputs, output):
        self.x0 = output

    def keep_attn_out(self, module, inputs, output):
        self.attn_out = output

    def last_on_attn_out(self, block, inputs):
        """Before the block runs: move :meth:`keep_attn_out` behind the hooks added since."""
        hooks = block.hook_attn_out._forward_hooks
        for key in [k for k, fn in hooks.items() if getattr(fn, "__self__", None) is self]:
            hooks.move_to_end(key)

    def replace(self, module, inputs, resid):
        if self.x0 is None or self.attn_out is None:
            raise ValueError("residual='embed' needs layer 0 in the same forward pass (no start_at_layer)")
        out = self.x0 + self.attn_out
        self.x0 = self.attn_out = None
        return out
