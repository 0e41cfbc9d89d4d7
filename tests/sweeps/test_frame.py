"""interp.read_runs: a store's runs as a DataFrame, checked field by field against the store's
rows read with sqlite3 directly (an independent reader: no interp code between the file and
the values)."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import textwrap
from pathlib import Path

import pytest

import interp
from interp.sweeps import driver, frame
from interp.training.runs import TrainConfig

TINY = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=3, n=4, d_token=d, pos_embed="none", seed=s, init="pytorch",
                       max_steps=40, curve_every=10, stop_loss=1.2)
           for d in (16, 4) for s in range(2)]
LAYOUT = TableLayout(rows=("case",), column="d_token", title="tiny")
"""


def tiny_sweep(root: Path, text: str = TINY) -> Path:
    """A sweep folder of 4 small runs (2 cells x 2 seeds), trained into its store."""
    folder = root / "tiny"
    folder.mkdir(parents=True)
    (folder / "configs.py").write_text(textwrap.dedent(text))
    summary = driver.run_sweep(driver.load(folder), store=folder / "results" / "store.sqlite")
    assert summary.trained == 4 and not summary.lost
    return folder


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return tiny_sweep(tmp_path_factory.mktemp("frame"))


def sqlite_rows(store: Path) -> list[dict]:
    with sqlite3.connect(store) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM runs ORDER BY rowid")]


def _same(a, b) -> bool:
    if isinstance(b, float) and math.isnan(b):
        return a is None or (isinstance(a, float) and math.isnan(a))
    return a == b


def test_read_runs_equals_the_stores_rows_field_by_field(sweep):
    store = sweep / "results" / "store.sqlite"
    rows = sqlite_rows(store)
    assert len(rows) == 4
    for source in (sweep, store):  # the sweep folder or the store file
        df = frame.read_runs(source)
        fields = [f.name for f in dataclasses.fields(TrainConfig)]
        assert list(df.columns) == ["name", *fields, *frame.RESULT_COLUMNS, *frame.WHERE_COLUMNS]
        assert len(df) == len(rows)
        for row, (_, got) in zip(rows, df.iterrows()):
            config = json.loads(row["config"])
            assert got["name"] == row["name"]
            for field in fields:
                assert got[field] == config[field], field
            for column in ("status", "accuracy", "steps", "final_loss", "seconds", "cpu_seconds",
                           "sweep", "started_at", "finished_at"):
                assert _same(row[column], got[column]), column
            assert got["curve"] == json.loads(row["curve"])
            assert got["checkpoint"] == str(store.resolve().parent / row["checkpoint"])
        assert df.curve.map(len).gt(1).all()  # a list of [step, loss] pairs per run


def test_read_runs_is_exported_and_refuses_a_folder_without_a_store(sweep, tmp_path):
    assert interp.read_runs is frame.read_runs
    with pytest.raises(ValueError, match="no results store at .*accepted: a store file, a sweep folder"):
        interp.read_runs(tmp_path)


def test_fields_missing_from_older_rows_get_their_defaults(sweep, monkeypatch):
    """A store written before a TrainConfig field existed: the field is filled with its default
    (as TrainConfig.from_dict would), not NaN."""
    from interp.sweeps import store

    real = store.read

    def older(path, **kw):
        df = real(path, **kw)
        df.loc[df.index[:2], "d_mlp"] = float("nan")  # two rows stored before d_mlp existed
        return df.drop(columns=["curve_every"])  # no row has this one

    monkeypatch.setattr(store, "read", older)
    df = frame.read_runs(sweep)
    assert df.d_mlp.tolist() == [0, 0, 0, 0] and df.d_mlp.dtype.kind == "i"
    default = {f.name: f.default for f in dataclasses.fields(TrainConfig)}["curve_every"]
    assert df.curve_every.tolist() == [default] * 4
