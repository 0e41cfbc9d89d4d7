"""The atlas's learned dimension and code geometry (``interp atlas --das --geometry``) on a sweep
trained here: present on every successful lookup and only there, equal to the per-model
measures run on the checkpoint (:func:`das.learned_dim`, :func:`figures.measure_model`), reused
from the cache on a rerun; the paper's construction reads ``circle`` where the label can tell.

The reference and the batched search agree up to float summation (``das_batch``'s docstring):
a learned dimension may differ only where the reference's held-out IIA of some k lies within
``MARGIN`` of ``iia_min``, and that is asserted, not assumed."""

from __future__ import annotations

import math
import textwrap

import pytest

from interp.inspect.mechanism import das, figures
from interp.inspect.mechanism.calibration import THRESHOLDS
from interp.inspect.studies import atlas, atlas_das, atlas_geometry
from interp.sweeps import driver as sweeps, store
from interp.training import checkpoints
from interp.training.machine import one_thread

#: case 3 at n = 5, d_token 32 learns in ~60 steps (core atlas: every seed), so its seeds are
#: successful lookups; 3 seeds, one cell, stacked in one search
TINY = """
from interp.sweeps import TableLayout
from interp.training.runs import TrainConfig

CONFIGS = [TrainConfig.paper(3, 5, 32, reading="attention-only", seed=s, max_steps=400,
                             batch_size=128, eval_batches=4) for s in (0, 1, 2)]
LAYOUT = TableLayout(rows=("case", "n_layers"), column="d_token", title="atlas das test")
"""
BATCH = 64
MARGIN = 4 / BATCH  # a few pairs of the held-out sample


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("atlas-das") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    sweeps.run_sweep(sweeps.load(folder))
    return folder


@pytest.fixture(scope="module")
def built(sweep_dir):
    return atlas.build_atlas(sweep_dir, batch_size=BATCH, das=True, geometry=True)


def near(ref: das.LearnedDim) -> bool:
    return any(abs(a - THRESHOLDS["iia_min"]) < MARGIN for _, a in ref.iia)


def test_every_successful_lookup_carries_the_per_model_learned_dimension(sweep_dir, built):
    runs = store.read(sweep_dir / "results" / "store.sqlite").set_index("name")
    lookups = built[(built.outcome == "success") & built.routing.isin(atlas_das.LOOKUPS)]
    assert len(lookups) >= 2, built[["outcome", "routing"]]  # the sweep is what the comment says
    assert built.attrs["das"] == {"searched": len(lookups), "cached": 0}
    for _, r in lookups.iterrows():
        model = checkpoints.load(runs.loc[r["name"], "checkpoint"])
        for variable in ("value", "query"):
            with one_thread():  # as the atlas measures (two threads on shared cores wait on each other)
                ref = das.learned_dim(model, variable, at=r["at"], batch_size=BATCH)
            got = r[f"{variable}_das_dim"]
            assert ref.axes_dim == (None if math.isnan(r[f"{variable}_dim"]) else r[f"{variable}_dim"])
            if not near(ref):
                assert got == (math.nan if ref.dim is None else ref.dim) or (ref.dim is None and math.isnan(got)), \
                    (r["name"], variable, ref, got)
            assert r["das_with"] == atlas_das.das_with(BATCH)
    others = built[~built.index.isin(lookups.index)]
    assert others[list(atlas_das.COLUMNS)].isna().all().all()


def test_a_rerun_reuses_the_learned_dimension_and_without_das_keeps_it(sweep_dir, built, tmp_path):
    atlas.write_atlas(built, tmp_path)
    again = atlas.build_atlas(sweep_dir, batch_size=BATCH, cache=tmp_path / "atlas.csv", das=True)
    n = int(((built.outcome == "success") & built.routing.isin(atlas_das.LOOKUPS)).sum())
    assert again.attrs["das"] == {"searched": 0, "cached": n}
    plain = atlas.build_atlas(sweep_dir, batch_size=BATCH, cache=tmp_path / "atlas.csv")
    for df in (again, plain):
        assert df.set_index("name")[list(atlas_das.COLUMNS)].equals(built.set_index("name")[list(atlas_das.COLUMNS)])
    # another batch size is another search: not reused
    assert atlas_das.das_with(BATCH) != atlas_das.das_with(2 * BATCH)


