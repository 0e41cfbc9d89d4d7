"""The paper's hard-attention constructions, loaded exactly into HookedTransformers.

``build(case, n)`` returns the same class of model that training produces (same hook names,
same token layout, ``model.task``), with analytic weights and the attention mode installed as
permanent hooks. Each construction is one ``make_*(task, n, dtype)`` that registers itself as its
tasks' ``"paper"`` builder (:func:`interp.core.tasks.register_builder`, tracr-style); ``build``
looks it up there, so a presentation's construction is found from its task.

Notation. ``cs_N(k) = [cos(2 pi k / N), sin(2 pi k / N)]``: the integer k on the unit circle.
For j != k in [N], ``cs_N(j) . cs_N(k) <= cos(2 pi / N) = 1 - 2 pi^2/N^2 + ...``, so O(log N)
bits separate them. TransformerLens conventions: ``x @ W_Q`` (W_Q is [d_model, d_head]),
``z @ W_O`` (W_O is [d_head, d_model]), ``resid @ W_U`` (W_U is [d_model, n]); biases are zero.
Scores are divided by ``attn_scale = sqrt(d_head)``; we set d_head to the paper's d_hid (2, or
3 for case 5) so the scores equal the paper's ``q . k / sqrt(d_hid)`` to the last digit.

The residual stream. The paper's theorems use no residual in the last layer; a
HookedTransformer always adds one. Each construction keeps the paper's d_model and makes the
query position's own vector harmless:

* cases 2, 3 and 4: the query position is zero in coordinates 2-3, so W_O writes the attended
  value there and W_U reads only coordinates 2-3 (the query's [cs(i*), 0, 0] is invisible).
* cases 1 and 5: the query position is non-zero everywhere, so OV writes
  ``value - key`` of the attended position into coordinates 0-1. The attended key equals the
  target key, so the residual's cs(i*) cancels and coordinates 0-1 hold cs(f(i*)).

c-size (h d p): 1 * 4 * p for cases 1-4 and 1 * 7 * p for the two-layer case 5, where p is the
precision; :data:`EXACT_UP_TO` records the largest n measured exact per dtype.

Limits. Hard attention merges scores within the tie tolerance tau (:mod:`interp.core.attention`), so
a construction is right only while its smallest score gap ``(1 - cos(2 pi / N)) / sqrt(d_hid)``
stays above tau plus rounding. ``experiments/precision/measure.py`` measures, per case and
dtype, the largest n on its grid at which the construction is exact with *twice* the default
tolerance (a margin of one tau against rounding on other CPUs); ``build`` refuses every n
beyond it, before allocating anything (the limit is in the message; ``check_precision=False``
overrides, a size check against the machine's memory still applies).
"""

from __future__ import annotations

import math

import torch

from interp.core import attention as attention_modes
from interp.core import models, tasks
from interp.core.limits import DTYPES, EXACT_UP_TO, check_buildable, default_layers  # noqa: F401 - re-exported

# Residual-stream coordinates, named by what they hold (d_model = 4 in cases 1-4, 7 in case 5).
KEY = [0, 1]  # cases 2-4: the key cs(k) (the target cs(i*) at the query)
VALUE = [2, 3]  # cases 2-4: the value, written there by OV; zero at the query
TOKEN = [0, 1]  # case 1: the token's value cs(v); case 5: the token cs(k) or cs(v)
POS = [2, 3]  # case 1: the position cs_N(j)
COPY = [2, 3]  # case 5: layer 0 copies the key's token here (cs(pi(k)) at value position 2k+1)
PAIR = [4, 5]  # case 5: the pair index cs_N(k) of positions 2k and 2k+1
EVEN = [6]  # case 5: -1 at even positions (keys, the query), 0 at values


def cs(k: torch.Tensor, N: int) -> torch.Tensor:
    """[..., 2] points ``[cos 2 pi k/N, sin 2 pi k/N]`` in float64."""
    theta = 2 * math.pi * k.to(torch.float64) / N
    return torch.stack([theta.cos(), theta.sin()], dim=-1)


def _zero_biases(model) -> None:
    for name, p in model.named_parameters():
        if name.split(".")[-1].startswith("b_"):
            p.data.zero_()


