"""QK and OV circuits against TransformerLens's own cache and FactoredMatrix, and the paper."""

import math

import pytest
import torch

from interp.core import constructions, models
from interp.inspect.tools import circuits, hooks

D_HEAD = {1: 2, 2: 2, 3: 2, 4: 2, 5: 3}


def plain_cos_matrix(n, N):
    return torch.tensor([[math.cos(2 * math.pi * (a - b) / N) for b in range(n)] for a in range(n)])


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_constructions_have_the_papers_qk_and_ov(case):
    n = 9
    N = n + 1 if case in (1, 5) else n
    model = constructions.build(case, n)
    qk = circuits.qk_matrix(model)
    ov = circuits.ov_matrix(model)
    # QK[a, b] = cos(theta(a) - theta(b)) / sqrt(d_hid); OV[v, u] = cos(theta(v) - theta(u))
    torch.testing.assert_close(qk.matrix, plain_cos_matrix(n, N) / math.sqrt(D_HEAD[case]), atol=1e-5, rtol=0)
    torch.testing.assert_close(ov.matrix, plain_cos_matrix(n, N), atol=1e-5, rtol=0)
    for mat, scale in ((qk, math.sqrt(D_HEAD[case])), (ov, 1.0)):
        assert mat.diag_frac == 1.0
        assert mat.margin == pytest.approx((1 - math.cos(2 * math.pi / N)) / scale, abs=1e-5)
    if case in (1, 4):
        pos = circuits.positional_qk(model)
        assert pos.diag_frac == 1.0 and pos.margin > 0


def test_qk_matrix_is_the_mean_cached_score():
    """For one layer, QK[a, b] equals the mean of hook_attn_scores over inputs (bilinearity)."""
    case, n = 3, 6
    model = models.build_model(case, n, 4, pos_embed="none", seed=5)
    tokens = hooks.sample_inputs(case, n, 600, seed=2)
    view = hooks.read(case, n, tokens)
    _, cache = model.run_with_cache(tokens)
    scores = cache["blocks.0.attn.hook_attn_scores"][:, 0, -1, :n].double()  # [batch, slot]
    ref = torch.zeros(n, n, dtype=torch.float64)
    count = torch.zeros(n, n, dtype=torch.float64)
    for b in range(len(tokens)):
        for j in range(n):
            a, k = int(view.target[b]), int(view.keys[b, j])
            ref[a, k] += scores[b, j]
            count[a, k] += 1
    # one layer: q at the final position depends on the target a alone, so the mean score
    # from a to key b is q(a) . k_bar(b) / sqrt(d_head) with k_bar averaged per key
    qk = circuits.qk_matrix(model, tokens)
    q = cache["blocks.0.attn.hook_q"][:, -1, 0].double()
    k = cache["blocks.0.attn.hook_k"][:, :n, 0].double()
    q_bar = torch.stack([q[view.target == a].mean(0) for a in range(n)])
    k_bar = torch.stack([k[view.keys == b].mean(0) for b in range(n)])
    torch.testing.assert_close(qk.matrix.double(), q_bar @ k_bar.T / math.sqrt(model.cfg.d_head), atol=1e-5, rtol=0)
    # and close to the plain per-(a, b) average of the cached scores (k_bar is averaged over all
    # inputs, the reference only over those with target a: equal up to sampling)
    assert (qk.matrix.double() - ref / count).abs().max() < 0.05


def test_ov_matrix_matches_transformer_lens_factored_ov():
    case, n = 4, 7
    model = models.build_model(case, n, 6, seed=1)
    ov = circuits.ov_matrix(model)
    ref = (model.W_E[:n] @ model.OV[0, 0] @ model.W_U).AB  # TransformerLens's FactoredMatrix
    torch.testing.assert_close(ov.matrix, ref.detach(), atol=1e-5, rtol=1e-5)


def test_pair_ov_uses_the_value_table_only():
    model = models.build_model(2, 5, 3, pos_embed="none", seed=2)
    value_table = model.embed.parametrizations.W_E.original1.detach()
    E = torch.cat([torch.zeros_like(value_table), value_table], 1)
    ref = E @ model.W_V[0, 0] @ model.W_O[0, 0] @ model.W_U
    torch.testing.assert_close(circuits.ov_matrix(model).matrix, ref.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", [1, 3, 4])
def test_random_model_circuits_are_not_diagonal(case):
    n = 12
    model = models.build_model(case, n, 8, seed=4)
    s = circuits.circuit_summary(model)
    assert s["QK_diag_frac"] < 0.5 and s["QK_margin"] < 0
    assert s["OV_diag_frac"] < 0.5 and s["OV_margin"] < 0


def test_circuit_matrix_margins_by_hand():
    m = circuits.CircuitMatrix("x", torch.tensor([[3.0, 1.0, 2.0], [0.0, 1.0, 5.0], [1.0, 1.0, 4.0]]))
    assert m.diag_frac == pytest.approx(2 / 3)
    assert m.margin == pytest.approx(-4.0)  # row 1: 1 - 5
    assert m.mean_margin == pytest.approx((1 - 4 + 3) / 3)


def test_positional_qk_only_for_positional_cases():
    with pytest.raises(ValueError, match="cases 1 and 4"):
        circuits.positional_qk(constructions.build(3, 5))


def _two_heads():
    cfg = models.make_config(1, 4, 8, 1, d_head=4)
    cfg.n_heads = 2
    torch.manual_seed(0)
    return models.new_model(cfg, 1)


def test_circuits_never_assume_head_0_of_several():
    """A two-head model: a circuit of "the" head is refused by name; a named head is that head's
    circuit, E OV[head] W_U computed here from the weights."""
    C = circuits
    model = _two_heads()
    with pytest.raises(ValueError, match="ov_matrix reads one head per layer and this model has n_heads=2"):
        C.ov_matrix(model)
    with pytest.raises(ValueError, match="head=2; accepted: an integer in 0..1"):
        C.ov_matrix(model, head=2)
    with pytest.raises(ValueError, match="n_heads=2"):
        C.qk_matrix(model)
    E = C.value_embeddings(model).double()  # the value tokens' rows of W_E
    W = lambda h: E @ (model.W_V[0, h] @ model.W_O[0, h]).double() @ model.W_U.detach().double()  # noqa: E731
    got = C.ov_matrix(model, head=1).matrix.double()
    assert torch.allclose(got, W(1), atol=1e-5) and not torch.allclose(got, W(0), atol=1e-3)
