"""One bad run is a named skip in every reader, counted truthfully (issue 55): a NaN weight in one
of three runs (every checksum recomputed) is skipped by the atlas (measured 2, skipped 1),
analyze-sweep and the explorer, each naming it; when every run is bad, analyze-sweep and the
explorer fail with one line. A timeline table's rows are sealed: an edited row, a row that
disagrees with its store row, or a table written before seals is left out with a note.

References: which run was broken, by construction here; the paper's construction as the good
runs (accuracy 1 by the theorems), stored with the accuracy training's own evaluation gives."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
from contextlib import closing

import pytest

from interp.core import constructions
from interp.inspect.studies import analysis, atlas, atlas_cache, explore, explore_timeline, timelines
from interp.sweeps import store
from interp.training import checkpoints
from interp.training.runs import TrainConfig, evaluate_accuracy

FILES = ("config.json", "model.safetensors")


def _cfg(seed):
    return TrainConfig(case=3, n=6, d_token=2, pos_embed="none", seed=seed, eval_batches=4, batch_size=64)


def _store(root, seeds=(0, 1, 2)):
    path = root / "results" / "store.sqlite"
    with store.Store(path) as db:
        for seed in seeds:
            cfg, model = _cfg(seed), constructions.build(3, 6)
            folder = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            sums = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}
            db.put(store.RunRecord(name=cfg.name(), sweep="skips", config=cfg.to_dict(), seed=seed, status="ok",
                                   accuracy=evaluate_accuracy(model, cfg), steps=10), folder, sums)
    return path


def _nan(path, seed):
    """A NaN in the run's first weight matrix; config.json's sha256, the row's checksums and
    digest recomputed (the store's own checks all pass)."""
    name = _cfg(seed).name()
    folder = path.parent / "checkpoints" / name
    w = folder / "model.safetensors"
    data = w.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    start, _ = header["blocks.0.attn.W_Q"]["data_offsets"]
    body = bytearray(data[8 + n:])
    body[start:start + 4] = struct.pack("<f", float("nan"))
    w.write_bytes(data[:8 + n] + bytes(body))
    meta = json.loads((folder / "config.json").read_text())
    meta["sha256"] = hashlib.sha256(w.read_bytes()).hexdigest()
    (folder / "config.json").write_text(json.dumps(meta))
    sums = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE runs SET checksums=? WHERE name=?", (json.dumps(sums, sort_keys=True), name))
        values = db.execute(f"SELECT {', '.join(store.RUN_COLUMNS)} FROM runs WHERE name=?", (name,)).fetchone()
        db.execute("UPDATE runs SET row_sha256=? WHERE name=?", (store.row_digest(values), name))
    return name


@pytest.fixture
def one_bad(tmp_path):
    path = _store(tmp_path / "sweep")
    return path, _nan(path, 1)


def test_the_atlas_measures_the_good_runs_and_counts_the_bad_one(one_bad):
    path, bad = one_bad
    df = atlas.build_atlas(path, batch_size=64)
    assert df.attrs["cache"]["measured"] == 2 and df.attrs["cache"]["skipped"] == 1
    row = df[df["name"] == bad].iloc[0]
    assert row["label"] == "unmeasured" and bad in row["note"] and "non-finite" in row["note"]
    assert set(df[df["name"] != bad]["label"]) != {"unmeasured"}


def test_analyze_sweep_and_explore_skip_it_by_name(one_bad, tmp_path):
    path, bad = one_bad
    res = analysis.analyze_sweep(path, all_groups=True, batch_size=64)
    assert list(res.skipped) == [bad] and len(res.table) == 2
    assert f"- run `{bad}`: run {bad}: checkpoint folder" in res.markdown()
    text = explore.write_explorer(path, tmp_path / "page", inputs=1, batch_size=64).read_text()
    assert f"run <code>{bad}</code>: run {bad}: checkpoint folder" in text and "non-finite" in text


def test_when_no_run_can_be_read_the_command_fails_naming_the_store(tmp_path):
    path = _store(tmp_path / "sweep", seeds=(0,))
    _nan(path, 0)
    with pytest.raises(ValueError, match=f"no run of {path} could be measured: 1 skipped"):
        analysis.analyze_sweep(path, all_groups=True, batch_size=64)
    with pytest.raises(ValueError, match=f"no run of {path} could be shown: 1 skipped"):
        explore.write_explorer(path, tmp_path / "page", inputs=1, batch_size=64)


def _table(path, rows, *, sealed=True):
    import pandas as pd

    text = pd.DataFrame(rows).to_csv(index=False)
    out = path.parent.parent / "timeline.csv"
    out.write_text(atlas_cache.seal(text) if sealed else text)
    return out


def _rows(path, seed, **changes):
    r = store.read(path).set_index("seed").loc[seed]
    row = dict(run=r["name"], seed=seed, case=3, n=6, routing="lookup", code="circle", loss=1.0,
               plateau_exit=None, final_accuracy=r["accuracy"], measures_version=timelines.MEASURES_VERSION)
    return [{**row, "step": s, **changes} for s in (0, 10)]


def test_a_timeline_table_is_used_only_where_its_rows_check(tmp_path):
    path = _store(tmp_path / "sweep")
    good, forged = _rows(path, 0), _rows(path, 1, final_accuracy=0.5)
    table = _table(path, good + forged)
    df = explore_timeline.load(path)
    assert set(df["run"]) == {_cfg(0).name()} and "row_sha" not in df
    assert "says final accuracy 0.5" in df.attrs["notes"][_cfg(1).name()]
    lines = table.read_text().splitlines()
    lines[1] = lines[1].replace("lookup", "mirror")  # an edited label, its seal kept
    table.write_text("\n".join(lines) + "\n")
    df = explore_timeline.load(path)
    assert df.empty and "fails its seal" in df.attrs["notes"][_cfg(0).name()]
    _table(path, good, sealed=False)
    df = explore_timeline.load(path)
    assert df.empty and "written before timeline seals" in df.attrs["notes"][_cfg(0).name()]
    html = explore_timeline.section(df, _cfg(0).name(), tmp_path / "fig")
    assert "Timeline not shown" in html and "written before timeline seals" in html


@pytest.mark.parametrize("version", ["measure3-progress0", None])
def test_a_timeline_table_of_another_measures_version_is_refused(tmp_path, caplog, version):
    """Issue 52: a sealed table whose rows hold another measures version (or none, written before
    versions) is not drawn for any run, nor read by the atlas; the note says which version and to
    measure again."""
    path = _store(tmp_path / "sweep")
    rows = [{k: v for k, v in r.items() if version is not None or k != "measures_version"}
            for r in _rows(path, 0, measures_version=version) + _rows(path, 1, measures_version=version)]
    table = _table(path, rows)
    df = explore_timeline.load(path)
    held = version or "none"
    says = (f"{table} holds measures version {held}; this code measures version {timelines.MEASURES_VERSION} "
            f"(issue 52's progress measures); run `interp timeline RUN_OR_STORE --out {table.parent}` "
            "to measure it again")
    assert df.empty and df.attrs["notes"] == {_cfg(0).name(): says, _cfg(1).name(): says}
    html = explore_timeline.section(df, _cfg(1).name(), tmp_path / "fig")
    assert f"Timeline not shown: {says}" in html.replace("&#x27;", "'")
    with pytest.raises(ValueError, match=f"holds measures version {held}; this code measures"):
        timelines.read_timeline(table)  # the same refusal as the reader of record
    import logging

    import pandas as pd

    from interp.inspect.studies import atlas_levels

    with caplog.at_level(logging.WARNING):  # the atlas reads the table through the same load
        added = atlas_levels.add_formation(pd.DataFrame({"name": [_cfg(0).name()]}), path)
    assert "routing_forms" not in added and says in caplog.text