def _set(param: torch.nn.Parameter, value: torch.Tensor) -> None:
    param.data.copy_(value.to(param.dtype))


def _eye_cols(d_model: int, rows: list[int], d_head: int, cols: list[int] | None = None, sign=None):
    """A [d_model, d_head] matrix copying coordinate rows[i] into head dim cols[i]."""
    W = torch.zeros(d_model, d_head, dtype=torch.float64)
    cols = cols or list(range(len(rows)))
    sign = sign or [1.0] * len(rows)
    for r, c, s in zip(rows, cols, sign, strict=True):
        W[r, c] = s
    return W


@tasks.register_builder("paper", 2, 3)
def make_same_position(task: tasks.Task, n: int, dtype: torch.dtype):
    """Theorem 3.1 (cases 2 and 3): same position, ordered or permuted keys.

    Embedding (pair token k*n + v and query token n*n + i*, no positional embedding):
        x_j = [cs_n(k_j), cs_n(v_j)],   x_n = [cs_n(i*), 0, 0]
    (the pair embedding of :mod:`interp.core.models` with key table cs_n(k), value table cs_n(v)).
    W_Q = W_K = coords 0-1 (the paper's [I_2 0]); score s_j = cos(theta(i*) - theta(k_j))/sqrt 2,
    max 1/sqrt 2 exactly where k_j = i*. The query's own key is also cs_n(i*) (the paper's
    appendix lists k_4 = 0, but its own W_K gives cs(i*)): s_n ties with the target, and
    leftmost attention resolves the tie to the earlier position j < n. (Rightmost picks the
    query itself and fails; average splits 1/2-1/2 with the query's zero value and still argmaxes
    right.) W_V = coords 2-3 (the value), W_O writes them to coords 2-3, which are 0 at the
    query, so resid = [cs(i*), cs(f(i*))]; W_U column u = [0, 0, cs_n(u)] gives
    logit_u = cos(theta(u) - theta(f(i*))), maximal exactly at u = f(i*).
    """
    cfg = models.make_config(task.case, n, 4, 1, d_head=2, dtype=dtype)
    model = models.new_model(cfg, task.case)
    _zero_biases(model)
    key_table = cs(torch.arange(n), n)
    models.tie_pair_embedding(model, n)
    with torch.no_grad():
        key_param, value_param = models.pair_tables(model)
        key_param.copy_(key_table.to(dtype))
        value_param.copy_(key_table.to(dtype))
    models.disable_pos_embed(model)
    a = model.blocks[0].attn
    _set(a.W_Q, _eye_cols(4, KEY, 2)[None])
    _set(a.W_K, _eye_cols(4, KEY, 2)[None])
    _set(a.W_V, _eye_cols(4, VALUE, 2)[None])
    _set(a.W_O, _eye_cols(4, VALUE, 2).T[None])
    W_U = torch.zeros(4, n, dtype=torch.float64)
    W_U[VALUE] = cs(torch.arange(n), n).T
    _set(model.unembed.W_U, W_U)
    return model


