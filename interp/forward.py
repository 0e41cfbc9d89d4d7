"""The final position's logits of our attention-only models, without the full forward pass.

A task model is read only at the last position, so the last attention layer needs only the
final query: its cost is O(batch * pos * d) instead of TransformerLens's O(batch * pos^2 * d).
Earlier layers (case 5's first layer) still run at every position. The arithmetic mirrors
TransformerLens op for op (``F.linear`` projections, ``q @ k / attn_scale``, the pattern of
:func:`interp.attention.pattern_from_scores`, ``resid + attn_out``), so results agree with
``model(tokens)[:, -1]`` to float rounding, and predictions agree exactly away from
precision limits (``tests/test_forward.py`` checks both). Hooks are not run.

Supports exactly the models this package builds: attention-only, no LayerNorm, standard
positional embedding, any number of heads. Autograd flows through it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.attention import pattern_from_scores


def check_supported(model) -> None:
    cfg = model.cfg
    if not cfg.attn_only or cfg.normalization_type is not None:
        raise ValueError(
            "interp.forward supports attention-only models without LayerNorm; got "
            f"attn_only={cfg.attn_only}, normalization_type={cfg.normalization_type!r}"
        )
    if cfg.positional_embedding_type != "standard" or cfg.attention_dir != "bidirectional":
        raise ValueError(
            f"interp.forward needs standard positional embeddings and bidirectional attention; got "
            f"{cfg.positional_embedding_type!r}, {cfg.attention_dir!r}"
        )


def _project(x: Tensor, W: Tensor, b: Tensor) -> Tensor:
    """[batch, pos, d_model] x [head_index, d_model, d_head] -> [batch, head_index, pos, d_head]"""
    h, d_model, d_head = W.shape
    w = W.permute(0, 2, 1).reshape(h * d_head, d_model)  # as TransformerLens's simple_attn_linear
    out = F.linear(x, w, b.reshape(h * d_head))
    return out.reshape(x.shape[0], x.shape[1], h, d_head).transpose(1, 2)


def _attend(model, layer: int, x_q: Tensor, x_kv: Tensor) -> Tensor:
    """One attention layer's output at the query rows x_q over all positions x_kv."""
    attn = model.blocks[layer].attn
    modes = getattr(model, "attention_modes", None) or [("softmax", 1.0)] * model.cfg.n_layers
    mode, beta = modes[layer]
    q = _project(x_q, attn.W_Q, attn.b_Q)  # [batch, head_index, query_pos, d_head]
    k = _project(x_kv, attn.W_K, attn.b_K)  # [batch, head_index, key_pos, d_head]
    v = _project(x_kv, attn.W_V, attn.b_V)  # [batch, head_index, key_pos, d_head]
    scores = q @ k.transpose(-1, -2) / attn.attn_scale  # [batch, head_index, query_pos, key_pos]
    pattern = pattern_from_scores(scores, mode, beta)
    z = pattern @ v  # [batch, head_index, query_pos, d_head]
    z = z.transpose(1, 2).reshape(x_q.shape[0], x_q.shape[1], -1)  # [batch, query_pos, h*d_head]
    w_o = attn.W_O.reshape(-1, model.cfg.d_model).T.contiguous()  # [d_model, h*d_head]
    return F.linear(z, w_o, attn.b_O)  # [batch, query_pos, d_model]


def embed(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
    """W_E[tokens] + W_pos; pair-token models (cases 2-3) read their two small tables directly
    instead of materialising the (n*n + n)-row W_E (same values: see models.PairEmbedding)."""
    from interp.models import has_pair_embedding

    if has_pair_embedding(model):
        tables = model.embed.parametrizations.W_E
        key_table, value_table = tables.original0, tables.original1
        n = key_table.shape[0]
        is_pair = tokens < n * n
        key = torch.where(is_pair, tokens // n, tokens - n * n)
        value = key_table.new_zeros(()).expand(*tokens.shape, value_table.shape[1])
        value = torch.where(is_pair[..., None], value_table[tokens % n], value)
        x = torch.cat([key_table[key], value], dim=-1)
    else:
        x = model.embed.W_E[tokens]
    return x + model.pos_embed.W_pos[: tokens.shape[1]]  # [batch, pos, d_model]


def final_resid(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch d_model"]:
    """The residual stream after the last layer at the final position."""
    check_supported(model)
    x = embed(model, tokens)
    last = model.cfg.n_layers - 1
    for layer in range(last):
        x = x + _attend(model, layer, x, x)
    x_q = x[:, -1:]
    return (x_q + _attend(model, last, x_q, x))[:, 0]


def final_logits(
    model, tokens: Int[Tensor, "batch pos"], *, chunk: int | None = None
) -> Float[Tensor, "batch d_vocab_out"]:
    """``model(tokens)[:, -1]`` computed from the final query only; ``chunk`` bounds memory."""
    if chunk is None or tokens.shape[0] <= chunk:
        resid = final_resid(model, tokens)
        return F.linear(resid, model.unembed.W_U.T.contiguous(), model.unembed.b_U)
    return torch.cat([final_logits(model, t) for t in tokens.split(chunk)], dim=0)
