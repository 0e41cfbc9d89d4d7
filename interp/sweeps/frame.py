"""A results store's runs as one pandas DataFrame: :func:`read_runs` (``interp.read_runs``).

Built on the store's reader (:func:`interp.sweeps.store.read`: every row verified against its
checksum, the config's JSON expanded into columns), with a fixed column order and the
TrainConfig fields a run stored before they existed filled with their defaults (what
:meth:`interp.training.runs.TrainConfig.from_dict` gives them), so every row has every field.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

#: the run's outcome, after the config fields
RESULT_COLUMNS = ("status", "accuracy", "steps", "final_loss", "seconds", "cpu_seconds", "curve")
#: where the run is and when it ran, last
WHERE_COLUMNS = ("checkpoint", "sweep", "started_at", "finished_at")


def find_store(path: str | os.PathLike) -> Path:
    """The store file ``path`` names: the file itself, a sweep folder's
    ``results/store.sqlite``, or a folder's ``store.sqlite`` (what ``interp train`` writes);
    ValueError naming the places looked at when there is none."""
    p = Path(path)
    for candidate in (p, p / "results" / "store.sqlite", p / "store.sqlite"):
        if candidate.is_file():
            return candidate
    raise ValueError(f"no results store at {p} (looked for {p}, {p}/results/store.sqlite and "
                     f"{p}/store.sqlite); accepted: a store file, a sweep folder or an "
                     "`interp train` folder")


def config_fields() -> list[str]:
    """TrainConfig's fields, in declaration order."""
    from interp.training.runs import TrainConfig

    return [f.name for f in dataclasses.fields(TrainConfig)]


def read_runs(path: str | os.PathLike):
    """The runs of a results store as a DataFrame, one row per run, in the store's order.

    ``path``: a store file, a sweep folder (``DIR/results/store.sqlite``) or an ``interp train``
    folder (``DIR/store.sqlite``). Columns: ``name``; every TrainConfig field (``case``, ``n``,
    ``d_token``, ..., ``seed``, ...); ``status`` (``"ok"`` or ``"failed: ..."``),
    ``accuracy``, ``steps``, ``final_loss``, ``seconds``, ``cpu_seconds`` (NaN where the store
    predates it), ``curve`` (a list of ``[step, training-batch loss]`` pairs per run);
    ``checkpoint`` (an absolute folder path, or None), ``sweep``, ``started_at``,
    ``finished_at``. An edited or corrupt row raises a ValueError naming the run and the store.
    """
    import pandas as pd

    from interp.sweeps import store
    from interp.training.runs import TrainConfig

    df = store.read(find_store(path))
    fields = config_fields()
    columns = ["name", *fields, *RESULT_COLUMNS, *WHERE_COLUMNS]
    if df.empty:
        return pd.DataFrame(columns=columns)
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.default is not dataclasses.MISSING}
    for name in fields:
        if name not in df.columns:  # no stored run has the field: all were stored before it
            df[name] = defaults.get(name)
        elif name in defaults and df[name].isna().any():  # some rows predate it
            filled = df[name].astype(object).where(df[name].notna(), defaults[name])
            whole = isinstance(defaults[name], int) and not isinstance(defaults[name], bool)
            df[name] = filled.astype("int64") if whole else filled.infer_objects()
    return df[columns].reset_index(drop=True)
