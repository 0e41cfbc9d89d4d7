"""The figure a code draws: simplex, orthoplex, circle or codebook, measured and named (issue 51).

:mod:`~interp.inspect.mechanism.codes` asks how many dimensions carry a variable; this module
asks which *figure* the symbols' vectors draw there, against four ideals:

* **simplex** (equiangular tight frame, the neural-collapse figure of Papyan, Han and Donoho 2020):
  n equal norms, every pairwise cosine -1/(n-1), dimension n - 1;
* **orthoplex** (cross-polytope, even n): +-e_i, each point orthogonal to all but its antipode;
* **circle**: n points evenly spaced on a circle (ellipse), the paper's cs(k): the plane test of
  :func:`codes.plane_geometry`, reused as it is;
* **codebook**: random near-orthogonal vectors (Gaussian in width w: |cos| ~ 1/sqrt(w), Bietti
  et al. 2023's associative memories): an effective dimension of at least a few, no
  near-duplicates and no antipodes, and the spreads of random vectors: unequal norms and
  unequal angles (``PREDICTIONS-geometry.md``, amendment A1).

**Frame.** A model's code is read where the last layer reads it: the value at the read slot
(``hook_v``, :func:`codes.code_table`'s site and contexts) mapped by the head's own ``W_O`` into
the residual stream, where the unembedding reads it; the target key (``hook_q`` at the query)
mapped by ``W_K^T``. The head's basis is a gauge (an invertible G between W_V and W_O changes no
output), so cosines in it mean nothing; the stream's basis is shared with the embedding and the
unembedding, and is where neural collapse measures its figures. A change of the stream's basis
that is not a rotation (undone in W_U) changes the figure: the house ``controls.widen`` makes
one, so the geometry controls widen by orthonormal maps only
(:func:`~interp.inspect.mechanism.figure_controls.widen_orthonormal`).

**Centring.** Class means are centred by their global mean (over the n symbols) before every
norm and cosine; per-context vectors are first centred over the symbols within their context,
as :func:`codes.code_table` centres them.

Axis vocabulary: ``u`` the n symbols, ``d`` the frame's width (d_model), ``context`` the inputs
a code table averages over. Thresholds: :data:`~interp.inspect.mechanism.calibration.THRESHOLDS`
(chosen by ``experiments/calibration/geometry_check.py``; ``PREDICTIONS-geometry.md`` declares
the rule; ``geometry.md`` is the table).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

#: the named figures, in the order the label tries them
FIGURES = ("simplex", "orthoplex", "circle", "codebook")
#: every word :func:`label` returns
LABELS = FIGURES + ("unnamed", "untestable")
#: the table sizes the geometry label was calibrated at (``calibration.NS``)
CALIBRATED_NS = (3, 5, 10, 20, 50)


def _check_table(X, name: str = "table") -> Tensor:
    X = torch.as_tensor(X)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"{name} of shape {tuple(X.shape)}; accepted: [n >= 2 symbols, d >= 1]")
    if not torch.isfinite(X).all():
        raise ValueError(f"{name} holds non-finite values; accepted: finite numbers")
    return X.detach().double()


def centred(X: Float[Tensor, "u d"]) -> Float[Tensor, "u d"]:
    """``X`` minus its global mean (over the symbols)."""
    return X - X.mean(0, keepdim=True)


def cosines(X: Float[Tensor, "u d"]) -> Float[Tensor, "u u"]:
    """Cosines between the centred rows of ``X`` (a row of norm 0 has cosine 0 with all)."""
    C = centred(_check_table(X))
    norms = C.norm(dim=1)
    unit = C / norms.clamp_min(1e-300)[:, None]
    unit[norms <= 1e-12 * float(norms.max().clamp_min(1e-300))] = 0.0
    return unit @ unit.T


def antipodal_pairing(cos: Float[Tensor, "u u"]) -> list[tuple[int, int]]:
    """Greedy pairing for the orthoplex: the most negative remaining pair first (even n)."""
    n = len(cos)
    free, pairs = set(range(n)), []
    order = sorted(((float(cos[i, j]), i, j) for i in range(n) for j in range(i + 1, n)))
    for _, i, j in order:
        if i in free and j in free:
            pairs.append((i, j))
            free -= {i, j}
    return pairs


def _off(C: Tensor) -> Tensor:
    return C[~torch.eye(len(C), dtype=torch.bool)]


def table_measures(means: Float[Tensor, "u d"], contexts: Float[Tensor, "context u d"] | None = None) -> dict:
    """The figure measures of a code table (module docstring; ``PREDICTIONS-geometry.md``):
    ``norm_cv``, ``cos_sd``, ``simplex_dev``, ``orthoplex_dev`` (NaN at odd n), ``cos_max``,
    ``pr``, the plane test's ``top2``, ``rcv``, ``gap``, and with per-context vectors
    ``collapse`` (within- over between-class scatter; NaN without them)."""
    from interp.inspect.mechanism import codes

    X = _check_table(means, "means")
    n = len(X)
    C = centred(X)
    norms = C.norm(dim=1)
    if float(norms.max()) == 0.0:
        raise ValueError("means are all equal; accepted: a code table whose symbols differ")
    cos = cosines(X)
    off = _off(cos)
    out = dict(n=n, norm_cv=float(norms.std(unbiased=False) / norms.mean()),
               cos_sd=float(off.std(unbiased=False)),
               simplex_dev=float((off + 1 / (n - 1)).pow(2).mean().sqrt()),
               orthoplex_dev=math.nan, cos_max=float(off.abs().max()))
    if n % 2 == 0:
        O = torch.zeros_like(cos)
        for i, j in antipodal_pairing(cos):
            O[i, j] = O[j, i] = -1.0
        out["orthoplex_dev"] = float((off - _off(O)).pow(2).mean().sqrt())
    s2 = torch.linalg.svdvals(C).pow(2)
    out["pr"] = float(s2.sum() ** 2 / s2.pow(2).sum())
    out["top2"], out["rcv"], out["gap"] = codes.plane_geometry(X) if n >= 3 else (math.nan,) * 3
    out["collapse"] = math.nan if contexts is None else collapse(contexts)
    return out


def collapse(contexts: Float[Tensor, "context u d"]) -> float:
    """Within-class over between-class scatter (trace ratio, NC1-style) of per-context vectors,
    each context centred over the symbols first: 0 when every context writes the same code."""
    V = torch.as_tensor(contexts).detach().double()
    if V.ndim != 3 or V.shape[0] < 2 or V.shape[1] < 2:
        raise ValueError(f"contexts of shape {tuple(V.shape)}; accepted: [context >= 2, u >= 2, d]")
    V = V - V.mean(1, keepdim=True)
    mean = V.mean(0)  # [u, d], already centred over u
    within = float((V - mean).pow(2).sum(-1).mean())
    between = float(mean.pow(2).sum(-1).mean())
    return within / between if between > 0 else math.inf


def _thresholds(T):
    from interp.inspect.mechanism.calibration import THRESHOLDS

    return THRESHOLDS if T is None else T


def detects(m: dict, T: dict | None = None) -> dict[str, bool]:
    """Which figures' detectors fire on the measures ``m`` (``PREDICTIONS-geometry.md``)."""
    T = _thresholds(T)
    le = lambda k, t: not math.isnan(m[k]) and m[k] <= T[t]
    ge = lambda k, t: not math.isnan(m[k]) and m[k] >= T[t]
    return dict(simplex=le("norm_cv", "simplex_norm_max") and le("simplex_dev", "simplex_dev_max"),
                orthoplex=m["n"] % 2 == 0 and le("norm_cv", "orthoplex_norm_max")
                and le("orthoplex_dev", "orthoplex_dev_max"),
                circle=ge("top2", "top2_min") and le("rcv", "rcv_max") and ge("gap", "gap_min"),
                codebook=ge("pr", "codebook_pr_min") and le("cos_max", "codebook_cos_max")
                and ge("norm_cv", "codebook_norm_min") and ge("cos_sd", "codebook_sd_min"))


