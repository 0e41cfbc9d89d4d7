"""The code level: how keys and values are written where the answer is read, tested by interchange.

The routing level (:mod:`interp.inspect.mechanism.labels`, ``routing``) asks where the answer's
information flows: does the final query attend the slot whose key matches and read its value?
This module asks the second question of issue 42: *in what code* are the value and the target
key carried there? The paper's constructions write both as points ``cs(k)`` on a circle (two
dimensions); a lookup can equally use one coordinate per symbol (``n - 1`` dimensions), or any
other arrangement its read-out separates.

Axis vocabulary: ``batch`` inputs, ``pos`` positions, ``u`` the n symbols (values, or target
keys), ``d`` the flattened ``head_index * d_head`` of one layer's value (or query) vectors.

Two variables, two sites, both in the last layer (the layer that reads the answer):

* **value**: ``blocks.L.attn.hook_v`` at the read slot (the matching slot's value position, or
  its key position 2j for a model measured ``at="key"``, the mirror mechanism). A *source* input
  is the base input with that slot's value replaced by another symbol u'; the hypothesis "the
  answer is the value read at the slot" predicts that the base run, with the slot's value vector
  taken from the source, answers u'.
* **query**: ``blocks.L.attn.hook_q`` at the final position. The source is the base with another
  target t'; "the query carries the target key that the scores match" predicts that the final
  position's attention (its argmax over the slots' read positions) moves to the slot whose key
  is t' (every key is in the table, as in training). The match position, not the answer, is
  asked: the paper's cases 1 and 5 read the target a second time from the residual stream.

The code's dimension is found by **distributed alignment search with the rotation fixed to the
code's principal axes** (closed form, no training): per symbol u, the mean vector at the site
over ``contexts`` inputs in which only the symbol changes, centred over u per context (so
context, position and key drop out) gives the code table ``M`` [u, d]; its right singular vectors
ordered by singular value are the candidate rotation. Interchanging the projection onto the top k
of them (base vector + P_k (source - base)) and counting the runs that answer as predicted gives
the interchange-intervention accuracy ``IIA(k)``; the code's dimension is the least k with
``IIA(k) >= IIA_MIN`` (:data:`interp.inspect.mechanism.calibration.THRESHOLDS`). A learned rotation (DAS
proper, :mod:`interp.inspect.mechanism.das`) could only find a smaller k: ours is an upper bound on
DAS's, tight when the code's variance lies where it is read (the calibration's controls: the
circle's 2 and a one-hot table's n - 1 are found exactly), not always on trained seeds (at n = 5
most "codebook" seeds carry their values in a learned 3-dimensional subspace:
``experiments/calibration/das.md``). We use TransformerLens hooks rather than pyvene: pyvene
addresses components through its own per-architecture mappings of HuggingFace modules, which
would be one more dependency and one more naming of sites that TL's hook points already name
(as every other measure here does); the interchange itself is ten lines.

The geometry of ``M``'s top-2 plane (:func:`plane_geometry`: top-2 variance, radius spread and
evenness of the sorted angles, in the whitened plane so that no linear read-out can tell our
circle from the model's ellipse) says whether a code of dimension <= 2 is a circle, and whether
its points are evenly spaced as the paper's ``cs(k)`` are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import tasks
from interp.inspect.tools import hooks

#: the variables and their sites (``L``: the last layer)
SITES = {"value": "blocks.{L}.attn.hook_v", "query": "blocks.{L}.attn.hook_q"}


@dataclass(frozen=True)
class CodeMeasure:
    """One variable's code (module docstring): its interchange accuracies and its geometry."""

    variable: str  # "value" or "query"
    n: int
    iia: tuple[tuple[int, float], ...]  # (k, IIA(k)) for the k tried: 1, 2, the rank, a bisection
    iia_full: float  # the whole vector interchanged: is the variable carried at this site at all?
    spectrum: tuple[float, ...]  # the code table's singular values squared, as shares (sum 1)
    top2: float  # circle test of the code table: top-2 variance share
    rcv: float  # radius std / mean in the top-2 plane
    gap: float  # smallest gap / even gap of the sorted angles (1: evenly spaced)
    cos_mean: float  # mean |cos| between distinct centred code vectors (one-hot: 1 / (n - 1))
    iia_min: float = field(default=math.nan)
    axes: Tensor | None = field(default=None, repr=False, compare=False)  # [rank, d] principal axes

    @property
    def dim(self) -> int | None:
        """The least k with IIA(k) >= iia_min; None when no subspace carries the variable."""
        for k, a in self.iia:
            if a >= self.iia_min:
                return k
        return None

    @property
    def participation(self) -> float:
        """Participation ratio of the spectrum: ~2 for a circle, ~n - 1 for a one-hot table."""
        s = torch.tensor(self.spectrum, dtype=torch.float64)
        return float(s.sum() ** 2 / s.pow(2).sum()) if s.sum() > 0 else 0.0

    def summary(self, prefix: str | None = None) -> dict:
        p = (prefix or self.variable) + "_"
        dim = self.dim
        return {f"{p}dim": math.nan if dim is None else float(dim),
                f"{p}iia1": dict(self.iia).get(1, math.nan), f"{p}iia2": dict(self.iia).get(2, math.nan),
                f"{p}iia_full": self.iia_full, f"{p}pr": self.participation,
                f"{p}top2": self.top2, f"{p}rcv": self.rcv, f"{p}gap": self.gap,
                f"{p}cos": self.cos_mean}


