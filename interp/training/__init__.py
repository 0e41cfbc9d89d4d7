"""Training the paper's experiments, and sweeps of them.

* :mod:`~interp.training.runs` - ``TrainConfig``, ``RunResult``, random streams, initial model,
  test accuracy (below both trainers).
* :mod:`~interp.training.trainer` - ``train``/``train_group`` and the plain TransformerLens loop.
* :mod:`~interp.training.fast_train` - the fast exact engine: data as table rows, seed ensembles;
  its arithmetic (final-position logits regrouped, custom autograd) is
  :mod:`~interp.training.fast_math`.
* :mod:`~interp.training.checkpoints` - safetensors checkpoints with checksums;
  :mod:`~interp.training.progress` - a training group's state saved mid-run, to go on from.
* :mod:`~interp.training.store` - the SQLite results store (one row per run);
  :mod:`~interp.training.store_files` - the files beside it: the driver's folder lock and pid
  file, atomic checkpoint folders, recognising a store before any write.
* :mod:`~interp.training.folders` - a sweep folder as data (``Layout``, ``Sweep``);
  :mod:`~interp.training.loader` - ``configs.py`` executed in a guarded child process;
  :mod:`~interp.training.sweeps` - the driver.
* :mod:`~interp.training.workers` - the worker function, worker set-up, the one scheduler loop
  and the local backend (one process per group, lost alone if it dies); :mod:`~interp.training.ray_backend` - the Ray backend;
  :mod:`~interp.training.machine` - MKL's branch, glibc's freed memory, the CPU's name.
* :mod:`~interp.training.report` - a sweep's table beside the paper's, violins.
* :mod:`~interp.training.files` - output files written whole or not at all (temp file, fsync,
  rename; never through a symlink), for every stage that writes one.

``from interp.training import TrainConfig`` (and ``RunResult``, ``train``, ``train_group``)
works as before the package existed (sweep folders' ``configs.py`` use it).
"""

from interp._lazy import exports

_EXPORTS = {
    "RunResult": "interp.training.runs",
    "TrainConfig": "interp.training.runs",
    "train": "interp.training.trainer",
    "train_group": "interp.training.trainer",
}
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
