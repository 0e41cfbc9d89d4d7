"""Graded progress measures (issue 52): how far one model is from the construction, none gated
on its accuracy.

The labels (:mod:`interp.inspect.mechanism.levels`) switch on only once a model answers; these
measures move before it does. Each reads one model on ``batch_size`` inputs of
:func:`interp.inspect.tools.hooks.sample_inputs` (targets cycling through 0..n-1, the tables of
permutations as in training), validated once (:func:`interp.inspect.tools.hooks.checked`: one head
per layer). ``L`` is the last layer, the one that reads the answer; "the matching slot" is the
slot j* whose key is the target i*; its *read position* is the position the last layer reads it
at (``at``, below). Axis names are TransformerLens's (``batch``, ``pos``, ``key_pos``).

=================== ============================================================================
column              meaning (scale; the constructions' value)
=================== ============================================================================
match_margin        mean over inputs of the QK score margin at the final position
                    (``blocks.L.attn.hook_attn_scores``, after the 1/sqrt(d_head) scale): the
                    score of j*'s read position minus the best score of another slot's read
                    position. Natural-log odds of softmax attention: a margin m puts e^m times
                    the weight on j* as on the best other slot (unbounded; > 0)
match_pos           fraction of inputs with that margin > 0 ([0, 1]; 1). Beside ``qk_diag``
                    (:mod:`interp.inspect.mechanism.measure`: the per-target *mean* QK matrix's
                    rows peaking on their diagonal), this is per input, before averaging
match_mass          mean over inputs of the final position's attention weight
                    (``blocks.L.attn.hook_pattern``, the pattern used: a hard mode's, too) on j*'s
                    read position ([0, 1]; 1; uniform attention gives 1 / seq_len)
readout_acc         answer accuracy with the last layer's final-position attention set one-hot on
                    j*'s read position (a hook on ``blocks.L.attn.hook_pattern``): the read-out
                    given the right slot, apart from the routing ([0, 1]; 1; chance ~1/n)
value_iia_code,     the interchange-intervention accuracy (:func:`interp.inspect.mechanism.codes.interchanger`,
query_iia_code      not thresholded) of the value (``hook_v`` at j*'s read position: the answer
                    becomes the source's value) and of the target key (``hook_q`` at the final
                    position: the attention's argmax moves to the source target's slot), along
                    the code table's principal axes: all of them with a non-zero singular value
                    (the span the symbol moves the site in), or the top ``iia_dims`` ([0, 1]; 1;
                    chance ~1/n)
answer_share,       the share of the final position's residual (``blocks.L.hook_resid_post``)
answer_share2       variance across inputs, inside the ``share_space``, that the answer f(i*)
                    explains (between-answer over total variance: eta squared); ``answer_share2``
                    counts only the between-answer variance in its top-2 principal plane, the
                    construction's circle ([0, 1]; 1; a residual unrelated to the answer gives
                    about (n - 1) / batch_size)
=================== ============================================================================

Choices, each a keyword:

* ``at``: where the last layer reads slot j: ``"value"`` (its value position, the construction's:
  Theorems 3.1-3.3 and 3.8), ``"key"`` (the key position 2j of the consecutive cases 4-5, where a
  two-layer "mirror" model reads), or ``"auto"`` (default): ``"key"`` for a two-layer consecutive
  model whose last layer puts more mean weight on the key positions than on the value positions,
  as :func:`interp.inspect.mechanism.measure.measure` decides its ``at``. The choice made is returned
  as ``at``.
* ``share_space``: ``"unembed"`` (default): the residual projected orthogonally onto the span of
  ``W_U``'s columns centred over the outputs, the directions that change one logit against
  another (a residual component outside it, or along the all-equal logit direction, cannot move
  the answer); ``"resid"``: the whole residual. With d_model <= n - 1 the two agree. A
  permutation of ``W_U``'s columns keeps the span, so the share does not see a shuffled read-out:
  ``readout_acc`` does.
* ``iia_dims``: None (default, the code table's rank) or k >= 1 (its top k principal axes; 2 is
  the construction's plane).

Measures are means over one sample of inputs: a finite-sample bias (the share's (n - 1) /
batch_size) and the spread across inputs are the calibration's to state
(``experiments/calibration/progress.md``), not corrected here.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import tasks
from interp.inspect.mechanism import codes
from interp.inspect.tools import hooks

#: bumped when a column below changes its definition (timelines record it per row)
VERSION = 1
COLUMNS = ("match_margin", "match_pos", "match_mass", "readout_acc", "value_iia_code",
           "query_iia_code", "answer_share", "answer_share2")
ATS = ("auto", "value", "key")
SHARE_SPACES = ("unembed", "resid")


def _check_options(batch_size, seed, at, iia_dims, share_space, contexts) -> None:
    def integer(x):
        return isinstance(x, int) and not isinstance(x, bool)

    if not integer(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: an integer >= 1")
    if not integer(seed):
        raise ValueError(f"seed={seed!r}; accepted: an integer")
    if at not in ATS:
        raise ValueError(f"at={at!r}; accepted: one of {ATS}")
    if iia_dims is not None and (not integer(iia_dims) or iia_dims < 1):
        raise ValueError(f"iia_dims={iia_dims!r}; accepted: None (the code table's rank) or an integer >= 1")
    if share_space not in SHARE_SPACES:
        raise ValueError(f"share_space={share_space!r}; accepted: one of {SHARE_SPACES}")
    if not integer(contexts) or contexts < 1:
        raise ValueError(f"contexts={contexts!r}; accepted: an integer >= 1")


@tasks.reads_task
def progress(model, *, case: int | None = None, n: int | None = None, batch_size: int = 256,
             seed: int = 0, at: str = "auto", iia_dims: int | None = None,
             share_space: str = "unembed", contexts: int = 32) -> dict:
    """Every column of the module docstring for one model, a flat dict (with ``at``, the read
    position chosen). ``contexts``: the inputs the code tables average over
    (:func:`interp.inspect.mechanism.codes.code_table`). Bad options are refused by name before
    the model is run."""
    _check_options(batch_size, seed, at, iia_dims, share_space, contexts)
    with hooks.checked(model, case=case, n=n) as (task, n):
        if at == "key" and not task.consecutive:
            raise ValueError(f"at='key' needs keys at their own positions (cases 4, 5); the model's case is {task.case}")
        view = hooks.read(task.case, n, hooks.sample_inputs(task.case, n, max(batch_size, n), seed=seed))
        seen = _run(model, view)
        at = _choose_at(task, model.cfg.n_layers, view, seen["pattern"]) if at == "auto" else at
        slots = hooks.slot_positions_at(task.case, n, at)  # [n] read position of slot j
        out = dict(at=at, **routing(seen["scores"], seen["pattern"], view.slot_of_target, slots))
        out["readout_acc"] = readout_accuracy(model, view, slots[view.slot_of_target])
        for variable in codes.SITES:
            out[f"{variable}_iia_code"] = code_iia(model, variable, view, at=at, dims=iia_dims,
                                                   contexts=contexts, seed=seed)
        resid = seen["resid"]
        if share_space == "unembed":
            resid = resid @ unembed_basis(model).T
        out["answer_share"], out["answer_share2"] = answer_shares(resid, view.answer, n)
        return out


def _run(model, view: hooks.TaskView) -> dict:
    """One pass: the last layer's final-position scores and pattern, and its residual there."""
    L = model.cfg.n_layers - 1
    names = {f"blocks.{L}.attn.hook_attn_scores", f"blocks.{L}.attn.hook_pattern", f"blocks.{L}.hook_resid_post"}
    with torch.no_grad():
        _, cache = model.run_with_cache(view.tokens, names_filter=lambda name: name in names)
    return dict(scores=cache[f"blocks.{L}.attn.hook_attn_scores"][:, 0, -1].double(),  # [batch, key_pos]
                pattern=cache[f"blocks.{L}.attn.hook_pattern"][:, 0, -1].double(),  # [batch, key_pos]
                resid=cache[f"blocks.{L}.hook_resid_post"][:, -1].double())  # [batch, d_model]


