"""Sweeps of training runs: the results store, the workers that fill it, the report.

* :mod:`~interp.sweeps.folders` - a sweep folder as data (``TableLayout``, ``Sweep``);
  :mod:`~interp.sweeps.configs_file` - what ``configs.py`` must declare, and its checks;
  :mod:`~interp.sweeps.loader` - ``configs.py`` executed in a guarded child process (of
  multiprocessing's forkserver, the local backend's);
  :mod:`~interp.sweeps.planning` - which configs train now, grouped by seed;
  :mod:`~interp.sweeps.driver` - the driver (``run_sweep``: plan, train, commit; with
  ``snapshots``, each run's ``timeline/`` written as it trains).
* :mod:`~interp.sweeps.store` - the SQLite results store (one row per run): the writer
  ``Store``, naming the rest; :mod:`~interp.sweeps.store_schema` - the formats the writer and
  the readers share (schema, row checksums, recognising a store);
  :mod:`~interp.sweeps.store_read` - the readers (``read``, ``verify``, ``read_sweeps``);
  :mod:`~interp.sweeps.store_evidence` - a run's row, ``config.json`` and model cross-checked
  before a reader shows it (``checked_model``, ``cross_check``);
  :mod:`~interp.sweeps.frame` - ``read_runs``: a store's runs as one DataFrame (``interp.read_runs``);
  :mod:`~interp.sweeps.store_files` - the files beside it: the driver's folder lock and pid
  file, recognising a store before any write; :mod:`~interp.sweeps.orphans` - progress files
  no sweep will resume (``interp store verify --remove-orphans``).
* :mod:`~interp.sweeps.workers` - the worker function, worker set-up and the one scheduler
  loop; :mod:`~interp.sweeps.local_backend` - one local process per group, lost alone if it
  dies; :mod:`~interp.sweeps.ray_backend` - the Ray backend.
* :mod:`~interp.sweeps.report_table` - a sweep's table beside the paper's, as data;
  :mod:`~interp.sweeps.report` - that table in Markdown, violins;
  :mod:`~interp.sweeps.paper_check` - the paper's max and mean tested against our seeds, cell by
  cell (predictive check, success counts with exact intervals, Holm); :mod:`~interp.sweeps.report_check`
  - that test as the report's section, and the escaping of user text in the report.

This package sits above :mod:`interp.training` (what one run is and how it trains) and imports
from it, never the other way. A sweep folder's ``configs.py`` writes
``from interp.sweeps import TableLayout`` (and ``from interp.training import TrainConfig``);
``Layout``, its name before issue 45, still imports for one release with a DeprecationWarning.
"""

from interp._lazy import exports

_EXPORTS = {
    "TableLayout": "interp.sweeps.folders",
    "Sweep": "interp.sweeps.folders",
    "load": "interp.sweeps.loader",
    "run_sweep": "interp.sweeps.driver",
    "read": "interp.sweeps.store",
}
_exported, __dir__ = exports(__name__, _EXPORTS, globals())


def __getattr__(name: str):
    if name == "Layout":  # TableLayout's old name: warns, for one release
        from interp.sweeps.folders import old_layout_name

        return old_layout_name(stacklevel=3)
    return _exported(name)
