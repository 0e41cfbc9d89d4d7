"""cos/sin probes, Fourier spectra and the circle test against hand-made references."""

import math

import numpy as np
import pytest
import torch

from interp.core import constructions, models
from interp.inspect.tools import probes

#: the number of angles each construction uses (constructions.py docstrings, the paper's proofs)
ANGLES = {1: "n+1", 2: "n", 3: "n", 4: "n", 5: "n+1"}
#: the tables that carry a key or value on a circle in each construction
IDEAL_SOURCES = {
    1: {"token", "pos"}, 2: {"token_key", "token_value"}, 3: {"token_key", "token_value"},
    4: {"token", "pos_value"}, 5: {"token", "pos_key", "pos_value"},
}


def plain_circle(labels, N, m=1):
    return np.array([[math.cos(2 * math.pi * m * k / N), math.sin(2 * math.pi * m * k / N)] for k in labels])


def test_heldout_r2_of_an_exact_linear_map_is_one_and_of_noise_is_not():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    A = rng.normal(size=(5, 2))
    assert probes.heldout_r2(X, X @ A + 3.0) == pytest.approx(1.0, abs=1e-9)
    assert probes.heldout_r2(X, rng.normal(size=(60, 2))) < 0.2


def test_probe_table_finds_frequency_and_angles_of_a_rotated_embedded_circle():
    rng = np.random.default_rng(1)
    n, N, m = 12, 13, 3
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    table = np.c_[plain_circle(range(n), N, m), np.zeros((n, 4))] @ Q.T * 2.5 + 1.0
    res = probes.probe_table(torch.tensor(table), np.arange(n), n=n)
    assert (res.N, res.m) == (N, m)
    assert res.r2 > 0.999
    assert res.r2_at(N, 1) < 0.5


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_constructions_have_ideal_probes(case):
    n = 10
    N = n + 1 if ANGLES[case] == "n+1" else n
    model = constructions.build(case, n)
    results = {p.source: p for p in probes.probe_model(model)}
    for source in IDEAL_SOURCES[case]:
        assert results[source].r2 >= 0.999, source
        assert (results[source].N, results[source].m) == (N, 1), source
    resid = probes.probe_resid(model, f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    assert resid.r2 >= 0.999 and (resid.N, resid.m) == (N, 1)


def test_case4_key_positions_carry_nothing():
    """Theorem 3.3 puts the key in the value position 2k+1; p(2k) = 0."""
    results = {p.source: p for p in probes.probe_model(constructions.build(4, 10))}
    assert results["pos_key"].r2 < 0.1


@pytest.mark.parametrize("case", [1, 3, 4])
def test_random_model_probes_are_not_ideal(case):
    n = 16
    model = models.build_model(case, n, 4, seed=3)
    for p in probes.probe_model(model):
        assert p.r2 < 0.5, p.source
    resid = probes.probe_resid(model, "blocks.0.hook_resid_post", batch_size=512)
    assert resid.r2 < 0.2


def test_probe_resid_target_label_reads_the_query_key():
    # cases 2-4: resid_post at the final position holds [cs(i*), cs(f(i*))]
    model = constructions.build(2, 8)
    p = probes.probe_resid(model, "hook_embed", label="target", N=8)
    assert p.r2 >= 0.999 and p.m == 1


def test_fourier_spectrum_peaks_at_the_frequency():
    table = torch.tensor(np.c_[plain_circle(range(20), 20, 3), np.ones((20, 1))])
    spec = probes.fourier_spectrum(table)
    assert int(spec.fraction.idxmax()) == 3
    assert spec.fraction[3] == pytest.approx(1.0, abs=1e-12)


def test_circle_test_is_order_free():
    rng = np.random.default_rng(2)
    n = 9
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    circle = np.c_[plain_circle(range(n), n), np.zeros((n, 3))] @ Q.T
    ordered = probes.circle_test(torch.tensor(circle))
    assert ordered.top2_var == pytest.approx(1.0, abs=1e-9)
    assert ordered.radius_cv < 1e-9 and ordered.gap_ratio == pytest.approx(1.0, abs=1e-9)
    assert ordered.in_order
    shuffled = probes.circle_test(torch.tensor(circle[rng.permutation(n)]))
    assert shuffled.top2_var == pytest.approx(1.0, abs=1e-9) and shuffled.radius_cv < 1e-9
    assert not shuffled.in_order
    # n points of cs_{n+1}: off-centre, still a perfect circle with one double gap
    arc = probes.circle_test(torch.tensor(plain_circle(range(n), n + 1)))
    assert arc.radius_cv < 1e-9 and arc.gap_ratio == pytest.approx(n / (n + 1), abs=1e-9)
    blob = probes.circle_test(torch.tensor(rng.normal(size=(n, 5))))
    assert blob.top2_var < 0.9 and blob.radius_cv > 0.1


def test_circle_report_of_constructions_and_random():
    ideal = probes.circle_report(constructions.build(3, 10))
    assert ideal["keys_top2_var"] == pytest.approx(1.0, abs=1e-6) and ideal["keys_in_order"]
    rand = probes.circle_report(models.build_model(3, 10, 8, seed=0))
    assert rand["keys_top2_var"] < 0.9 and not rand["keys_in_order"]


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        probes.heldout_r2(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="N=1"):
        probes.probe_table(torch.zeros(5, 2), range(5), N=1)
    with pytest.raises(ValueError, match="hook_name"):
        probes.probe_resid(constructions.build(2, 5), "blocks.9.nothing")


def test_wide_table_with_few_rows_still_finds_a_dominant_circle():
    """n = 10 rows in 32 dimensions: each training fold is underdetermined; the minimum-norm
    least-squares fit still finds a circle that dominates the table, and rejects a random one."""
    rng = np.random.default_rng(4)
    n = 10
    Q, _ = np.linalg.qr(rng.normal(size=(32, 32)))
    wide = np.c_[plain_circle(range(n), n), 0.1 * rng.normal(size=(n, 30))] @ Q.T
    res = probes.probe_table(torch.tensor(wide), np.arange(n))
    assert res.r2 > 0.95 and (res.N, res.m) == (n, 1)
    assert probes.probe_table(torch.tensor(rng.normal(size=(n, 32))), np.arange(n)).r2 < 0.5
