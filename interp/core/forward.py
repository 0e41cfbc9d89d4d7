"""The one evaluation forward pass: a task model's logits at the final position.

A task model is read only at the last position, so the last attention layer needs only the
final query: O(batch * pos * d) instead of TransformerLens's O(batch * pos^2 * d). Earlier
layers (case 5's first layer) run at every position. Every evaluation in the package
(``verify``, ``precision``, ``temperature``, ``softmax_construction``, ``lower_bounds``,
``counterexample``, the trainers' test accuracy, ``hooks.predictions``) goes through
:func:`final_logits`, so two tools can never disagree on the same model and input.

The arithmetic mirrors TransformerLens op for op (``F.linear`` projections as
``simple_attn_linear``, ``q @ k / attn_scale`` after the same rearranges, the pattern of
:func:`interp.core.attention.pattern_from_scores` with the layer's mode and tie tolerance, the
fused ``batch_addmm`` of the MLP (TransformerLens's own, imported), ``resid + attn_out``), so logits agree with
``model(tokens)[:, -1]`` to float rounding and predictions agree wherever hard-attention ties
are within the tie tolerance (``tests/core/test_forward.py``, ``tests/core/test_exact.py``).

Hooks are TransformerLens's: ``fwd_hooks=[(name_or_filter, hook)]`` as in ``run_with_hooks``,
each ``hook(activation, hook=hook_point)`` (``hook.name`` is the name; ``None`` keeps the
activation, so in-place edits work), run in list order at every point where TransformerLens has
a hook of that name (``precision`` rounds there), so ``final_logits(model, tokens,
fwd_hooks=h)`` is ``model.run_with_hooks(tokens, fwd_hooks=h)[:, -1]`` (``tests/core/
test_forward.py``). Three differences follow from computing less or from the modes. The last
layer's hooks see the final query only: ``hook_q``, ``hook_attn_scores``, ``hook_pattern``,
``hook_z`` and every later stream have one query position, not ``pos``. A token-independent first
layer (below) calls its q, k, scores and pattern hooks on one input, shared by the batch. Scores
hooks run before an attention mode reads the scores and pattern hooks after the mode set it, as
in TransformerLens's forward (:mod:`interp.core.attention` keeps the mode's hooks in that place).

When the first of several layers has token-independent scores (the coordinates W_E writes and
W_Q, W_K read are disjoint: case 5's construction attends by position only), its pattern is
computed once and shared by the batch (``cache`` keeps it across calls).

Supports the models this package builds: no LayerNorm, standard positional embedding,
bidirectional attention, any number of heads, optionally a ReLU MLP per block, and every
``ModelSpec`` choice (read from ``model.spec``: the MLP placement, where mlp="last" skips the
earlier blocks' zero MLPs, residual="embed", where block l >= 1 adds its attention output
to x_0, and embed_scale; the fixed tensors are the model's own). Autograd flows.
Axes follow TransformerLens: ``batch pos d_model``, ``head_index d_head``, ``query_pos key_pos``.
"""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import attention, embed_scale, models, pe_combine

with warnings.catch_warnings():  # TransformerLens's MLP product, so MLP outputs match its bits
    warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
    from transformer_lens.utilities.addmm import batch_addmm

#: TransformerLens's hook list: ``[(name or filter(name) -> bool, hook(activation, hook))]``
FwdHooks = Sequence[tuple[str | Callable[[str], bool], Callable]]
#: what the passes below call at each hook point: ``t(name, activation) -> activation``
Apply = Callable[[str, Tensor], Tensor]


def _identity(name: str, x: Tensor) -> Tensor:
    return x


def hook_runner(model, fwd_hooks: FwdHooks) -> Apply:
    """The ``fwd_hooks`` list resolved once against ``model.hook_dict`` (names and filters, as
    ``run_with_hooks`` resolves them): at a point, each hook in list order is called as
    TransformerLens calls it, ``hook(act, hook=hook_point)``; a ``None`` return keeps ``act``."""
    if not fwd_hooks:
        return _identity
    points = model.hook_dict
    for name, _ in fwd_hooks:
        if isinstance(name, str) and name not in points:
            raise KeyError(f"no hook point {name!r} on this model; accepted: a name in model.hook_dict or a filter")
    at = {p: [fn for name, fn in fwd_hooks if (name == p if isinstance(name, str) else name(p))] for p in points}

    def run(point: str, x: Tensor) -> Tensor:
        for fn in at[point]:
            out = fn(x, hook=points[point])
            x = x if out is None else out
        return x

    return run


