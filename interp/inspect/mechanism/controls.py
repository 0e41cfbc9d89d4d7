"""Models whose mechanism is known by construction: the positive controls and nulls of the labels.

A label is a detector; it is calibrated (:mod:`interp.inspect.mechanism.calibration`) on models whose
answer we know before measuring them:

* :func:`one_hot_lookup`: the construction's routing with a **one-hot** code (cases 1-4, one
  layer): the query attends the slot whose key matches and reads its value, but keys and values
  are standard basis vectors, not points on a circle. ``inverted=True`` gives the inverted
  mechanism (attention avoids the match, OV writes minus the value), right whenever f is a
  permutation.
* :func:`widen`: any attention-only model hidden in a wider residual stream by a random map with
  orthonormal rows, then a random basis and scale of the stream and the head
  (:func:`interp.inspect.tools.geometry.disguise`'s mix): every score and logit unchanged, no
  coordinate of the original left in place.
* :func:`recode_values`: the construction's routing with the values written as other points
  of the plane (a 2-dimensional code that is not a circle, or an uneven circle).
* :func:`shuffle_weights`: a null: every weight tensor's entries permuted at random (the trained
  model's weight statistics, no mechanism).
* :func:`mirror_lookup` and :func:`one_hot_case5` (two layers, case 5; built in
  :mod:`interp.inspect.mechanism.controls_case5`, re-exported here): the construction run backwards (the
  last layer reads the key position 2j, routing ``mirror``) and the construction's two-layer
  routing with one-hot keys and values. :data:`ONE_HOT_CASES` stays the one-layer cases (1-4)
  that :func:`one_hot_lookup` builds; case 5 is :func:`one_hot_case5`.

Residual blocks of :func:`one_hot_lookup`, named as :mod:`interp.core.constructions` names its
slices: ``KEY`` (n: the slot's key, ``beta`` e_k), ``VALUE`` (n: e_v), ``QUERY`` (n: the target
``beta`` e_t), and in cases 1 and 4 ``OUT`` (n: where OV writes, since every token there may be
a value and the query token's own VALUE must not reach the unembedding) and one ``IS_QUERY``
coordinate (1 at the query position). With
pair tokens (cases 2-3, d_model = 2 d_token) the query token's key half is the key table's row,
so KEY doubles as QUERY and the query ties with the matching slot (the value half of the query
is zero: half the attention, the same argmax), as in Theorem 3.1.

Scores: ``W_Q`` reads QUERY (``KEY`` with pairs) and ``W_K`` reads KEY, so s_j = beta^2 [k_j =
i*] / sqrt(d_head); ``IS_QUERY`` meets a constant query bias with weight -beta^2, so the query
position never attends itself. ``W_V`` reads VALUE, ``W_O`` writes it to OUT (VALUE with pairs) and ``W_U``
reads OUT: logit_u = (attention on a slot holding u). Inverted: W_Q and W_O negated; over a
permutation the non-matching slots hold every value but f(i*), each with weight 1 / (n - 1), so
-sum of them is highest at f(i*).
"""

from __future__ import annotations

import math

import torch

from interp.core import models, tasks
from interp.inspect.tools import geometry
from interp.inspect.mechanism.controls_case5 import mirror_lookup, one_hot_case5  # noqa: F401 - re-exported

#: the cases :func:`one_hot_lookup` builds (one attention layer reads the matching slot; the
#: two-layer case 5 is :func:`one_hot_case5`)
ONE_HOT_CASES = (1, 2, 3, 4)


def one_hot_lookup(case: int, n: int, *, inverted: bool = False, beta: float = 8.0,
                   dtype: torch.dtype = torch.float32):
    """The construction's lookup with one-hot keys and values (module docstring), softmax
    attention: a HookedTransformer of ``case`` (1-4) carrying ``model.task``."""
    task = tasks.get(tasks.check_case(case))
    n = tasks.check_n(n)
    if case not in ONE_HOT_CASES:
        raise ValueError(f"case={case}; accepted: one of {ONE_HOT_CASES} (one layer reads the slot; "
                         "case 5, two layers: one_hot_case5)")
    if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta={beta!r}; accepted: a finite number > 0")
    pair = task.same_position
    KEY, VALUE = torch.arange(n), torch.arange(n, 2 * n)
    QUERY = KEY if pair else torch.arange(2 * n, 3 * n)
    OUT = VALUE if pair else torch.arange(3 * n, 4 * n)
    IS_QUERY = None if pair else 4 * n
    d = 2 * n if pair else 4 * n + 1
    model = models.new_model(models.make_config(case, n, d, 1, d_head=n + (not pair), dtype=dtype), case)
    for name, p in model.named_parameters():
        if name.split(".")[-1].startswith("b_"):
            p.data.zero_()
    W_Q = torch.zeros(d, n + (not pair), dtype=torch.float64)
    W_K = torch.zeros_like(W_Q)
    W_Q[QUERY, torch.arange(n)] = 1.0
    W_K[KEY, torch.arange(n)] = 1.0
    W_V = torch.zeros(d, n + (not pair), dtype=torch.float64)
    W_V[VALUE, torch.arange(n)] = 1.0
    W_U = torch.zeros(d, n, dtype=torch.float64)
    W_U[OUT, torch.arange(n)] = 1.0
    W_O = torch.zeros(n + (not pair), d, dtype=torch.float64)
    W_O[torch.arange(n), OUT] = 1.0
    sign = -1.0 if inverted else 1.0
    eye = torch.eye(n, dtype=torch.float64)
    with torch.no_grad():
        if pair:
            models.tie_pair_embedding(model, n)
            key_table, value_table = models.pair_tables(model)
            key_table.copy_((beta * eye).to(dtype))
            value_table.copy_(eye.to(dtype))
            models.disable_pos_embed(model)
        else:
            E = torch.zeros(n, d, dtype=torch.float64)
            E[:, VALUE], E[:, QUERY] = eye, beta * eye  # every token may be a value or the target
            pos = torch.zeros(task.seq_len(n), d, dtype=torch.float64)
            slot = task.value_positions(n)
            pos[slot[:, None], KEY[None, :]] = beta * eye  # cases 1, 4: the position is the key
            pos[task.query_pos(n), IS_QUERY] = 1.0
            model.embed.W_E.copy_(E.to(dtype))
            model.pos_embed.W_pos.copy_(pos.to(dtype))
            W_K[IS_QUERY, n] = -beta * beta
            model.blocks[0].attn.b_Q.copy_(torch.zeros(1, n + 1, dtype=dtype).index_fill_(1, torch.tensor([n]), 1.0))
        a = model.blocks[0].attn
        a.W_Q.copy_((sign * W_Q)[None].to(dtype))
        a.W_K.copy_(W_K[None].to(dtype))
        a.W_V.copy_(W_V[None].to(dtype))
        a.W_O.copy_((sign * W_O)[None].to(dtype))
        model.unembed.W_U.copy_(W_U.to(dtype))
    return model.eval()


