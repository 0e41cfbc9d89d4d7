"""The geometry label (issue 51, item 1): its measures against plain numpy computations of
hand-built figures, its calibrated thresholds against the declared rule, and hand-built models
read through ``interp probe CKPT --json``."""

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from interp.inspect.mechanism import calibration, figure_controls, figures, shapes

ROOT = Path(__file__).resolve().parents[3]


def _np_cosines(X):
    """Reference: cosines of the rows of X after subtracting their mean, pair by pair."""
    C = X - X.mean(0)
    out = np.zeros((len(C), len(C)))
    for i, j in itertools.product(range(len(C)), repeat=2):
        out[i, j] = C[i] @ C[j] / (np.linalg.norm(C[i]) * np.linalg.norm(C[j]))
    return out


@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_a_one_hot_table_is_a_simplex(n):
    """e_1..e_n centred is the regular simplex: cosines -1/(n-1) (numpy), equal norms."""
    X = np.eye(n) * 3.0 + 7.0  # any scale, any offset: the global mean is removed first
    ref = _np_cosines(X)
    assert np.allclose(ref[~np.eye(n, dtype=bool)], -1 / (n - 1))
    m = figures.table_measures(torch.tensor(X))
    assert m["simplex_dev"] < 1e-12 and m["norm_cv"] < 1e-12 and m["cos_sd"] < 1e-12
    assert m["pr"] == pytest.approx(n - 1)


@pytest.mark.parametrize("n", [4, 10])
def test_a_shuffled_orthoplex_is_found_with_its_antipodes(n):
    rng = np.random.default_rng(0)
    half = np.eye(n // 2)
    X = np.concatenate([half, -half])[rng.permutation(n)] @ np.linalg.qr(rng.normal(size=(n // 2, n // 2)))[0]
    m = figures.table_measures(torch.tensor(X))
    assert m["orthoplex_dev"] < 1e-12 and m["norm_cv"] < 1e-12 and m["cos_max"] == pytest.approx(1.0)
    pairs = figures.antipodal_pairing(torch.tensor(_np_cosines(X)))
    assert sorted(tuple(sorted(p)) for p in pairs) == sorted(
        (i, j) for i, j in itertools.combinations(range(n), 2) if np.allclose(X[i], -X[j]))
    assert math.isnan(figures.table_measures(torch.tensor(X[:-1]))["orthoplex_dev"])  # odd n: no orthoplex


def test_measures_of_a_random_table_equal_numpy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(7, 5)) * rng.uniform(0.5, 2, size=(7, 1))
    m = figures.table_measures(torch.tensor(X))
    cos = _np_cosines(X)[~np.eye(7, dtype=bool)]
    norms = np.linalg.norm(X - X.mean(0), axis=1)
    s2 = np.linalg.svd(X - X.mean(0), compute_uv=False) ** 2
    assert m["norm_cv"] == pytest.approx(norms.std() / norms.mean(), rel=1e-9)
    assert m["simplex_dev"] == pytest.approx(np.sqrt(np.mean((cos + 1 / 6) ** 2)), rel=1e-9)
    assert m["cos_max"] == pytest.approx(np.abs(cos).max(), rel=1e-9)
    assert m["pr"] == pytest.approx(s2.sum() ** 2 / (s2 ** 2).sum(), rel=1e-9)


def test_collapse_is_within_over_between_scatter():
    rng = np.random.default_rng(2)
    V = rng.normal(size=(6, 4, 3))
    Vc = V - V.mean(1, keepdims=True)
    within = sum(np.sum((Vc[c, u] - Vc[:, u].mean(0)) ** 2) for c in range(6) for u in range(4)) / 24
    between = sum(np.sum(Vc[:, u].mean(0) ** 2) for u in range(4)) / 4
    assert figures.collapse(torch.tensor(V)) == pytest.approx(within / between, rel=1e-9)
    same = np.broadcast_to(rng.normal(size=(1, 4, 3)), (5, 4, 3))  # every context writes the same code
    assert figures.collapse(torch.tensor(same.copy())) < 1e-20


def test_self_duality_and_margin_by_hand():
    P = torch.tensor([[1.0, 0], [0, 1], [-1, 0], [0, -1]], dtype=torch.float64)
    assert figures.self_duality(P, 2 * P.T) == pytest.approx(1.0)
    assert figures.self_duality(P, -P.T) == pytest.approx(-1.0)
    logits = np.array([[3.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0], [0.0, 5.0, 1.0, 0.0]])
    answer = [0, 3, 2]  # the third input answered wrong: a negative lead
    leads = [(z[a] - max(np.delete(z, a))) / z.std(ddof=1) for z, a in zip(logits, answer)]
    assert figures.margin(torch.tensor(logits), torch.tensor(answer)) == pytest.approx(float(np.median(leads)))


@pytest.mark.parametrize("bad,match", [
    (lambda: figures.table_measures(torch.zeros(1, 3)), r"shape \(1, 3\)"),
    (lambda: figures.table_measures(torch.zeros(4)), r"shape \(4,\)"),
    (lambda: figures.table_measures(torch.tensor([[1.0, math.nan], [0, 1]])), "non-finite"),
    (lambda: figures.table_measures(torch.ones(3, 2)), "all equal"),
    (lambda: figures.calibrated_size(1), "n=1"),
    (lambda: figure_controls.draw("hexagon", 5, 0), "family='hexagon'"),
    (lambda: figure_controls.draw("orthoplex", 5, 0), "even n"),
    (lambda: figure_controls.draw("simplex", 2, 0), "n=2"),
    (lambda: figures.stream_map(figure_controls.lookup_with_values(3, torch.eye(3)), "key"), "variable='key'"),
    (lambda: figure_controls.lookup_with_values(3, torch.zeros(3, 4)), r"shape \(3, 4\)"),
    (lambda: figure_controls.lookup_with_values(3, torch.eye(3), case=1), "case=1"),
])
def test_bad_input_is_named(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_label_below_three_and_between_sizes():
    m = figures.table_measures(torch.eye(12, dtype=torch.float64))
    assert figures.label({**m, "n": 2}) == "untestable"
    assert figures.calibrated_size(12) == 10 and figures.calibrated_size(500) == 50


def _check():
    spec = importlib.util.spec_from_file_location("geometry_check", ROOT / "experiments/calibration/geometry_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    return check


def test_the_committed_thresholds_are_the_declared_rules_choice():
    """geometry_check.py's rule applied to the committed rows picks what calibration holds."""
    check = _check()
    rows = check.read()
    chosen = check.choose(rows)
    T = calibration.THRESHOLDS
    for keys in check.KEYS.values():
        for k in keys:
            assert chosen[k] == T[k], k
    assert chosen["geometry_testable"] == T["geometry_testable"]
    expected = sum(figure_controls.DRAWS[f] for n in check.NS for f in figure_controls.families_at(n))
    assert len(rows) == expected