def check_supported(model) -> None:
    """Raise a ValueError naming the setting when ``model`` is not one this pass computes."""
    cfg = model.cfg
    if cfg.normalization_type is not None:
        raise ValueError(f"normalization_type={cfg.normalization_type!r}; accepted: None (no LayerNorm)")
    if cfg.positional_embedding_type != "standard" or cfg.attention_dir != "bidirectional":
        raise ValueError(
            "interp.core.forward needs standard positional embeddings and bidirectional attention; "
            f"got {cfg.positional_embedding_type!r}, {cfg.attention_dir!r}"
        )
    if not cfg.attn_only and (cfg.act_fn != "relu" or cfg.gated_mlp or cfg.parallel_attn_mlp):
        raise ValueError(
            f"MLP with act_fn={cfg.act_fn!r}, gated={cfg.gated_mlp}, parallel={cfg.parallel_attn_mlp}; "
            "accepted: a plain ReLU MLP after attention"
        )
    if cfg.use_attn_result or cfg.use_split_qkv_input or cfg.use_hook_mlp_in:
        raise ValueError("use_attn_result / use_split_qkv_input / use_hook_mlp_in are not supported")
    models.check_spec(model)  # a fixed tensor edited, or the residual hook gone: refused by name


def project(x: Tensor, W: Tensor, b: Tensor) -> Float[Tensor, "batch pos head_index d_head"]:
    """``hook_q``/``hook_k``/``hook_v``: one F.linear, as TransformerLens's simple_attn_linear."""
    w = einops.rearrange(W, "head_index d_model d_head -> (head_index d_head) d_model")
    out = F.linear(x, w, einops.rearrange(b, "head_index d_head -> (head_index d_head)"))
    return einops.rearrange(out, "batch pos (head_index d_head) -> batch pos head_index d_head", d_head=W.shape[-1])


def pattern(scores: Tensor, layer_mode: attention.LayerMode) -> Tensor:
    """TransformerLens's softmax (beta = 1, NaN rows zeroed) or the mode's pattern."""
    if layer_mode[:2] == ("softmax", 1.0):
        p = F.softmax(scores, dim=-1)
        return torch.where(torch.isnan(p), torch.zeros_like(p), p)
    mode, beta, rtol, atol = layer_mode
    return attention.pattern_from_scores(scores, mode, beta, tie_rtol=rtol, tie_atol=atol)