@tasks.register_builder("paper", 1)
def make_no_keys(task: tasks.Task, n: int, dtype: torch.dtype):
    """Theorem 3.2 (case 1): no keys, positions carry the key. N = n + 1 angles.

    w(v) = [cs_N(v), 0, 0],   p(i) = [0, 0, cs_N(i)] for i in [n + 1].
    W_Q = coords 0-1 (the target's cs_N(i*) at the query), W_K = coords 2-3 (the position's
    cs_N(j)): s_j = cos(theta(i*) - theta(j))/sqrt 2, max exactly at j = i* (the query's own
    position n never matches: that is why the paper uses n + 1 angles).
    The query position is [cs_N(i*), cs_N(n)], non-zero everywhere, so instead of the paper's
    W_V = coords 0-1 we use OV: x -> (x[0:2] - x[2:4]) into coords 0-1. At the attended j = i*,
    x[2:4] = cs_N(i*), so resid[0:2] = cs_N(i*) + cs_N(f(i*)) - cs_N(i*) = cs_N(f(i*)).
    W_U column u = [cs_N(u), 0, 0] (the paper's U, without the unused row n).
    """
    N = n + 1
    cfg = models.make_config(task.case, n, 4, 1, d_head=2, dtype=dtype)
    model = models.new_model(cfg, task.case)
    _zero_biases(model)
    W_E = torch.zeros(n, 4, dtype=torch.float64)
    W_E[:, TOKEN] = cs(torch.arange(n), N)
    W_pos = torch.zeros(n + 1, 4, dtype=torch.float64)
    W_pos[:, POS] = cs(torch.arange(n + 1), N)
    _set(model.embed.W_E, W_E)
    _set(model.pos_embed.W_pos, W_pos)
    a = model.blocks[0].attn
    _set(a.W_Q, _eye_cols(4, TOKEN, 2)[None])
    _set(a.W_K, _eye_cols(4, POS, 2)[None])
    _set(a.W_V, _eye_cols(4, TOKEN + POS, 2, [0, 1, 0, 1], [1, 1, -1, -1])[None])  # token - position
    _set(a.W_O, _eye_cols(4, TOKEN, 2).T[None])
    W_U = torch.zeros(4, n, dtype=torch.float64)
    W_U[TOKEN] = cs(torch.arange(n), N).T
    _set(model.unembed.W_U, W_U)
    return model


@tasks.register_builder("paper", 4)
def make_consecutive_ordered(task: tasks.Task, n: int, dtype: torch.dtype):
    """Theorem 3.3 (case 4): consecutive positions, ordered keys. N = n angles.

    w(x) = [cs_n(x), 0, 0];  p(2k) = 0,  p(2k+1) = [0, 0, cs_n(k)],  p(2n) = 0.
    The keys in the input are ignored: the position embedding puts key k beside value f(k).
    W_Q = coords 0-1 (cs_n(i*) at the query 2n), W_K = coords 2-3: s_j = 0 at even j and
    cos(theta(i*) - theta(k))/sqrt 2 at j = 2k + 1, uniquely max at j = 2 i* + 1.
    W_V = coords 0-1 (the value f(i*)); W_O writes it to coords 2-3, which are 0 at the query
    (p(2n) = 0), so resid = [cs(i*), cs(f(i*))]; W_U column u = [0, 0, cs_n(u)].
    """
    cfg = models.make_config(task.case, n, 4, 1, d_head=2, dtype=dtype)
    model = models.new_model(cfg, task.case)
    _zero_biases(model)
    W_E = torch.zeros(n, 4, dtype=torch.float64)
    W_E[:, KEY] = cs(torch.arange(n), n)  # every token, key or value, on the circle
    W_pos = torch.zeros(2 * n + 1, 4, dtype=torch.float64)
    W_pos[1 : 2 * n : 2, VALUE] = cs(torch.arange(n), n)  # value slot k carries key k
    _set(model.embed.W_E, W_E)
    _set(model.pos_embed.W_pos, W_pos)
    a = model.blocks[0].attn
    _set(a.W_Q, _eye_cols(4, KEY, 2)[None])
    _set(a.W_K, _eye_cols(4, VALUE, 2)[None])
    _set(a.W_V, _eye_cols(4, KEY, 2)[None])
    _set(a.W_O, _eye_cols(4, VALUE, 2).T[None])
    W_U = torch.zeros(4, n, dtype=torch.float64)
    W_U[VALUE] = cs(torch.arange(n), n).T
    _set(model.unembed.W_U, W_U)
    return model


