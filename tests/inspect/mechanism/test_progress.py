"""Issue 52: graded progress measures, on models whose answer is known by construction.

The paper's constructions (hard attention) route and read out perfectly; the same with W_U's
columns shifted by one answers f(i*) - 1 on every input while routing as before; a model whose
W_Q and b_Q are zero attends uniformly under softmax (1 / seq_len on each position) and to
position 0 under leftmost hard attention. Each value is compared with a plain-Python reference:
the scores from the residual entering the last layer and the weights as Python floats, slots
from :meth:`interp.core.tasks.Task.decode`, the read-out from the one-layer formula, eta squared
from sums of squares.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from interp.core import constructions, models, tasks
from interp.inspect.mechanism import progress
from interp.inspect.tools import hooks

B = 64


def _inputs(model, batch=B, seed=0):
    return hooks.sample_inputs(model.task.case, model.cfg.d_vocab_out, batch, seed=seed)


def _plain(t):
    return t.detach().double().tolist()


def reference_scores(model, tokens) -> list[list[float]]:
    """Final-position scores of the last layer, q . k / attn_scale, in plain Python from the
    residual entering it (``blocks.L.hook_resid_pre``) and W_Q, b_Q, W_K, b_K."""
    L = model.cfg.n_layers - 1
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=f"blocks.{L}.hook_resid_pre")
    X = _plain(cache[f"blocks.{L}.hook_resid_pre"])
    WQ, WK = _plain(model.W_Q[L, 0]), _plain(model.W_K[L, 0])
    bQ, bK = _plain(model.b_Q[L, 0]), _plain(model.b_K[L, 0])
    scale = float(model.blocks[L].attn.attn_scale)

    def project(x, W, b):
        return [sum(x[i] * W[i][h] for i in range(len(x))) + b[h] for h in range(len(b))]

    out = []
    for x in X:
        q = project(x[-1], WQ, bQ)
        out.append([sum(a * c for a, c in zip(q, project(xp, WK, bK))) / scale for xp in x])
    return out


def reference_slots(model, tokens, at="value"):
    """Per input, (the matching slot's read position, every slot's read position, the answer)."""
    task, n = model.task, model.cfg.d_vocab_out
    positions = [task.value_pos(n, j) if at == "value" else task.key_pos(n, j) for j in range(n)]
    out = []
    for row in tokens.tolist():
        keys, values, target = task.decode(n, row)
        j = keys.index(target)
        out.append((positions[j], positions, values[j]))
    return out


@pytest.mark.parametrize("case", [1, 2, 3, 4, 5])
def test_a_construction_routes_and_reads_out_perfectly(case):
    model = constructions.build(case, 5)  # leftmost hard attention
    got = progress.progress(model, batch_size=B)
    tokens = _inputs(model)
    scores = reference_scores(model, tokens)
    margins = []
    for s, (mine, slots, _) in zip(scores, reference_slots(model, tokens)):
        margins.append(s[mine] - max(s[p] for p in slots if p != mine))
    assert min(margins) > 0
    assert got["match_margin"] == pytest.approx(sum(margins) / len(margins), rel=1e-5)
    assert got["match_pos"] == 1.0 and got["match_mass"] == 1.0 and got["readout_acc"] == 1.0
    assert got["value_iia_code"] == 1.0 and got["query_iia_code"] == 1.0
    assert got["answer_share"] == pytest.approx(1.0, abs=1e-6)
    assert got["answer_share2"] == pytest.approx(1.0, abs=1e-6)
    assert got["at"] == "value"


def _shift_unembed(model):
    """W_U's (and b_U's) columns shifted by one: output u reads what output u + 1 read."""
    shifted = copy.deepcopy(model)
    with torch.no_grad():
        shifted.unembed.W_U.copy_(model.W_U.roll(-1, dims=1))
        shifted.unembed.b_U.copy_(model.b_U.roll(-1, dims=0))
    return shifted


@pytest.mark.parametrize("case", [2, 5])
def test_a_shifted_unembedding_breaks_the_read_out_and_leaves_the_routing(case):
    model = constructions.build(case, 5)
    shifted = _shift_unembed(model)
    tokens = _inputs(model)
    answers = [a for _, _, a in reference_slots(model, tokens)]
    predicted = hooks.predictions(shifted, tokens).tolist()
    assert all(p == (a - 1) % 5 for p, a in zip(predicted, answers))  # the reference: never f(i*)
    before, after = progress.progress(model, batch_size=B), progress.progress(shifted, batch_size=B)
    assert after["readout_acc"] == 0.0 and after["value_iia_code"] == 0.0
    for key in ("match_margin", "match_pos", "match_mass", "query_iia_code"):
        assert after[key] == before[key], key
    assert after["answer_share"] == pytest.approx(before["answer_share"], abs=1e-9)  # same span


def _zero_qk(model):
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_()
            block.attn.b_Q.zero_()
    return model


def test_zero_qk_under_softmax_attends_uniformly():
    model = _zero_qk(models.build_model(3, 5, 4, seed=0, init="pytorch"))
    got = progress.progress(model, batch_size=B)
    seq_len = tasks.seq_len(3, 5)
    assert got["match_mass"] == pytest.approx(1 / seq_len, abs=1e-6)
    assert got["match_margin"] == 0.0 and got["match_pos"] == 0.0


def test_zero_qk_under_hard_attention_reads_position_0():
    """Every score ties: leftmost attention takes position 0, so the mass on the matching slot is
    the share of inputs whose matching slot is read at position 0 (reference: decode)."""
    model = _zero_qk(constructions.build(2, 5))
    got = progress.progress(model, batch_size=B)
    at_zero = [mine == 0 for mine, _, _ in reference_slots(model, _inputs(model))]
    assert got["match_mass"] == pytest.approx(sum(at_zero) / len(at_zero), abs=1e-12)
    assert 0 < got["match_mass"] < 1 and got["match_pos"] == 0.0


def test_readout_accuracy_matches_the_one_layer_formula():
    """An untrained one-layer model: the answer with the final query's attention one-hot on the
    matching slot is argmax_u ((x_T + (x_r W_V + b_V) W_O + b_O) W_U + b_U)[u]."""
    model = models.build_model(3, 5, 4, seed=1, init="pytorch")
    tokens = _inputs(model)
    view = hooks.read(3, 5, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_pre")
    X = _plain(cache["blocks.0.hook_resid_pre"])
    WV, WO, WU = _plain(model.W_V[0, 0]), _plain(model.W_O[0, 0]), _plain(model.W_U)
    bV, bO, bU = _plain(model.b_V[0, 0]), _plain(model.b_O[0]), _plain(model.b_U)

    def matvec(x, W):
        return [sum(x[i] * W[i][j] for i in range(len(x))) for j in range(len(W[0]))]

    right = 0
    for x, (mine, _, answer) in zip(X, reference_slots(model, tokens)):
        v = [a + b for a, b in zip(matvec(x[mine], WV), bV)]
        resid = [a + b + c for a, b, c in zip(x[-1], matvec(v, WO), bO)]
        logits = [a + b for a, b in zip(matvec(resid, WU), bU)]
        right += logits.index(max(logits)) == answer
    read = view.slot_pos[view.slot_of_target]
    assert progress.readout_accuracy(model, view, read) == right / len(X)


def test_answer_shares_are_eta_squared():
    g = torch.Generator().manual_seed(0)
    n, x_dim = 4, 3
    answer = torch.arange(40) % n
    x = torch.randn(40, x_dim, generator=g, dtype=torch.float64) + answer[:, None].double() * torch.tensor([1.0, 0.5, 0.0],
                                                                                                          dtype=torch.float64)
    rows, labels = x.tolist(), answer.tolist()
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(x_dim)]
    total = sum((r[i] - mean[i]) ** 2 for r in rows for i in range(x_dim))
    between = 0.0
    for a in range(n):
        group = [r for r, y in zip(rows, labels) if y == a]
        m = [sum(r[i] for r in group) / len(group) for i in range(x_dim)]
        between += len(group) * sum((m[i] - mean[i]) ** 2 for i in range(x_dim))
    share, share2 = progress.answer_shares(x, answer, n)
    assert share == pytest.approx(between / total, rel=1e-12)
    assert share2 <= share + 1e-15
    flat, flat2 = progress.answer_shares(x[:, :2], answer, n)  # two dimensions: the plane is all
    assert flat2 == pytest.approx(flat, rel=1e-12)
    assert math.isnan(progress.answer_shares(torch.ones(8, 2), torch.arange(8) % 4, 4)[0])


@pytest.mark.parametrize("option,value,words", [
    ("at", "middle", "at='middle'; accepted"), ("iia_dims", 0, "iia_dims=0; accepted"),
    ("share_space", "logits", "share_space='logits'; accepted"), ("batch_size", 0, "batch_size=0; accepted"),
    ("contexts", 1.5, "contexts=1.5; accepted"), ("seed", "0", "seed='0'; accepted"),
])
def test_bad_options_are_refused_by_name(option, value, words):
    with pytest.raises(ValueError, match=words):
        progress.progress(constructions.build(2, 5), **{option: value})


def test_key_positions_and_several_heads_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match="at='key' needs keys at their own positions"):
        progress.progress(constructions.build(2, 5), at="key")
    wide = models.new_model(models.make_config(3, 5, 8, 1, d_head=4), 3)
    wide.cfg.n_heads = 2  # a second head: which one carries the answer is not known
    with pytest.raises(ValueError, match="n_heads=2"):
        progress.progress(wide)


def test_the_code_iia_along_fewer_axes_than_the_circle_falls():
    """The construction's value code is a circle (two dimensions): interchanging its top two
    principal axes carries the value, one axis does not (a point on a circle is not set by one
    coordinate), and the default (the code table's rank, 2 here) is the top-two value."""
    model = constructions.build(3, 10)
    two = progress.progress(model, batch_size=B, iia_dims=2)
    one = progress.progress(model, batch_size=B, iia_dims=1)
    assert two["value_iia_code"] == 1.0 and two["query_iia_code"] == 1.0
    assert one["value_iia_code"] < 0.9 and one["query_iia_code"] < 0.9
