"""Distributed alignment search with a learned rotation: the code's dimension, not its upper bound.

:mod:`interp.inspect.mechanism.codes` measures a code's dimension by interchanging along the code table's
principal axes (closed form): the least k whose interchange carries the variable. A learned
rotation (DAS proper, Geiger et al. 2023) can only do better: some k-dimensional subspace that
is not spanned by the top-k principal axes may carry the variable. This module learns one.

For a variable (``value`` or ``query``, the sites of :mod:`~interp.inspect.mechanism.codes`) and a k, an
orthonormal basis ``R`` [k, d] of the site's vector space is trained (``torch``'s orthogonal
parametrization, started at the top-k principal axes, Adam) so that moving the base run's
vector along ``R`` to the source's makes the model behave as the variable predicts:

* value: cross-entropy of the final logits against the source's value u';
* query: minus the log of the last layer's final-position attention (mean over heads) on the
  slot whose key is the source's target t'.

Trained on one sample of base/source pairs and scored on another (``seed`` and ``seed + 1``):
the held-out interchange accuracy ``IIA(k)`` of the learned ``R``. :func:`learned_dim` is the
least k (searched upward from 1, at most the principal-axes dimension, which is an upper bound)
whose held-out IIA reaches :data:`interp.inspect.mechanism.calibration.THRESHOLDS`'s ``iia_min``.

The model's weights are not changed (their gradients are never asked for); a model with
hard-attention hooks has no gradient through the scores and is refused.

Axis vocabulary as in :mod:`~interp.inspect.mechanism.codes`: ``batch`` inputs, ``d`` the flattened
``head_index * d_head`` of the site.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.inspect.mechanism import codes
from interp.inspect.tools import hooks

Pairs = codes.Pairs


def pairs(model, variable: str, *, batch_size: int = 512, seed: int = 0, at: str = "value") -> Pairs:
    """One sample of base/source pairs for ``variable`` (:func:`codes.pairs` on inputs drawn
    with ``seed``)."""
    task, n = hooks.check_model(model)
    view = hooks.read(task.case, n, hooks.sample_inputs(task.case, n, max(batch_size, n), seed=seed))
    return codes.pairs(model, variable, view, seed=seed, at=at)


def _run(model, variable: str, p: Pairs, basis: Float[Tensor, "k d"]) -> Tensor:
    """Per base input, the score of the predicted behaviour (log-probability), differentiable
    in ``basis`` (:func:`codes.run_moved`)."""
    logits, pattern = codes.run_moved(model, p, basis)
    if variable == "value":
        return logits.double().log_softmax(-1), p.other
    att = pattern.mean(1)[:, p.slots].double()  # mean over heads
    return att.clamp_min(1e-300).log(), p.expect


def iia(model, variable: str, p: Pairs, basis) -> float:
    """Interchange accuracy of ``basis`` on the pairs ``p`` (argmax, as :mod:`codes` scores it)."""
    with torch.no_grad():
        score, want = _run(model, variable, p, basis)
    return float((score.argmax(-1) == want).double().mean())


def start(d: int, k: int, init=None) -> torch.nn.Linear:
    """The layer whose ``weight`` [k, d] :func:`learn` trains, before any step: ``torch``'s
    orthogonal parametrization of a ``Linear(d, k)``, set to ``init`` (orthonormal rows) when
    given. Draws from torch's global generator (the layer's random start, and the random
    completion of ``init`` to a d x d orthogonal base that the parametrization keeps), so the
    trained basis depends on the generator's state: :func:`learned_dim` seeds it."""
    if not (isinstance(k, int) and 1 <= k <= d):
        raise ValueError(f"k={k!r}; accepted: an integer from 1 to the site's width {d}")
    layer = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(d, k, bias=False, dtype=torch.float64))
    if init is not None:
        with torch.no_grad():
            layer.weight = torch.as_tensor(init, dtype=torch.float64)
    return layer


def learn(model, variable: str, k: int, train: Pairs, *, init=None, steps: int = 300,
          lr: float = 0.01) -> Float[Tensor, "k d"]:
    """An orthonormal basis [k, d] trained on ``train`` (module docstring); ``init`` [k, d]: its
    start (orthonormal rows; default the first k standard axes)."""
    layer = start(train.src.flatten(1).shape[1], k, init)
    opt = torch.optim.Adam(layer.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        score, want = _run(model, variable, train, layer.weight)
        loss = -score[torch.arange(len(want)), want].mean()
        loss.backward()
        opt.step()
    return layer.weight.detach()


@dataclass(frozen=True)
class LearnedDim:
    """The learned search's result for one variable."""

    variable: str
    axes_dim: int | None  # the principal-axes dimension (codes.measure_code): an upper bound
    iia: tuple[tuple[int, float], ...]  # (k, held-out IIA of the learned basis) for the k tried
    dim: int | None  # least k reaching iia_min; axes_dim when no smaller k does


def learned_dim(model, variable: str = "value", *, at: str = "value", batch_size: int = 512,
                seed: int = 0, steps: int = 300, max_k: int = 3, iia_min: float | None = None) -> LearnedDim:
    """The least k <= min(max_k, principal-axes dimension - 1) whose learned basis reaches
    ``iia_min`` on held-out pairs; the principal-axes dimension when none does (module docstring).
    A function of its arguments: torch's generator is seeded with ``seed`` before the first k
    (as ``experiments/calibration/das_check.py`` seeded it with 0 before each model) and given
    back to the caller as it was. :func:`interp.inspect.mechanism.das_batch.learned_dims` gives
    the same search for many models of one cell at once."""
    from interp.core import attention
    from interp.inspect.mechanism.calibration import THRESHOLDS

    hooks.check_model(model)
    hard = [m for m in attention.modes(model) if m.mode != "softmax"]
    if hard:
        raise ValueError(f"model has attention modes {[m.mode for m in hard]}; accepted: softmax "
                         "attention, whose scores have a gradient (remove_attention takes them off)")
    iia_min = THRESHOLDS["iia_min"] if iia_min is None else iia_min
    axes = codes.measure_code(model, variable, batch_size=batch_size, seed=seed,
                              at=at, iia_min=iia_min)
    Vh = axes.axes  # the code table's principal axes: where each learned basis starts
    train = pairs(model, variable, batch_size=batch_size, seed=seed + 2, at=at)
    test = pairs(model, variable, batch_size=batch_size, seed=seed + 3, at=at)
    top = axes.dim if axes.dim is not None else Vh.shape[0]
    tried = []
    with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was
        torch.manual_seed(seed)  # each k's start draws from it (:func:`start`)
        for k in range(1, min(max_k, top - 1) + 1):
            init = Vh[:k] if k <= Vh.shape[0] else None
            basis = learn(model, variable, k, train, init=init, steps=steps)
            tried.append((k, iia(model, variable, test, basis)))
            if tried[-1][1] >= iia_min:
                return LearnedDim(variable, axes.dim, tuple(tried), k)
    return LearnedDim(variable, axes.dim, tuple(tried), axes.dim)
