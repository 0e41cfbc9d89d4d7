"""The residual form "embed" (``ModelSpec.residual``) as permanent hooks.

residual="embed" makes block ``l >= 1`` compute ``resid_mid_l = x_0 + attn_out_l`` (without
MLPs: ``resid_post_l``) instead of TransformerLens's ``x_l + attn_out_l``: the paper's "sum of
the input embedding and the attention layer's output" in every layer. Block 0 is the same
either way.

Block l computes ``hook_resid_mid(x_l + attn_out_l)``; the hook on that point returns
``x_0 + attn_out_l`` instead, with x_0 what block 0's attention reads (caught as it enters
``blocks.0.ln1``, the identity here, or with split-QKV / attn-in inputs one head's copy: after
every hook on ``hook_resid_pre``) and attn_out_l what leaves ``blocks.{l}.hook_attn_out`` (caught by
a hook that is moved behind every other hook of that point each time the block runs, so it sees
their patches). Gradients take the paths TransformerLens's backward hooks watch (``_EmbedSum``),
so ``run_with_cache(incl_bwd=True)`` caches the right gradient at every point. The replacement is
moved in front of every other hook of ``hook_resid_mid`` the same way, so a hook a user adds
there, with ``prepend=True`` or not, sees and edits the stream the model carries, in the order
TransformerLens documents. The sum is the same operation the evaluator and the fast engine
compute, bit for bit; caches keep meaning what they say (``blocks.{l}.hook_resid_pre``: the
layer's input x_l, ``hook_attn_out``: its attention output, ``hook_resid_mid``: x_0 +
attn_out), and gradients reach x_0 and attn_out only. The hooks are torch hooks on the modules,
as :mod:`interp.core.attention`'s, so ``reset_hooks(including_permanent=True)`` keeps them.

x_0 and attn_out are kept for one forward pass only: :func:`forward` (every task model's
``forward``, :class:`interp.core.cache.TaskTransformer`) clears them before and after, so a pass
never reads another input's x_0. A pass that does not compute x_0 itself (``start_at_layer`` >= 1)
is refused by name unless ``tokens=`` gives the input, from which x_0 is computed first.
"""

from __future__ import annotations

import inspect

import torch


def hook_point(model, layer: int):
    """The HookPoint that carries x_0 + attn_out of block ``layer``."""
    block = model.blocks[layer]
    return block.hook_resid_post if model.cfg.attn_only else block.hook_resid_mid


def _watch_input(block, keep_stream, keep_heads) -> None:
    """Catch what block's attention reads, after every hook on hook_resid_pre: the input of ln1
    (the identity here), or with split-QKV / attn-in inputs one head's copy of it."""
    block.ln1.register_forward_pre_hook(keep_stream)
    block.hook_attn_in.register_forward_pre_hook(keep_heads)
    block.hook_v_input.register_forward_pre_hook(keep_heads)


def install(model, layer: int) -> None:
    """Make block ``layer`` (>= 1) add its attention output to x_0 instead of its input."""
    hooks, block = _EmbedResidual(), model.blocks[layer]
    _watch_input(model.blocks[0], hooks.x0_from_stream, hooks.x0_from_heads)
    _watch_input(block, hooks.x_from_stream, hooks.x_from_heads)
    block.hook_attn_out.register_forward_hook(hooks.keep_attn_out)
    block.register_forward_pre_hook(hooks.order)
    hook_point(model, layer).register_forward_hook(hooks.replace)


def _states(model, layer: int) -> list:
    return [fn.__self__ for fn in hook_point(model, layer)._forward_hooks.values()
            if getattr(getattr(fn, "__self__", None), "interp_residual", False)]


def installed(model, layer: int) -> bool:
    return bool(_states(model, layer))


def states(model) -> list:
    """The embed-residual hooks' states of every layer (none for a residual="stream" model)."""
    return [s for layer in range(1, model.cfg.n_layers) for s in _states(model, layer)]


def _move(hooks, owner, last: bool) -> None:
    for key in [k for k, fn in hooks.items() if getattr(fn, "__self__", None) is owner]:
        hooks.move_to_end(key, last=last)


