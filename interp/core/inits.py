"""Initialisation families (``ModelSpec.init``): how a task model's trainable parameters are drawn.

* ``"gpt2"``: TransformerLens's own (weights N(0, (0.8/sqrt(d_model))^2), biases 0), drawn when
  TransformerLens builds the model; nothing happens here.
* ``"xavier_uniform"``, ``"xavier_normal"``, ``"kaiming_uniform"``, ``"kaiming_normal"``:
  TransformerLens's ``init_weights`` with that ``cfg.init_mode``.
* ``"pytorch"``: what a model of ``nn.Embedding`` and ``nn.Linear`` gets. Embedding tables (W_E
  or the key/value tables, W_pos when learned) ~ N(0, 1); every projection ``x W + b`` with
  fan-in f: W and b ~ U(-1/sqrt f, 1/sqrt f) (``nn.Linear``'s kaiming_uniform(a=sqrt 5)): W_Q,
  W_K, W_V, W_U and the MLP's W_in with f = d_model, W_O with f = d_head, W_out with f = d_mlp.
* ``"mha"``: ``nn.MultiheadAttention``'s attention (one head, head_dim = d_model), everything
  else as ``"pytorch"``. Each block's attention is an actual ``nn.MultiheadAttention(d_model, 1,
  bias=attn_bias)``, made where the block's first attention parameter comes in
  ``named_parameters`` order: its joint in_proj [3 d_model, d_model] (Xavier-uniform, bound
  sqrt(6 / (4 d_model))) gives W_Q, W_K, W_V (rows 0:d, d:2d, 2d:3d, transposed to
  TransformerLens's [d_model, d_head]), its in_proj bias (zero) b_Q, b_K, b_V, and its out_proj
  (``nn.Linear``'s default weight, zero bias) W_O and b_O.

The families other than ``"gpt2"`` draw from the global torch RNG (the caller seeds it) in
``named_parameters`` order. "pytorch" and "mha" skip frozen parameters (the spec's fixed
tensors draw nothing, as ``nn.Linear(bias=False)`` draws no bias); TransformerLens's
``init_weights`` draws them too, and :func:`interp.core.models.from_spec` restores the fixed
values afterwards.
"""

from __future__ import annotations

import math

import torch
from torch import nn

TRANSFORMER_LENS = ("xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal")


@torch.no_grad()
def initialise(model, spec) -> None:
    """Draw ``model``'s trainable parameters with the family ``spec.init`` (module docstring;
    ``spec`` is a validated ModelSpec)."""
    if spec.init == "gpt2":
        return
    if spec.init in TRANSFORMER_LENS:
        model.cfg.init_mode = spec.init
        model.init_weights()
        return
    done: set[int] = set()
    for name, p in model.named_parameters():
        parts = name.split(".")
        if spec.init == "mha" and parts[0] == "blocks" and parts[2] == "attn":
            layer = int(parts[1])
            if layer not in done:
                done.add(layer)
                _mha(model.blocks[layer].attn, spec.attn_bias)
        elif p.requires_grad:
            _pytorch(model, name, p)


@torch.no_grad()
def pytorch(model) -> None:
    """The family "pytorch" on every trainable parameter of any HookedTransformer (a model
    built without a spec too, e.g. with several heads)."""
    for name, p in model.named_parameters():
        if p.requires_grad:
            _pytorch(model, name, p)


def _pytorch(model, name: str, p: torch.Tensor) -> None:
    """One parameter as ``nn.Embedding`` / ``nn.Linear`` initialise theirs."""
    if name.startswith("embed.") or name == "pos_embed.W_pos":
        p.normal_(0.0, 1.0)
        return
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("W_O", "b_O"):
        fan_in = model.cfg.d_head
    elif leaf in ("W_out", "b_out"):
        fan_in = model.cfg.d_mlp
    else:
        fan_in = model.cfg.d_model
    bound = 1.0 / math.sqrt(fan_in)
    p.uniform_(-bound, bound)


def _mha(attn, bias: bool) -> None:
    """One block's attention from a fresh ``nn.MultiheadAttention`` (trainable parameters only)."""
    d = attn.W_Q.shape[1]
    mha = nn.MultiheadAttention(d, 1, bias=bias, dtype=attn.W_Q.dtype)
    w = mha.in_proj_weight.detach()  # [3 d_model, d_model]: q = x w_q^T + b_q
    new = dict(W_Q=w[:d].T[None], W_K=w[d : 2 * d].T[None], W_V=w[2 * d :].T[None],
               W_O=mha.out_proj.weight.detach().T[None])  # [head_index, d_model, d_head] / [1, d_head, d_model]
    if bias:
        b = mha.in_proj_bias.detach()
        new.update(b_Q=b[:d][None], b_K=b[d : 2 * d][None], b_V=b[2 * d :][None], b_O=mha.out_proj.bias.detach())
    for key, value in new.items():
        p = getattr(attn, key)
        if p.requires_grad:
            p.copy_(value)
