"""Mechanism measures and labels on models with MLPs, checked on models whose answer is known.

(a) The paper's constructions loaded into ModelSpec models with MLPs that pass values through:
    the MLP (random W_in) writes only into residual coordinates that no later layer and not the
    unembedding reads, so logits are the construction's own. Known answer: ``construction``,
    ``mlp_role == "passes"``, the attention's argmax on the matching slot in every input.
(b) A hand-built two-layer case-1 model whose attention is uniform and whose MLPs do the lookup
    (weights derived in :func:`mlp_lookup_model`); and Theorem 3.5's one-layer case-5 softmax
    construction (:mod:`interp.theory.softmax_construction`). Known answer: ``mlp-lookup``,
    ``mlp_role == "needed"``, accuracy 1, and for (b) attention entropy exactly 1 and ablated
    accuracies that follow from the weights (the most frequent answer; the answer 0).
(c) The ablation hooks against references computed without them (MLP weights zeroed in a copy;
    the mean added by hand to the cached residual); every ModelSpec variant measured; the
    attention-only columns equal to what the code wrote before the MLP columns existed.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from interp.core import attention, constructions, models, tasks
from interp.inspect.mechanism import labels
from interp.inspect.studies import analysis
from interp.inspect.tools import hooks

MLP_COLUMNS = ("acc_mean_mlp", "acc_zero_mlp", "attn_entropy", "attn_picks_slot", "mlp_role")


# ----------------------------------------------------------------------------- models


def _ignored(c, layer: int) -> list[int]:
    """Residual coordinates that no layer after ``layer`` reads (W_Q, W_K, W_V rows zero) and
    the unembedding ignores (W_U row zero): an MLP of block ``layer`` may write there freely."""
    read = c.W_U.detach().abs().sum(1)
    for later in range(layer + 1, c.cfg.n_layers):
        for W in (c.W_Q, c.W_K, c.W_V):
            read = read + W[later, 0].detach().abs().sum(1)
    return [i for i in range(c.cfg.d_model) if read[i] == 0]


def construction_with_mlp(case: int, n: int, *, mlp: str = "every", d_mlp: int = 16,
                          W_O: str = "free", embed_scale: str = "1", seed: int = 0):
    """``constructions.build(case, n)`` (leftmost hard attention) inside
    ``build_model(..., d_mlp=d_mlp, mlp=mlp, W_O=W_O, embed_scale=embed_scale)``.

    The spec model has d_head = d_model = D where the construction has d_head = dh: its W_Q,
    W_K, W_V take the construction's dh columns (W_O its dh rows) padded with zeros, and W_Q is
    multiplied by sqrt(D / dh) so that q.k / sqrt(D) is the construction's q.k / sqrt(dh).
    W_O="identity" fixes W_O = I, so W_V holds the product W_V W_O. embed_scale="sqrt_d_model"
    multiplies the token embedding by sqrt(D), so the tables are loaded divided by it. Every
    MLP gets a random W_in, b_in and writes (random W_out, b_out) only into :func:`_ignored`.
    """
    c = constructions.build(case, n)
    task = tasks.get(case)
    D, dh, L = c.cfg.d_model, c.cfg.d_head, c.cfg.n_layers
    m = models.build_model(case, n, D // 2 if task.same_position else D, L,
                           "none" if task.same_position else "learned", d_mlp=d_mlp, mlp=mlp,
                           W_O=W_O, embed_scale=embed_scale, seed=seed)
    g = torch.Generator().manual_seed(seed)
    scale = math.sqrt(D) if embed_scale == "sqrt_d_model" else 1.0
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.split(".")[-1] in ("b_Q", "b_K", "b_V", "b_O", "b_U"):
                p.zero_()
        if task.same_position:
            for mine, theirs in zip(models.pair_tables(m), models.pair_tables(c)):
                mine.copy_(theirs / scale)
        else:
            m.embed.W_E.copy_(c.W_E / scale)
        m.pos_embed.W_pos.copy_(c.W_pos)
        for layer in range(L):
            a = m.blocks[layer].attn
            for mine, theirs, factor in ((a.W_Q, c.W_Q, math.sqrt(D / dh)), (a.W_K, c.W_K, 1.0)):
                mine.zero_()
                mine[0, :, :dh] = theirs[layer, 0] * factor
            a.W_V.zero_()
            if W_O == "identity":
                a.W_V[0] = c.W_V[layer, 0] @ c.W_O[layer, 0]
            else:
                a.W_V[0, :, :dh] = c.W_V[layer, 0]
                a.W_O.zero_()
                a.W_O[0, :dh] = c.W_O[layer, 0]
            if not m.spec.has_mlp(layer):
                continue
            free = _ignored(c, layer)
            mlp_ = m.blocks[layer].mlp
            mlp_.W_in.copy_(torch.randn(D, d_mlp, generator=g))
            mlp_.b_in.copy_(torch.randn(d_mlp, generator=g))
            mlp_.W_out.zero_()
            mlp_.b_out.zero_()
            mlp_.W_out[:, free] = torch.randn(d_mlp, len(free), generator=g)
            mlp_.b_out[free] = torch.randn(len(free), generator=g)
        m.unembed.W_U.copy_(c.W_U)
    attention.set_attention(m, "leftmost")
    return m


def mlp_lookup_model(n: int = 3, d_mlp: int | None = None):
    """Case 1, two layers, mlp="every": uniform attention, and the MLPs do the lookup.

    Residual coordinates (D = n + (n + 1) + n^2 + n):
        VAL[v]      token v (W_E[v] = e_VAL[v]; the query token i* is a token too)
        POS[p]      position p in 0..n (W_pos[p] = e_POS[p])
        BIND[j, v]  "slot j holds value v", written by layer 0's MLP at position j
        ANS[u]      the answer's one-hot, written by layer 1's MLP; W_U reads only it
    Layer 0: attention writes nothing (W_V = 0); MLP unit (j, v) = ReLU(x[VAL v] + x[POS j] - 1)
    is 1 exactly at position j when its token is v (0 at the query, whose POS is n), and writes
    e_BIND[j, v]. Layer 1: W_Q = W_K = 0, so every score is 0 and the final query attends
    1/(n + 1) to each position; OV copies BIND, so the final position holds BIND[j, f(j)] =
    1/(n + 1) for every slot j. Its MLP unit (j, v) = ReLU((n + 1) x[BIND j, v] + x[VAL j] - 1)
    is 1 exactly when i* = j and f(j) = v, and writes e_ANS[v]: logits are the one-hot of
    f(i*), for any f. All biases zero except b_in = -1 on these units.
    """
    VAL, POS = range(n), range(n, 2 * n + 1)
    BIND = [[2 * n + 1 + j * n + v for v in range(n)] for j in range(n)]
    ANS = range(2 * n + 1 + n * n, 3 * n + 1 + n * n)
    D, d_mlp = 3 * n + 1 + n * n, d_mlp or n * n
    m = models.build_model(1, n, D, 2, d_mlp=d_mlp, mlp="every", seed=0)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.embed.W_E[:, VAL] = torch.eye(n)
        m.pos_embed.W_pos[:, POS] = torch.eye(n + 1)
        mlp0, attn1, mlp1 = m.blocks[0].mlp, m.blocks[1].attn, m.blocks[1].mlp
        for j in range(n):
            for v in range(n):
                unit = j * n + v
                mlp0.W_in[VAL[v], unit] = mlp0.W_in[POS[j], unit] = 1.0
                mlp0.b_in[unit] = -1.0
                mlp0.W_out[unit, BIND[j][v]] = 1.0
                mlp1.W_in[BIND[j][v], unit] = n + 1.0
                mlp1.W_in[VAL[j], unit] = 1.0
                mlp1.b_in[unit] = -1.0
                mlp1.W_out[unit, ANS[v]] = 1.0
                attn1.W_V[0, BIND[j][v], BIND[j][v]] = 1.0
                attn1.W_O[0, BIND[j][v], BIND[j][v]] = 1.0
        m.unembed.W_U[list(ANS)] = torch.eye(n)
    return m


# ----------------------------------------------------------------------------- (a) passes


PASSING = [
    dict(case=1, n=10),
    dict(case=3, n=10, W_O="identity", embed_scale="sqrt_d_model"),
    dict(case=4, n=10),
    dict(case=5, n=10, mlp="last"),
    dict(case=5, n=10, mlp="every"),
]


@pytest.mark.parametrize("kw", PASSING, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_a_construction_with_a_passing_mlp_keeps_its_label(kw):
    case, n = kw["case"], kw["n"]
    model = construction_with_mlp(**kw)
    tokens = hooks.sample_inputs(case, n, 128)
    with torch.no_grad():
        clean, cache = model.run_with_cache(tokens, names_filter=lambda s: s.endswith("hook_mlp_out"))
    for layer in range(model.cfg.n_layers):  # the MLPs do write something, varying with the input
        out = cache[f"blocks.{layer}.hook_mlp_out"]
        assert (out.std(0).max() > 0.1) == model.spec.has_mlp(layer), layer
    assert torch.allclose(clean[:, -1], constructions.build(case, n)(tokens)[:, -1], atol=1e-6)  # logits kept
    modes = attention.modes(model)
    row = analysis.measure(model, batch_size=128)
    assert attention.modes(model) == modes  # the ablation hooks were temporary
    assert (row["acc"], row["acc_mean_mlp"], row["acc_zero_mlp"]) == (1.0, 1.0, 1.0)
    assert row["mlp_role"] == "passes"
    assert row["attn_picks_slot"] == 1.0  # hard attention, one-hot on the matching slot
    assert row["attn_entropy"] == pytest.approx(0.0, abs=1e-6)
    assert labels.mechanism(row) == "construction"
    plain = analysis.measure(constructions.build(case, n), batch_size=128)
    assert labels.mechanism(plain) == "construction" and plain["mlp_role"] == "none"
    for col in ("mass", "hit", "qk_diag", "ov_diag", "follow", "keep"):  # the attention's measures
        assert row[col] == pytest.approx(plain[col], abs=1e-6), col
    assert "MLP: passes (accuracy 1.000 with its output mean-ablated" in labels.verdict(row)


def readout_model(case: int, n: int):
    """``constructions.build(case, n)`` (one layer) in residual coordinates [0, D) of a model of
    width 2D whose MLP copies those D coordinates into [D, 2D) (x = ReLU(x) - ReLU(-x)) and whose
    unembedding reads only [D, 2D): the attention does the construction's lookup, and the answer
    reaches the logits only through the MLP. Known answer: ``construction`` (the attention found
    the slot; the MLP reads the value out), ``mlp_role == "needed"``, and the direct-path
    ``ov_diag`` is 0, since W_U reads nothing the attention writes."""
    c = constructions.build(case, n)
    D, dh = c.cfg.d_model, c.cfg.d_head
    assert c.cfg.n_layers == 1 and not tasks.get(case).same_position
    m = models.build_model(case, n, 2 * D, 1, "learned", d_mlp=2 * D, seed=0)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.embed.W_E[:, :D] = c.W_E
        m.pos_embed.W_pos[:, :D] = c.W_pos
        a = m.blocks[0].attn
        a.W_Q[0, :D, :dh] = c.W_Q[0, 0] * math.sqrt(2 * D / dh)  # q.k / sqrt(2D) as q.k / sqrt(dh)
        a.W_K[0, :D, :dh] = c.W_K[0, 0]
        a.W_V[0, :D, :dh] = c.W_V[0, 0]
        a.W_O[0, :dh, :D] = c.W_O[0, 0]
        mlp = m.blocks[0].mlp
        eye = torch.eye(D)
        mlp.W_in[:D, :D], mlp.W_in[:D, D:] = eye, -eye
        mlp.W_out[:D, D:], mlp.W_out[D:, D:] = eye, -eye
        m.unembed.W_U[D:] = c.W_U
        m.unembed.b_U.copy_(c.b_U)
    attention.set_attention(m, "leftmost")
    return m


@pytest.mark.parametrize("case,n", [(1, 10), (4, 10)])
def test_a_construction_read_out_by_its_mlp_is_a_construction(case, n):
    model = readout_model(case, n)
    tokens = hooks.sample_inputs(case, n, 128)
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, -1], constructions.build(case, n)(tokens)[:, -1], atol=1e-5)
    row = analysis.measure(model, batch_size=128)
    assert row["acc"] == 1.0 and row["mlp_role"] == "needed"
    assert row["ov_diag"] == 0.0  # the direct path reads nothing: OV must be read through the MLP
    assert row["qk_diag"] == 1.0 and row["follow"] >= 0.9 and row["attn_picks_slot"] == 1.0
    assert labels.mechanism(row) == "construction"
    assert labels.code(row) == "circle"  # the value's circle, read at the slot through the MLP
    # the same numbers with the attention off the slot, or not followed, are not a construction
    assert labels.mechanism({**row, "qk_diag": 0.5}) != "construction"
    assert labels.mechanism({**row, "follow": 0.5}) != "construction"


# ----------------------------------------------------------------------------- (b) needed


def test_b_uniform_attention_and_an_mlp_lookup_is_labelled_mlp_lookup():
    n, batch = 3, 300
    model = mlp_lookup_model(n)
    tokens = hooks.sample_inputs(1, n, batch, seed=0)  # the inputs measure() samples
    answers = torch.tensor([tasks.evaluate(1, n, t.tolist()) for t in tokens])  # plain Python
    row = analysis.measure(model, batch_size=batch)
    assert row["acc"] == 1.0 and row["acc_any"] == 1.0
    assert row["attn_entropy"] == pytest.approx(1.0, abs=1e-6)  # every score 0: uniform
    # a uniform row's argmax is its first position (the leftmost tie): slot i* is position i*
    assert row["attn_picks_slot"] == pytest.approx(float((tokens[:, -1] == 0).double().mean()))
    # the hooks act: zeroed MLPs leave logits 0, argmax 0; mean-ablated, the final MLP writes the
    # mean of the one-hot answers, whose argmax is the most frequent answer (the first on a tie)
    assert row["acc_zero_mlp"] == pytest.approx(float((answers == 0).double().mean()))
    counts = torch.bincount(answers, minlength=n)
    assert row["acc_mean_mlp"] == pytest.approx(float(counts.max()) / batch)
    assert row["acc_mean_mlp"] < row["acc"] and row["acc_zero_mlp"] < row["acc"]
    assert row["mlp_role"] == "needed"
    assert labels.mechanism(row) == "mlp-lookup"
    assert labels.verdict(row).startswith("mlp-lookup: accuracy 1.000")
    import pandas as pd

    report = labels.answer(pd.DataFrame([{**row, "seed": 0, "accuracy": 1.0, "outcome": "success",
                                          "mechanism": "mlp-lookup"}]))
    assert "**Successful seeds 0: the MLP does the lookup.**" in report and "MLP role needed" in report


@pytest.mark.parametrize("n", [3, 5])
def test_b_theorem_35_is_an_mlp_lookup(n):
    from interp.theory import softmax_construction

    row = analysis.measure(softmax_construction.build(n), batch_size=256)
    assert row["acc"] == 1.0 and row["acc_any"] == 1.0
    assert row["mlp_role"] == "needed" and row["acc_mean_mlp"] < 1 / n + 0.1
    assert row["attn_entropy"] > 0.9  # weights (t_j + 1) / S: spread over the whole input
    assert labels.mechanism(row) == "mlp-lookup"


# ----------------------------------------------------------------------------- (c) the hooks


SPECS = [
    dict(case=1, n=4, d_token=4, n_layers=1, d_mlp=16),
    dict(case=2, n=4, d_token=4, n_layers=2, pos_embed="none", d_mlp=8, residual="embed", attn_bias=False),
    dict(case=4, n=4, d_token=6, n_layers=2, d_mlp=24, mlp="last"),
    dict(case=5, n=4, d_token=8, n_layers=2, d_mlp=32, W_O="identity", embed_scale="sqrt_d_model"),
    dict(case=5, n=4, d_token=8, n_layers=1, d_mlp=32, init="pytorch", pos_init="zero", unembed_bias=False),
]


@pytest.mark.parametrize("kw", SPECS, ids=lambda kw: f"case{kw['case']}-L{kw['n_layers']}")
def test_every_spec_is_measured_and_zero_ablation_equals_zeroed_weights(kw):
    model = models.build_model(seed=1, **kw)
    row = analysis.measure(model, batch_size=128)
    assert row["mlp_role"] in ("passes", "helps", "needed")
    assert 0 <= row["attn_entropy"] <= 1 and 0 <= row["attn_picks_slot"] <= 1
    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        for layer in range(zeroed.cfg.n_layers):
            zeroed.blocks[layer].mlp.W_out.zero_()
            zeroed.blocks[layer].mlp.b_out.zero_()
    tokens = hooks.sample_inputs(kw["case"], kw["n"], 128)
    said = zeroed(tokens)[:, -1].argmax(-1)
    assert row["acc_zero_mlp"] == float((said == tasks.answers(kw["case"], kw["n"], tokens)).double().mean())


def test_mean_ablation_equals_the_mean_added_by_hand():
    """One layer: logits = (resid_mid + mean MLP output) W_U + b_U at the final position."""
    model = models.build_model(3, 5, 8, 1, "none", d_mlp=32, seed=2, attn_bias=False, unembed_bias=False)
    tokens = hooks.sample_inputs(3, 5, 256)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        resid = cache["blocks.0.hook_resid_mid"][:, -1] + cache["blocks.0.hook_mlp_out"][:, -1].mean(0)
        said = (resid @ model.W_U + model.b_U).argmax(-1)
        assert not torch.equal(said, model(tokens)[:, -1].argmax(-1))  # the ablation changes answers
    answers = tasks.answers(3, 5, tokens)
    row = analysis.measure(model, batch_size=256)
    assert row["acc_mean_mlp"] == float((said == answers).double().mean())


@pytest.mark.parametrize("acc, ablated, n, want", [
    (1.0, 1.0, 10, "passes"), (1.0, 0.95, 10, "passes"), (0.1, 0.08, 10, "passes"),
    (1.0, 0.94, 10, "helps"), (1.0, 0.2, 10, "helps"), (1.0, 0.199, 10, "needed"),
    (1.0, 0.0, 10, "needed"), (0.5, 0.31, 5, "helps"), (0.9, 0.29, 5, "needed"),
    (1.0, math.nan, 10, "none"),
])
def test_mlp_role_thresholds(acc, ablated, n, want):
    from interp.inspect.mechanism import mlp_measures

    assert mlp_measures.role(acc, ablated, n) == want


def test_labels_of_mlp_rows():
    """The attention's label stands whatever the MLP does; mlp-lookup only where it is none."""
    construction = dict(acc=1.0, acc_any=1.0, qk_diag=1.0, ov_diag=1.0, follow=1.0, qk_anti=0.0,
                        ov_anti=0.0, at="value")
    spread = dict(acc=1.0, acc_any=1.0, qk_diag=0.2, ov_diag=0.0, follow=1.0, qk_anti=0.2,
                  ov_anti=0.0, at="value", attn_entropy=0.95, attn_picks_slot=0.2)
    # rows without the code level's columns: the routing is all they say (issue 42)
    assert labels.mechanism({**construction, "mlp_role": "needed"}) == "lookup"
    assert labels.mechanism({**construction, "mlp_role": "passes"}) == "lookup"
    assert labels.mechanism({**spread, "mlp_role": "needed"}) == "mlp-lookup"
    # a working model by no named route is "other" (before issue 42 it was folded into "none")
    assert labels.mechanism({**spread, "mlp_role": "helps"}) == "other"
    assert labels.mechanism({**spread, "mlp_role": "none"}) == "other"  # attention-only
    assert labels.mechanism(spread) == "other"  # an older row without the MLP columns
    assert labels.mechanism({**spread, "mlp_role": "needed", "attn_entropy": 0.3}) == "other"
    assert labels.mechanism({**spread, "acc": 0.5}) == "none"
    assert labels.mechanism({**spread, "mlp_role": "needed", "acc": 0.5}) == "none"
    assert labels.mechanism({**spread, "mlp_role": "needed", "attn_entropy": math.nan}) == "other"
    assert "mlp-lookup" in labels.MECHANISMS and "MLP does the lookup" in labels.describe("mlp-lookup")
    for col in MLP_COLUMNS:
        assert labels.describe(col)


