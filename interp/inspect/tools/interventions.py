"""Interventions that return data: activation patching, ablation, slot logit attribution,
logit lens, path patching and attribution patching, on any model of the toolkit, through
TransformerLens hooks.

One patching engine, in TransformerLens's convention (``transformer_lens.patching``: one generic
patch and one-line ``partial`` specialisations): :func:`patch` runs ``corrupted_tokens`` with the
activations at some hook points overwritten from ``clean_activations`` where a *setter* says;
setters take TransformerLens's ``(corrupted_activation, index, clean_activation)`` and return the
patched activation (:func:`pos_setter`, :func:`pos_head_setter`, :func:`mask_setter`);
:data:`patch_positions`, :data:`patch_head` and :data:`patch_mask` are the engine with one setter
each. As with TransformerLens's ``generic_activation_patch``, the run input is the one patched
*into* (denoising); noising, as :func:`patch_attended` does, passes a clean input and corrupted
activations. Ablation, path patching and :func:`patch_attended` are built on them.

Where TransformerLens has the operation, call it: ``transformer_lens.tools.analysis.
direct_logit_attribution`` or ``cache.decompose_resid`` + ``cache.logit_attrs`` for direct logit
attribution (right on every interp model: :mod:`interp.core.cache`); :func:`logit_lens` is
``cache.accumulated_resid`` then ``model.unembed``. :func:`slot_logit_attribution` is interp's
own (per source position through the last layer's final query), under a name TL does not use.

Every function reads the model only at the final position (where the task's answer is read)
and returns tensors or fractions, never prints. The answer of an input is f(i*), taken from the
tokens by the model's task (``model.task``; ``case=`` is accepted and checked). Axes follow
TransformerLens: ``batch``, ``pos``, ``head_index``, ``d_head``, ``d_model``, ``d_vocab_out``.

**Patching the attended position** (:func:`patch_attended`): is the answer carried by the
position the construction attends? For each clean input, :func:`corrupt` makes one with the same
keys and target but another answer (the target slot's value swapped with another slot's, so a
permutation stays one). The clean run then gets the corrupted run's activation

* **attended**: at the attended position only (the slot with k_j = i*). If the answer is read
  from there, the prediction follows the corrupted answer;
* **control**: at every *other* slot position. If the answer is read from the attended position
  only, the prediction stays the clean answer, although the swapped slot changed.

The patched activation is ``blocks.L.hook_resid_pre`` (``hook="resid_pre"``: everything the last
layer L reads at that position) or ``blocks.L.attn.hook_v`` (``hook="v"``: only the value vector,
the attention pattern left clean). For case 5 with two layers, L = 1 reads the value position
2j + 1 after layer 0 has copied the key there; keys are equal in both runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.core import models, tasks
from interp.inspect.tools import hooks

# ----------------------------------------------------------------------------- the engine

#: ``setter(corrupted_activation, index, clean_activation) -> activation``: TransformerLens's
#: patch setter; writes the clean activation into the (cloned) corrupted one where ``index`` says
Setter = Callable[[Tensor, Any, Tensor], Tensor]


def patch(
    model, corrupted_tokens: Int[Tensor, "batch pos"], clean_activations: dict[str, Tensor], index=None, *,
    setter: Setter,
) -> Float[Tensor, "batch d_vocab_out"]:
    """Final-position logits of ``corrupted_tokens`` with the activation at each hook point named
    in ``clean_activations`` replaced by ``setter(activation, index, clean_activations[name])``;
    temporary hooks (TransformerLens removes them on exit), no gradients. A clean activation has
    the activation's shape; :func:`pos_setter` and :func:`pos_head_setter` also take a batch axis
    of 1 (the same values for every input)."""
    missing = [name for name in clean_activations if name not in model.hook_dict]
    if missing or not clean_activations:
        raise ValueError(f"clean_activations names {missing or 'no hook'}; accepted: hook points of this "
                         f"model, e.g. {list(model.hook_dict)[:3]}")

    def hook(act, hook):
        return setter(act.clone(), index, clean_activations[hook.name].to(act))

    with torch.no_grad():
        return model.run_with_hooks(corrupted_tokens, fwd_hooks=[(name, hook) for name in clean_activations])[:, -1]


def pos_setter(corrupted_activation: Tensor, pos, clean_activation: Tensor) -> Tensor:
    """``index`` = positions (an int, a list or a slice): every input, everything at them."""
    corrupted_activation[:, pos] = clean_activation[:, pos]
    return corrupted_activation


def pos_head_setter(corrupted_activation: Tensor, index, clean_activation: Tensor) -> Tensor:
    """``index`` = ``(positions, head)`` of a ``[batch, pos, head_index, d_head]`` activation."""
    pos, head = index
    corrupted_activation[:, pos, head] = clean_activation[:, pos, head]
    return corrupted_activation


def mask_setter(corrupted_activation: Tensor, mask: Bool[Tensor, "batch pos"], clean_activation: Tensor) -> Tensor:
    """``index`` = a ``[batch, pos]`` bool mask: each input at its own positions."""
    corrupted_activation[mask] = clean_activation[mask]
    return corrupted_activation


patch_positions = partial(patch, setter=pos_setter)
patch_positions.__doc__ = """``patch(model, corrupted_tokens, clean_activations, positions)``:
every input at the same positions (:func:`pos_setter`)."""
patch_head = partial(patch, setter=pos_head_setter)
patch_head.__doc__ = """``patch(model, corrupted_tokens, clean_activations, (positions, head))``:
one head's ``[batch, pos, head_index, d_head]`` activation at some positions (:func:`pos_head_setter`)."""
patch_mask = partial(patch, setter=mask_setter)
patch_mask.__doc__ = """``patch(model, corrupted_tokens, clean_activations, mask)``: each input at
the positions of its row of a ``[batch, pos]`` bool mask (:func:`mask_setter`)."""


