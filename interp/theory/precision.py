"""How many bits a model needs: round every activation and weight to p bits, find the least p.

The paper's theorems count precision p in the c-size h*d*p (Section 3), under the "p-bit rational
precision assumption" of Sanford et al.: every number the transformer computes can be rounded to
p bits without changing its behaviour. This module makes that operational.

Formats (``Format.kind``):

* ``"fixed"`` (the default, and the one that counts bits honestly): a p-bit signed fixed-point
  number, 1 sign bit + I integer bits + F = p - 1 - I fractional bits, i.e. a multiple of 2^-F
  in [-2^I, 2^I - 2^-F] (round half to even, saturate at the ends). I is one format for the
  whole model: the least I with 2^I > max |x| over every weight and every activation of the
  unrounded model on the probe inputs, so nothing saturates. A p-bit fixed-point number is
  exactly p bits on a wire, which is what the communication argument of Theorem 3.4 counts.
* ``"float"``: p significant bits (the mantissa, implicit leading bit included; float32 has
  24, float16 11), with an unbounded exponent. This is what hardware rounding does; it does
  not count the exponent, so it is a lower bound on the bits a real number format needs.

What is rounded: every weight of the model, and every activation at every TransformerLens hook
point (``hook_embed``, ``hook_pos_embed``, ``hook_resid_pre``, ``hook_q/k/v``,
``hook_attn_scores``, ``hook_pattern``, ``hook_z``, ``hook_attn_out``, ``hook_resid_mid``,
``mlp.hook_pre/post``, ``hook_mlp_out``, ``hook_resid_post``, ``unembed.hook_in/out``: the
logits). Scores are rounded before the hard-attention mode reads them (the rounding hook is
prepended), and the pattern is rounded after the mode has replaced it. All arithmetic between
two hook points is float64, so p <= 52 is resolved exactly.

Two forward passes compute this, and ``tests/theory/test_precision.py`` checks they agree:

* :func:`hooked_final_logits` rounds through real TransformerLens hooks on ``model(tokens)``.
* :func:`interp.core.forward.final_logits` with ``fwd_hooks=``, the package's one evaluation pass:
  only the final query row of the last layer is computed (O(batch * pos * d) instead of
  O(batch * pos^2 * d)), op for op as TransformerLens does it, calling the same rounding hook
  (``Format.round_hook(act, hook)``: TransformerLens's signature) on the same tensors; a
  token-independent first layer (case 5's construction attends by position only) is computed
  once per batch, which makes n = 10^4 feasible.

Exact means: on every probe input the correct output is the unique maximum of the rounded
logits (a tie counts as wrong). With ``reference=True`` (trained models) "correct" is the
unrounded model's own prediction instead: the p-bit assumption verbatim.

The probe inputs (:class:`ProbeSet`) exercise every comparison the constructions make: every
target key t in [n], with f(t) = t + s mod n so that every output value is an answer, keys
ordered so that t's neighbours on the circle (t - 1, t + 1: the keys whose scores are closest)
come before t, where a rounding tie would win under leftmost attention; plus random inputs.

Axes follow TransformerLens: ``batch pos d_model``, ``head_index d_head``, ``query_pos key_pos``.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import asdict, dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import tasks
from interp.core.bounds import theorem_3_4_bound  # noqa: F401 - precision.theorem_3_4_bound, as before
from interp.core.forward import FwdHooks, final_logits, hook_runner
from interp.theory.probe_inputs import ProbeSet, check_probes  # noqa: F401 - precision.ProbeSet, as before

log = logging.getLogger(__name__)

KINDS = ("fixed", "float")
#: Largest p resolvable in float64 arithmetic (53-bit significand).
MAX_BITS = {"fixed": 53, "float": 52}


def at_every_hook(hook) -> FwdHooks:
    """``fwd_hooks`` that put TransformerLens hook ``hook(act, hook)`` at every hook point."""
    return [(lambda name: True, hook)]


# --------------------------------------------------------------------------------------------
# number formats


@dataclass(frozen=True)
class Format:
    """A p-bit number format: ``kind`` "fixed" (with ``int_bits`` I) or "float" (mantissa)."""

    kind: str
    bits: int
    int_bits: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}; accepted: one of {KINDS}")
        if not isinstance(self.int_bits, int) or self.int_bits < 0:
            raise ValueError(f"int_bits={self.int_bits!r}; accepted: an integer >= 0")
        lo = self.int_bits + 2 if self.kind == "fixed" else 1
        if not isinstance(self.bits, int) or not lo <= self.bits <= MAX_BITS[self.kind]:
            raise ValueError(
                f"bits={self.bits!r} for a {self.kind} format with int_bits={self.int_bits}; "
                f"accepted: {lo}..{MAX_BITS[self.kind]}"
            )

    @property
    def frac_bits(self) -> int:
        """F, the fractional bits of a fixed-point format (p - 1 - I)."""
        return self.bits - 1 - self.int_bits

    def round(self, x: Tensor) -> Tensor:
        """x rounded to this format (float64 in, float64 out; round half to even)."""
        if self.kind == "fixed":
            scale = 2.0**self.frac_bits
            top = 2.0 ** (self.bits - 1)
            return (x * scale).round_().clamp_(-top, top - 1).div_(scale)  # all exact in float64
        mantissa, exponent = torch.frexp(x)  # x = mantissa * 2**exponent, |mantissa| in [0.5, 1)
        scale = 2.0**self.bits
        return torch.ldexp(mantissa.mul_(scale).round_().div_(scale), exponent)

    def round_hook(self, act: Tensor, hook) -> Tensor:
        """A TransformerLens hook: ``act`` rounded to this format."""
        return self.round(act)



def int_bits_for(max_abs: float) -> int:
    """Least I >= 0 with 2^I > max_abs: a fixed-point range that holds every value."""
    return 0 if max_abs < 1 else int(math.floor(math.log2(max_abs))) + 1


class MaxAbs:
    """A TransformerLens hook that records the largest |activation| per hook name and changes
    nothing (put it at every point with :func:`at_every_hook`)."""

    def __init__(self):
        self.per_hook: dict[str, float] = {}

    def __call__(self, act: Tensor, hook) -> None:
        m = float(act.detach().abs().max()) if act.numel() else 0.0
        self.per_hook[hook.name] = max(self.per_hook.get(hook.name, 0.0), m)

    @property
    def value(self) -> float:
        return max(self.per_hook.values(), default=0.0)


# --------------------------------------------------------------------------------------------
# models in float64, with rounded weights


def as_float64(model, fmt: Format | None = None):
    """A float64 copy of ``model`` (hooks and attention modes kept), weights rounded to fmt."""
    m = copy.deepcopy(model)
    m.cfg.dtype = torch.float64
    with torch.no_grad():
        for p in m.parameters():
            p.data = p.data.to(torch.float64)
            if fmt is not None:
                p.data = fmt.round(p.data)
    return m


def max_abs_weight(model) -> float:
    return max((float(p.detach().abs().max()) for p in model.parameters() if p.numel()), default=0.0)


# --------------------------------------------------------------------------------------------
# forward passes: interp.core.forward.final_logits (fwd_hooks=) and TransformerLens's own, hooked


def hooked_final_logits(
    model, tokens: Int[Tensor, "batch pos"], fwd_hooks: FwdHooks = ()
) -> Float[Tensor, "batch d_vocab_out"]:
    """``model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)[:, -1]``, except that hooks on
    ``hook_attn_scores`` are prepended, so attention modes read the hooked scores (what
    ``final_logits`` does); every other hook runs after the modes' (the pattern is hooked after
    the mode set it). The hooks are removed afterwards; the model's own (permanent) hooks stay.
    """
    hook_runner(model, fwd_hooks)  # an unknown name: the KeyError final_logits raises
    added = []
    try:
        for name, hp in model.hook_dict.items():
            fns = [fn for key, fn in fwd_hooks if (key == name if isinstance(key, str) else key(name))]
            prepend = name.endswith("hook_attn_scores")
            for fn in reversed(fns) if prepend else fns:  # list order either way
                before = list(hp.fwd_hooks)
                hp.add_hook(fn, prepend=prepend)
                added += [(hp, h) for h in hp.fwd_hooks if all(h is not b for b in before)]
        return model(tokens)[:, -1]
    finally:
        for hp, handle in added:
            handle.hook.remove()
            hp.fwd_hooks = [h for h in hp.fwd_hooks if h is not handle]


# --------------------------------------------------------------------------------------------
# exactness and the least precision


@dataclass(frozen=True)
class Check:
    exact: bool
    inputs: int  # inputs checked (all of them when exact; up to the first failing chunk if not)
    wrong: int
    first_wrong: list[int] | None = None


def strict_correct(logits: Tensor, target: Tensor) -> Tensor:
    """target is the unique maximum of each row of logits."""
    top = logits.max(dim=-1, keepdim=True).values
    return (logits.gather(-1, target[:, None])[:, 0] == top[:, 0]) & ((logits == top).sum(-1) == 1)


def check(
    model,
    probes,
    fwd_hooks: FwdHooks = (),
    *,
    reference: list[Tensor] | None = None,
    stop_early: bool = True,
    method: str = "fast",
) -> Check:
    """Is the model (with ``fwd_hooks``: TransformerLens's list) exact on every probe input?

    ``reference`` (one tensor per chunk) replaces the answers: behaviour preservation.
    """
    check_probes(model, probes)
    cache: dict = {}

    def forward(m, tokens, hooks):
        if method == "fast":
            return final_logits(m, tokens, fwd_hooks=hooks, cache=cache)
        return hooked_final_logits(m, tokens, hooks)

    total = wrong = 0
    first = None
    with torch.no_grad():
        for i, (tokens, answers) in enumerate(probes):
            target = answers if reference is None else reference[i]
            ok = strict_correct(forward(model, tokens, fwd_hooks), target)
            total += len(ok)
            bad = int((~ok).sum())
            if bad and first is None:
                first = tokens[(~ok).nonzero()[0, 0]].tolist()
            wrong += bad
            if bad and stop_early:
                break
    return Check(wrong == 0, total, wrong, first)


@dataclass(frozen=True)
class PrecisionResult:
    """The least p at which a model stays exact, and what was measured to find it."""

    kind: str
    bits: int | None  # None: not exact at any p <= MAX_BITS (or not exact unrounded)
    int_bits: int
    max_abs: float
    inputs: int
    evaluated: dict[int, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["evaluated"] = {str(k): v for k, v in sorted(self.evaluated.items())}
        return d


def least_precision(
    model,
    probes,
    kind: str = "fixed",
    *,
    reference: bool = False,
    hint: int | None = None,
    method: str = "fast",
    below: int = 1,
    int_bits: int | None = None,
) -> PrecisionResult:
    """The least p at which ``model`` rounded to p bits (weights and every hook) stays exact.

    The search brackets from ``hint`` (default 12 significant bits) and bisects, assuming
    exactness is monotone in p; ``below`` more values under the answer are checked to fail
    (``evaluated`` records every p tried). ``reference=True`` compares with the unrounded
    model's own predictions instead of the answers (for trained models).

    The fixed-point range I (``int_bits``, default: measured) covers every activation the
    output depends on, which is what the fast path computes (the last layer at the final
    position only). The hooked path also rounds the last layer at the other positions; those
    may saturate, which cannot change the output, so pass the fast path's I to compare the two.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; accepted: one of {KINDS}")
    check_probes(model, probes)
    start = time.perf_counter()
    base = as_float64(model)
    rec = MaxAbs()
    refs, ok_base, total = [], True, 0
    cache: dict = {}
    with torch.no_grad():
        for tokens, answers in probes:
            if method == "fast":
                logits = final_logits(base, tokens, fwd_hooks=at_every_hook(rec), cache=cache)
            else:
                logits = hooked_final_logits(base, tokens, at_every_hook(rec))
            total += len(answers)
            if reference:
                refs.append(logits.argmax(-1))
            elif not bool(strict_correct(logits, answers).all()):
                ok_base = False
    max_abs = max(rec.value, max_abs_weight(base))
    I = (int_bits_for(max_abs) if int_bits is None else int_bits) if kind == "fixed" else 0
    evaluated: dict[int, bool] = {}

    def ok(p: int) -> bool:
        if p not in evaluated:
            fmt = Format(kind, p, I)
            m = as_float64(base, fmt)
            hooks = at_every_hook(fmt.round_hook)
            evaluated[p] = check(m, probes, hooks, reference=refs if reference else None, method=method).exact
            log.info("%s p=%d: %s", kind, p, evaluated[p])
        return evaluated[p]

    lo_bound = I + 2 if kind == "fixed" else 1
    top = MAX_BITS[kind]
    if not ok_base:
        return PrecisionResult(kind, None, I, max_abs, total, evaluated, time.perf_counter() - start)
    p = min(top, max(lo_bound, hint if hint is not None else lo_bound + 12))
    if ok(p):  # walk down: exact at hi
        hi, step = p, 1
        while hi - step >= lo_bound and ok(hi - step):
            hi, step = hi - step, step * 2
        lo = max(lo_bound - 1, hi - step)  # lo fails (or is below the format)
    else:
        lo, step = p, 1
        while lo < top and not ok(min(top, lo + step)):
            lo, step = min(top, lo + step), step * 2
        if lo >= top:  # not exact even at the largest p float64 resolves
            return PrecisionResult(kind, None, I, max_abs, total, evaluated, time.perf_counter() - start)
        hi = min(top, lo + step)
    while hi - lo > 1:
        mid = (hi + lo) // 2
        hi, lo = (mid, lo) if ok(mid) else (hi, mid)
    for q in range(hi - 1, max(lo_bound, hi - below) - 1, -1):
        ok(q)
    return PrecisionResult(kind, hi, I, max_abs, total, evaluated, time.perf_counter() - start)


# --------------------------------------------------------------------------------------------
# the law over n, c-size and the Theorem 3.4 bound


def c_size(model, bits: int) -> int:
    """h * d * p (heads per layer, embedding dimension d_model, precision)."""
    return model.cfg.n_heads * model.cfg.d_model * bits


def construction(case: int, n: int, which: str = "paper"):
    """The model measured (float64): the paper's hard-attention construction, or another
    construction registered for the task (``"theorem35"``: Theorem 3.5's, case 5)."""
    from interp.core import constructions
    from interp.theory import softmax_construction  # noqa: F401 - registers "theorem35"

    if which == "paper":
        return constructions.build(case, n, dtype=torch.float64, check_precision=False)
    task = tasks.get(case)
    return task.builder(which)(task, n, torch.float64)


def measure(case: int, n: int, kind: str, *, which: str = "paper", hint=None, n_random=64, seed=0) -> dict:
    """One row of the precision law: least p, c-size, the Theorem 3.4 bound (case 5)."""
    model = construction(case, n, which)
    L = tasks.seq_len(case, n)
    probes = ProbeSet(case, n, n_random=n_random, seed=seed, chunk=max(1, min(512, 2_000_000 // (L * 8))))
    r = least_precision(model, probes, kind, hint=hint)
    return dict(
        case=case, n=n, which=which, layers=model.cfg.n_layers, kind=kind, bits=r.bits,
        int_bits=r.int_bits, max_abs=r.max_abs, inputs=r.inputs, h=model.cfg.n_heads,
        d=model.cfg.d_model, c_size=None if r.bits is None else c_size(model, r.bits),
        bound_3_4=theorem_3_4_bound(n) if case == 5 else None,  # Theorem 3.4 is stated for case 5
        evaluated=r.to_dict()["evaluated"], seconds=round(r.seconds, 2),
    )


def fit_law(rows: list[dict], min_n: int = 8) -> dict:
    """Least squares p = a log2(n) + b over rows with n >= min_n (per case and kind)."""
    out = {}
    keys = sorted({(r["case"], r["which"], r["kind"]) for r in rows})
    for key in keys:
        pts = [(math.log2(r["n"]), r["bits"]) for r in rows
               if (r["case"], r["which"], r["kind"]) == key and r["n"] >= min_n and r["bits"] is not None]
        if len(pts) < 2:
            continue
        x = torch.tensor([p[0] for p in pts], dtype=torch.float64)
        y = torch.tensor([p[1] for p in pts], dtype=torch.float64)
        A = torch.stack([x, torch.ones_like(x)], dim=1)
        sol = torch.linalg.lstsq(A, y[:, None]).solution[:, 0]
        resid = (A @ sol - y).abs().max()
        out[f"case{key[0]}/{key[1]}/{key[2]}"] = dict(
            slope=float(sol[0]), intercept=float(sol[1]), max_residual=float(resid), points=len(pts)
        )
    return out
