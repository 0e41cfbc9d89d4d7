"""Training one run, or a group of seeds stacked: what a run is, its engines, its files.

* :mod:`~interp.training.runs` - ``TrainConfig``, ``RunResult``, random streams, initial model,
  test accuracy (below both trainers).
* :mod:`~interp.training.trainer` - ``train``/``train_group`` and the plain TransformerLens loop.
* :mod:`~interp.training.fast_train` - the fast exact engine's front (``train_ensemble``): data
  as table rows (:mod:`~interp.training.fast_data`), seed ensembles
  (:mod:`~interp.training.fast_ensemble`; on CUDA the step captured and replayed,
  :mod:`~interp.training.fast_graph`); its arithmetic (final-position logits regrouped) is
  :mod:`~interp.training.fast_math`, with :mod:`~interp.training.fast_two_layers`,
  :mod:`~interp.training.fast_tables` and the custom autograd of :mod:`~interp.training.fast_autograd`.
* :mod:`~interp.training.checkpoints` - safetensors checkpoints with checksums;
  :mod:`~interp.training.progress` - a training group's state saved mid-run, to go on from
  (here, not in :mod:`interp.sweeps`, because the trainer writes it between steps).
* :mod:`~interp.training.snapshots` - a run's parameters at chosen steps (log-spaced and around
  its plateau exit, or by a plan of :mod:`~interp.training.snapshot_plans`: every N steps, every
  curve point, given steps), kept without changing its bits; saved checksummed in
  ``timeline/`` (:mod:`~interp.training.snapshot_files`); :mod:`~interp.training.milestones` -
  the loss milestones of a run's curve (plateau exit, half-loss, steepest drop, low loss).
* :mod:`~interp.training.files` - files and folders written whole or not at all (temp file,
  fsync, rename; never through a symlink), for every stage that writes one.
* :mod:`~interp.training.machine` - MKL's branch, glibc's freed memory, the CPU's name.

Sweeps of runs (the results store, workers, Ray, reports) are :mod:`interp.sweeps`, one level
up. ``from interp.training import TrainConfig`` (and ``RunResult``, ``train``, ``train_group``)
is what a sweep folder's ``configs.py`` uses.
"""

from interp._lazy import exports

_EXPORTS = {
    "RunResult": "interp.training.runs",
    "TrainConfig": "interp.training.runs",
    "train": "interp.training.trainer",
    "train_group": "interp.training.trainer",
}
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
