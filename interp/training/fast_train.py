"""Exact fast training: the HookedTransformer's final-position logits, regrouped, for seed ensembles.

The arithmetic (which models it computes, their parameters stacked over seeds, and the
final-position logits of one and two layers, regrouped over table rows) is
:mod:`interp.training.fast_math` and the modules it names; the data, drawn as table rows, are
:mod:`interp.training.fast_data`; an ensemble of seeds and its step are
:mod:`interp.training.fast_ensemble` (and :mod:`interp.training.fast_graph`, the step captured
on CUDA). This module is the engine's front: one model's logits by the fast path
(:func:`model_final_logits`) and the loop that trains an ensemble (:func:`train_ensemble`),
with the names above re-exported.
"""

from __future__ import annotations

import logging
import os
import time

from jaxtyping import Float, Int
from torch import Tensor

from interp.core import models
from interp.training.fast_data import (  # noqa: F401 - the engine's API here
    _argsort_np, _argsort_rows, sample_indices, token_indices,
)
from interp.training.fast_ensemble import Ensemble, accuracy, mkl_reproducible  # noqa: F401
from interp.training.fast_math import (  # noqa: F401 - check_model, stack_params: the engine's API here
    check_model, final_logits, seed_losses, stack_params,
)

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# One model by the fast path (the stacked parameters: fast_math.stack_params).


def model_final_logits(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch n"]:
    """One model's ``model(tokens)[:, -1]`` by the fast path."""
    check_model(model)
    n = model.cfg.d_vocab_out
    J = token_indices(models.has_pair_embedding(model), n, tokens)
    return final_logits(stack_params([model]), J[:, None])[0]


def train_ensemble(
    configs: list, *, models_: list | None = None, device: str = "cpu",
    progress: str | os.PathLike | None = None, every: float = 600.0, on_step=None,
    graph: bool | None = None, check_every: int | None = None,
) -> list:
    """Train configs that differ only in seed as one batched ensemble; list of RunResult.

    ``progress`` (a file path, optional): go on from the state saved there if it holds this
    group and passes its checks, and save the state there every ``every`` seconds of wall time
    (:mod:`interp.training.progress`; the caller deletes it once the results are safe).
    Saving is an optimisation: a save that fails (a full disk, ``progress/`` gone or not a
    folder, ...) logs one warning for the group, naming the file and the cause, and training
    goes on; later saves are still tried, silently (space may come back), and the last good
    file, if any, stays in place.

    ``on_step`` (optional): called after every step as ``on_step(step, {config index: loss})``
    for the configs that trained in it (:class:`interp.training.trainer._Watch`: the bar and
    the user's callback); an exception it raises stops training.

    ``graph`` (default: on CUDA, not on the CPU): train with
    :class:`interp.training.fast_graph.GraphEnsemble`, whose step never waits on the host
    (captured in a CUDA graph on CUDA); the host reads the losses back every ``check_every``
    steps, so ``on_step`` is then called for those steps together, after them. Same results
    (bit for bit on the CPU when seeds are stacked, :func:`mkl_reproducible`).
    """
    from interp.training import progress as progress_mod

    ens = _ensemble(configs, models_, device, graph, check_every)
    graph = hasattr(ens, "advance")  # a GraphEnsemble runs blocks of steps
    if progress is not None and progress_mod.resume(ens, progress) and graph:
        ens.after_resume()
    saved, warned = time.perf_counter(), False
    while not ens.done:
        if graph:
            steps = ens.advance()
        else:
            live = list(ens.active)
            ens.step()
            steps = [(ens.t, {s: ens.last[s] for s in live})]
        if on_step is not None:
            for step, losses in steps:
                on_step(step, losses)
        if progress is not None and time.perf_counter() - saved >= every and not ens.done:
            try:
                _save(ens, progress, graph)
            except Exception as e:  # noqa: BLE001 - no save must cost the run itself
                if not warned:
                    log.warning("could not save progress to %s (%s: %s); training goes on "
                                "without it", progress, type(e).__name__, e)
                    warned = True
            saved = time.perf_counter()
    return ens.results()


def _ensemble(configs, models_, device, graph, check_every):
    """The plain :class:`Ensemble`, or with ``graph`` (default: on CUDA) the captured-step one."""
    if not (device != "cpu" if graph is None else graph):
        return Ensemble(configs, models_=models_, device=device)
    from interp.training.fast_graph import CHECK_EVERY, GraphEnsemble

    return GraphEnsemble(configs, models_=models_, device=device,
                         check_every=CHECK_EVERY if check_every is None else check_every)


def _save(ens, path, graph: bool) -> None:
    from interp.training import progress as progress_mod

    if graph:
        ens.before_save()  # the generators as of the last step run
    try:
        progress_mod.save(ens, path)
    finally:
        if graph:
            ens.after_save()