def _choose_at(task, n_layers: int, view: hooks.TaskView, pattern: Tensor) -> str:
    """``at="auto"``: "key" for a two-layer consecutive model weighing its key positions more."""
    if not (task.consecutive and n_layers == 2):
        return "value"
    j = view.slot_of_target
    on = {at: float(pattern.gather(1, hooks.slot_positions_at(task.case, view.n, at)[j][:, None]).mean())
          for at in ("value", "key")}
    return "key" if on["key"] > on["value"] else "value"


def routing(scores: Float[Tensor, "batch key_pos"], pattern: Float[Tensor, "batch key_pos"],
            slot: Int[Tensor, "batch"], slots: Int[Tensor, "n"]) -> dict:
    """``match_margin``, ``match_pos`` and ``match_mass`` from the final position's scores and
    pattern, the matching slot of each input and every slot's read position."""
    at_slots = scores[:, slots]  # [batch, n]
    rows = torch.arange(len(slot))
    mine = at_slots[rows, slot]
    others = at_slots.clone()
    others[rows, slot] = -math.inf
    margin = mine - others.max(dim=1).values  # [batch]; hard modes keep the real scores (attention.py)
    return dict(match_margin=float(margin.mean()), match_pos=float((margin > 0).double().mean()),
                match_mass=float(pattern[rows, slots[slot]].mean()))


