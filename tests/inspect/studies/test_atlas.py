"""The atlas on a sweep trained here (one row per run, the store's accuracy, measures only where
they should be, the cache), its architecture names, and its figures read off the Figure objects.

References: the store's own rows (:func:`interp.sweeps.store.read`), the outcome thresholds of
PREDICTIONS.md written out here, :func:`interp.inspect.mechanism.measure.measure` called directly on the
checkpoint, and success fractions and step lines computed by hand from hand-made tables.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from interp.inspect.mechanism import labels
from interp.inspect.studies import analysis, atlas, atlas_figures
from interp.sweeps import driver as sweeps, store
from interp.training import checkpoints, machine

# case 1 at n = 3 and lr 0.01 learns in ~60 steps in some seeds and not in others (a partial
# and two successes), with an MLP too (so an MLP row is measured); case 5 at n = 3 with 60
# steps does not: failed seeds
TINY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

common = dict(n=3, pos_embed="learned", batch_size=128, eval_batches=4, init="pytorch", curve_every=20)
CONFIGS = (
    [TrainConfig(case=1, d_token=8, lr=0.01, max_steps=300, seed=s, **common) for s in (0, 1, 2)]
    + [TrainConfig(case=5, d_token=8, n_layers=2, max_steps=60, seed=s, **common) for s in (0, 1)]
    + [TrainConfig(case=1, d_token=8, d_mlp=32, lr=0.01, max_steps=300, seed=0, **common)]
)
LAYOUT = TableLayout(rows=("case", "n_layers"), column="d_token", title="atlas test")
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("atlas") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    sweeps.run_sweep(sweeps.load(folder))
    return folder


@pytest.fixture(scope="module")
def built(sweep_dir):
    return atlas.build_atlas(sweep_dir, batch_size=64)


def expected_outcome(acc: float, n: int) -> str:
    """PREDICTIONS.md: success >= 99%, failed below max(2/n, 5%), partial otherwise."""
    return "success" if acc >= 0.99 else "failed" if acc < max(2 / n, 0.05) else "partial"


def test_one_row_per_run_with_the_stores_accuracy_and_cell(sweep_dir, built):
    runs = store.read(sweep_dir / "results" / "store.sqlite").set_index("name")
    assert sorted(built["name"]) == sorted(runs.index) and len(built) == 6
    for _, r in built.iterrows():
        s = runs.loc[r["name"]]
        assert r["accuracy"] == s["accuracy"] and r["steps"] == s["steps"]
        assert (r["case"], r["n"], r["d_token"], r["n_layers"], r["d_mlp"], r["seed"]) == (
            s["case"], s["n"], s["d_token"], s["n_layers"], s.get("d_mlp", 0), s["seed"])
        assert r["outcome"] == expected_outcome(r["accuracy"], r["n"])
        assert r["architecture"] == ("attention-only" if s.get("d_mlp", 0) == 0 else "mlp-4x")
    # the sweep is what the comment says: something to measure, something not to
    assert "success" in set(built.outcome) and "failed" in set(built.outcome), built.outcome.tolist()


def test_failed_seeds_are_not_measured_and_the_others_carry_measure_and_their_label(sweep_dir, built):
    runs = store.read(sweep_dir / "results" / "store.sqlite").set_index("name")
    for _, r in built.iterrows():
        if r["outcome"] == "failed":
            assert r["label"] == "failed" and np.isnan(r["acc"]) and np.isnan(r["qk_diag"])
            continue
        model = checkpoints.load(runs.loc[r["name"], "checkpoint"])
        direct = analysis.measure(model, case=int(r["case"]), n=int(r["n"]), batch_size=64)
        for k in ("acc", "acc_any", "mass", "qk_diag", "ov_diag", "follow", "acc_mean_mlp", "attn_picks_slot"):
            assert r[k] == pytest.approx(direct[k], abs=1e-12, nan_ok=True), k
        assert r["mlp_role"] == direct["mlp_role"]
        assert r["label"] == labels.mechanism(direct) and r["label"] in labels.MECHANISMS
    # the MLP run is measured (not skipped as failed), so an MLP row's columns are checked above
    mlp_rows = built[built["architecture"] != "attention-only"]
    assert len(mlp_rows) == 1 and mlp_rows.iloc[0]["outcome"] != "failed", mlp_rows.outcome.tolist()
    assert mlp_rows.iloc[0]["mlp_role"] in ("passes", "helps", "needed")


def test_seeds_are_measured_on_one_torch_thread_and_the_count_is_restored(sweep_dir, monkeypatch):
    import torch

    seen = []
    monkeypatch.setattr(analysis, "measure", lambda *a, **kw: seen.append(torch.get_num_threads()) or {})
    r = store.read(sweep_dir / "results" / "store.sqlite").iloc[0]
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # whatever the test process runs on: two threads to come back to
    try:
        base = {"name": r["name"], "case": int(r["case"]), "n": int(r["n"])}
        assert atlas._measure(r, base, 64, sweep_dir / "results" / "store.sqlite", r) == {}
        assert seen == [1] and torch.get_num_threads() == 2
        with pytest.raises(RuntimeError, match="inside"), machine.one_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("case, d_token, d_mlp, mlp, layers, name", [
    (1, 8, 0, "every", 1, "attention-only"),
    (5, 4, 16, "every", 1, "mlp-4x"),       # d_model = d_token
    (3, 4, 32, "every", 1, "mlp-4x"),       # d_model = 2 d_token in cases 2-3
    (3, 4, 16, "every", 1, "mlp-2x"),
    (1, 8, 20, "every", 1, "mlp-20"),       # not a whole multiple: the width itself
    (5, 8, 32, "last", 2, "mlp-4x-last"),
    (5, 8, 32, "last", 1, "mlp-4x"),        # one layer: "last" is "every"
])
def test_architecture_names_by_rule(case, d_token, d_mlp, mlp, layers, name):
    assert atlas.architecture(case, d_token, d_mlp, mlp, layers) == name


def test_a_run_off_the_grids_reading_is_named_with_its_fields_not_pooled():
    assert atlas.architecture(5, 8, 32, "every", 1, **atlas.READING) == "mlp-4x"
    assert atlas.architecture(5, 8, 32, "last", 2, attn_bias=False, W_O="identity", init="pytorch") == \
        "mlp-4x-last[W_O=identity,attn_bias=False]"
    assert atlas.architecture(1, 8, 0, init="gpt2", embed_scale="sqrt_d_model") == \
        "attention-only[embed_scale=sqrt_d_model,init=gpt2]"
    with pytest.raises(ValueError, match="lr"):
        atlas.architecture(1, 8, 0, lr=0.01)
    # a stored row, as read_runs gives it (numpy bools), named from its own fields
    import numpy as np
    row = {**dict(case=1, n=3, d_token=8, n_layers=1, pos_embed="learned", d_mlp=0, mlp="every",
                  function="permutation", seed=0, name="x", status="ok", accuracy=1.0, steps=10),
           **atlas.READING, "unembed_bias": np.bool_(False)}
    assert atlas._base(row)["architecture"] == "attention-only[unembed_bias=False]"
    assert atlas._base({**row, "unembed_bias": np.bool_(True)})["architecture"] == "attention-only"


def test_a_named_reading_is_one_name_in_every_cell_and_only_with_exactly_its_fields():
    """f14's fields, written as the screen writes a cell (key order only with permuted keys, the
    residual only with two layers), name a run ``[f14]`` in every case; one field more or less
    is a different model and keeps its fields in the name."""
    f14 = dict(unembed_bias=False, W_O="identity", residual="embed", key_order="batch")
    assert atlas.NAMED["f14"] == f14
    hand = {  # (case, n_layers): the fields the screen writes there, by hand
        (1, 1): dict(unembed_bias=False, W_O="identity"),
        (4, 1): dict(unembed_bias=False, W_O="identity"),      # case 4's keys are in order
        (3, 1): dict(unembed_bias=False, W_O="identity", key_order="batch"),
        (5, 1): dict(unembed_bias=False, W_O="identity", key_order="batch"),
        (5, 2): f14,
    }
    for (case, layers), fields in hand.items():
        assert atlas.acting(f14, case, layers) == fields
        assert atlas.architecture(case, 8, 4 * (16 if case == 3 else 8), "last", layers, **fields) == \
            ("mlp-4x-last[f14]" if layers == 2 else "mlp-4x[f14]")
    assert atlas.architecture(1, 8, 0, unembed_bias=False, W_O="identity") == "attention-only[f14]"
    assert atlas.architecture(5, 8, 32, "last", 2, unembed_bias=False, W_O="identity", key_order="batch") == \
        "mlp-4x-last[W_O=identity,key_order=batch,unembed_bias=False]"  # no residual "embed": not f14
    assert atlas.architecture(1, 8, 0, unembed_bias=False, W_O="identity", attn_bias=False) == \
        "attention-only[W_O=identity,attn_bias=False,unembed_bias=False]"
    # the PE init acts only with a learned PE
    assert atlas.acting({"pos_init": "zero"}, 1, 1, "none") == {}
    assert atlas.acting({"pos_init": "zero"}, 1, 1, "learned") == {"pos_init": "zero"}


@pytest.fixture
def counted(monkeypatch):
    """The names of the runs :func:`analysis.measure` is called for, measuring for real."""
    seen = []
    real = analysis.measure

    def counting(model, **kw):
        seen.append((kw["case"], kw["n"]))
        return real(model, **kw)

    monkeypatch.setattr(analysis, "measure", counting)
    return seen


def test_the_cache_lends_known_rows_and_measures_only_the_rest(built, sweep_dir, tmp_path, counted):
    atlas.write_atlas(built, tmp_path)
    cache = tmp_path / "atlas.csv"
    again = atlas.build_atlas(sweep_dir, batch_size=64, cache=cache)
    assert counted == []  # every run known
    cols = ["name", "accuracy", "outcome", "label", "acc", "qk_diag", "follow"]
    pd.testing.assert_frame_equal(again[cols], built[cols], check_dtype=False)
    measured = built[built.outcome != "failed"]
    assert len(measured) >= 2
    # one measured run missing from the cache (a run that landed since) and one whose stored
    # accuracy no longer matches: only those two are measured
    table = pd.read_csv(cache)
    table = table[table.name != measured.name.iloc[0]]
    table.loc[table.name == measured.name.iloc[-1], "accuracy"] = 0.5
    table.to_csv(cache, index=False)
    third = atlas.build_atlas(sweep_dir, batch_size=64, cache=cache)
    assert len(counted) == 2
    pd.testing.assert_frame_equal(third[cols], built[cols], check_dtype=False)


def test_a_cut_or_edited_row_or_other_options_are_measured_again(built, sweep_dir, tmp_path, counted):
    """Issue 43: cached rows carry their run's checksum digest, the measuring options and a seal
    of their own fields; an edit, a cut or another batch size sends the row to be measured."""
    atlas.write_atlas(built, tmp_path)
    cache = tmp_path / "atlas.csv"
    lines = cache.read_text().splitlines()
    measured = built[built.outcome != "failed"]
    i = 1 + int(measured.index[0])  # its line (after the header)
    fields = lines[i].split(",")
    col = lines[0].split(",").index("qk_diag")
    fields[col] = "0.0" if fields[col] != "0.0" else "1.0"  # a hand edit of one measure
    lines[i] = ",".join(fields)
    cache.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # last row cut
    again = atlas.build_atlas(sweep_dir, batch_size=64, cache=cache)
    assert again.attrs["cache"]["bad"] == 2
    assert len(counted) >= 1  # the edited measured row at least, measured for real
    cols = ["name", "label", "qk_diag", "follow"]
    pd.testing.assert_frame_equal(again[cols], built[cols], check_dtype=False)
    counted.clear()
    atlas.write_atlas(built, tmp_path)
    atlas.build_atlas(sweep_dir, batch_size=32, cache=cache)  # other options: every measured row
    assert len(counted) == len(measured)


def test_a_swapped_checkpoint_is_skipped_by_name(built, sweep_dir, tmp_path):
    """Two checkpoint folders swapped (each self-consistent): never measured as the other run."""
    import shutil

    copy = tmp_path / "tiny"
    shutil.copytree(sweep_dir, copy)
    runs = store.read(copy / "results" / "store.sqlite")
    measured = runs[runs.accuracy >= 0.5]
    a, b = (copy / "results" / "checkpoints" / str(n) for n in measured.name.iloc[:2])
    tmp = a.with_name("swap")
    a.rename(tmp), b.rename(a), tmp.rename(b)
    df = atlas.build_atlas(copy, batch_size=64)
    for name in measured.name.iloc[:2]:
        row = df[df.name == name].iloc[0]
        assert row["label"] == "unmeasured" and name in row["note"] and "checkpoint" in row["note"]
    assert df.attrs["cache"]["skipped"] == 2


def test_write_atlas_writes_all_files_or_none(built, tmp_path, monkeypatch):
    import os

    first = atlas.write_atlas(built, tmp_path)
    before = {k: v.read_bytes() for k, v in first.items() if k != "predictions"}
    from interp.training import files

    real, made = files._create_beside, []

    def failing(path):  # the third file of the set meets a full disk
        made.append(path)
        if len(made) >= 3:
            raise OSError(28, "No space left on device")
        return real(path)

    monkeypatch.setattr(files, "_create_beside", failing)
    with pytest.raises(ValueError, match="No space left"):
        atlas.write_atlas(built.assign(accuracy=0.0), tmp_path)
    monkeypatch.undo()
    assert {k: first[k].read_bytes() for k in before} == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_file_that_is_no_atlas_table_is_refused(sweep_dir, tmp_path):
    (tmp_path / "atlas.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="is not an atlas table"):
        atlas.build_atlas(sweep_dir, cache=tmp_path / "atlas.csv")
    with pytest.raises(ValueError, match="no results store"):
        atlas.build_atlas(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="batch_size=0"):
        atlas.build_atlas(sweep_dir, batch_size=0)


# ----------------------------------------------------------------------------- figures, atlas.md


def _rows(case, layers, arch, cells):
    """Atlas rows: ``cells`` maps (n, d_token) to a list of (outcome, label) per seed."""
    out = []
    for (n, d), seeds in cells.items():
        for seed, (outcome, label) in enumerate(seeds):
            out.append(dict(case=case, n=n, d_token=d, n_layers=layers, architecture=arch,
                            function="permutation", seed=seed, outcome=outcome, label=label,
                            accuracy=1.0 if outcome == "success" else 0.0))
    return out


S, F = ("success", "construction"), ("failed", "failed")
HAND = pd.DataFrame(
    _rows(1, 1, "attention-only", {(3, 2): [F, F], (3, 4): [S, ("success", "inverted"), F],
                                   (10, 4): [S, S], (10, 8): [S, ("success", "none")]})
    + _rows(5, 1, "mlp-4x", {(3, 4): [F], (3, 8): [S], (5, 4): [F], (5, 8): [F], (5, 16): [S]}))


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def test_figures_have_titled_panels_labelled_axes_and_the_cells_values():
    figs = atlas_figures.figures(HAND)
    assert set(figs) == {"atlas-success", "atlas-mechanism"}
    for name, fig in figs.items():
        assert "Atlas" in fig._suptitle.get_text()
        panels = _panels(fig)
        assert [ax.get_title() for ax in panels] == ["case 1, 1 layer, attention-only, permutation",
                                                     "case 5, 1 layer, mlp-4x, permutation"], name
        for ax in panels:
            assert (ax.get_xlabel(), ax.get_ylabel()) == ("d_token", "n")
        first, second = panels
        assert [t.get_text() for t in first.get_xticklabels()] == ["2", "4", "8"]
        assert [t.get_text() for t in first.get_yticklabels()] == ["3", "10"]
        assert [t.get_text() for t in second.get_xticklabels()] == ["4", "8", "16"]
    success = _panels(figs["atlas-success"])[0].images[0].get_array()
    expected = np.ma.masked_invalid([[0, 2 / 3, np.nan], [np.nan, 1, 1]])
    assert (success.mask == expected.mask).all()
    assert np.allclose(success.filled(-1), expected.filled(-1))
    texts = sorted(t.get_text() for t in _panels(figs["atlas-success"])[0].texts)
    assert texts == ["0/2", "2/2", "2/2", "2/3"]
    mech = _panels(figs["atlas-mechanism"])[0]
    assert sorted(t.get_text() for t in mech.texts) == ["-", "c1 i1", "c1 o1", "c2"]
    legend = [t.get_text() for t in figs["atlas-mechanism"].legends[0].get_texts()]
    assert {"construction", "inverted", "mirror", "none", "no successful seed"} <= set(legend)
    order = list(atlas_figures.COLOURS) + [atlas_figures.NO_SUCCESS]
    codes = mech.images[0].get_array()  # the tie c1 i1 goes to construction, listed first
    assert [order[int(codes[0, 0])], order[int(codes[0, 1])], order[int(codes[1, 2])]] == [
        "no successful seed", "construction", "construction"]


def test_theorem_35_line_steps_at_2n_plus_2():
    fig = atlas_figures.figures(HAND)["atlas-success"]
    _, mlp = _panels(fig)
    (line,) = mlp.lines
    # n = 3: 2n + 2 = 8 -> column 1 (d_token 8); n = 5: 12 -> column 2 (16)
    assert list(line.get_xdata()) == [0.5, 0.5, 1.5, 1.5]
    assert list(line.get_ydata()) == [-0.5, 0.5, 0.5, 1.5]
    assert "Theorem 3.5: d_token >= 2n + 2" in [t.get_text() for t in fig.legends[0].get_texts()]
    # PREDICTIONS.md, P6(a): below the line "n = 3: d_token 4; n = 5: 4, 8; n = 10: 4-16; n = 20:
    # every core width"
    least = atlas_figures.theory_line(5, 1, "mlp-4x")[1]
    below = {n: [d for d in (4, 8, 16, 32) if d < least(n)] for n in (3, 5, 10, 20)}
    assert below == {3: [4], 5: [4, 8], 10: [4, 8, 16], 20: [4, 8, 16, 32]}
    assert atlas_figures.theory_line(5, 1, "attention-only") is None  # Theorem 3.6: no line
    # d_token = 2n + 2 itself is on the enough side (P6(a) refutes only d_token < 2n + 2)
    edge = pd.DataFrame(_rows(5, 1, "mlp-4x", {(5, 11): [S], (5, 12): [S]}))
    (line,) = _panels(atlas_figures.success_figure(edge))[0].lines
    assert list(line.get_xdata()) == [0.5, 0.5]


def test_write_atlas_files_and_markdown(tmp_path, assert_drawn):
    paths = atlas.write_atlas(HAND, tmp_path, source="experiments/atlas/results")
    for name in ("atlas.csv", "atlas.md", "atlas-success.png", "atlas-mechanism.png"):
        assert (tmp_path / name).is_file()
    assert_drawn(tmp_path / "atlas-success.png")
    md = (tmp_path / "atlas.md").read_text()
    assert "`interp atlas experiments/atlas/results`" in md
    assert "| 3 | 0/2 | 2/3 c1 i1 |  |" in md and "| 10 |  | 2/2 c2 | 2/2 c1 o1 |" in md
    assert "## case 5, 1 layer, mlp-4x, permutation" in md
    for p in paths["predictions"]:
        assert f"| **{p['name']}** {p['claim']} | {p['verdict']} |" in md
    assert len(pd.read_csv(tmp_path / "atlas.csv")) == len(HAND)


def _row(case, n, d, outcome, label, arch="attention-only", layers=1, accuracy=None):
    acc = {"success": 1.0, "partial": 0.5, "failed": 0.0}[outcome] if accuracy is None else accuracy
    return dict(case=case, n=n, d_token=d, n_layers=layers, architecture=arch, function="permutation",
                outcome=outcome, label=label, accuracy=acc)


def test_summary_counts_cells_seeds_and_labels_per_panel():
    import pandas as pd
    rows = [_row(1, 3, 4, "success", "construction"), _row(1, 3, 4, "success", "construction"),
            _row(1, 3, 4, "success", "mirror"),          # cell (3, 4): mostly construction
            _row(1, 3, 8, "success", "mirror"), _row(1, 3, 8, "failed", "failed"),  # success, none construction
            _row(1, 5, 4, "success", "construction"), _row(1, 5, 4, "success", "inverted"),  # half: not mostly
            _row(1, 5, 8, "partial", "none"),             # no success
            _row(3, 3, 2, "success", "odd-label")]         # a second panel, a label without a column
    lines = atlas.summary_markdown(pd.DataFrame(rows))
    assert lines[0].startswith("| panel | cells | cells with a success | seeds successful | construction | mirror | "
                               "inverted | mlp-lookup | none | unmeasured | other labels |")
    assert lines[2] == "| case 1, 1 layer, attention-only, permutation | 4 | 3 | 6 of 8 | 3 | 2 | 1 | 0 | 0 | 0 | 0 | 1 | 1 |"
    assert lines[3] == "| case 3, 1 layer, attention-only, permutation | 1 | 1 | 1 of 1 | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 1 |"


def test_theory_section_places_seeds_beside_each_line_and_theorems_3_4_3_7_where_they_bind():
    import math

    import pandas as pd
    mlp = "mlp-4x"
    rows = [_row(5, 3, 4, "success", "mlp-lookup", mlp), _row(5, 3, 8, "success", "mlp-lookup", mlp),
            _row(5, 3, 8, "failed", "failed", mlp),                 # 2n + 2 = 8: one below, one at
            _row(1, 5, 2, "success", "none"), _row(1, 5, 4, "partial", "none"),  # below d_model 4
            _row(5, 50, 2, "partial", "none", accuracy=0.42),       # binds at p = 32: 50 log2 50 > 96 * 2
            _row(5, 50, 4, "failed", "failed", accuracy=0.03),      # 282.2 < 384: does not bind
            _row(5, 5, 8, "success", "none", "attention-only[init=gpt2]")]  # no line (Theorem 3.6)
    lines = atlas.theory_markdown(pd.DataFrame(rows))
    assert "| case 5, 1 layer, mlp-4x, permutation | Theorem 3.5: d_token >= 2n + 2 | 3 | 8 | 4 | 1 | 1 |" in lines
    assert "| case 1, 1 layer, attention-only, permutation | Theorems 3.1-3.3: d_model >= 4 (d_token >= 4) | 5 | 4 | 2 | 1 | 0 |" in lines
    assert not any("attention-only[init=gpt2]" in line for line in lines)
    assert any("1 cell of this atlas" in line for line in lines)
    R = 50 * math.log2(50) - 3 * 1 * 2 * 32
    err = R / (3 * 50 * math.log2(50))
    assert f"| 50 | 2 | {R:.1f} | {100 * err:.2f}% | {100 * (1 - err):.2f}% | 42.00% | 1 |" in lines
    assert R == pytest.approx(90.19, abs=0.01) and not any(line.startswith("| 50 | 4 |") for line in lines)


def test_probe_and_analysis_check_a_sweeps_run_against_its_store_row(sweep_dir, tmp_path, capsys):
    """Issue 43: ``interp probe`` of a sweep's run folder and ``analyze_sweep`` refuse or skip a
    checkpoint that is not its store row's (two folders swapped)."""
    import shutil

    from interp import cli

    copy = tmp_path / "tiny"
    shutil.copytree(sweep_dir, copy)
    runs = store.read(copy / "results" / "store.sqlite")
    names = [str(n) for n in runs[runs.accuracy >= 0.5].name.iloc[:2]]
    a, b = (copy / "results" / "checkpoints" / n for n in names)
    tmp = a.with_name("swap")
    a.rename(tmp), b.rename(a), tmp.rename(b)
    assert cli.main(["probe", str(a), "--json", "--batch-size", "64"]) != 0
    err = capsys.readouterr().err
    assert names[0] in err and "checkpoint" in err
    res = analysis.analyze_sweep(copy, batch_size=64, all_groups=True)
    ok = runs[(runs.status == "ok") & runs.checkpoint.notna()]
    assert len(res.table) == len(ok) - 2  # the two swapped runs skipped, every other measured


