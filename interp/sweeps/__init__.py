"""Sweeps of training runs: the results store, the workers that fill it, the report.

* :mod:`~interp.sweeps.folders` - a sweep folder as data (``Layout``, ``Sweep``);
  :mod:`~interp.sweeps.loader` - ``configs.py`` executed in a guarded child process;
  :mod:`~interp.sweeps.driver` - the driver (``run_sweep``: plan, train, commit).
* :mod:`~interp.sweeps.store` - the SQLite results store (one row per run);
  :mod:`~interp.sweeps.store_files` - the files beside it: the driver's folder lock and pid
  file, recognising a store before any write.
* :mod:`~interp.sweeps.workers` - the worker function, worker set-up, the one scheduler loop
  and the local backend (one process per group, lost alone if it dies);
  :mod:`~interp.sweeps.ray_backend` - the Ray backend.
* :mod:`~interp.sweeps.report` - a sweep's table beside the paper's, violins.

This package sits above :mod:`interp.training` (what one run is and how it trains) and imports
from it, never the other way. A sweep folder's ``configs.py`` writes
``from interp.sweeps import Layout`` (and ``from interp.training import TrainConfig``).
"""

from interp._lazy import exports

_EXPORTS = {
    "Layout": "interp.sweeps.folders",
    "Sweep": "interp.sweeps.folders",
    "load": "interp.sweeps.loader",
    "run_sweep": "interp.sweeps.driver",
    "read": "interp.sweeps.store",
}
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