def _site(model, variable: str) -> str:
    if variable not in SITES:
        raise ValueError(f"variable={variable!r}; accepted: one of {tuple(SITES)}")
    return SITES[variable].format(L=model.cfg.n_layers - 1)


def _read_pos(task: tasks.Task, n: int, view: hooks.TaskView, variable: str, at: str) -> Tensor:
    """[batch] the position each input's variable is read at."""
    if variable == "query":
        return torch.full_like(view.target, task.query_pos(n))
    return hooks.slot_positions_at(task.case, n, at)[view.slot_of_target]


def _with_symbol(task: tasks.Task, n: int, view: hooks.TaskView, variable: str,
                 symbol: Int[Tensor, "batch"]) -> Int[Tensor, "batch pos"]:
    """The base inputs with the variable set to ``symbol``: the read slot's value, or the target."""
    if variable == "query":
        tokens = view.tokens.clone()
        tokens[:, task.query_pos(n)] = task.query_token(n, symbol)
        return tokens
    values = view.values.clone()
    values[torch.arange(len(symbol)), view.slot_of_target] = symbol
    return tasks.encode(task.case, view.keys if task.permuted else None, values, view.target)


def _vectors(model, name: str, tokens, pos) -> Float[Tensor, "batch d"]:
    """The site's vectors (heads flattened) at one position per input, in float64."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda x: x == name)
    act = cache[name]  # [batch, pos, head_index, d_head]
    return act[torch.arange(len(pos)), pos].flatten(1).double()


def code_table(model, variable: str, view: hooks.TaskView, *, contexts: int = 32,
               at: str = "value") -> Float[Tensor, "u d"]:
    """The code table M [u, d]: per symbol u the site's vector with the variable set to u,
    centred over u within each of the first ``contexts`` inputs, then averaged over them."""
    task, n = tasks.get(view.case), view.n
    name = _site(model, variable)
    base = hooks.TaskView(view.case, n, *(x[:contexts] for x in (view.tokens, view.keys, view.values,
                                                                  view.target)), view.slot_pos)
    b = len(base.target)
    rows = []
    for u in range(n):
        tokens = _with_symbol(task, n, base, variable, torch.full((b,), u, dtype=torch.long))
        rows.append(_vectors(model, name, tokens, _read_pos(task, n, base, variable, at)))
    V = torch.stack(rows, dim=1)  # [context, u, d]
    return (V - V.mean(dim=1, keepdim=True)).mean(dim=0)


@dataclass(frozen=True)
class Pairs:
    """Base inputs ``view``, their sources' vectors at the site and what the variable predicts."""

    view: hooks.TaskView
    name: str  # the site's hook name
    pos: Tensor  # [batch] read position
    src: Tensor  # [batch, head_index, d_head] the source's vector there
    other: Tensor  # [batch] the source's symbol (value u', or target t')
    expect: Tensor  # [batch] query: the slot holding key t'
    slots: Tensor  # [n] read position of slot j