def test_rows_of_an_older_measures_version_are_reused_only_where_still_valid(built, sweep_dir, tmp_path, counted):
    """Version 3 changed only the target key's code of rows read at the key position (the
    mirror): version 2's rows read at the value position are reused, one read at the key is
    measured again, and a version no rule covers sends every row to be measured."""
    import re

    from interp.inspect.studies import atlas_cache

    measured = built[built.outcome != "failed"]
    old = built.copy()
    old["measured_with"] = [re.sub(r"measures=\d+$", "measures=2", m) for m in old["measured_with"]]
    old.loc[old.name == measured.name.iloc[0], "at"] = "key"
    cache = tmp_path / "atlas.csv"
    cache.write_text(atlas_cache.seal(old.to_csv(index=False)))
    again = atlas.build_atlas(sweep_dir, batch_size=64, cache=cache)
    assert len(counted) == 1 and again.attrs["cache"]["bad"] == 0
    assert set(again["measured_with"]) == {atlas_cache.measured_with(64)}
    old["measured_with"] = [m.replace("measures=2", "measures=1") for m in old["measured_with"]]
    cache.write_text(atlas_cache.seal(old.to_csv(index=False)))
    counted.clear()
    atlas.build_atlas(sweep_dir, batch_size=64, cache=cache)
    assert len(counted) == len(measured)
    assert atlas_cache.same_measures({"measured_with": "batch=64;seed=0;measures=2", "at": "value"},
                                     atlas_cache.measured_with(64))
    assert not atlas_cache.same_measures({"measured_with": "batch=32;seed=0;measures=2", "at": "value"},
                                         atlas_cache.measured_with(64))
