"""TransformerLens's residual bookkeeping, right on every architecture of a :class:`ModelSpec`.

``run_with_cache`` of a task model returns a :class:`TaskCache`: TransformerLens's
``ActivationCache`` whose decompositions sum to the stream they decompose on every model the
spec allows. Only one field needs it: residual="embed" makes block ``l >= 1`` add its output to
x_0 (:mod:`interp.core.residual`), so block 0's attention and MLP outputs are *not* in block 1's
``resid_mid`` / ``resid_post`` although TransformerLens, which assumes x_{l+1} = x_l + block_l,
sums them (``cache.decompose_resid()`` then missed ``resid_post`` by 0.2-1.5). Here the
components of blocks that the stream drops are left out, by their labels:

* ``decompose_resid``, ``stack_head_results``, ``stack_neuron_results``,
  ``get_full_resid_decomposition``: rows of dropped blocks removed (a ``remainder`` row takes
  them back, so it still closes the sum);
* ``model.accumulated_bias`` (:class:`TaskTransformer`): the biases of dropped blocks left out,
  and no ``AttributeError`` on attention-only models (TransformerLens 3.9 reads ``block.mlp``
  there, so its ``get_full_resid_decomposition()`` failed on every attention-only model).

``accumulated_resid``, ``stack_activation``, ``logit_attrs`` and ``transformer_lens.patching``
read cached values or add hooks, so they are right as they are (``tests/core/test_tl_cache.py``
checks every one against a direct computation per field). The other fields (W_O identity,
biases off, mlp="last", pos_embed="none", embed_scale, hard attention modes) are fixed tensors or
hooks whose cached values are what the forward used; TransformerLens's sums hold there.

A plain ``transformer_lens.ActivationCache(cache_dict, model)`` built by hand (from
``add_caching_hooks``, say) of a model whose stream drops blocks cannot know it: its four
decompositions above refuse, naming :class:`TaskCache` (a guard this module adds to
TransformerLens's class; it acts on task models only, every other model's cache is untouched).

:class:`TaskTransformer` also keeps TransformerLens's habits from giving a silently wrong number
elsewhere: its forward clears residual="embed"'s state around every pass
(:func:`interp.core.residual.forward`); ``to_string`` / ``to_str_tokens`` refuse output classes that
a pair-token model would label as pairs (:func:`interp.core.pairs.check_decodable`);
``generate_stream`` is refused as ``generate`` is; ``run_with_cache(incl_bwd=True)`` on a model
with no trainable parameter (a construction: its weights are the theorem's, frozen) says so; and
``state_dict()`` called from a user's code warns when a plain HookedTransformer loading it would
compute other logits (the hooks that are architecture here: hard attention, residual="embed",
embed_scale).
"""

from __future__ import annotations

import functools
import re
import sys
import warnings

import torch

from interp.core import pairs, residual

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
    from transformer_lens import ActivationCache, HookedTransformer

_BLOCK_LABEL = re.compile(r"^L(\d+)[HN]\d+$|^(\d+)_(?:attn|mlp)_out$")


def dropped_blocks(model, layer: int | None, mlp_input: bool = False) -> range:
    """The blocks whose outputs are not in the stream entering ``layer`` (its MLP with
    ``mlp_input``; ``layer`` None or -1 or n_layers: the final stream), in TransformerLens's
    indexing: all blocks before the last one that wrote it under residual="embed", else none."""
    n_layers = model.cfg.n_layers
    if layer is None or layer == -1:
        layer = n_layers
    spec = getattr(model, "spec", None)
    if spec is None or spec.residual != "embed":
        return range(0)
    last = layer - 1 + int(mlp_input)  # the last block whose output the stream holds
    return range(0, last) if last >= 1 else range(0)


def _block_of(label: str) -> int | None:
    m = _BLOCK_LABEL.match(label)
    return None if m is None else int(m.group(1) or m.group(2))


def _leave_out(stack: torch.Tensor, labels: list[str], dropped: range):
    """``stack`` without the rows of ``dropped`` blocks; a ``remainder`` row takes them back."""
    if not dropped:
        return stack, labels
    out = [i for i, label in enumerate(labels) if _block_of(label) in dropped]
    if not out:
        return stack, labels
    keep = [i for i in range(len(labels)) if i not in out]
    if "remainder" in labels:  # TransformerLens's remainder is the stream minus every row
        stack = stack.clone()
        stack[labels.index("remainder")] += stack[out].sum(0)
    return stack[keep], [labels[i] for i in keep]


class TaskCache(ActivationCache):
    """TransformerLens's ActivationCache with decompositions that leave out the blocks a
    residual="embed" stream drops (module docstring); otherwise TransformerLens's own."""

    def _fixed(self, result, return_labels: bool, dropped: range):
        stack, labels = result
        stack, labels = _leave_out(stack, labels, dropped)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer=None, mlp_input=False, *args, return_labels=False, **kwargs):
        result = super().decompose_resid(layer, mlp_input, *args, return_labels=True, **kwargs)
        return self._fixed(result, return_labels, dropped_blocks(self.model, layer, mlp_input))

    def stack_head_results(self, layer=-1, return_labels=False, *args, **kwargs):
        result = super().stack_head_results(layer, True, *args, **kwargs)
        return self._fixed(result, return_labels, dropped_blocks(self.model, layer))

    def stack_neuron_results(self, layer, *args, return_labels=False, **kwargs):
        result = super().stack_neuron_results(layer, *args, return_labels=True, **kwargs)
        return self._fixed(result, return_labels, dropped_blocks(self.model, layer))

    def get_full_resid_decomposition(self, layer=None, mlp_input=False, *args, return_labels=False, **kwargs):
        result = super().get_full_resid_decomposition(layer, mlp_input, *args, return_labels=True, **kwargs)
        return self._fixed(result, return_labels, dropped_blocks(self.model, layer, mlp_input))

    def apply_slice_to_batch_dim(self, batch_slice):
        sliced = super().apply_slice_to_batch_dim(batch_slice)
        return TaskCache(sliced.cache_dict, self.model, has_batch_dim=sliced.has_batch_dim)