def test_a_store_keeps_architectures_apart():
    """analyze_sweep's groups: a run with an MLP is not grouped with the attention-only run of
    the same case, n and width; attention-only labels are as before."""
    base = dict(case=5, n=10, d_token=32, n_layers=1, pos_embed="learned")
    assert analysis.group_label(base) == "case 5, n=10, d_token=32, 1 layer, PE learned"
    assert analysis.group_label({**base, "d_mlp": 0, "mlp": "every"}) == analysis.group_label(base)
    assert analysis.group_label({**base, "d_mlp": 128, "mlp": "every"}) == (
        "case 5, n=10, d_token=32, 1 layer, PE learned, d_mlp=128")
    assert analysis.group_label({**base, "n_layers": 2, "d_mlp": 128, "mlp": "last"}) == (
        "case 5, n=10, d_token=32, 2 layers, PE learned, d_mlp=128, MLP last")


# ----------------------------------------------------------------------------- attention-only


#: measure(model, batch_size=128) of three attention-only models, written by the code before the
#: MLP columns existed (commit d1ef2d6); floats as repr(). The MLP columns must be NaN / "none".
BEFORE = {
    'case 5, two layers, untrained': {
        'acc': 0.234375, 'acc_any': 0.1796875, 'mass': 0.11054887622594833, 'self_mass': 0.1150379627943039,
        'hit': 0.1484375, 'entropy': 0.9993988871574402, 'mass_keypos': 0.11052463203668594,
        'mass_L0': 0.11304190754890442, 'hit_L0': 0.1397569477558136, 'at': 'value', 'qk_diag': 0.0,
        'qk_margin': -0.2521873210058777, 'qk_anti': 0.5, 'ov_diag': 0.25, 'ov_margin': -0.990998775262564,
        'ov_anti': 0.5, 'qk_circle': False, 'qk_top2': 0.9905127102696771, 'qk_balance': 0.2509188576388654,
        'qk_rcv': 0.22994458500249224, 'qk_spacing': 0.17375837522130747, 'qk_fit': 0.4282633187805546,
        'qk_inverted': False, 'qk_bias': 0.3571393061154115, 'ov_circle': False,
        'ov_top2': 0.9979706876370781, 'ov_balance': 0.2987424481091183, 'ov_rcv': 0.16232944105756233,
        'ov_spacing': 0.06459535870171579, 'ov_fit': 0.28996220457016625, 'ov_inverted': False,
        'ov_bias': 0.4979558146408157, 'r2_token': -0.7143593963884652, 'm_token': 2, 'N_token': 5,
        'r2_pos_key': 0.017021049340469996, 'm_pos_key': 2, 'N_pos_key': 5,
        'r2_pos_value': 0.2201475042222082, 'm_pos_value': 2, 'N_pos_value': 5,
        'r2_resid': -0.14209870299678118, 'm_resid': 1, 'N_resid': 5, 'keys_top2': 0.9040561726551514,
        'keys_rcv': 0.4555618794917375, 'keys_gap': 0.6040232914752846, 'keys_in_order': False,
        'emb_rank': 1.7840291093508627, 'follow': 0.2734375, 'keep': 0.265625,
    },
    'case 1, construction': {
        'acc': 1.0, 'acc_any': 1.0, 'mass': 1.0, 'self_mass': 0.0, 'hit': 1.0, 'entropy': 0.0,
        'at': 'value', 'qk_diag': 1.0, 'qk_margin': 0.25, 'qk_anti': 0.0, 'ov_diag': 1.0, 'ov_margin': 0.25,
        'ov_anti': 0.0, 'qk_circle': True, 'qk_top2': 1.0, 'qk_balance': 0.6000000000000002,
        'qk_rcv': 2.2868009281005456e-16, 'qk_spacing': 5.684057184615449e-16, 'qk_fit': 0.9999999999999997,
        'qk_inverted': False, 'qk_bias': 0.02857142857142858, 'ov_circle': True, 'ov_top2': 1.0,
        'ov_balance': 0.5999999911696822, 'ov_rcv': 2.575509348833346e-09,
        'ov_spacing': 5.5770537469940875e-09, 'ov_fit': 1.0, 'ov_inverted': False,
        'ov_bias': 0.02857142786860738, 'qkpos_diag': 1.0, 'r2_token': 1.0, 'm_token': 1, 'N_token': 6,
        'r2_pos': 1.0, 'm_pos': 1, 'N_pos': 6, 'r2_resid': 1.0, 'm_resid': 1, 'N_resid': 6,
        'keys_top2': 1.0, 'keys_rcv': 7.094661501238874e-09, 'keys_gap': 0.8333333250871843,
        'keys_in_order': True, 'emb_rank': 1.8823529337239173, 'follow': 1.0, 'keep': 1.0,
    },
    'case 3, W_O identity, sqrt scale': {
        'acc': 0.171875, 'acc_any': 0.2734375, 'mass': 0.08092542737722397, 'self_mass': 0.0653560683131218,
        'hit': 0.0546875, 'entropy': 0.7080324292182922, 'at': 'value', 'qk_diag': 0.0,
        'qk_margin': -0.8975592467453927, 'qk_anti': 0.8, 'ov_diag': 0.2, 'ov_margin': -0.7903456943469637,
        'ov_anti': 0.6, 'qk_circle': False, 'qk_top2': 0.9508559703362481,
        'qk_balance': 0.40925694654630995, 'qk_rcv': 0.5068716665920671, 'qk_spacing': 0.32308624690480575,
        'qk_fit': 0.6458019660768359, 'qk_inverted': False, 'qk_bias': 0.03752327741829891,
        'ov_circle': False, 'ov_top2': 0.9361107181992083, 'ov_balance': 0.575213776188998,
        'ov_rcv': 0.3086275153615267, 'ov_spacing': 0.31091341118013255, 'ov_fit': 0.12609826105374478,
        'ov_inverted': False, 'ov_bias': 0.26249640138123964, 'r2_token_key': -0.4082156580591871,
        'm_token_key': 2, 'N_token_key': 5, 'r2_token_value': -0.3739470051296472, 'm_token_value': 1,
        'N_token_value': 5, 'r2_resid': 0.09917030845596736, 'm_resid': 1, 'N_resid': 5,
        'keys_top2': 0.8335071083330124, 'keys_rcv': 0.08074114815594245, 'keys_gap': 0.29964644840299415,
        'keys_in_order': False, 'emb_rank': 2.1647976925742514, 'follow': 0.234375, 'keep': 0.1796875,
    },
}