def calibrated_size(n: int) -> int | None:
    """The calibrated table size whose rule applies at ``n``: the largest one <= n (None below 3)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n={n!r}; accepted: an integer >= 2")
    below = [c for c in CALIBRATED_NS if c <= n]
    return below[-1] if below else None


def label(m: dict, T: dict | None = None) -> str:
    """The geometry label of measures ``m`` (:data:`LABELS`): the first figure (:data:`FIGURES`
    order) whose detector fires, if it is testable at n, else ``untestable``; none firing:
    ``unnamed`` if every figure that exists at n (the orthoplex: even n) is testable there, else
    ``untestable``. Testable sizes: ``T["geometry_testable"]``."""
    T = _thresholds(T)
    size = calibrated_size(int(m["n"]))
    if size is None:
        return "untestable"
    testable = {f: size in T["geometry_testable"][f] for f in FIGURES}
    fired = detects(m, T)
    for f in FIGURES:
        if fired[f]:
            return f if testable[f] else "untestable"
    exists = [f for f in FIGURES if f != "orthoplex" or m["n"] % 2 == 0]
    return "unnamed" if all(testable[f] for f in exists) else "untestable"


def context_vectors(model, variable: str, view, *, contexts: int = 32,
                    at: str = "value") -> Float[Tensor, "context u d_head"]:
    """Per context (the first ``contexts`` inputs of ``view``) and symbol u, the site's vector
    with the variable set to u (:func:`codes.code_table` before its averaging)."""
    from interp.core import tasks
    from interp.inspect.mechanism import codes
    from interp.inspect.tools import hooks

    task, n = tasks.get(view.case), view.n
    name = codes._site(model, variable)
    base = hooks.TaskView(view.case, n, *(x[:contexts] for x in (view.tokens, view.keys, view.values,
                                                                  view.target)), view.slot_pos)
    pos = codes._read_pos(task, n, base, variable, at)
    rows = [codes._vectors(model, name, codes._with_symbol(task, n, base, variable,
                                                           torch.full((len(pos),), u, dtype=torch.long)), pos)
            for u in range(n)]
    return torch.stack(rows, dim=1)


def stream_map(model, variable: str) -> Float[Tensor, "d_head d_model"]:
    """The last layer's map of the site into the residual stream (module docstring, "Frame"):
    value: ``W_O`` (heads stacked); query: ``W_K^T`` (the stream direction keys are matched to)."""
    L = model.cfg.n_layers - 1
    if variable == "value":
        W = model.blocks[L].attn.W_O.detach().double()  # [head_index, d_head, d_model]
    elif variable == "query":
        W = model.blocks[L].attn.W_K.detach().double().transpose(1, 2)  # [head_index, d_head, d_model]
    else:
        raise ValueError(f"variable={variable!r}; accepted: 'value' or 'query'")
    return W.reshape(-1, W.shape[-1])


def self_duality(means: Float[Tensor, "u d_model"], W_U: Float[Tensor, "d_model u"]) -> float:
    """Frobenius cosine of the centred value code and the centred unembedding columns (1:
    self-dual, as neural collapse's NC3; basis-dependent, as neural collapse measures it)."""
    R = centred(_check_table(means, "means"))
    W = centred(torch.as_tensor(W_U).detach().double().T)
    if R.shape != W.shape:
        raise ValueError(f"means {tuple(R.shape)} and W_U {tuple(W_U.shape)}; accepted: [u, d_model] and [d_model, u]")
    denom = float(R.norm() * W.norm())
    return float((R * W).sum()) / denom if denom > 0 else math.nan


def margin(logits: Float[Tensor, "batch u"], answer) -> float:
    """The read-out's margin: the median over inputs of the right logit's lead over the best
    other, in units of that input's logit std (negative where the model answers wrong)."""
    Z = torch.as_tensor(logits).detach().double()
    answer = torch.as_tensor(answer)
    right = Z[torch.arange(len(Z)), answer]
    other = Z.scatter(1, answer[:, None], -math.inf).max(1).values
    return float(((right - other) / Z.std(1).clamp_min(1e-300)).median())


def stream_code(model, variable: str, view, *, contexts: int = 32,
                at: str = "value") -> Float[Tensor, "context u d_model"]:
    """The code in the stream (module docstring, "Frame"): :func:`context_vectors` through
    :func:`stream_map`, each context centred over the symbols; ``.mean(0)`` is the code table."""
    V = context_vectors(model, variable, view, contexts=contexts, at=at) @ stream_map(model, variable)
    return V - V.mean(1, keepdim=True)


def measure_model(model, *, batch_size: int = 512, contexts: int = 32, seed: int = 0,
                  at: str = "value") -> dict:
    """``{"value": measures, "query": measures}``: each variable's code (module docstring) in the
    stream, its :func:`table_measures`, its ``label``; the value's also :func:`self_duality` (``dual``) and the read-out's
    :func:`margin` on the sampled inputs."""
    from interp.inspect.tools import hooks

    task, n = hooks.check_model(model)
    view = hooks.read(task.case, n, hooks.sample_inputs(task.case, n, max(batch_size, n), seed=seed))
    out = {}
    for variable in ("value", "query"):
        V = stream_code(model, variable, view, contexts=contexts, at=at)
        means = V.mean(0)
        if float(means.norm()) <= 1e-12 * max(float(V.norm()), 1e-300):
            out[variable] = dict(n=n, label="untestable", note="the code table is zero: not read here")
            continue
        m = table_measures(means, V)
        if variable == "value":
            m["dual"] = self_duality(means, model.W_U)
            with torch.no_grad():
                m["margin"] = margin(model(view.tokens)[:, -1], view.answer)
        m["label"] = label(m)
        out[variable] = m
    return out