class TaskTransformer(HookedTransformer):
    """The class of every task model (:func:`interp.core.models.new_model`): a HookedTransformer
    whose ``run_with_cache`` returns a :class:`TaskCache` and whose ``accumulated_bias`` sums the
    biases the stream holds (residual="embed": the last block's; attention-only: no MLP biases)."""

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases=True):
        dropped = dropped_blocks(self, layer, mlp_input)
        bias = torch.zeros(self.cfg.d_model, device=self.cfg.device)
        for i in range(layer + int(mlp_input)):
            if i in dropped:
                continue
            bias = bias + self.blocks[i].attn.b_O
            if include_mlp_biases and i < layer and not self.cfg.attn_only:
                bias = bias + self.blocks[i].mlp.b_out
        return bias

    def forward(self, *args, **kwargs):
        return residual.forward(self, super().forward, args, kwargs)

    def run_with_cache(self, *model_args, return_cache_object=True, remove_batch_dim=False, **kwargs):
        if kwargs.get("incl_bwd") and not any(p.requires_grad for p in self.parameters()):
            raise ValueError("run_with_cache(incl_bwd=True): no parameter of this model requires grad (a "
                             "construction's weights are the theorem's exact values, frozen), so there is no "
                             "backward pass; take gradients on a copy: m = copy.deepcopy(model).requires_grad_(True)")
        out, cache = super().run_with_cache(*model_args, return_cache_object=return_cache_object,
                                            remove_batch_dim=remove_batch_dim, **kwargs)
        if return_cache_object:
            cache = TaskCache(cache.cache_dict, self, has_batch_dim=cache.has_batch_dim)
        return out, cache

    def to_string(self, tokens):
        pairs.check_decodable(self, tokens)
        return super().to_string(tokens)

    def to_str_tokens(self, input, *args, **kwargs):
        pairs.check_decodable(self, input)
        return super().to_str_tokens(input, *args, **kwargs)

    def generate_stream(self, *args, **kwargs):
        from interp.core import tokens

        raise ValueError(f"generate_stream() does not apply: {tokens.ANSWERS_ONCE} "
                         "(interp.forward.predictions(model, tokens))")

    def state_dict(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not args and not kwargs and not caller.startswith(_INTERNAL):
            if lost := outside_the_weights(self):
                warnings.warn(f"state_dict() holds the weights only: a plain HookedTransformer(cfg) that loads "
                              f"it loses {lost}, so its logits differ; load it with interp.core.roundtrip."
                              "from_state_dict(cfg, state, **roundtrip.extras(model)) instead", stacklevel=2)
        return super().state_dict(*args, **kwargs)


def outside_the_weights(model) -> str:
    """What a plain HookedTransformer loading ``model``'s state dict loses, in words ('' if not logits)."""
    from interp.core import attention

    spec, task = getattr(model, "spec", None), getattr(model, "task", None)
    parts = [f"layer {layer}'s {m.mode} attention{f' (beta={m.beta})' if m.mode == 'softmax' else ''}"
             for layer, m in enumerate(attention.modes(model)) if m[:2] != ("softmax", 1.0)]
    if spec is not None and spec.residual == "embed" and spec.n_layers > 1:
        parts.append(f"the residual='embed' hooks of layers {list(range(1, spec.n_layers))}")
    if spec is not None and spec.embed_scale != "1":
        parts.append(f"the embed_scale={spec.embed_scale!r} hook on hook_embed")
    tokenizer = "the task tokenizer" + (f" and loss (case {task.case})" if task is not None else "")
    return ", ".join(parts + [tokenizer]) if parts else ""


#: modules whose state_dict() calls are the toolkit's or a library's own (no warning)
_INTERNAL = ("interp.", "torch", "transformer_lens", "safetensors", "copy")
#: the ActivationCache methods that sum residual components (TaskCache's overrides)
_DECOMPOSITIONS = ("decompose_resid", "stack_head_results", "stack_neuron_results", "get_full_resid_decomposition")


def _refuse_plain(method):
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if type(self) is ActivationCache and isinstance(self.model, TaskTransformer) \
                and dropped_blocks(self.model, None):
            raise ValueError(f"{method.__name__} of a plain transformer_lens.ActivationCache of a residual='embed' "
                             "model: TransformerLens sums every block's output into the stream, which this model's "
                             "does not hold; build interp.core.cache.TaskCache(cache_dict, model) with the same "
                             "arguments, or take the cache from model.run_with_cache")
        return method(self, *args, **kwargs)

    guarded.interp_guard = True
    return guarded


for _name in _DECOMPOSITIONS:
    if not getattr(getattr(ActivationCache, _name), "interp_guard", False):
        setattr(ActivationCache, _name, _refuse_plain(getattr(ActivationCache, _name)))