def readout_accuracy(model, view: hooks.TaskView, read_pos: Int[Tensor, "batch"]) -> float:
    """Accuracy with the last layer's final-position attention one-hot on ``read_pos`` (earlier
    layers and other query positions as the model has them): the OV read-out given the slot."""
    L = model.cfg.n_layers - 1
    rows = torch.arange(len(read_pos))

    def force(pattern, hook):  # [batch, head_index, query_pos, key_pos]
        pattern = pattern.clone()
        pattern[:, :, -1] = 0.0
        pattern[rows, :, -1, read_pos] = 1.0
        return pattern

    with torch.no_grad():  # after a hard mode's own pattern hook (attention.py keeps it first)
        logits = model.run_with_hooks(view.tokens, fwd_hooks=[(f"blocks.{L}.attn.hook_pattern", force)])
    return float((logits[:, -1].argmax(-1) == view.answer).double().mean())


def code_iia(model, variable: str, view: hooks.TaskView, *, at: str, dims: int | None = None,
             contexts: int = 32, seed: int = 0) -> float:
    """The interchange accuracy of ``variable`` ("value" or "query") along the code table's
    principal axes: those with a non-zero singular value (``dims`` None) or the top ``dims``
    (fewer when the table's rank is lower). A site the symbol does not move (a zero table) has
    no axis: nothing is interchanged and the base runs are asked."""
    M = codes.code_table(model, variable, view, contexts=contexts, at=at)  # [u, d]
    _, s, Vh = torch.linalg.svd(M, full_matrices=False)
    rank = int((s > 1e-9 * float(s.max().clamp_min(1e-300))).sum()) if float(s.max()) > 0 else 0
    k = rank if dims is None else min(dims, rank)
    return codes.interchanger(model, variable, view, seed=seed + 1, at=at)(Vh[:k])


def unembed_basis(model) -> Float[Tensor, "k d_model"]:
    """Orthonormal rows spanning ``W_U``'s columns centred over the outputs (float64)."""
    W = model.W_U.detach().double()  # [d_model, d_vocab_out]
    W = W - W.mean(dim=1, keepdim=True)
    U, s, _ = torch.linalg.svd(W, full_matrices=False)
    keep = s > 1e-9 * float(s.max().clamp_min(1e-300)) if float(s.max()) > 0 else s > math.inf
    return U[:, keep].T


def answer_shares(x: Float[Tensor, "batch d"], answer: Int[Tensor, "batch"], n: int) -> tuple[float, float]:
    """(between-answer variance / total variance, the same with the between-answer variance in
    its top-2 principal plane only) of the rows of ``x`` grouped by ``answer``; NaN for a
    constant ``x``."""
    x = x.double()
    x = x - x.mean(dim=0, keepdim=True)
    total = float(x.pow(2).sum()) / len(x)
    if total <= 0:
        return math.nan, math.nan
    counts = torch.bincount(answer, minlength=n).double()
    means = torch.zeros(n, x.shape[1], dtype=torch.float64).index_add_(0, answer, x)
    seen = counts > 0
    means = means[seen] / counts[seen, None]
    weighted = means * (counts[seen, None] / len(x)).sqrt()  # between = weighted^T weighted
    s2 = torch.linalg.svdvals(weighted).pow(2)  # the between-answer covariance's eigenvalues
    return float(s2.sum()) / total, float(s2[:2].sum()) / total