@tasks.register_builder("paper", 5)
def make_consecutive_permuted(task: tasks.Task, n: int, dtype: torch.dtype):
    """Theorem 3.8 (appendix, case 5): two layers, d_model 7, d_hid 3. N = n + 1 angles.

    w(k) = [cs_N(k), 0, 0, 0, 0, 0];  p(2k) = [0,0,0,0, cs_N(k), -1],  p(2k+1) = [0,0,0,0, cs_N(k), 0]
    (the query position 2n is p(2n) with k = n).
    Layer 1: W_Q1 = W_K1 = coords 4-5 (the pair index k): positions 2k and 2k+1 tie, and
    leftmost attention sends both to 2k (the key). OV1 copies coords 0-1 into coords 2-3, so
    with the residual x'_{2k+1} = [cs(f(pi(k))), cs(pi(k)), cs(k), 0] and
    x'_{2n} = [cs(i*), cs(i*), cs(n), -1].
    Layer 2: W_K2 = coords (2, 3, 6), W_Q2 = coords (0, 1, -6): the query [cs(i*), 1] scores
    cos(.)/sqrt 3 at odd 2k+1 (max 1/sqrt 3 iff pi(k) = i*), (cos(.) - 1)/sqrt 3 <= 0 at even 2k
    and 0 at itself. OV2 writes (coords 0-1) - (coords 2-3) of the attended 2k+1, i.e.
    cs(f(i*)) - cs(i*), into coords 0-1 (the paper's V_2 copies coords 0-1 and has no residual
    in layer 2): resid[0:2] = cs(i*) + cs(f(i*)) - cs(i*) = cs(f(i*)). W_U column u = [cs_N(u), 0...].
    """
    N = n + 1
    cfg = models.make_config(task.case, n, 7, 2, d_head=3, dtype=dtype)
    model = models.new_model(cfg, task.case)
    _zero_biases(model)
    W_E = torch.zeros(n, 7, dtype=torch.float64)
    W_E[:, TOKEN] = cs(torch.arange(n), N)
    W_pos = torch.zeros(2 * n + 1, 7, dtype=torch.float64)
    W_pos[:, PAIR] = cs(torch.arange(2 * n + 1) // 2, N)
    W_pos[0::2, EVEN] = -1.0
    _set(model.embed.W_E, W_E)
    _set(model.pos_embed.W_pos, W_pos)
    a1, a2 = model.blocks[0].attn, model.blocks[1].attn
    _set(a1.W_Q, _eye_cols(7, PAIR, 3)[None])
    _set(a1.W_K, _eye_cols(7, PAIR, 3)[None])
    _set(a1.W_V, _eye_cols(7, TOKEN, 3)[None])
    _set(a1.W_O, _eye_cols(7, COPY, 3).T[None])
    _set(a2.W_K, _eye_cols(7, COPY + EVEN, 3)[None])
    _set(a2.W_Q, _eye_cols(7, TOKEN + EVEN, 3, None, [1, 1, -1])[None])
    _set(a2.W_V, _eye_cols(7, TOKEN + COPY, 3, [0, 1, 0, 1], [1, 1, -1, -1])[None])  # token - copy
    _set(a2.W_O, _eye_cols(7, TOKEN, 3).T[None])
    W_U = torch.zeros(7, n, dtype=torch.float64)
    W_U[TOKEN] = cs(torch.arange(n), N).T
    _set(model.unembed.W_U, W_U)
    return model


def build(
    case: int,
    n: int,
    *,
    layers: int | None = None,
    attention: str = "leftmost",
    beta: float = 1.0,
    dtype: torch.dtype = torch.float32,
    check_precision: bool = True,
    tie_rtol: float | None = None,
    tie_atol: float | None = None,
):
    """The paper's construction for ``case`` and table size ``n`` as a HookedTransformer.

    ``layers`` defaults to 1 (cases 1-4) or 2 (case 5); ``attention`` is installed on every
    layer as permanent hooks (see :mod:`interp.core.attention`; ``remove_attention`` takes it off),
    with the hard modes' tie tolerance ``tie_rtol``/``tie_atol`` (``None``: the dtype's default,
    ``8 * eps``; see :mod:`interp.core.attention`). With ``check_precision`` a ValueError is raised
    when n is beyond the largest n measured exact for this dtype (:data:`EXACT_UP_TO`), instead
    of answering wrong silently; every refusal comes before any allocation
    (:func:`check_buildable`).
    """
    check_buildable(case, n, dtype, layers=layers, check_precision=check_precision)
    attention_modes.check_mode(attention, beta)
    layers = default_layers(case) if layers is None else layers
    task = tasks.get(case)
    model = task.builder("paper")(task, n, dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    model.construction = dict(case=case, n=n, layers=layers, dtype=str(dtype).replace("torch.", ""))
    attention_modes.set_attention(model, attention, beta=beta, tie_rtol=tie_rtol, tie_atol=tie_atol)
    return model
