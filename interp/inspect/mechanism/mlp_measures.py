"""What a model's MLPs contribute, and whether its attention alone picks the matching slot.

:func:`summary` gives the five columns that :func:`interp.inspect.mechanism.measure.measure` appends to
every row, for any model :func:`interp.core.models.build_model` makes (and the constructions):

=============== ==========================================================================
column          meaning
=============== ==========================================================================
acc_mean_mlp    accuracy with the output of every block that has an MLP
                (``blocks.{l}.hook_mlp_out``; :func:`interp.core.models.mlp_layers`: every
                block, or the last with mlp="last") replaced by its mean over the test inputs,
                per position, all at once (TransformerLens hooks on one forward pass)
acc_zero_mlp    the same with those outputs zeroed
attn_entropy    last layer, final position: attention entropy / log(seq_len), 0 one-hot,
                1 uniform (what ``entropy`` measures, in float64, here for MLP models)
attn_picks_slot fraction of inputs whose last-layer final-position attention has its argmax
                (ties: the leftmost position, the constructions' rule) on the matching slot
                j (k_j = i*): its value position ``Task.value_pos(n, j)`` or, where a token
                holds the key, its key position ``Task.key_pos(n, j)``
mlp_role        ``none``: no MLP (attention-only); ``passes``: acc_mean_mlp >= acc -
                :data:`PASSES_WITHIN` (the MLP can be mean-ablated); ``needed``: acc_mean_mlp <
                1/n + :data:`NEEDED_ABOVE_CHANCE` (ablation drops it to near chance);
                ``helps``: between
=============== ==========================================================================

An attention-only model gets NaN in the four numeric columns and ``none`` in ``mlp_role``, so a
table of mixed models has one schema. ``acc`` (the row's accuracy, from the package's one
evaluation pass on the same inputs) is what ``mlp_role`` compares with; the ablated accuracies
come from TransformerLens's forward with the hooks, argmax of the final-position logits. One
head per layer (every model here): head 0 is read. Nothing here changes a weight, flag or
permanent hook: the ablation hooks are temporary (``run_with_hooks``).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import models, tasks
from interp.inspect.tools import hooks

#: the columns :func:`summary` writes, in order (read by ``interp atlas``: keep the names)
MLP_COLUMNS = ("acc_mean_mlp", "acc_zero_mlp", "attn_entropy", "attn_picks_slot", "mlp_role")
#: the values of ``mlp_role``
MLP_ROLES = ("none", "passes", "helps", "needed")
#: ``passes``: mean-ablating the MLPs costs at most this much accuracy (5 points)
PASSES_WITHIN = 0.05
#: ``needed``: mean-ablated accuracy below chance 1/n plus this (10 points)
NEEDED_ABOVE_CHANCE = 0.10
ABLATIONS = ("mean", "zero")


def mlp_blocks(model) -> list[int]:
    """The blocks whose MLP computes something (:func:`interp.core.models.mlp_layers`); [] for
    an attention-only model."""
    return [layer for layer, has in enumerate(models.mlp_layers(model)) if has]


def cache_names(model) -> set[str]:
    """The activations :func:`summary` reads from a cache besides the attention patterns."""
    return {f"blocks.{layer}.hook_mlp_out" for layer in mlp_blocks(model)}


def ablated_logits(model, tokens: Int[Tensor, "batch pos"], how: str, *,
                   cache=None) -> Float[Tensor, "batch d_vocab_out"]:
    """Final-position logits with every MLP's output (``blocks.{l}.hook_mlp_out``) replaced by
    its mean over ``tokens`` at each position (``how="mean"``, the means from ``cache`` if it
    holds them, else from a clean run) or by zero (``how="zero"``)."""
    if how not in ABLATIONS:
        raise ValueError(f"how={how!r}; accepted: one of {ABLATIONS}")
    names = sorted(cache_names(model))
    if not names:
        raise ValueError("the model has no MLP (d_mlp = 0, or cfg.attn_only): nothing to ablate")
    with torch.no_grad():
        if how == "mean" and (cache is None or any(name not in cache for name in names)):
            _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        fill = {name: (cache[name].mean(0, keepdim=True) if how == "mean" else None) for name in names}

        def replace(act: Float[Tensor, "batch pos d_model"], hook):
            mean = fill[hook.name]
            return torch.zeros_like(act) if mean is None else mean.expand_as(act).clone()

        logits = model.run_with_hooks(tokens, fwd_hooks=[(name, replace) for name in names])
    return logits[:, -1]


def role(acc: float, acc_mean_mlp: float, n: int) -> str:
    """``mlp_role`` from accuracy, MLP-mean-ablated accuracy and n (module docstring); ``none``
    when acc_mean_mlp is NaN (no MLP)."""
    if acc_mean_mlp is None or math.isnan(acc_mean_mlp):
        return "none"
    if acc_mean_mlp >= acc - PASSES_WITHIN:
        return "passes"
    return "needed" if acc_mean_mlp < 1.0 / n + NEEDED_ABOVE_CHANCE else "helps"


def slot_attention(task: tasks.Task, view: hooks.TaskView,
                   final: Float[Tensor, "batch key_pos"]) -> tuple[float, float]:
    """``(attn_entropy, attn_picks_slot)`` of the last layer's final-position attention rows."""
    p = final.double()
    entropy = float((-(p * p.clamp_min(1e-30).log()).sum(1)).mean() / math.log(p.shape[1]))
    j = view.slot_of_target
    picked = p.argmax(1)  # the first maximum: ties go to the leftmost position
    hit = picked == task.value_positions(view.n)[j]
    key_pos = task.key_positions(view.n)
    if key_pos is not None:
        hit |= picked == key_pos[j]
    return entropy, float(hit.double().mean())


@tasks.reads_task
def summary(model, tokens=None, *, case: int | None = None, n: int | None = None,
            acc: float | None = None, cache=None, batch_size: int = 512, seed: int = 0) -> dict:
    """The columns of the module docstring for one model, as a dict in :data:`MLP_COLUMNS`
    order. ``tokens`` default to :func:`interp.inspect.tools.hooks.sample_inputs` (``batch_size``,
    ``seed``); ``acc``: the model's accuracy on them if known (else measured); ``cache``: a
    cache of ``tokens`` holding the last layer's ``hook_pattern`` and :func:`cache_names`."""
    task, n = hooks.check_model(model, case=case, n=n)
    if not mlp_blocks(model):
        return dict(acc_mean_mlp=math.nan, acc_zero_mlp=math.nan, attn_entropy=math.nan,
                    attn_picks_slot=math.nan, mlp_role="none")
    tokens = hooks.sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    view = hooks.read(task.case, n, tokens)
    last = f"blocks.{model.cfg.n_layers - 1}.attn.hook_pattern"
    wanted = cache_names(model) | {last}
    if cache is None or any(name not in cache for name in wanted):
        with torch.no_grad():
            _, cache = model.run_with_cache(view.tokens, names_filter=lambda name: name in wanted)
    if acc is None:
        acc = hooks.accuracy(model, view.tokens, case=task.case, n=n)
    out = {f"acc_{how}_mlp": float((ablated_logits(model, view.tokens, how, cache=cache).argmax(-1)
                                    == view.answer).double().mean()) for how in ABLATIONS}
    out["attn_entropy"], out["attn_picks_slot"] = slot_attention(task, view, cache[last][:, 0, -1])
    out["mlp_role"] = role(acc, out["acc_mean_mlp"], n)
    return out