def test_every_successful_lookup_carries_the_geometry_of_its_checkpoint(sweep_dir, built):
    runs = store.read(sweep_dir / "results" / "store.sqlite").set_index("name")
    lookups = built[(built.outcome == "success") & built.routing.isin(atlas_das.LOOKUPS)]
    assert built.attrs["geometry"] == {"measured": len(lookups), "cached": 0}
    for _, r in lookups.iterrows():
        model = checkpoints.load(runs.loc[r["name"], "checkpoint"])
        with one_thread():
            ref = figures.measure_model(model, batch_size=BATCH, seed=0, at=r["at"])
        assert (r["geometry"], r["key_geometry"]) == (ref["value"]["label"], ref["query"]["label"])
        for variable in ("value", "query"):
            for column in atlas_geometry.columns(variable):
                want = ref[variable][column.split("_fig_")[1]]
                assert r[column] == want or (math.isnan(want) and math.isnan(r[column])), (column, r[column], want)
    others = built[~built.index.isin(lookups.index)]
    assert others[list(atlas_geometry.COLUMNS)].isna().all().all() and (others["geometry"] == "").all()


def test_a_rerun_reuses_the_geometry_and_relabels_it_from_the_measures(sweep_dir, built, tmp_path):
    atlas.write_atlas(built, tmp_path)
    again = atlas.build_atlas(sweep_dir, batch_size=BATCH, cache=tmp_path / "atlas.csv", geometry=True)
    n = int(((built.outcome == "success") & built.routing.isin(atlas_das.LOOKUPS)).sum())
    assert again.attrs["geometry"] == {"measured": 0, "cached": n}
    cols = [*atlas_geometry.COLUMNS, "geometry", "key_geometry"]
    a, b = again.set_index("name")[cols], built.set_index("name")[cols]
    assert a.fillna(-1).equals(b.fillna(-1))
    # the label is recomputed from the stored measures: a row whose measures say simplex reads simplex
    row = {**again.iloc[0].to_dict(), "n": 5, atlas_geometry.KEY: "x", "value_fig_norm_cv": 0.0,
           "value_fig_simplex_dev": 0.0}
    atlas_geometry.relabel(row)
    assert row["geometry"] == "simplex"


def test_interp_atlas_das_flag_writes_the_columns_and_skips_a_hard_attention_seed(tmp_path, capsys):
    """``interp atlas --das --geometry --json`` on a store whose one success is the case-3
    construction at n = 10 (leftmost attention: no gradient to learn a rotation through): the DAS
    columns are written, NaN there, and the run is not stopped; its value code, the paper's
    evenly spaced circle, reads ``circle`` (testable at n = 10)."""
    import json

    import pandas as pd

    from interp import cli
    from interp.core import constructions
    from interp.training.runs import TrainConfig, evaluate_accuracy

    root = tmp_path / "known"
    with store.Store(root / "results" / "store.sqlite") as db:
        cfg = TrainConfig(case=3, n=10, d_token=2, pos_embed="none", init="pytorch", seed=0)
        model = constructions.build(3, 10)
        path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
        db.put(store.RunRecord(name=cfg.name(), sweep="known", config=cfg.to_dict(), seed=0, status="ok",
                               accuracy=evaluate_accuracy(model, cfg), steps=10), path)
    assert cli.main(["atlas", str(root), "--batch-size", "64", "--das", "--geometry", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    df = pd.read_csv(root / "atlas.csv")
    assert out["das"] == {"searched": 0, "cached": 0} and set(atlas_das.COLUMNS) <= set(df.columns)
    assert df.loc[0, "outcome"] == "success" and df.loc[0, "routing"] in atlas_das.LOOKUPS  # searched, then skipped
    assert df[list(atlas_das.COLUMNS)].isna().all().all()
    assert out["geometry"] == {"measured": 1, "cached": 0}
    assert df.loc[0, "geometry"] == "circle", df.loc[0, list(atlas_geometry.COLUMNS)].to_dict()