def recode_values(case: int, n: int, points):
    """The paper's construction of case 2 or 3 (leftmost hard attention, as built: all of the
    attention on the matching slot, so the read value is the point itself) with its values written as
    ``points`` [n, 2] instead of cs_n(v): the value table holds the points, and the read-out is
    nearest-point (``W_U`` columns 2 p_u on the value coordinates, ``b_U`` = -|p_u|^2), so any
    distinct points work. Random points in the plane: a 2-dimensional code that is not a circle;
    random angles on the circle: an uneven circle. The keys stay on the circle."""
    from interp.core import constructions

    if case not in (2, 3):
        raise ValueError(f"case={case}; accepted: 2 or 3 (the pair-token constructions)")
    P = torch.as_tensor(points, dtype=torch.float64)
    if P.shape != (n, 2) or not torch.isfinite(P).all():
        raise ValueError(f"points of shape {tuple(P.shape)}; accepted: finite [n={n}, 2]")
    model = constructions.build(case, n, check_precision=False)
    with torch.no_grad():
        _, value_table = models.pair_tables(model)
        value_table.copy_(P.to(value_table.dtype))
        W_U = torch.zeros_like(model.unembed.W_U, dtype=torch.float64)
        W_U[constructions.VALUE] = 2 * P.T
        model.unembed.W_U.copy_(W_U.to(model.unembed.W_U.dtype))
        model.unembed.b_U.copy_((-P.pow(2).sum(1)).to(model.unembed.b_U.dtype))
    return model


def _orthonormal_rows(d: int, D: int, g: torch.Generator) -> torch.Tensor:
    """R [d, D] with R R^T = I: d random orthonormal directions of a D-dimensional space."""
    Q, _ = torch.linalg.qr(torch.randn(D, d, generator=g, dtype=torch.float64))
    return Q.T


def widen(model, d_token: int, *, seed: int = 0, mix: bool = True):
    """``model`` (attention-only) hidden in a residual of token width ``d_token`` (module
    docstring): same scores and logits, keys and values relabelled at random, no coordinate left
    in place. ``d_token`` at least the model's own."""
    from interp.inspect.tools import hooks

    task, n = hooks.check_model(model)
    if not model.cfg.attn_only:
        raise ValueError("model has MLPs (d_mlp > 0); accepted: attention-only models")
    W = geometry._weights(model)
    pair = "key" in W
    t = W["key"].shape[1] if pair else W["E"].shape[1]
    if not (isinstance(d_token, int) and d_token >= t):
        raise ValueError(f"d_token={d_token!r}; accepted: an integer >= the model's token width {t}")
    g = torch.Generator().manual_seed(seed)
    geometry._relabel(W, task, n, torch.randperm(n, generator=g))
    if pair:
        R1, R2 = _orthonormal_rows(t, d_token, g), _orthonormal_rows(t, d_token, g)
        W["key"], W["value"] = W["key"] @ R1, W["value"] @ R2
        R = torch.block_diag(R1, R2)
    else:
        R = _orthonormal_rows(t, d_token, g)
        W["E"] = W["E"] @ R
    W["pos"] = W["pos"] @ R
    for name in ("W_Q", "W_K", "W_V"):
        W[name] = R.T @ W[name]
    W["W_O"], W["b_O"], W["W_U"] = W["W_O"] @ R, W["b_O"] @ R, R.T @ W["W_U"]
    if mix:  # False: orthonormal maps only (figure_controls.widen_orthonormal)
        geometry._mix(W, g)
    return geometry._load(model, task, n, W)


def shuffle_weights(model, *, seed: int = 0):
    """A copy of ``model`` with every weight tensor's entries permuted at random (a null); the
    tensors its spec fixes (e.g. f14's ``W_O='identity'``) are architecture, not learned, and stay."""
    import copy

    new = copy.deepcopy(model)
    spec = models.spec_of(new)
    fixed = set(models.fixed_weights(new, spec)) if spec is not None else set()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        tensors = (list(models.pair_tables(new)) if models.has_pair_embedding(new) else [])
        tensors += [p for name, p in new.named_parameters()
                    if "parametrizations" not in name and name not in fixed]
        for p in tensors:
            flat = p.data.reshape(-1)
            p.data.copy_(flat[torch.randperm(flat.numel(), generator=g)].view_as(p.data))
    return new.eval()
