"""interp.inspect.mechanism.das: distributed alignment search with a learned rotation, against models whose
code's dimension is known from how they were built (not from the principal-axes measure)."""

from __future__ import annotations

import math

import pytest
import torch

from interp.core import constructions, models
from interp.inspect.mechanism import codes, controls, das
from interp.inspect.tools import hooks


def unread_variance_lookup(n: int = 6, scale: float = 3.0):
    """Case 3, one layer: the one-hot lookup's routing, but each value v is written in the value
    vectors as [cos, sin of 2 pi v / n, scale * r_v] (r_v random in [-1, 1]); the output reads the
    circle's two head dimensions (nearest point on the circle) and not the third. The read code
    is 2-dimensional; the code table's largest principal axis is the unread coordinate."""
    model = controls.one_hot_lookup(3, n)
    VALUE = torch.arange(n, 2 * n)  # the value half of the pair embedding
    g = torch.Generator().manual_seed(0)
    r = torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1
    points = constructions.cs(torch.arange(n), n)
    with torch.no_grad():
        _, value_table = models.pair_tables(model)
        table = torch.zeros(n, n, dtype=torch.float64)
        table[:, :2], table[:, 2] = points, scale * r
        value_table.copy_(table.to(value_table.dtype))
        a = model.blocks[0].attn
        W_V, W_O = torch.zeros_like(a.W_V), torch.zeros_like(a.W_O)
        W_U = torch.zeros_like(model.unembed.W_U)
        for i in range(3):
            W_V[0, VALUE[i], i] = 1.0
        for i in range(2):
            W_O[0, i, VALUE[i]] = 1.0
            W_U[VALUE[i]] = points[:, i].to(W_U.dtype)
        a.W_V.copy_(W_V)
        a.W_O.copy_(W_O)
        model.unembed.W_U.copy_(W_U)
    return model


def test_learned_rotation_finds_the_read_plane_where_the_axes_miss_it():
    model = unread_variance_lookup()
    assert hooks.accuracy(model, batch_size=256) == 1.0  # built right
    axes = codes.measure_code(model, "value", batch_size=256)
    assert axes.dim == 3  # the top axis is the unread coordinate: the bound is loose here
    got = das.learned_dim(model, "value", batch_size=128, steps=100)
    assert got.axes_dim == 3 and got.dim == 2
    assert dict(got.iia)[2] >= 0.9 and dict(got.iia)[1] < 0.9


def test_circle_stays_two_and_one_hot_has_no_small_subspace():
    circle = controls.widen(constructions.build(3, 6, attention="softmax", beta=100.0), 8, seed=1)
    got = das.learned_dim(circle, "value", batch_size=128, steps=100)
    assert got.axes_dim == 2 and got.dim == 2 and dict(got.iia)[1] < 0.9
    one_hot = controls.one_hot_lookup(3, 6)
    got = das.learned_dim(one_hot, "value", batch_size=128, steps=100)
    assert got.axes_dim == got.dim and got.dim >= 4
    assert [k for k, _ in got.iia] == [1, 2, 3] and all(a < 0.9 for _, a in got.iia)


def test_learned_basis_is_orthonormal_and_iia_matches_the_axes_measure():
    model = controls.one_hot_lookup(3, 5)
    p = das.pairs(model, "value", batch_size=128, seed=3)
    basis = das.learn(model, "value", 2, p, steps=20)
    assert torch.allclose(basis @ basis.T, torch.eye(2, dtype=basis.dtype), atol=1e-10)
    # the whole space moved: every base run answers the source's value (the interchange is exact)
    full = torch.eye(p.src.flatten(1).shape[1], dtype=torch.float64)
    assert das.iia(model, "value", p, full) == 1.0
    assert not math.isnan(das.iia(model, "value", p, basis))


def test_refusals_name_the_value():
    hard = constructions.build(3, 5)  # leftmost hard attention: no gradient through the scores
    with pytest.raises(ValueError, match="leftmost.*accepted: softmax"):
        das.learned_dim(hard, "value")
    model = controls.one_hot_lookup(3, 5)
    p = das.pairs(model, "value", batch_size=64)
    with pytest.raises(ValueError, match="k=0; accepted"):
        das.learn(model, "value", 0, p)
    with pytest.raises(ValueError, match="variable='key'"):
        das.pairs(model, "key")


def test_probe_das_reports_the_learned_dimension_beside_the_axes_bound(tmp_path, probe_json):
    """``interp probe CKPT --json --das``: the unread-variance lookup's value code is 3 by the
    axes (the measures) and 2 learned; a hard-attention model is refused before measuring."""
    import contextlib
    import io

    from interp import cli

    out = probe_json(unread_variance_lookup(), tmp_path, "--das")
    assert out["measures"]["value_dim"] == 3
    assert out["das"]["value"]["axes_dim"] == 3 and out["das"]["value"]["dim"] == 2
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["probe", "--construction", "3", "--n", "5", "--das"]) == 2
    assert "--das with attention ['leftmost']; accepted: softmax" in err.getvalue()