# ----------------------------------------------------------------------------- interventions


def ablate(
    model, tokens: Int[Tensor, "batch pos"], *, layer: int, head: int = 0, positions=None,
    kind: str = "zero", reference: Int[Tensor, "ref pos"] | None = None,
) -> Float[Tensor, "batch d_vocab_out"]:
    """Final-position logits with one head's output ``hook_z`` ablated at ``positions`` (all by
    default): ``kind="zero"`` sets it to 0, ``"mean"`` to its mean over ``reference`` inputs
    (default: ``tokens`` themselves), position by position."""
    if kind not in ("zero", "mean"):
        raise ValueError(f"kind={kind!r}; accepted: 'zero' or 'mean'")
    if not 0 <= layer < model.cfg.n_layers or not 0 <= head < model.cfg.n_heads:
        raise ValueError(f"layer={layer}, head={head}; accepted: layer in 0..{model.cfg.n_layers - 1}, "
                         f"head in 0..{model.cfg.n_heads - 1}")
    name = f"blocks.{layer}.attn.hook_z"
    pos = slice(None) if positions is None else torch.as_tensor(positions)
    if kind == "mean":
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens if reference is None else reference, names_filter=name)
        fill = cache[name].mean(0, keepdim=True)  # [1, pos, head_index, d_head]
    else:
        fill = torch.zeros(1, tokens.shape[-1], model.cfg.n_heads, model.cfg.d_head)
    return patch_head(model, tokens, {name: fill}, (pos, head))


@tasks.reads_task
def slot_logit_attribution(model, tokens: Int[Tensor, "batch pos"], *, case: int | None = None,
                           n: int | None = None) -> dict[str, Tensor]:
    """Interp's own attribution (not TransformerLens's ``direct_logit_attribution``, which
    decomposes by component: use it, or ``cache.decompose_resid`` + ``cache.logit_attrs``, for
    that). How each source position writes the answer's logit at the final position, through the
    last attention layer, for attention-only models: ``per_position[b, p]`` = the last layer's
    pattern (final query -> p) times ``v_p W_O W_U[:, f(i*)]``, summed over heads; ``residual``
    = the final position's residual that layer adds to (its input; x_0, the embedding, where
    the spec's residual="embed" makes the last layer add to it), ``bias`` = ``b_O W_U + b_U`` at
    the answer. The three add up to the answer's logit (``total``)."""
    task, n = hooks.check_model(model, case=case, n=n)
    if not model.cfg.attn_only:
        raise ValueError("slot_logit_attribution needs an attention-only model: an MLP after "
                         "the last attention layer is not linear in the positions")
    if model.cfg.normalization_type is not None:  # a norm rescales the sum: it would not add up
        raise ValueError(f"slot_logit_attribution needs a model without LayerNorm; this one has "
                         f"normalization_type={model.cfg.normalization_type!r}, which is not linear in the positions")
    last = model.cfg.n_layers - 1
    embed = getattr(models.spec_of(model), "residual", "stream") == "embed" and last >= 1
    base = f"blocks.{0 if embed else last}.hook_resid_pre"  # what the last layer's output is added to
    names = {f"blocks.{last}.attn.hook_pattern", f"blocks.{last}.attn.hook_v", base}
    with torch.no_grad():
        answers = task.answers(n, tokens)
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        attn = model.blocks[last].attn
        u = model.W_U[:, answers].T  # [batch, d_model]: the answer's unembedding direction
        pattern = cache[f"blocks.{last}.attn.hook_pattern"][:, :, -1]  # [batch, head, pos]
        v = cache[f"blocks.{last}.attn.hook_v"]  # [batch, pos, head, d_head]
        written = torch.einsum("bphd,hdm,bm->bhp", v, attn.W_O, u)  # v_p W_O . u per head
        per_position = (pattern * written).sum(1)  # [batch, pos]
        residual = (cache[base][:, -1] * u).sum(-1)
        bias = attn.b_O @ u.T
        bias = bias + model.b_U[answers]
        return dict(per_position=per_position, residual=residual, bias=bias,
                    total=logits[torch.arange(len(answers)), -1, answers], answers=answers)


