"""interp: how small transformers evaluate functions f: [n] -> [n].

A toolkit around Strobl, Angluin & Frank, "Concise One-Layer Transformers Can Do Function
Evaluation (Sometimes)". Five stages, each a sub-package; imports point down the list only
(``inspect`` and ``theory`` share a level and do not import each other):

* :mod:`interp.core` - the tasks (five input presentations, plain-Python reference), the
  ``HookedTransformer`` models, attention modes and their tie rule, the paper's constructions
  as exact weights, their measured limits, the one evaluation forward pass, ``verify``.
* :mod:`interp.training` - one run: its config and result, the plain TransformerLens trainer
  and the fast exact engine, checkpoints, progress saved mid-run.
* :mod:`interp.sweeps` - many runs: the results store, the sweep driver, workers (process
  pool, Ray), reports beside the paper's tables.
* :mod:`interp.inspect` - hooks, probes (cos/sin encodings), circuits (QK/OV), patching,
  per-seed analysis of sweeps, circuitsvis and matplotlib views.
* :mod:`interp.theory` - beyond the paper: precision and temperature laws, Theorem 3.6 as a
  counterexample finder, Theorem 3.5 with an explicit MLP, lower bounds for trained models.
* :mod:`interp.cli` - the ``interp`` command line; the only place that prints.

The names most sessions need are here: ``interp.build``, ``interp.train``,
``interp.train_group``, ``interp.TrainConfig``, ``interp.RunResult``, ``interp.load``, ``interp.load_run``,
``interp.save``, ``interp.read_runs`` (a results store as a DataFrame), ``interp.timeline``
(a run's or a store's snapshots measured and labelled, a DataFrame),
``interp.find_counterexample`` and the modules ``interp.tasks``,
``interp.models``, ``interp.attention``, ``interp.constructions``, ``interp.forward``. They are
imported on first use (PEP 562), so ``interp --help`` and the CLI's refusals of bad input answer
before TransformerLens loads.

Axis names follow TransformerLens throughout: ``batch``, ``pos``, ``d_model``, ``head_index``,
``d_head``, ``query_pos``, ``key_pos``, ``d_vocab``; ``n`` is the table size.
"""

from interp._lazy import exports

#: public name -> the module that defines it (the module itself for the module names)
_EXPORTS = {
    "attention": "interp.core.attention",
    "constructions": "interp.core.constructions",
    "forward": "interp.core.forward",
    "models": "interp.core.models",
    "tasks": "interp.core.tasks",
    "build": "interp.core.constructions",
    "load": "interp.training.checkpoints",
    "load_run": "interp.training.checkpoints",
    "save": "interp.training.checkpoints",
    "find_counterexample": "interp.theory.counterexample",
    "RunResult": "interp.training.runs",
    "TrainConfig": "interp.training.runs",
    "read_runs": "interp.sweeps.frame",
    "timeline": "interp.inspect.studies.timelines",
    # the trainer's functions, with progress=True meaning the package's tqdm bar (which only
    # interp.cli may show): interp.cli.bars
    "train": "interp.cli.bars",
    "train_group": "interp.cli.bars",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
