"""Hand-built lookups whose values draw a known figure, hidden in a wider residual stream by
orthonormal maps, read through ``interp probe CKPT --json`` (issue 51, item 1's done-when): the
figure is named where the calibration says it can be, and no near miss of the circle is ever
called ``circle`` (nor ``construction``)."""

import math

import pytest
import torch

from interp.inspect.mechanism import calibration, figure_controls, figures, shapes
from interp.inspect.tools import hooks


def _embedded(P, width, seed):
    """P [n, k] placed by a random orthonormal map in ``width`` dimensions (width >= k)."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(width, P.shape[1], generator=g, dtype=torch.float64))
    return P @ Q.T


def _semicircle(n):
    a = torch.linspace(0, math.pi, n, dtype=torch.float64)
    return torch.stack([a.cos(), a.sin()], 1)


def _model(P, n, d_token, seed=0):
    model = figure_controls.widen_orthonormal(figure_controls.lookup_with_values(n, P), d_token, seed=seed)
    assert hooks.accuracy(model) == 1.0  # the hand-built lookup answers, whatever its figure
    return model


def _expected(figure, n):
    """The label the calibration promises for a figure at n: the figure where it is testable."""
    return figure if figures.calibrated_size(n) in calibration.THRESHOLDS["geometry_testable"][figure] else "untestable"


POSITIVES = {  # figure -> (n, the points [n, k <= n], the widened token width)
    "simplex": (10, lambda: _embedded(figure_controls.draw("simplex", 10, 0), 10, 1), 16),
    "orthoplex": (10, lambda: _embedded(figure_controls.draw("orthoplex", 10, 0), 10, 2), 16),
    "circle": (10, lambda: shapes.draw("exact", 10, 3), 12),
    "codebook": (20, lambda: torch.randn(20, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64), 24),
}


#: what each is labelled: its figure (each is built at an n where geometry.md certifies it)
EXPECTED = {"simplex": "simplex", "orthoplex": "orthoplex", "circle": "circle", "codebook": "codebook"}


@pytest.mark.parametrize("figure", list(POSITIVES))
def test_a_known_figure_is_named(figure, tmp_path, probe_json):
    n, points, d_token = POSITIVES[figure]
    out = probe_json(_model(points(), n, d_token), tmp_path)
    assert out["routing"] == "lookup"
    assert out["geometry"] == _expected(figure, n) == EXPECTED[figure]
    assert figures.detects(out["geometry_measures"]["value"])[figure]  # the figure's own test passes
    value = out["geometry_measures"]["value"]
    assert value["dual"] == pytest.approx(1.0, abs=1e-6)  # W_U = 2 P^T: the read-out is the code
    assert value["collapse"] < 1e-12  # every context writes the same value vector


def test_a_codebook_where_it_cannot_be_certified_reads_untestable():
    P = torch.randn(10, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    got = figures.measure_model(_model(P, 10, 12), batch_size=128)["value"]
    assert figures.detects(got)["codebook"] and got["label"] == _expected("codebook", 10) == "untestable"


NEAR = {"square": lambda n: shapes.draw("square", n, 5), "spiral": lambda n: shapes.draw("spiral", n, 6),
        "semicircle": _semicircle, "alternating": lambda n: shapes.draw("alternating", n, 7)}


@pytest.mark.parametrize("family", list(NEAR))
def test_near_misses_are_not_circles_through_the_probe(family, tmp_path, probe_json):
    out = probe_json(_model(NEAR[family](10), 10, 12), tmp_path)
    assert out["geometry"] != "circle" and out["code"] != "circle" and out["mechanism"] != "construction"


@pytest.mark.slow
@pytest.mark.parametrize("n", calibration.NS)
def test_near_misses_are_never_circles_at_any_n(n):
    for family, points in NEAR.items():
        got = figures.measure_model(_model(points(n), n, n + 2, seed=n), batch_size=128)
        assert got["value"]["label"] != "circle", (family, n, got["value"])


def test_the_figure_is_blind_to_the_heads_basis_not_to_the_streams():
    """The frame (figures docstring): an invertible G between W_V and W_O changes no output and no
    measure, though in the head's own coordinates the simplex is gone; the house ``widen`` (a
    non-orthogonal change of the stream's basis, undone in W_U) changes no answer but does change
    the figure, which is why these controls widen by orthonormal maps only."""
    import copy

    from interp.inspect.mechanism import controls

    plain = figure_controls.lookup_with_values(6, figure_controls.draw("simplex", 6, 0))
    base = figure_controls.widen_orthonormal(plain, 8, seed=0)
    g = torch.Generator().manual_seed(9)
    d_head = base.cfg.d_head
    G = torch.randn(d_head, d_head, generator=g, dtype=torch.float64) + 3 * torch.eye(d_head, dtype=torch.float64)
    gauged = copy.deepcopy(base)
    attn = gauged.blocks[0].attn
    with torch.no_grad():
        attn.W_V.copy_(attn.W_V @ G)
        attn.b_V.copy_(attn.b_V @ G)
        attn.W_O.copy_(torch.linalg.inv(G) @ attn.W_O)
    tokens = hooks.sample_inputs(3, 6, 64, seed=0)
    assert torch.allclose(gauged(tokens), base(tokens), atol=1e-9)
    a, b = figures.measure_model(base, batch_size=64)["value"], figures.measure_model(gauged, batch_size=64)["value"]
    for k in ("norm_cv", "simplex_dev", "pr", "cos_max"):
        assert a[k] == pytest.approx(b[k], abs=1e-9), k
    assert a["label"] == b["label"] == "simplex"
    in_head = figures.context_vectors(gauged, "value", hooks.read(3, 6, tokens)).mean(0)
    assert figures.table_measures(in_head)["simplex_dev"] > 0.05
    mixed = controls.widen(plain, 8, seed=0)
    assert hooks.accuracy(mixed) == 1.0
    assert figures.measure_model(mixed, batch_size=64)["value"]["simplex_dev"] > 0.02