def pairs(model, variable: str, view: hooks.TaskView, *, seed: int = 0, at: str = "value") -> Pairs:
    """Each base input of ``view`` with a source: the variable set to another symbol (drawn with
    ``seed``), and the source's vector at the site, run once."""
    task, n = tasks.get(view.case), view.n
    name = _site(model, variable)
    batch = len(view.target)
    g = torch.Generator().manual_seed(seed)
    own = view.target if variable == "query" else view.answer
    other = (own + torch.randint(1, n, (batch,), generator=g)) % n  # a symbol != the base's
    source = _with_symbol(task, n, view, variable, other)
    pos = _read_pos(task, n, view, variable, at)
    with torch.no_grad():
        _, cache = model.run_with_cache(source, names_filter=lambda x: x == name)
    return Pairs(view, name, pos, cache[name][torch.arange(batch), pos],  # [batch, head_index, d_head]
                 other, (view.keys == other[:, None]).int().argmax(1),
                 hooks.slot_positions_at(task.case, n, at))


def interchanger(model, variable: str, view: hooks.TaskView, *, seed: int = 0, at: str = "value"):
    """A function ``basis -> IIA`` (the sources drawn and run once, :func:`pairs`): the share of
    base runs that, with the site's vector moved along ``basis`` (rows orthonormal; None: the
    whole vector) to the source's, behave as the variable predicts.

    value: the answer becomes the source's value u'. query: the last layer's final-position
    attention, argmax over the slots' read positions, moves to the slot whose key is the source's
    target t' (the match position, the variable the key code feeds; the answer itself is not
    asked, since cases 1 and 5 of the paper also read the target from the residual stream)."""
    p = pairs(model, variable, view, seed=seed, at=at)

    def iia(basis) -> float:
        with torch.no_grad():
            logits, pattern = run_moved(model, p, basis)
        if variable == "value":
            return float((logits.argmax(-1) == p.other).float().mean())
        picked = pattern.sum(1)[:, p.slots].argmax(-1)  # the slot attended most
        return float((picked == p.expect).float().mean())

    return iia


def run_moved(model, p: Pairs, basis) -> tuple[Tensor, Tensor]:
    """The base runs of ``p`` with the site's vector moved along ``basis`` ([k, d], rows
    orthonormal, float64; None: the whole vector) to the source's: the final logits [batch, u]
    and the last layer's final-position attention [batch, head_index, key_pos]. Differentiable
    in ``basis`` (:mod:`interp.inspect.mechanism.das` learns it)."""
    rows, L, seen = torch.arange(len(p.pos)), model.cfg.n_layers - 1, {}

    def hook(act, hook):
        here = act[rows, p.pos]  # [batch, head_index, d_head]
        delta = (p.src - here).flatten(1).double()
        if basis is not None:
            delta = (delta @ basis.T) @ basis
        act = act.clone()
        act[rows, p.pos] = here + delta.to(act.dtype).view_as(here)
        return act

    def keep(act, hook):  # [batch, head_index, query_pos, key_pos]
        seen["pattern"] = act[:, :, -1]
        return act

    fwd = [(p.name, hook), (f"blocks.{L}.attn.hook_pattern", keep)]
    logits = model.run_with_hooks(p.view.tokens, fwd_hooks=fwd)[:, -1]
    return logits, seen["pattern"]


def plane_geometry(M: Float[Tensor, "u d"]) -> tuple[float, float, float]:
    """``(top2, rcv, gap)`` of a code table, blind to any linear map of the code: the share of
    the centred variance in the top-2 principal plane, then in that plane *whitened* (its two
    axes scaled to unit variance, so an ellipse that a linear read-out sees as a circle counts
    as one) the radius std / mean about the fitted circle and the smallest angular gap / even
    gap. Evenly spaced points on any ellipse give rcv 0 and gap 1 (up to rounding)."""
    from interp.inspect.tools import geometry

    X = M.detach().double()
    X = X - X.mean(0, keepdim=True)
    U, s, _ = torch.linalg.svd(X, full_matrices=False)
    s2 = s.pow(2)
    if len(s) < 2 or float(s2.sum()) == 0.0 or float(s[1]) <= 1e-12 * float(s[0]):
        return (1.0 if float(s2.sum()) > 0 else math.nan), math.nan, 0.0
    top2 = float(s2[:2].sum() / s2.sum())
    P = U[:, :2]  # whitened top-2 coordinates
    centre, radii = geometry.fit_circle(P)
    rcv = float(radii.std() / radii.mean()) if float(radii.mean()) > 0 else math.nan
    angles = torch.atan2(P[:, 1] - centre[1], P[:, 0] - centre[0])
    _, gaps = geometry.angle_gaps(angles)
    return top2, rcv, float(gaps.min() / (2 * math.pi / len(P)))


