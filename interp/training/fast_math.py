"""The fast engine's arithmetic: a HookedTransformer's final-position logits, regrouped.

Which models it computes (:func:`check_model`: one head, one or two layers, plain softmax,
every ``ModelSpec`` choice) and their parameters stacked over seeds (:func:`stack_params`) are
here too.

The loss reads only ``logits[:, -1]``, so this module computes exactly that function (and, by
autograd, exactly its gradients) of the HookedTransformer's own parameters, regrouped so that
the last layer never forms a ``[batch, pos, d_model]`` tensor. Axis names: ``seed`` (runs that
differ only in seed), ``batch``, ``pos``, ``d_model``, ``d_head``, ``n``; V is the number of
token-table rows, P the number of positions, K the number of table rows a position reads.

Embedding as table rows. Position p holds ``x0[p] = sum_k T[J[k, p]] + W_pos[p]``:

* cases 1, 4, 5: ``T = W_E`` ([n, d_model]) and J[0] is the token (K = 1);
* cases 2, 3: ``T = [[key, 0], [0, value], [0, 0]]`` ([2n+1, d_model], from the model's own key
  and value tables), K = 2: pair token ``k*n + v`` reads rows k and n + v, the query token
  ``n*n + i*`` reads row i* and the zero row 2n. This is ``models.PairEmbedding`` row by row,
  without its [n*n + n, d_model] table; products with T are taken by halves.

TransformerLens computes ``q = x W_Q + b_Q``, ``k = x W_K + b_K``, ``v = x W_V + b_V``, scores
``q.k / attn_scale`` (no mask), ``out = softmax(scores) v W_O + b_O``, then ``(x + out) W_U + b_U``.

One layer (:func:`_final_logits_1`), final query only, with ``x`` = the final position:

    score_p = q . k_p = sum_k Gtok[J[k, last], J[k, p]] + Gpos[J[0, last], p]   (+ q . b_K)
        Gtok = (T W_Q + q_c) (T W_K)^T / attn_scale,  Gpos = (T W_Q + q_c) (W_pos W_K)^T / ...
    logits  = x W_U + m (W_V W_O W_U) + (b_V W_O + b_O) W_U + b_U,   m = sum_p a_p x0[p]

where q_c = b_Q + W_pos[last] W_Q and ``sum_p a_p = 1``. With an MLP (``d_mlp > 0``) the final
position's residual after attention, ``r = x + m W_V W_O + b_V W_O + b_O``, is
formed in d_model ([batch, d_model], cheap) and ``(relu(r W_in + b_in) W_out + b_out) W_U`` is
added to the logits: the MLP acts position-wise, so the final position's is the only one the
loss reads (two layers: :mod:`interp.training.fast_two_layers`). ``q . b_K`` is the same for every key
and cancels in the softmax, so b_K is left out (its exact gradient is 0; TransformerLens's is
rounding noise); likewise in layer 0. ``m`` is ``a`` scattered onto the table rows times T, plus
``a W_pos``. Per input this costs gathers and O((V + P) d_model) products; everything of size
d_model x d_model is a product of parameters, once per step.

Two layers: :mod:`interp.training.fast_two_layers` (layer 0 at every query in basis-row
coefficients, custom autograd in :mod:`interp.training.fast_autograd`); the table products
both use are :mod:`interp.training.fast_tables`.

Architecture choices (``ModelSpec``). The engine reads the model's own tensors, so the fixed
ones need nothing: no biases (attn_bias, unembed_bias) are zero tensors, W_O="identity" is
I, pos_embed="none" drops W_pos (zero). mlp="last" stacks only the last block's MLP
(:func:`interp.training.fast_train.stack_params`; the others are fixed at zero), which then
acts on the final position only; residual="embed" changes only the residual the last layer
adds to (``p["residual"]``), the same as "stream" with one layer. embed_scale multiplies the
token tables by ``p["embed_scale"]`` before anything reads them (:func:`final_logits`), so the
gradients reach the unscaled parameters through one product; pe_combine="concat" multiplies W_E
and W_pos by their 0/1 masks there too (:mod:`interp.core.pe_combine`: the zero blocks get a zero
gradient, as under the hooks); pos_init is the initial W_pos only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import attention, embed_scale, models, pe_combine
from interp.training import fast_tables as tb
from interp.training import fast_two_layers as two


# ---------------------------------------------------------------------------------------------
# The parameter dict: an ensemble's parameters stacked along a leading seed axis.

_LAYER = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")
_MLP = ("W_in", "b_in", "W_out", "b_out")


def check_model(model) -> None:
    """The fast path computes the Section 4 architecture with every ``ModelSpec`` choice (a
    model without a spec as TransformerLens computes it); refuse anything else by name."""
    cfg = model.cfg
    problems = []
    if cfg.n_heads != 1:
        problems.append(f"n_heads={cfg.n_heads} (accepted: 1)")
    if not cfg.attn_only and cfg.act_fn != "relu":
        problems.append(f"act_fn={cfg.act_fn!r} (accepted: relu)")
    if cfg.normalization_type is not None:
        problems.append(f"normalization_type={cfg.normalization_type!r} (accepted: None)")
    if cfg.attention_dir != "bidirectional":
        problems.append(f"attention_dir={cfg.attention_dir!r} (accepted: bidirectional)")
    if cfg.positional_embedding_type != "standard":
        problems.append(f"positional_embedding_type={cfg.positional_embedding_type!r}")
    if cfg.n_layers not in (1, 2):
        problems.append(f"n_layers={cfg.n_layers} (accepted: 1 or 2)")
    modes = [m[:2] for m in attention.modes(model)]
    if any(m != ("softmax", 1.0) for m in modes):
        problems.append(f"attention modes {modes} (accepted: plain softmax)")
    if problems:
        raise ValueError("the fast path cannot compute this model: " + "; ".join(problems))
    models.check_spec(model, trainable=True)  # fixed tensors at their values and frozen


def _pos_is_zero(model) -> bool:
    W_pos = model.pos_embed.W_pos
    return not W_pos.requires_grad and not bool(W_pos.any())


def stack_params(models_: list, *, leaves: dict | None = None, pos_zero: bool | None = None) -> dict:
    """The ensemble's parameters, each stacked to [seed, ...] (autograd reaches the models'),
    with the MLPs and the residual form of the models' spec.

    ``leaves`` (optional): ``id(first model's parameter) -> [seed, ...] tensor`` to use instead
    of stacking that parameter (:mod:`interp.training.fast_graph` keeps them stacked);
    ``pos_zero``: whether W_pos is fixed at zero, if already known (then nothing is read back
    from the device, as a captured step requires).
    """
    m0 = models_[0]

    def st(get):
        if leaves is not None and id(get(m0)) in leaves:
            return leaves[id(get(m0))]
        if len(models_) == 1:
            return get(m0).unsqueeze(0)  # a view: the parameter itself
        return torch.stack([get(m) for m in models_])

    pairs = models.has_pair_embedding(m0)
    zero_pos = _pos_is_zero(m0) if pos_zero is None else pos_zero
    p = dict(
        T=None if pairs else st(lambda m: m.embed.W_E),
        pairs=(
            (st(lambda m: models.pair_tables(m)[0]),
             st(lambda m: models.pair_tables(m)[1]))
            if pairs else None
        ),
        W_U=st(lambda m: m.unembed.W_U),
        b_U=st(lambda m: m.unembed.b_U),
        pos=None if zero_pos else st(lambda m: m.pos_embed.W_pos),
        scale=[float(b.attn.attn_scale) for b in m0.blocks],
        layers=[],
        residual=getattr(models.spec_of(m0), "residual", "stream"),
        embed_scale=_embed_scale(m0),
        pe_masks=_pe_masks(m0),
    )
    for layer, has_mlp in enumerate(models.mlp_layers(m0)):
        ws = {}
        for name in _LAYER:
            t = st(lambda m: getattr(m.blocks[layer].attn, name))
            ws[name] = t.squeeze(1) if name != "b_O" else t  # drop head_index (one head)
        if has_mlp:  # mlp="last": the earlier blocks' MLPs are fixed at zero and left out
            for name in _MLP:
                ws[name] = st(lambda m: getattr(m.blocks[layer].mlp, name))
        p["layers"].append(ws)
    return p


def _embed_scale(model) -> float | None:
    """embed_scale's multiplier (:mod:`interp.core.embed_scale`); None when it is 1."""
    spec = models.spec_of(model)
    return None if spec is None or spec.embed_scale == "1" else embed_scale.factor(spec)


def _pe_masks(model) -> tuple | None:
    """pe_combine="concat"'s (token, position) masks on the model's device and dtype; None for "add"."""
    masks = pe_combine.masks(models.spec_of(model))
    return None if masks is None else tuple(m.to(model.embed.W_E) for m in masks)


def _scaled_tables(p: dict) -> dict:
    """``p`` with the token tables times ``p["embed_scale"]``: what ``hook_embed`` carries is a
    gather of the scaled table, elementwise the same product as the hook's."""
    s = p["embed_scale"]
    if p["pairs"] is None:
        return {**p, "T": p["T"] * s, "embed_scale": None}
    return {**p, "pairs": (p["pairs"][0] * s, p["pairs"][1] * s), "embed_scale": None}


def final_logits(p: dict, J: Int[Tensor, "K seed batch pos"]) -> Float[Tensor, "seed batch n"]:
    """The models' ``logits[:, -1]`` for token-row indices ``J``
    (:func:`interp.training.fast_train.token_indices`)."""
    if p.get("embed_scale") is not None:
        p = _scaled_tables(p)
    if p.get("pe_masks") is not None:  # pe_combine="concat": the hooks' masks, so the zero blocks get no gradient
        token, position = p["pe_masks"]
        p = {**p, "T": pe_combine.apply(p["T"], token), "pos": pe_combine.apply(p["pos"], position), "pe_masks": None}
    if len(p["layers"]) == 1:
        return _final_logits_1(p, J)
    if "W_in" in p["layers"][0]:
        return two.final_logits_2_mlp(p, J)
    return two.final_logits_2(p, J)


def _final_logits_1(p: dict, J: Tensor) -> Tensor:
    """One layer, final query only; every product with an embedding is taken with the tables.

    Scores: the final query is ``q = x_last W_Q + b_Q`` with ``x_last`` = its token row (+
    position P-1), so ``q . k_p`` for every key is a row of the small matrices
    ``Gtok = (T_q W_Q + q_c) (T W_K)^T`` (query-side token rows x all token rows) and
    ``Gpos = (T_q W_Q + q_c) (W_pos W_K)^T``, gathered per input: no [batch, pos, d] tensor.
    ``q . b_K`` is the same for every key and cancels in the softmax, so b_K is left out (its
    exact gradient is 0; TransformerLens's is rounding noise).
    Values: ``sum_p a_p x_p`` = a scattered onto the token rows times T, plus ``a W_pos``.
    """
    pos, ws, W_U = p["pos"], p["layers"][0], p["W_U"]
    K, S, B, P = J.shape
    W_Q, W_K = ws["W_Q"], ws["W_K"]
    qc = ws["b_Q"][:, None]  # [S, 1, d_head]: what every final query holds besides its token
    uc = p["b_U"][:, None] + (ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]) @ W_U
    if pos is not None:
        qc = qc + pos[:, -1:] @ W_Q
        uc = uc + pos[:, -1:] @ W_U  # [S, 1, n]
    J_last, q_table = tb.query_rows(p, J)  # [K', S, B]; rows the final token reads
    inv = 1.0 / p["scale"][0]
    Q = (tb.T_at(p, W_Q, which=q_table) + qc) * inv  # [S, Vq, d_head], scaled
    Rl = tb.rows(Q @ tb.T_at(p, W_K).transpose(1, 2), J_last[:1])  # [S, B, V]
    if pos is not None:
        Rp = tb.rows(Q @ (pos @ W_K).transpose(1, 2), J_last[:1])  # [S, B, P]
    if J_last.shape[0] > 1:  # a pair token at the final position: its value row too
        Qv = tb.T_at(p, W_Q) * inv
        Rl = Rl + tb.rows(Qv @ tb.T_at(p, W_K).transpose(1, 2), J_last[1:])
        if pos is not None:
            Rp = Rp + tb.rows(Qv @ (pos @ W_K).transpose(1, 2), J_last[1:])
    scores = tb.gsum(Rl, J)  # [S, B, key_pos]
    if pos is not None:
        scores = scores + Rp
    a = torch.softmax(scores, dim=-1)  # [S, B, key_pos]
    m = tb.mix_tables(p, a, J)  # sum_p a_p x_p, [S, B, d_model]
    if pos is not None:
        m = m + a @ pos
    W_VOU = ws["W_V"] @ (ws["W_O"] @ W_U)  # [S, d_model, n]
    x = tb.rows(tb.T_at(p, W_U, which=q_table) + uc, J_last[:1])  # x_last W_U + constants
    if J_last.shape[0] > 1:
        x = x + tb.rows(tb.T_at(p, W_U), J_last[1:])
    logits = x + m @ W_VOU
    if "W_in" in ws:  # the MLP at the final position, on the residual stream after attention
        resid = tb.rows(tb.full_T(p), J_last) + m @ (ws["W_V"] @ ws["W_O"])  # [S, B, d_model]
        c = ws["b_V"][:, None] @ ws["W_O"] + ws["b_O"][:, None]  # [S, 1, d_model]
        if pos is not None:
            c = c + pos[:, -1:]
        logits = logits + tb.mlp(ws, resid + c) @ W_U
    return logits


def seed_losses(p: dict, J: Tensor, answers: Int[Tensor, "seed batch"]) -> Float[Tensor, "seed"]:
    """Each seed's mean cross-entropy over its own batch (the training loss), [seed]."""
    logits = final_logits(p, J)
    S, B, n = logits.shape
    return F.cross_entropy(
        logits.reshape(S * B, n), answers.reshape(S * B), reduction="none"
    ).view(S, B).mean(1)
