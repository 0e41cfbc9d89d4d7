"""Issue 28's screen: the declared design (experiments/readings/screen/design.py) is what
DESIGN.md says, and its score script computes W, D, main effects, Lenth's margin and the drift
check as declared (on hand-made numbers whose answers are known)."""

import importlib.util
import itertools
import math
import pathlib
import sys

import pytest

SCREEN = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "readings" / "screen"


def _load(name):
    sys.path.insert(0, str(SCREEN))
    spec = importlib.util.spec_from_file_location(f"screen_{name}", SCREEN / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


design, score = _load("design"), _load("score")


def test_block_1_is_the_declared_fraction_and_both_blocks_are_resolution_iv():
    rows = design.block(1)
    assert rows[0] == {k: -1 for k in design.LETTERS}  # f01: every factor at its default
    for r in rows:  # generators O = -AS, P = -AU, I = -SU, R = ASU, K at its default
        assert (r["O"], r["P"], r["I"], r["R"], r["K"]) == (
            -r["A"] * r["S"], -r["A"] * r["U"], -r["S"] * r["U"], r["A"] * r["S"] * r["U"], -1)
    both = rows + design.block(2)
    assert all(design.block(2)[i][k] == -rows[i][k] for i in range(8) for k in design.LETTERS)
    for a, b in itertools.combinations(design.LETTERS, 2):  # main effects orthogonal
        assert sum(r[a] * r[b] for r in both) == 0
    for k, (a, b) in itertools.product(design.LETTERS, itertools.combinations(design.LETTERS, 2)):
        assert sum(r[k] * r[a] * r[b] for r in both) == 0  # clear of every two-factor interaction
    _, chains = design.alias_chains()
    assert len(chains) == 7 and all(len(c) == 4 for c in chains)


def test_a_factor_that_cannot_act_is_written_at_its_default():
    on = {k: 1 for k in design.LETTERS}
    one_layer_none = design.cell_fields(on, "last-4d", (3, 100, 1, "none", 8))
    assert (one_layer_none["residual"], one_layer_none["pos_init"], one_layer_none["mlp"]) == ("stream", "drawn", "every")
    assert one_layer_none["key_order"] == "batch" and one_layer_none["embed_scale"] == "sqrt_d_model"
    case1 = design.cell_fields(on, "last-4d", (1, 100, 1, "learned", 8))
    assert case1["key_order"] == "sequence" and case1["pos_init"] == "zero"
    two = design.cell_fields(on, "last-4d", (5, 10, 2, "learned", 16))
    assert (two["residual"], two["mlp"], two["d_mlp"]) == ("embed", "last", 64)
    assert design.cell_fields(on, "last-2048", (3, 100, 1, "none", 8))["d_mlp"] == 2048
    with pytest.raises(ValueError, match="mlp_level='last'"):
        design.cell_fields(on, "last", (1, 100, 1, "learned", 8))


def test_every_combination_builds_its_70_runs_and_f01_one_layer_is_mlp_4x():
    for name in design.combinations():
        configs = design.configs(name)
        assert len(configs) == 70 and len({c.name() for c in configs}) == 70
    f01 = {c.name(): c for c in design.configs("f01") if c.n_layers == 1}
    mlp4x = {r["run"] for r in score._readings_score().csv_rows() if r["reading"] == "mlp-4x"}
    assert len(f01) == 45 and set(f01) <= mlp4x  # the drift check compares the same runs


def test_score_counts_within_5_points_and_mean_abs_diff_by_hand():
    paper = score.paper()
    cell = design.SCREENING[0]
    p_max, p_avg = paper[cell]
    seeds = {cell: [p_max - 4, p_max - 20, p_max - 20, p_max - 20, p_max - 20]}
    s = score.score(seeds)
    mean = (p_max - 4 + 4 * (p_max - 20)) / 5
    assert (s["wmax"], s["missing"], s["comparisons"]) == (1, 13, 2)
    assert s["wmean"] == int(abs(mean - p_avg) <= 5)
    assert s["mean_abs_diff"] == pytest.approx((4 + abs(mean - p_avg)) / 2)


def test_lenth_pse_by_hand():
    pse, me = score.lenth([1, -2, 3, 4, -5, 6, 20])
    # s0 = 1.5 * median |e| = 6; |e| < 15 keeps 1..6, median 3.5: PSE = 5.25
    assert pse == pytest.approx(5.25)
    assert me > 2.571 * pse  # t(0.975, 7/3) is larger than t(0.975, 5)


def test_main_effects_find_the_one_factor_that_moves_w(monkeypatch):
    combos = {f"f0{i + 1}": (r, design.FRACTION_MLP) for i, r in enumerate(design.block(1))}
    monkeypatch.setattr(design, "combinations", lambda: combos)
    cells = {c: (50.0, 40.0) for c in design.SCREENING}
    scores = {n: dict(missing=0, within=10 + 3 * lv["U"], mean_abs_diff=20.0 - lv["A"], cells=cells)
              for n, (lv, _) in combos.items()}
    text = "\n".join(score.main_effects(scores))
    assert "| U | `unembed_bias`: True / False | +6.00 * | +0.00 |" in text
    assert "| A | `attn_bias`: True / False | +0.00 | -2.00 * |" in text
    assert "resolution III" in text and "| K |" not in text  # K is at its default in all of block 1


def test_drift_flags_a_seed_more_than_half_a_point_from_seeds_csv():
    runs = [r for r in score._readings_score().csv_rows() if r["reading"] == "mlp-4x"][:2]
    rows = [dict(r, combination="f01", accuracy_pct=str(float(r["accuracy_pct"]) + d))
            for r, d in zip(runs, (0.4, 0.6))]
    flagged = score.drift(rows)
    assert len(flagged) == 1 and runs[1]["run"] in flagged[0]
    assert math.isfinite(float(runs[0]["accuracy_pct"]))


def test_both_blocks_add_the_seven_interaction_chains_and_the_declared_margin(monkeypatch):
    rows = design.block(1) + design.block(2)
    combos = {f"f{i + 1:02d}": (r, design.FRACTION_MLP) for i, r in enumerate(rows)}
    monkeypatch.setattr(design, "combinations", lambda: combos)
    cells = {c: (50.0, 40.0) for c in design.SCREENING}
    scores = {n: dict(missing=0, within=10 + 3 * lv["A"] * lv["U"], mean_abs_diff=20.0, cells=cells)
              for n, (lv, _) in combos.items()}
    text = "\n".join(score.main_effects(scores))
    assert "Lenth over 15 contrasts, t(0.975, 15/3)" in text and "resolution IV" in text
    assert "| AU = OI = RS = PK | interaction chain | +6.00 * | +0.00 |" in text
    assert "| A | `attn_bias`: True / False | +0.00 |" in text and "| K | `key_order`" in text
    from scipy import stats
    assert float(stats.t.ppf(0.975, 15 / 3)) == pytest.approx(2.571, abs=1e-3)  # DESIGN.md's number
    scores.pop("f16")  # block 2 short of one combination: block 1's analysis alone
    assert "Over block 1 alone (resolution III)" in score.main_effects(scores)[0]
    scores.pop("f01")  # no complete block: no effects yet
    assert score.main_effects(scores)[0].startswith("No main effects yet")