def _mean_abs_cos(M: Tensor) -> float:
    norms = M.norm(dim=1, keepdim=True)
    keep = norms[:, 0] > 1e-12 * float(norms.max().clamp_min(1e-300))
    X = M[keep] / norms[keep]
    if len(X) < 2:
        return math.nan
    C = (X @ X.T).abs()
    return float((C.sum() - C.diagonal().sum()) / (len(X) * (len(X) - 1)))


@tasks.reads_task
def measure_code(model, variable: str = "value", *, case: int | None = None, n: int | None = None,
                 batch_size: int = 512, contexts: int = 32, seed: int = 0, at: str = "value",
                 iia_min: float | None = None, max_dim: int | None = None) -> CodeMeasure:
    """One variable's code (module docstring). IIA(k) is computed at k = 1, 2 and the code
    table's rank (or ``max_dim``), then bisected for the least k reaching ``iia_min`` (default:
    the calibrated threshold), taking IIA(k) as rising in k (principal axes are nested);
    ``iia_full`` interchanges the whole vector."""
    from interp.inspect.mechanism.calibration import THRESHOLDS

    task, n = hooks.check_model(model, case=case, n=n)
    if variable not in SITES:
        raise ValueError(f"variable={variable!r}; accepted: one of {tuple(SITES)}")
    if at not in ("value", "key") or (at == "key" and not task.consecutive):
        raise ValueError(f"at={at!r}; accepted: 'value', or 'key' in the consecutive cases 4-5")
    iia_min = THRESHOLDS["iia_min"] if iia_min is None else iia_min
    view = hooks.read(task.case, n, hooks.sample_inputs(task.case, n, max(batch_size, n), seed=seed))
    M = code_table(model, variable, view, contexts=contexts, at=at)
    _, s, Vh = torch.linalg.svd(M, full_matrices=False)
    s2 = s.pow(2)
    total = float(s2.sum())
    rank = int((s > 1e-9 * float(s.max().clamp_min(1e-300))).sum()) if total > 0 else 0
    top = min(rank, max_dim or rank)
    run = interchanger(model, variable, view, seed=seed + 1, at=at)
    tried = {}  # k -> IIA(k); bisection for the least k reaching iia_min, IIA(k) taken as rising
    for k in (1, 2):
        if k <= top:
            tried[k] = run(Vh[:k])
    lo, hi = 2, top  # IIA(lo) < iia_min; search (lo, hi]
    if top >= 3 and tried[2] < iia_min:
        tried[top] = run(Vh[:top])
        if tried[top] >= iia_min:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                tried[mid] = run(Vh[:mid])
                lo, hi = (lo, mid) if tried[mid] >= iia_min else (mid, hi)
    full = run(None)
    top2, rcv, gap = plane_geometry(M) if n >= 3 and total > 0 else (math.nan,) * 3
    return CodeMeasure(variable=variable, n=n, iia=tuple(sorted(tried.items())), iia_full=full,
                       spectrum=tuple(float(x) / total for x in s2) if total > 0 else (),
                       top2=top2, rcv=rcv, gap=gap, cos_mean=_mean_abs_cos(M), iia_min=iia_min,
                       axes=Vh[:rank])


@tasks.reads_task
def summary(model, *, case: int | None = None, n: int | None = None, batch_size: int = 512,
            seed: int = 0, at: str = "value") -> dict:
    """Both variables' codes as flat columns (``value_dim``, ``value_iia2``, ..., ``query_dim``,
    ...) for :func:`interp.inspect.mechanism.measure.measure`, both read where the last layer reads
    (``at``): a model measured at the key position (the mirror) has its query's match asked
    among the key positions."""
    out = {}
    for variable in SITES:
        out.update(measure_code(model, variable, case=case, n=n, batch_size=batch_size, seed=seed,
                                at=at).summary())
    return out
