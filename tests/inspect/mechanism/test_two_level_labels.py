"""Issue 42: two labels per model (routing and code), read through ``interp probe CKPT --json``.

The models are built here, not taken from the repo: the paper's construction hidden in a wider
d_token by random orthonormal maps, a one-hot lookup (the construction's routing, no circle), its
inverted mechanism, and an untrained model. Each is saved as a checkpoint and probed by the CLI,
as a user would; the expected labels come from how the model was built, not from the code that
labels it. On the code before issue 42 the one-hot lookup was labelled ``construction``.
"""

import json
import math

import pytest
import torch

from interp.core import constructions, models
from interp.inspect.mechanism import calibration, codes, controls, labels
from interp.inspect.tools import hooks


@pytest.mark.parametrize("case,n", [(3, 10), (1, 10), (4, 10)])
def test_disguised_construction_is_the_construction(case, n, tmp_path, probe_json):
    base = constructions.build(case, n, attention="softmax", beta=100.0)
    model = controls.widen(base, 16, seed=case)
    assert hooks.accuracy(model) == 1.0
    out = probe_json(model, tmp_path)
    assert (out["routing"], out["code"], out["key_code"], out["mechanism"]) == \
        ("lookup", "circle", "circle", "construction")
    assert out["measures"]["value_dim"] == 2 and out["measures"]["query_dim"] == 2


def test_a_construction_below_the_circle_tests_power_is_untestable_not_a_circle(tmp_path, probe_json):
    """n = 5: squares and spirals of five points pass any circle test that keeps noisy circles
    (experiments/calibration/circle.md), so the widened construction is a lookup whose code
    cannot be told, not ``construction``."""
    model = controls.widen(constructions.build(4, 5, attention="softmax", beta=100.0), 16, seed=4)
    out = probe_json(model, tmp_path)
    assert (out["routing"], out["code"], out["mechanism"]) == ("lookup", "untestable", "lookup-untestable")
    assert out["measures"]["value_dim"] == 2


@pytest.mark.parametrize("case,n", [(3, 10), (1, 10), (4, 5)])
def test_one_hot_lookup_routes_like_the_construction_without_its_circle(case, n, tmp_path, probe_json):
    model = controls.one_hot_lookup(case, n)
    assert hooks.accuracy(model) == 1.0
    out = probe_json(model, tmp_path)
    assert out["routing"] == "lookup"
    assert out["code"] not in labels.CIRCLES and out["mechanism"] != "construction"
    assert out["code"] == "codebook" and out["mechanism"] == "lookup-codebook"
    assert out["measures"]["value_dim"] >= 4  # a circle needs 2


def test_untrained_model_has_no_route(tmp_path, probe_json):
    out = probe_json(models.build_model(3, 10, 16, seed=0, init="pytorch"), tmp_path)
    assert out["routing"] == "none" and out["mechanism"] == "none"


def test_inverted_one_hot_is_inverted():
    from interp.inspect.studies import analysis

    row = analysis.measure(controls.one_hot_lookup(1, 10, inverted=True), batch_size=256)
    assert labels.routing(row) == "inverted" and labels.mechanism(row) == "inverted"


def test_code_dimension_follows_the_code_not_the_width():
    """The interchange dimension is 2 for the circle at any width and n - 1 for one-hot codes
    of a clean (unwidened) lookup, where every value direction is read equally."""
    for d_token in (8, 32):
        m = controls.widen(constructions.build(2, 10, attention="softmax", beta=100.0), d_token, seed=1)
        assert codes.measure_code(m, "value", batch_size=256).dim == 2
    c = codes.measure_code(controls.one_hot_lookup(3, 6), "value", batch_size=256)
    assert c.dim in (4, 5) and c.iia_full == 1.0 and abs(c.participation - 5) < 1e-6


def test_code_untestable_at_n3_and_unmeasured_on_old_rows():
    row = {"n": 3, "qk_diag": 1.0, "follow": 1.0, "value_dim": 2.0, "value_top2": 1.0,
           "value_rcv": 0.0, "value_gap": 1.0, "query_dim": 2.0, "query_top2": 1.0,
           "query_rcv": 0.0, "query_gap": 1.0, "acc": 1.0}
    assert labels.code(row) == "untestable" and labels.mechanism(row) == "lookup-untestable"
    assert labels.mechanism({**row, "n": 10}) == "construction"
    old = {k: v for k, v in row.items() if not k.startswith(("value_", "query_"))}
    assert labels.code(old) == "unmeasured" and labels.mechanism({**old, "n": 10}) == "lookup"


def test_plane_geometry_is_blind_to_linear_maps():
    theta = 2 * math.pi * torch.arange(12, dtype=torch.float64) / 12
    circle = torch.stack([theta.cos(), theta.sin()], 1)
    A = torch.tensor([[3.0, 1.0], [0.0, 0.2]], dtype=torch.float64)
    top2, rcv, gap = codes.plane_geometry(circle @ A @ torch.randn(2, 7, dtype=torch.float64,
                                                                   generator=torch.Generator().manual_seed(0)))
    assert top2 > 1 - 1e-9 and rcv < 1e-9 and abs(gap - 1) < 1e-9
    uneven = torch.stack([(theta ** 1.3).cos(), (theta ** 1.3).sin()], 1)
    assert codes.plane_geometry(uneven)[2] < 0.5


def test_thresholds_come_from_the_committed_calibration():
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "experiments" / "calibration" / "thresholds.json"
    assert json.loads(path.read_text()) == calibration.THRESHOLDS


def test_bad_variable_is_refused():
    with pytest.raises(ValueError, match="variable='key'"):
        codes.measure_code(controls.one_hot_lookup(3, 5), "key")
    with pytest.raises(ValueError, match="variable='key'"):
        labels.code({}, "key")