class _EmbedSum(torch.autograd.Function):
    """``x_0 + attn_out`` in value; in gradient, routed through the tensors TransformerLens's
    backward hooks watch: all of it to the block's summed input ``x_l + attn_out`` (so
    ``hook_attn_out``'s gradient is right), minus it to ``x_l`` (which the sum does not hold),
    and to x_0."""

    @staticmethod
    def forward(ctx, summed, x0, attn_out, x_l):
        return x0 + attn_out

    @staticmethod
    def backward(ctx, grad):
        return grad, grad, None, -grad


class _EmbedResidual:
    """One block's hooks: remember x_0, x_l and attn_out, then put x_0 + attn_out in the residual."""

    interp_residual = True

    def __init__(self):
        self.x0 = self.x = self.attn_out = None

    def clear(self) -> None:
        self.x0 = self.x = self.attn_out = None

    def x0_from_stream(self, ln1, inputs):
        if inputs[0].dim() == 3:
            self.x0 = inputs[0]

    def x0_from_heads(self, point, inputs):
        self.x0 = inputs[0][..., 0, :]

    def x_from_stream(self, ln1, inputs):
        if inputs[0].dim() == 3:
            self.x = inputs[0]

    def x_from_heads(self, point, inputs):
        self.x = inputs[0][..., 0, :]

    def keep_attn_out(self, module, inputs, output):
        self.attn_out = output

    def order(self, block, inputs):
        """Before block l runs: :meth:`keep_attn_out` last at hook_attn_out, :meth:`replace`
        first at the residual's point (hooks added since run after it and see the sum)."""
        _move(block.hook_attn_out._forward_hooks, self, last=True)
        for point in ("hook_resid_mid", "hook_resid_post"):
            if hasattr(block, point):  # attention-only blocks have no hook_resid_mid
                _move(getattr(block, point)._forward_hooks, self, last=False)

    def replace(self, module, inputs, resid):
        if self.x0 is None or self.attn_out is None or self.x is None:
            raise ValueError("residual='embed': this block adds its attention output to x_0, the input's "
                             "embedding (blocks.0.hook_resid_pre), which this forward pass did not compute; "
                             "run the model on tokens, or pass start_at_layer with tokens=<the input's tokens>")
        if self.x0.shape != resid.shape:
            raise ValueError(f"residual='embed': x_0 has shape {tuple(self.x0.shape)}, the residual "
                             f"{tuple(resid.shape)}; accepted: tokens= of the batch the residual is of")
        out = _EmbedSum.apply(resid, self.x0, self.attn_out, self.x)
        self.x0 = self.x = self.attn_out = None
        return out


def _bound(model, args, kwargs) -> dict:
    from transformer_lens import HookedTransformer

    return inspect.signature(HookedTransformer.forward).bind(model, *args, **kwargs).arguments


def forward(model, run, args: tuple, kwargs: dict):
    """``run(*args, **kwargs)`` (TransformerLens's forward of ``model``) with every embed-residual
    state cleared before and after, so none outlives its pass; ``start_at_layer`` >= 1 needs
    ``tokens=``, from which x_0 is computed here (hooks on ``hook_embed``, ``hook_pos_embed``
    and ``blocks.0.hook_resid_pre`` run, as in a full pass)."""
    held = states(model)
    if not held:
        return run(*args, **kwargs)
    bound = _bound(model, args, kwargs)
    start, tokens = bound.get("start_at_layer"), bound.get("tokens")
    start = None if start is None else (start + model.cfg.n_layers if start < 0 else start)
    for s in held:
        s.clear()
    try:
        if start is not None and start >= 1:
            if tokens is None:
                raise ValueError(
                    f"start_at_layer={bound['start_at_layer']} on a residual='embed' model: blocks 1.. add their "
                    "attention output to x_0, the embedding of the input, which a residual stream does not hold; "
                    "accepted: tokens=<the input's tokens> beside the residual (x_0 is computed from them), "
                    "or a forward from the tokens (start_at_layer=None)")
            embedded = model.input_to_embed(tokens)[0]
            x0 = model.blocks[0].hook_resid_pre(embedded)  # the hooks of that point run, as in block 0
            for s in held:
                s.x0 = x0
        return run(*args, **kwargs)
    finally:
        for s in held:
            s.clear()
