"""The probes' held-out least squares (``probes.heldout_predictions``) against scikit-learn's
``cross_val_predict(LinearRegression())`` on the same shuffled KFold, the computation it
replaces: tall, wide (underdetermined folds), rank-deficient and exact-circle tables."""

import math

import numpy as np
import pytest
import torch
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_predict

from interp.inspect.tools import probes

TOL = 1e-9


def reference(X, Y, folds=5, seed=0):
    """scikit-learn's out-of-fold predictions, as ``heldout_predictions`` computed them before."""
    cv = KFold(n_splits=min(folds, len(X)), shuffle=True, random_state=seed)
    return cross_val_predict(LinearRegression(), np.asarray(X, float), np.asarray(Y, float), cv=cv)


def circle_targets(rows, n):
    """Every (N, m) target pair ``probe_table`` stacks for labels 0..n-1, as one [rows, 2 pairs] array."""
    labels = np.arange(rows) % n
    pairs = [(N, m) for N in (n, n + 1) for m in range(1, (N - 1) // 2 + 1)]
    return np.concatenate([probes.cs_targets(labels, N, m) for N, m in pairs], axis=1)


def tables():
    """(name, X, Y): the kinds of table the atlas probes, and harder ones."""
    rng = np.random.default_rng(0)
    out = []
    for rows, d in [(50, 8), (50, 32), (512, 64), (7, 3)]:  # tall: every fold overdetermined
        out.append((f"tall {rows}x{d}", rng.normal(size=(rows, d)), circle_targets(rows, min(rows, 50))))
    for rows, d in [(10, 32), (5, 16), (20, 64), (3, 4)]:  # wide: every fold underdetermined
        out.append((f"wide {rows}x{d}", rng.normal(size=(rows, d)), circle_targets(rows, rows)))
    low = rng.normal(size=(40, 3)) @ rng.normal(size=(3, 24))  # rank 3 in 24 dimensions
    out.append(("rank 3 of 24", low + 5.0, circle_targets(40, 40)))
    dup = rng.normal(size=(30, 6))
    out.append(("repeated columns", np.c_[dup, dup, 2 * dup[:, :2]], circle_targets(30, 30)))
    tiny = rng.normal(size=(40, 6)) * np.array([1, 1, 1, 1, 1e-8, 1e-3])  # one direction below the cutoff
    out.append(("a direction below LSTSQ_COND", tiny, circle_targets(40, 40)))
    out.append(("constant column", np.c_[rng.normal(size=(30, 5)), np.full(30, 3.0)], circle_targets(30, 30)))
    for n, N, m, d in [(10, 10, 1, 32), (50, 51, 1, 32), (20, 20, 3, 8), (12, 13, 2, 6)]:  # exact circles
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        k = np.arange(n)
        circle = np.c_[np.cos(2 * np.pi * m * k / N), np.sin(2 * np.pi * m * k / N), np.zeros((n, d - 2))]
        out.append((f"circle n={n} N={N} m={m} d={d}", circle @ Q.T * 2.5 + 1.0, circle_targets(n, n)))
    return out


@pytest.mark.parametrize("name,X,Y", tables(), ids=[t[0] for t in tables()])
@pytest.mark.parametrize("seed", [0, 3])
def test_heldout_predictions_equal_scikit_learns(name, X, Y, seed):
    got = probes.heldout_predictions(X, Y, seed=seed)
    want = reference(X, Y, seed=seed)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL, err_msg=name)


@pytest.mark.parametrize("folds", [2, 3, 10])
def test_other_fold_counts_equal_scikit_learns(folds):
    rng = np.random.default_rng(folds)
    for X in (rng.normal(size=(25, 4)), rng.normal(size=(8, 20))):
        Y = circle_targets(len(X), len(X))
        np.testing.assert_allclose(probes.heldout_predictions(X, Y, folds=folds, seed=1),
                                   reference(X, Y, folds=folds, seed=1), rtol=0, atol=TOL)


def test_one_target_column_and_integer_input():
    X = np.arange(24).reshape(12, 2) ** 2  # integers, cast to float64 as scikit-learn casts them
    Y = np.arange(12)[:, None] * 1.5
    np.testing.assert_allclose(probes.heldout_predictions(X, Y), reference(X, Y), rtol=0, atol=TOL)


def test_probe_table_scores_equal_those_of_scikit_learns_predictions(monkeypatch):
    """Every (N, m) score and the chosen (N, m) of ``probe_table``, fast path against reference."""
    rng = np.random.default_rng(7)
    n = 20
    k = np.arange(n)
    Q, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    circle = np.c_[np.cos(2 * np.pi * 3 * k / n), np.sin(2 * np.pi * 3 * k / n), 0.05 * rng.normal(size=(n, 14))]
    for table in (torch.tensor(circle @ Q.T), torch.tensor(rng.normal(size=(n, 16))), torch.zeros(n, 4)):
        got = probes.probe_table(table, k)
        with monkeypatch.context() as m:
            m.setattr(probes, "heldout_predictions", lambda X, Y, folds, seed: reference(X, Y, folds, seed))
            want = probes.probe_table(table, k)
        assert (got.N, got.m, got.rows) == (want.N, want.m, want.rows)
        assert math.isclose(got.r2, want.r2, rel_tol=0, abs_tol=TOL)
        np.testing.assert_allclose(got.scores.r2, want.scores.r2, rtol=0, atol=TOL)
        assert (got.scores[["N", "m"]].values == want.scores[["N", "m"]].values).all()


def test_non_finite_input_is_refused_as_scikit_learn_refused_it():
    X = np.ones((10, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        probes.heldout_predictions(X, np.ones((10, 2)))
    with pytest.raises(ValueError):
        reference(X, np.ones((10, 2)))


def test_a_table_or_target_without_columns_is_refused():
    for X, Y in ((np.zeros((6, 0)), np.ones((6, 2))), (np.ones((6, 3)), np.zeros((6, 0)))):
        with pytest.raises(ValueError, match=r"d and k >= 1"):
            probes.heldout_predictions(X, Y)


def test_blas_threads_are_restored():
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    probes.heldout_predictions(np.random.default_rng(0).normal(size=(20, 3)), np.ones((20, 2)))
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
