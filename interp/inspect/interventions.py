"""Interventions that return data: ablation, direct logit attribution, logit lens, path
patching and attribution patching, on any model of the toolkit, through TransformerLens hooks.

Every function reads the model only at the final position (where the task's answer is read)
and returns tensors, never prints. The answer of an input is f(i*), taken from the tokens by
:func:`interp.core.tasks.answers` (the model's case is needed for that: pass it). Axes follow
TransformerLens: ``batch``, ``pos``, ``head_index``, ``d_head``, ``d_model``, ``d_vocab_out``.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import tasks


def _answers(case: int, model, tokens) -> Tensor:
    return tasks.answers(case, model.cfg.d_vocab_out, tokens)


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
    fill = None
    if kind == "mean":
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens if reference is None else reference, names_filter=name)
        fill = cache[name][:, :, head].mean(0)  # [pos, d_head]

    def hook(z, hook):
        z = z.clone()
        z[:, pos, head] = 0.0 if fill is None else fill[pos]
        return z

    with torch.no_grad():
        return model.run_with_hooks(tokens, fwd_hooks=[(name, hook)])[:, -1]


def direct_logit_attribution(model, tokens: Int[Tensor, "batch pos"], case: int) -> dict[str, Tensor]:
    """How each source position writes the answer's logit at the final position, through the
    last attention layer, for attention-only models: ``per_position[b, p]`` = the last layer's
    pattern (final query -> p) times ``v_p W_O W_U[:, f(i*)]``, summed over heads; ``residual``
    = the final position's residual before that layer, ``bias`` = ``b_O W_U + b_U`` at the
    answer. The three add up to the answer's logit (``total``)."""
    if not model.cfg.attn_only:
        raise ValueError("direct logit attribution here needs an attention-only model: an MLP after "
                         "the last attention layer is not linear in the positions")
    last = model.cfg.n_layers - 1
    names = {f"blocks.{last}.attn.hook_pattern", f"blocks.{last}.attn.hook_v", f"blocks.{last}.hook_resid_pre"}
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
        answers = _answers(case, model, tokens)
        attn = model.blocks[last].attn
        u = model.W_U[:, answers].T  # [batch, d_model]: the answer's unembedding direction
        pattern = cache[f"blocks.{last}.attn.hook_pattern"][:, :, -1]  # [batch, head, pos]
        v = cache[f"blocks.{last}.attn.hook_v"]  # [batch, pos, head, d_head]
        written = torch.einsum("bphd,hdm,bm->bhp", v, attn.W_O, u)  # v_p W_O . u per head
        per_position = (pattern * written).sum(1)  # [batch, pos]
        residual = (cache[f"blocks.{last}.hook_resid_pre"][:, -1] * u).sum(-1)
        bias = attn.b_O @ u.T
        bias = bias + model.b_U[answers]
        return dict(per_position=per_position, residual=residual, bias=bias,
                    total=logits[torch.arange(len(answers)), -1, answers], answers=answers)


def logit_lens(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "layer batch d_vocab_out"]:
    """The final position's residual stream unembedded before every layer and after the last
    (``[n_layers + 1, batch, d_vocab_out]``; the last entry is the model's logits)."""
    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(model.cfg.n_layers)]
    names.append(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
        return torch.stack([cache[n][:, -1] @ model.W_U + model.b_U for n in names])


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
        pos = slice(None) if positions is None else torch.as_tensor(positions)

        def patch(which):
            W, b = weights[which]
            patched = torch.einsum("bpm,hmd->bphd", x, W) + b  # [batch, pos, head, d_head]

            def hook(act, hook):
                act = act.clone()
                act[:, pos] = patched[:, pos]
                return act

            return (f"blocks.{receiver}.attn.hook_{which}", hook)

        return model.run_with_hooks(clean, fwd_hooks=[patch(w) for w in into])[:, -1]


def attribution_patching(
    model, clean: Int[Tensor, "batch pos"], corrupt: Int[Tensor, "batch pos"], case: int, *, hook_name: str,
) -> Tensor:
    """The first-order estimate of patching ``hook_name`` from ``corrupt`` into ``clean``, for
    the clean answer's logit minus the mean logit: ``(a_corrupt - a_clean) . d metric/d a`` at
    the clean activation, summed over the last axis (one number per batch and position, or per
    batch, position and head for ``[batch, pos, head, d]`` activations)."""
    if hook_name not in model.hook_dict:
        raise ValueError(f"hook_name={hook_name!r} is not a hook point of this model")
    answers = _answers(case, model, clean)
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