def logit_lens(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "layer batch d_vocab_out"]:
    """The final position's residual stream unembedded before every layer and after the last
    (``[n_layers + 1, batch, d_vocab_out]``; the last entry is the model's logits):
    TransformerLens's ``model.unembed(cache.accumulated_resid(pos_slice=-1))``."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: "hook_resid_" in n)
        return model.unembed(cache.accumulated_resid(pos_slice=-1))


def path_patch(
    model, clean: Int[Tensor, "batch pos"], corrupt: Int[Tensor, "batch pos"], *,
    sender: int = 0, receiver: int = 1, into: str | tuple[str, ...] = "k", positions=None,
) -> Float[Tensor, "batch d_vocab_out"]:
    """Final-position logits of ``clean`` when only the path sender layer's attention output ->
    receiver layer's ``into`` inputs (``"q"``, ``"k"``, ``"v"`` or several) carry the ``corrupt`` run's
    sender output, at ``positions`` (all by default); every other path keeps the clean values.
    For case 5's two layers: ``path_patch(m, clean, corrupt, sender=0, receiver=1, into="k")``
    asks whether layer 1 finds the key through what layer 0 moved."""
    into = (into,) if isinstance(into, str) else tuple(into)
    if not into or any(i not in ("q", "k", "v") for i in into):
        raise ValueError(f"into={into!r}; accepted: 'q', 'k', 'v' or several of them")
    if not 0 <= sender < receiver < model.cfg.n_layers:
        raise ValueError(f"sender={sender}, receiver={receiver}; accepted: 0 <= sender < receiver < "
                         f"{model.cfg.n_layers}")
    out = f"blocks.{sender}.hook_attn_out"
    resid = f"blocks.{receiver}.hook_resid_pre"
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean, names_filter=lambda n: n in (out, resid))
        _, corrupt_cache = model.run_with_cache(corrupt, names_filter=lambda n: n == out)
        x = clean_cache[resid] - clean_cache[out] + corrupt_cache[out]  # the receiver's input on that path
        attn = model.blocks[receiver].attn
        weights = {"q": (attn.W_Q, attn.b_Q), "k": (attn.W_K, attn.b_K), "v": (attn.W_V, attn.b_V)}
        sources = {f"blocks.{receiver}.attn.hook_{w}":  # [batch, pos, head, d_head]
                   torch.einsum("bpm,hmd->bphd", x, weights[w][0]) + weights[w][1] for w in into}
    pos = slice(None) if positions is None else torch.as_tensor(positions)
    return patch_positions(model, clean, sources, pos)


@tasks.reads_task
def attribution_patching(
    model, clean: Int[Tensor, "batch pos"], corrupt: Int[Tensor, "batch pos"], *,
    case: int | None = None, n: int | None = None, hook_name: str,
) -> Tensor:
    """The first-order estimate of patching ``hook_name`` from ``corrupt`` into ``clean``, for
    the clean answer's logit minus the mean logit: ``(a_corrupt - a_clean) . d metric/d a`` at
    the clean activation, summed over the last axis (one number per batch and position, or per
    batch, position and head for ``[batch, pos, head, d]`` activations)."""
    task, n = hooks.check_model(model, case=case, n=n)
    if hook_name not in model.hook_dict:
        raise ValueError(f"hook_name={hook_name!r} is not a hook point of this model")
    answers = task.answers(n, clean)
    saved = {}

    def keep(act, hook):  # a leaf from here on, so its gradient is kept
        act = act.detach().requires_grad_(True)
        saved["clean"] = act
        return act

    with torch.enable_grad():
        logits = model.run_with_hooks(clean, fwd_hooks=[(hook_name, keep)])[:, -1]
        metric = (logits[torch.arange(len(answers)), answers] - logits.mean(-1)).sum()
        metric.backward()
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        _, cache = model.run_with_cache(corrupt, names_filter=hook_name)
    act = saved["clean"]
    return ((cache[hook_name] - act.detach()) * act.grad).sum(-1)


# ----------------------------------------------------------------------------- the attended position

HOOKS = {"resid_pre": "blocks.{L}.hook_resid_pre", "v": "blocks.{L}.attn.hook_v"}


def corrupt(case: int, n: int, tokens, *, seed: int = 0) -> Int[Tensor, "batch pos"]:
    """Same keys and target, the target slot's value swapped with a random other slot's."""
    view = hooks.read(case, n, tokens)
    if n < 2:
        raise ValueError(f"n={n}: corrupting needs two slots (n >= 2)")
    g = torch.Generator().manual_seed(seed)
    batch = view.tokens.shape[0]
    j = view.slot_of_target
    other = (j + torch.randint(1, n, (batch,), generator=g)) % n  # a slot != j
    values = view.values.clone()
    rows = torch.arange(batch)
    values[rows, j], values[rows, other] = view.values[rows, other], view.values[rows, j]
    return tasks.encode(case, view.keys if tasks.get(case).permuted else None, values, view.target)


@dataclass(frozen=True)
class PatchingResult:
    """Fractions over the batch (predictions are ``logits[:, -1].argmax``)."""

    hook_name: str
    clean_acc: float  # clean prediction == clean answer
    corrupt_acc: float  # corrupted prediction == corrupted answer
    follow: float  # attended position patched: prediction == corrupted answer
    control_keep: float  # every other slot patched: prediction == clean answer
    changed: float  # fraction of inputs whose corrupted answer differs (1.0 unless values tie)

    def summary(self) -> dict:
        return dict(hook=self.hook_name, clean_acc=self.clean_acc, corrupt_acc=self.corrupt_acc,
                    follow=self.follow, control_keep=self.control_keep)


@tasks.reads_task
def patch_attended(
    model, tokens=None, *, case: int | None = None, n: int | None = None, hook: str = "resid_pre",
    batch_size: int = 512, seed: int = 0, at: str = "value",
) -> PatchingResult:
    """Patch the attended position (and, as a control, the other slots) from corrupted runs
    (module docstring); ``tokens`` default to :func:`interp.inspect.tools.hooks.sample_inputs`.

    ``at="key"`` (cases 4-5) patches the matching slot's key position 2j instead of its value
    position 2j + 1, and the other slots' key positions as the control: the check for a
    two-layer model that reads the answer at the key position (the "mirror" mechanism)."""
    task, n = hooks.check_model(model, case=case, n=n)
    slot_pos = hooks.slot_positions_at(task.case, n, at)
    if hook not in HOOKS:
        raise ValueError(f"hook={hook!r}; accepted: one of {tuple(HOOKS)}")
    name = HOOKS[hook].format(L=model.cfg.n_layers - 1)
    tokens = hooks.sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    clean = hooks.read(task.case, n, tokens)
    bad = hooks.read(task.case, n, corrupt(task.case, n, clean.tokens, seed=seed + 1))
    with torch.no_grad():
        _, cache = model.run_with_cache(bad.tokens, names_filter=lambda x: x == name)
    batch, pos = clean.tokens.shape
    attended = torch.zeros(batch, pos, dtype=torch.bool)
    attended[torch.arange(batch), slot_pos[clean.slot_of_target]] = True
    others = torch.zeros(batch, pos, dtype=torch.bool)
    others[:, slot_pos] = True
    others &= ~attended
    follow = patch_mask(model, clean.tokens, {name: cache[name]}, attended).argmax(-1)
    control = patch_mask(model, clean.tokens, {name: cache[name]}, others).argmax(-1)

    def frac(x: Tensor) -> float:
        return float(x.float().mean())

    return PatchingResult(
        hook_name=name,
        clean_acc=frac(hooks.predictions(model, clean.tokens) == clean.answer),
        corrupt_acc=frac(hooks.predictions(model, bad.tokens) == bad.answer),
        follow=frac(follow == bad.answer),
        control_keep=frac(control == clean.answer),
        changed=frac(bad.answer != clean.answer),
    )