def _before_models():
    return {
        "case 5, two layers, untrained": models.build_model(5, 4, 8, 2, seed=0),
        "case 1, construction": constructions.build(1, 5),
        "case 3, W_O identity, sqrt scale": models.build_model(
            3, 5, 4, 1, "none", seed=1, W_O="identity", embed_scale="sqrt_d_model", init="pytorch"),
    }


def test_attention_only_columns_are_unchanged_and_the_mlp_columns_empty():
    """Every column the code wrote before stays (same names, order and values, to 1e-6, r2_* to
    1e-4: another CPU's kernels may round the last bits differently); the MLP columns follow,
    NaN / none."""
    for name, model in _before_models().items():
        row = analysis.measure(model, batch_size=128)
        before = BEFORE[name]
        code_columns = [f"{v}_{k}" for v in ("value", "query")
                        for k in ("dim", "iia1", "iia2", "iia_full", "pr", "top2", "rcv", "gap", "cos")]
        assert list(row) == [*before, *MLP_COLUMNS, *code_columns, "n"], name
        for col, value in before.items():
            if isinstance(value, float) and not isinstance(value, bool):
                # r2_*: least-squares fits, whose conditioning amplifies the last bits (r2_resid of
                # the untrained two-layer model: 3e-6 apart on an AMD EPYC from the Intel Xeon's)
                rel = 1e-4 if col.startswith("r2_") else 1e-6
                assert row[col] == pytest.approx(value, rel=rel, abs=1e-9, nan_ok=True), (name, col)
            else:
                assert row[col] == value, (name, col)
        assert all(math.isnan(row[c]) for c in MLP_COLUMNS[:4]) and row["mlp_role"] == "none"