def embed(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
    """``hook_embed``: W_E[tokens], times the spec's embed_scale when it is not "1"
    (:mod:`interp.core.embed_scale`, the same multiplication as its hook), then pe_combine's
    token mask when "concat" (:mod:`interp.core.pe_combine`). Pair-token models
    (cases 2-3) read their two small tables instead of materialising the (n*n + n)-row W_E
    (same values: see models.PairEmbedding)."""
    spec = models.spec_of(model)
    x = _embed(model, tokens)
    if spec is not None and spec.embed_scale != "1":
        x = x * embed_scale.factor(spec)
    return pe_combine.apply(x, (pe_combine.masks(spec) or (None,))[0])


def _embed(model, tokens: Tensor) -> Tensor:
    from interp.core.models import has_pair_embedding, pair_tables

    if not has_pair_embedding(model):
        return model.embed.W_E[tokens]
    key_table, value_table = pair_tables(model)
    n = key_table.shape[0]
    is_pair = tokens < n * n
    key = torch.where(is_pair, tokens // n, tokens - n * n)
    value = torch.where(is_pair[..., None], value_table[tokens % n], torch.zeros_like(value_table[:1]))
    return torch.cat([key_table[key], value], dim=-1)


def token_independent_scores(model, layer: int = 0) -> bool:
    """True when layer 0's scores depend on positions only: no coordinate that W_E writes is
    read by W_Q or W_K, so resid_pre there is (transformed) W_pos alone, for every input."""
    if layer != 0:
        return False
    from interp.core.models import has_pair_embedding, pair_tables

    attn = model.blocks[0].attn
    if has_pair_embedding(model):  # W_E's columns are the key table's, then the value table's
        written = torch.cat([(t != 0).any(dim=0) for t in pair_tables(model)])
    else:
        written = (model.embed.W_E != 0).any(dim=0)  # [d_model]
    read = (attn.W_Q != 0).any(dim=(0, 2)) | (attn.W_K != 0).any(dim=(0, 2))  # [d_model]
    return not bool((written & read).any())


class SharedPattern:
    """Layer 0's pattern for all query rows, computed once from one input (token-independent).

    Stored sparse when every row has few non-zeros (hard attention): ``idx``/``w`` [h, L, K],
    and z is the sum over k of w * v[idx] in ascending key order. Rows with one non-zero
    (leftmost, rightmost) give z = 1.0 * v exactly, as the dense product does; two non-zeros
    (case 5's average) add two terms, which is order-free. Otherwise (softmax) stored dense,
    which needs pos <= MAX_DENSE.
    """

    MAX_K = 16
    MAX_DENSE = 4096

    def __init__(self, model, x0: Tensor, t: Apply, layer_mode, rows: int = 512):
        attn = model.blocks[0].attn
        L = x0.shape[1]
        q = t("blocks.0.attn.hook_q", project(x0, attn.W_Q, attn.b_Q))  # [1, L, h, dh]
        k = t("blocks.0.attn.hook_k", project(x0, attn.W_K, attn.b_K))  # [1, L, h, dh]
        q_ = einops.rearrange(q, "batch pos head_index d_head -> batch head_index pos d_head")
        k_ = einops.rearrange(k, "batch pos head_index d_head -> batch head_index d_head pos")

        def rows_of(start):  # [h, r, L]
            s = t("blocks.0.attn.hook_attn_scores", q_[:, :, start : start + rows] @ k_ / attn.attn_scale)
            return t("blocks.0.attn.hook_pattern", pattern(s, layer_mode).to(x0.dtype))[0]

        self.dense = self.idx = self.w = None
        idx, w = [], []
        for start in range(0, L, rows):
            p = rows_of(start)
            nnz = int((p != 0).sum(-1).max())
            if nnz > self.MAX_K:
                break
            rank = (p != 0) * torch.arange(L, 0, -1, dtype=torch.float32)  # earlier key: larger
            top = rank.topk(max(nnz, 1), dim=-1).indices.sort(dim=-1).values  # ascending positions
            idx.append(top)
            w.append(p.gather(-1, top))
        else:
            K = max(i.shape[-1] for i in idx)
            self.idx = torch.cat([F.pad(i, (0, K - i.shape[-1]), value=0) for i in idx], dim=1)
            self.w = torch.cat([F.pad(x, (0, K - x.shape[-1]), value=0.0) for x in w], dim=1)
            return
        if L > self.MAX_DENSE:
            raise ValueError(
                f"layer 0 has rows with {nnz} non-zero weights at pos={L}; accepted: at most "
                f"{self.MAX_K} per row (hard attention) or pos <= {self.MAX_DENSE}"
            )
        self.dense = torch.cat([rows_of(start) for start in range(0, L, rows)], dim=1)  # [h, L, L]

    def z(self, v: Float[Tensor, "batch pos head_index d_head"]) -> Float[Tensor, "batch pos head_index d_head"]:
        if self.dense is not None:
            v_ = einops.rearrange(v, "batch pos head_index d_head -> batch head_index pos d_head")
            return einops.rearrange(self.dense[None] @ v_, "batch head_index pos d_head -> batch pos head_index d_head")
        vh = einops.rearrange(v, "batch pos head_index d_head -> head_index batch pos d_head")
        z = None
        for kk in range(self.idx.shape[-1]):
            i, w = self.idx[..., kk], self.w[..., kk]  # [h, L]
            gathered = vh.gather(2, i[:, None, :, None].expand(-1, vh.shape[1], -1, vh.shape[3]))
            term = w[:, None, :, None] * gathered
            z = term if z is None else z + term
        return einops.rearrange(z, "head_index batch pos d_head -> batch pos head_index d_head")


def _attention_z(model, layer, resid, x_q, t, layer_mode, shared):
    """``hook_z`` of one layer: queries x_q [batch, qpos, d_model] over every position of resid."""
    attn, name = model.blocks[layer].attn, f"blocks.{layer}.attn"
    if layer == 0 and model.cfg.n_layers > 1 and token_independent_scores(model):
        key = (resid.shape[1], id(model))
        if key not in shared:
            shared[key] = SharedPattern(model, resid[:1], t, layer_mode)
        v = t(f"{name}.hook_v", project(resid, attn.W_V, attn.b_V))  # [batch, pos, h, dh]
        return t(f"{name}.hook_z", shared[key].z(v))
    # hooks in TransformerLens's order: q, k, v, scores, pattern, z
    q = t(f"{name}.hook_q", project(x_q, attn.W_Q, attn.b_Q))  # [batch, qpos, h, dh]
    k = t(f"{name}.hook_k", project(resid, attn.W_K, attn.b_K))  # [batch, pos, h, dh]
    v = t(f"{name}.hook_v", project(resid, attn.W_V, attn.b_V))  # [batch, pos, h, dh]
    q_ = einops.rearrange(q, "batch query_pos head_index d_head -> batch head_index query_pos d_head")
    k_ = einops.rearrange(k, "batch key_pos head_index d_head -> batch head_index d_head key_pos")
    scores = t(f"{name}.hook_attn_scores", q_ @ k_ / attn.attn_scale)  # [batch, h, qpos, kpos]
    p = t(f"{name}.hook_pattern", pattern(scores, layer_mode).to(v.dtype))
    v_ = einops.rearrange(v, "batch key_pos head_index d_head -> batch head_index key_pos d_head")
    z = einops.rearrange(p @ v_, "batch head_index query_pos d_head -> batch query_pos head_index d_head")
    return t(f"{name}.hook_z", z)


def _final(model, tokens: Tensor, t: Apply, shared: dict) -> Tensor:
    cfg = model.cfg
    L = tokens.shape[1]
    modes = attention.modes(model)
    mlp_layers = models.mlp_layers(model)
    embed_residual = getattr(models.spec_of(model), "residual", "stream") == "embed"
    x = t("hook_embed", embed(model, tokens))  # [batch, pos, d_model]
    masks = pe_combine.masks(models.spec_of(model)) or (None, None)
    pos = t("hook_pos_embed", pe_combine.apply(model.pos_embed.W_pos[:L][None], masks[1]))  # [1, pos, d_model]
    resid = x0 = t("blocks.0.hook_resid_pre", x + pos)  # [batch, pos, d_model]
    last = cfg.n_layers - 1
    for layer in range(cfg.n_layers):
        block, name = model.blocks[layer], f"blocks.{layer}"
        if layer > 0:
            resid = t(f"{name}.hook_resid_pre", resid)
        x_q = resid[:, -1:] if layer == last else resid  # [batch, query_pos, d_model]
        z = _attention_z(model, layer, resid, x_q, t, modes[layer], shared)
        w_o = einops.rearrange(block.attn.W_O, "head_index d_head d_model -> d_model (head_index d_head)")
        z_flat = einops.rearrange(z, "batch pos head_index d_head -> batch pos (head_index d_head)")
        attn_out = t(f"{name}.hook_attn_out", F.linear(z_flat, w_o.contiguous(), block.attn.b_O))
        if embed_residual and layer > 0:  # residual="embed": x_0, not the layer's input
            x_q = x0[:, -1:] if layer == last else x0
        if cfg.attn_only:
            resid = t(f"{name}.hook_resid_post", x_q + attn_out)
            continue
        mid = t(f"{name}.hook_resid_mid", x_q + attn_out)
        if not mlp_layers[layer]:  # mlp="last": this block's MLP is fixed at zero, adds 0
            resid = t(f"{name}.hook_resid_post", mid)
            continue
        pre = t(f"{name}.mlp.hook_pre", batch_addmm(block.mlp.b_in, block.mlp.W_in, mid))
        post = t(f"{name}.mlp.hook_post", F.relu(pre))
        out = t(f"{name}.hook_mlp_out", batch_addmm(block.mlp.b_out, block.mlp.W_out, post))
        resid = t(f"{name}.hook_resid_post", mid + out)
    resid = t("unembed.hook_in", resid[:, -1])  # [batch, d_model]
    return t("unembed.hook_out", F.linear(resid, model.unembed.W_U.T.contiguous(), model.unembed.b_U))


def final_logits(
    model,
    tokens: Int[Tensor, "batch pos"],
    *,
    fwd_hooks: FwdHooks = (),
    chunk: int | None = None,
    cache: dict | None = None,
) -> Float[Tensor, "batch d_vocab_out"]:
    """``model(tokens)[:, -1]``, computed from the final query of the last layer.

    ``fwd_hooks``: TransformerLens's ``[(name_or_filter, hook(act, hook))]``, as
    ``model.run_with_hooks(tokens, fwd_hooks=...)[:, -1]`` (module docstring: the last layer's
    hooks see the final query; scores hooks run before an attention mode reads them);
    ``chunk`` bounds memory (inputs per pass); ``cache``, a dict the caller keeps, shares a
    token-independent first-layer pattern across calls with the same model and hooks.
    """
    check_supported(model)
    t = hook_runner(model, fwd_hooks)
    shared = {} if cache is None else cache
    if chunk is not None and tokens.shape[0] > chunk:
        return torch.cat([_final(model, x, t, shared) for x in tokens.split(chunk)], dim=0)
    return _final(model, tokens, t, shared)


def predictions(
    model, tokens: Int[Tensor, "batch pos"], *, chunk: int | None = None, cache: dict | None = None
) -> Int[Tensor, "batch"]:
    """argmax of :func:`final_logits`, without gradients: what every accuracy counts. Pass the
    same ``cache`` dict for every batch of one model (case 5: layer 0 is computed once)."""
    with torch.inference_mode():
        return final_logits(model, tokens, chunk=chunk, cache=cache).argmax(-1)
