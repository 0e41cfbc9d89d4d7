"""The learned (DAS) dimension of many models of one cell at once: :func:`das.learned_dim`,
batched and replayed from the site on.

:func:`interp.inspect.mechanism.das.learned_dim` trains each basis through the whole model
(TransformerLens's ``run_with_hooks``, every layer, every position, forward and backward, 300
steps per k). Almost none of that depends on the basis: the interchange moves one vector of the
last layer, so everything before it is the base run's, computed once. From the site on:

* value (``hook_v`` at the read slot p): the last layer's pattern does not read v, so moving v_p
  by delta moves the final position's attention output by ``sum_h a_h delta_h W_O[h]`` (a_h the
  final query's weight on p in head h), and the logits are the last block's rest (its MLP, if
  any) and the unembedding applied to the base ``resid_mid`` plus that;
* query (``hook_q`` at the final position): the final row of scores is ``(q + delta) . k_j /
  attn_scale`` over the base run's keys k_j, and its pattern is the layer's mode's.

That replay (:class:`Tail`) is a few products of [batch, d] per step instead of a
forward and backward pass; models of one cell (same shapes) stack on a leading ``seed`` axis
(einsum), so one optimisation trains every model's basis of one k at once.

The search is :func:`das.learned_dim`'s, step for step: the same principal axes and upper bound
(:func:`codes.measure_code`), the same train and held-out pairs (:func:`das.pairs`, seeds
``seed + 2`` and ``seed + 3``), the same start of each k (:func:`das.start` replayed per model
from the generator seeded with ``seed``, so the random completion of the start is the one the
per-model search draws), the same parametrization (torch's orthogonal map is batched over
leading axes) and Adam (elementwise; each model's loss is its own mean, summed, so each gets its
own gradient), the same steps and ``iia_min``. A model leaves the batch at the first k that
reaches ``iia_min`` (the search is upward). What differs is float summation: the replay rounds in
the same dtype as the model's pass but adds the move to the base run's sums instead of summing
again, so the two trajectories of Adam drift apart by rounding, and a held-out IIA within a few pairs of ``iia_min`` can fall on
the other side (``tests/inspect/mechanism/test_das_batch.py`` bounds the drift;
``experiments/bench/das_batch.py`` counts agreement on trained seeds).

Axis vocabulary as in :mod:`~interp.inspect.mechanism.codes`, with ``seed`` the models stacked:
``seed batch d`` (``d`` = ``head_index * d_head`` of the site), ``d_model``, ``pos``, ``u``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.inspect.mechanism import codes, das
from interp.inspect.tools import hooks

#: the config fields that must agree for models to be stacked
SHAPE = ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "attn_only", "d_vocab", "d_vocab_out", "n_ctx")


@dataclass(frozen=True)
class Tail:
    """One sample of pairs (or many models' samples, stacked on a leading ``seed`` axis), with
    what the last layer needs to be replayed from the site on (module docstring), in the model's
    dtype (the move itself is computed in float64 and rounded to it, as
    :func:`codes.run_moved` does)."""

    variable: str
    here: Tensor  # [(seed,) batch, d] the base run's vector at the site
    src: Tensor  # [(seed,) batch, d] the source's vector there
    want: Tensor  # [(seed,) batch] value: the source's value u'; query: the slot of key t'
    mid: Tensor | None = None  # value: [(seed,) batch, d_model] the base resid_mid, final position
    weight: Tensor | None = None  # value: [(seed,) batch, head_index] final query's weight on p
    W_O: Tensor | None = None  # value: [(seed,) head_index, d_head, d_model]
    mlp: tuple | None = None  # value: (W_in, b_in, W_out, b_out), stacked; None: attention-only
    W_U: Tensor | None = None  # value: [(seed,) d_model, d_vocab_out]
    b_U: Tensor | None = None  # value: [(seed,) d_vocab_out]
    keys: Tensor | None = None  # query: [(seed,) batch, pos, head_index, d_head] the base keys
    slots: Tensor | None = None  # query: [u] the read position of slot j
    scale: float = 1.0  # query: the layer's attn_scale
    beta: float = 1.0  # query: the layer's softmax inverse temperature


def _f64(x: Tensor) -> Tensor:
    return x.detach()  # the model's dtype: the replay rounds where the model's pass rounds


def tail(model, p: das.Pairs) -> Tail:
    """The replay of ``p``'s base runs from the site on (module docstring), one model."""
    from interp.core import attention

    L, attn = model.cfg.n_layers - 1, model.blocks[model.cfg.n_layers - 1].attn
    variable = "query" if p.name.endswith("hook_q") else "value"
    rows = torch.arange(len(p.pos))
    mid = f"blocks.{L}.hook_resid_post" if model.cfg.attn_only else f"blocks.{L}.hook_resid_mid"
    names = {p.name, f"blocks.{L}.attn.hook_pattern", f"blocks.{L}.attn.hook_k", mid}
    with torch.no_grad():
        _, cache = model.run_with_cache(p.view.tokens, names_filter=lambda x: x in names)
    here, src = _f64(cache[p.name][rows, p.pos].flatten(1)), _f64(p.src.flatten(1))
    if variable == "query":
        final = p.view.tokens.shape[1] - 1
        if bool((p.pos != final).any()):
            raise ValueError(f"query read at positions {sorted(set(p.pos.tolist()))}; accepted: "
                             f"the final position {final}, the only row the replay computes")
        return Tail(variable, here, src, p.expect, keys=_f64(cache[f"blocks.{L}.attn.hook_k"]),
                    slots=p.slots, scale=float(attn.attn_scale), beta=attention.modes(model)[L].beta)
    pattern = cache[f"blocks.{L}.attn.hook_pattern"][:, :, -1]  # [batch, head_index, key_pos]
    block = model.blocks[L]
    mlp = None if model.cfg.attn_only else tuple(_f64(x) for x in (
        block.mlp.W_in, block.mlp.b_in, block.mlp.W_out, block.mlp.b_out))
    return Tail(variable, here, src, p.other, mid=_f64(cache[mid][:, -1]),
                weight=_f64(pattern[rows, :, p.pos]), W_O=_f64(attn.W_O), mlp=mlp,
                W_U=_f64(model.unembed.W_U), b_U=_f64(model.unembed.b_U))


def stack(tails: list[Tail]) -> Tail:
    """Tails of models of one cell on a leading ``seed`` axis."""
    first = tails[0]

    def cat(xs):
        if xs[0] is None:
            return None
        if isinstance(xs[0], tuple):
            return tuple(torch.stack(list(ys)) for ys in zip(*xs))
        return torch.stack(list(xs))

    fields = ("here", "src", "want", "mid", "weight", "W_O", "mlp", "W_U", "b_U", "keys")
    out = {f: cat([getattr(t, f) for t in tails]) for f in fields}
    return Tail(first.variable, slots=first.slots, scale=first.scale, beta=first.beta, **out)


def scores(t: Tail, basis: Float[Tensor, "seed k d"]) -> Tensor:
    """[seed, batch, u] log-probabilities (value: of the answer; query: of the slot attended,
    heads averaged) with the site's vector moved along ``basis`` to the source's, as
    :func:`das._run` scores them; differentiable in ``basis``."""
    delta = (t.src - t.here).double()  # as codes.run_moved: the move in float64, then the model's dtype
    delta = torch.einsum("sbk,skd->sbd", torch.einsum("sbd,skd->sbk", delta, basis), basis).to(t.here.dtype)
    if t.variable == "query":
        S, B, P, H, E = t.keys.shape
        q = (t.here + delta).view(S, B, H, E)
        s = torch.einsum("sbhe,sbphe->sbhp", q, t.keys) / t.scale
        att = torch.softmax(t.beta * s, dim=-1).mean(2)[..., t.slots].double()  # [seed, batch, u]
        return att.clamp_min(1e-300).log()
    S, H, E, _ = t.W_O.shape
    moved = torch.einsum("sbh,sbhe,shem->sbm", t.weight, delta.view(S, -1, H, E), t.W_O)
    resid = t.mid + moved  # [seed, batch, d_model]
    if t.mlp is not None:
        W_in, b_in, W_out, b_out = t.mlp
        pre = torch.einsum("sbm,smf->sbf", resid, W_in) + b_in[:, None]
        resid = resid + torch.einsum("sbf,sfm->sbm", pre.relu(), W_out) + b_out[:, None]
    return (torch.einsum("sbm,smv->sbv", resid, t.W_U) + t.b_U[:, None]).double().log_softmax(-1)


def iia(t: Tail, basis: Float[Tensor, "seed k d"]) -> Tensor:
    """[seed] interchange accuracy of each model's basis on its pairs (argmax, as
    :func:`das.iia`)."""
    with torch.no_grad():
        return (scores(t, basis).argmax(-1) == t.want).double().mean(-1)


def starts(inits: list[Tensor], d: int, k: int, seed: int) -> torch.nn.Module:
    """A module whose ``weight`` [seed, k, d] is each model's :func:`das.start` of k, as
    :func:`das.learned_dim` reaches it: the generator seeded with ``seed``, then the starts of
    1, ..., k drawn in turn (``inits[i]``: model i's principal axes, at least k rows)."""
    originals, bases = [], []
    for axes in inits:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for j in range(1, k + 1):
                layer = das.start(d, j, axes[:j])
        P = layer.parametrizations.weight
        originals.append(P.original.detach())
        bases.append(P[0].base)
    holder = torch.nn.Module()
    holder.weight = torch.nn.Parameter(torch.stack(originals).clone())
    with torch.random.fork_rng(devices=[]):  # registration draws; its draws are overwritten
        torch.nn.utils.parametrizations.orthogonal(holder, "weight")
    with torch.no_grad():
        holder.parametrizations.weight.original.copy_(torch.stack(originals))
        holder.parametrizations.weight[0].base = torch.stack(bases)
    return holder


def learn(train: Tail, inits: list[Tensor], k: int, *, seed: int = 0, steps: int = 300,
          lr: float = 0.01) -> Float[Tensor, "seed k d"]:
    """Every stacked model's basis of ``k``, trained at once (:func:`das.learn`, batched)."""
    d = train.here.shape[-1]
    if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= d):
        raise ValueError(f"k={k!r}; accepted: an integer from 1 to the site's width {d}")
    short = [i for i, x in enumerate(inits) if x.shape[0] < k]
    if short:
        raise ValueError(f"k={k}: models {short} have fewer than {k} principal axes; accepted: "
                         "k at most each model's number of axes")
    layer = starts(inits, d, k, seed)
    opt = torch.optim.Adam(layer.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        score = scores(train, layer.weight)
        loss = -score.gather(-1, train.want[..., None]).squeeze(-1).mean(-1).sum()
        loss.backward()
        opt.step()
    return layer.weight.detach()


def check(models, variable: str, at, max_k) -> list[str]:
    """Refuse, before any work, what :func:`learned_dims` cannot stack, naming the value: no
    models, models of different shapes or tasks, a hard-attention last layer, a bad variable,
    ``at`` or ``max_k``; returns ``at`` per model."""
    from interp.core import attention

    if not models:
        raise ValueError("models=[]; accepted: one or more models of one cell")
    if variable not in codes.SITES:
        raise ValueError(f"variable={variable!r}; accepted: one of {tuple(codes.SITES)}")
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1:
        raise ValueError(f"max_k={max_k!r}; accepted: an integer >= 1")
    ats = [at] * len(models) if isinstance(at, str) else list(at)
    if len(ats) != len(models) or any(a not in ("value", "key") for a in ats):
        raise ValueError(f"at={at!r}; accepted: 'value', 'key', or one of them per model ({len(models)})")
    first = models[0]
    for i, m in enumerate(models):
        task, n = hooks.check_model(m)
        for name, mine, theirs in [("task", (task.case, n), hooks.check_model(first))] + [
                (f, getattr(m.cfg, f), getattr(first.cfg, f)) for f in SHAPE]:
            theirs = (theirs[0].case, theirs[1]) if name == "task" else theirs
            if mine != theirs:
                raise ValueError(f"models[{i}] has {name}={mine!r}, models[0] has {theirs!r}; "
                                 f"accepted: models of one cell (the same task and {', '.join(SHAPE)})")
        hard = [md.mode for md in attention.modes(m) if md.mode != "softmax"]
        if hard:
            raise ValueError(f"models[{i}] has attention modes {hard}; accepted: softmax attention, "
                             "whose scores have a gradient (remove_attention takes them off)")
    return ats


def learned_dims(models, variable: str = "value", *, at="value", batch_size: int = 512,
                 seed: int = 0, steps: int = 300, max_k: int = 3,
                 iia_min: float | None = None) -> list[das.LearnedDim]:
    """:func:`das.learned_dim` of each of ``models`` (one cell: same task and shapes; ``at``: one
    for all or one per model), the k of all models trained at once (module docstring)."""
    from interp.inspect.mechanism.calibration import THRESHOLDS

    ats = check(models, variable, at, max_k)
    iia_min = THRESHOLDS["iia_min"] if iia_min is None else iia_min
    axes, train, test = [], [], []
    for m, a in zip(models, ats):
        axes.append(codes.measure_code(m, variable, batch_size=batch_size, seed=seed, at=a, iia_min=iia_min))
        train.append(tail(m, das.pairs(m, variable, batch_size=batch_size, seed=seed + 2, at=a)))
        test.append(tail(m, das.pairs(m, variable, batch_size=batch_size, seed=seed + 3, at=a)))
    top = [x.dim if x.dim is not None else x.axes.shape[0] for x in axes]
    last = [min(max_k, t - 1) for t in top]  # the largest k each model tries
    tried = [[] for _ in models]
    done = [False] * len(models)
    for k in range(1, max(last, default=0) + 1):
        live = [i for i in range(len(models)) if not done[i] and k <= last[i]]
        if not live:
            break
        basis = learn(stack([train[i] for i in live]), [axes[i].axes for i in live], k,
                      seed=seed, steps=steps)
        got = iia(stack([test[i] for i in live]), basis)
        for i, a in zip(live, got.tolist()):
            tried[i].append((k, a))
            done[i] = a >= iia_min
    return [das.LearnedDim(variable, x.dim, tuple(t), t[-1][0] if ok else x.dim)
            for x, t, ok in zip(axes, tried, done)]
