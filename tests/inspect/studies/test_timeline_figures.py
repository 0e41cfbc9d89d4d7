"""Issue 52 item 3: the timeline figures, read back from their matplotlib Axes.

References, independent of the drawing code: the rows and the loss curve are built here, with
the milestone steps derived by hand from the curve (n = 5, ln 5 = 1.609: the plateau exit is the
first loss below 1.448, half-loss below 0.805, low loss below 0.161; the steepest drop by the
running median of three worked below) and checked against :mod:`interp.training.milestones` too;
the outcomes are set by hand."""

from __future__ import annotations

import math

import pytest
from matplotlib.colors import to_rgba

from interp.inspect.studies import timeline_report
from interp.training import milestones
from interp.training.runs import TrainConfig

CONFIG = TrainConfig(case=3, n=5, d_token=4, pos_embed="none", curve_every=10)
# step 1 (the initial loss), then every 10 steps: a plateau at ln 5, a fall from step 50 on
LOSSES = {1: 1.61, 10: 1.6, 20: 1.6, 30: 1.6, 40: 1.6, 50: 1.4, 60: 0.9, 70: 0.5, 80: 0.1, 90: 0.05, 100: 0.04}
CURVE = sorted(LOSSES.items())
# smoothed (median of 3) at 40..90: 1.6, 1.4, 0.9, 0.5, 0.1, 0.05; the falls 0.2, 0.5, 0.4, 0.4,
# 0.05: the steepest ends at 60
BY_HAND = {"plateau_exit": 50, "half_loss": 70, "steepest_drop": 60, "low_loss": 80}
STEPS = [0, 5, 20, 50, 70, 100]
ROUTING = ["none", "none", "none", "lookup", "lookup", "lookup"]
CODE = ["unread", "unread", "codebook", "codebook", "circle", "circle"]


def _rows(run="r0", seed=0, outcome="success", shift=0.0):
    out = []
    for i, (step, routing, code) in enumerate(zip(STEPS, ROUTING, CODE)):
        graded = {c: round(0.1 * i + shift + 0.01 * j, 6) for j, c in enumerate(timeline_report.DRAWN)}
        out.append(dict(run=run, seed=seed, case=3, n=5, d_token=4, n_layers=1, pos_embed="none", d_mlp=0,
                        step=step, loss=LOSSES.get(step, math.nan), acc=0.2 * i, routing=routing, code=code,
                        outcome=outcome, **graded))
    return out


def _lines(ax, gid):
    return [ln for ln in ax.get_lines() if ln.get_gid() == gid]


def test_a_seed_figure_draws_every_measure_at_the_snapshot_steps_and_the_milestones():
    rows = _rows()
    assert milestones.milestones(CURVE, CONFIG) == BY_HAND
    fig = timeline_report.seed_figure(list(reversed(rows)), CURVE, CONFIG, "seed 0")  # any order in
    ax_loss, ax_m, ax_lab = fig.axes
    [loss] = _lines(ax_loss, "loss")
    assert list(loss.get_xdata()) == [s for s, _ in CURVE] and list(loss.get_ydata()) == [v for _, v in CURVE]
    for key in (*timeline_report.DRAWN, "acc"):
        [line] = _lines(ax_m, key)
        assert list(line.get_xdata()) == STEPS, key  # steps, never a fraction of the run
        assert list(line.get_ydata()) == [r[key] for r in rows], key
    assert set(timeline_report.DRAWN) == {"match_mass", "match_pos", "readout_acc", "value_iia_code",
                                          "query_iia_code", "answer_share"}
    for ax in fig.axes:  # one time axis: every panel shares it, each marks every milestone
        assert ax.get_xscale() == "symlog" and ax.get_shared_x_axes().joined(ax, ax_loss)
        for name, step in BY_HAND.items():
            [mark] = _lines(ax, f"milestone-{name}")
            assert list(mark.get_xdata()) == [step, step], name
    named = {t.get_text().strip() for t in ax_loss.texts}
    assert named == {"plateau exit", "half loss", "steepest drop", "low loss"}
    # the labels: named where each begins, routing on the upper band, the code on the lower
    begins = sorted((t.get_position()[1], t.get_position()[0], t.get_text().strip()) for t in ax_lab.texts)
    assert begins == [(0, 0, "unread"), (0, 20, "codebook"), (0, 70, "circle"), (1, 0, "none"), (1, 50, "lookup")]


def test_without_a_curve_the_loss_is_the_snapshots_and_no_milestone_is_drawn():
    rows = _rows()
    fig = timeline_report.seed_figure(rows)
    [loss] = _lines(fig.axes[0], "loss")
    assert list(loss.get_xdata()) == STEPS
    assert not [ln for ax in fig.axes for ln in ax.get_lines() if str(ln.get_gid()).startswith("milestone-")]


def test_a_cell_figure_has_one_line_per_run_coloured_by_outcome():
    outcomes = {"a": "success", "b": "failed", "c": "success", "d": "partial"}
    rows = [r for k, (run, outcome) in enumerate(outcomes.items()) for r in _rows(run, k, outcome, 0.01 * k)]
    curves = {"a": CURVE, "b": [(1, 1.6), (50, 1.6), (100, 1.59)]}  # c and d: no recorded curve
    fig = timeline_report.cell_figure(rows, curves, "cell")
    ax_loss, ax_m = fig.axes
    for ax in (ax_loss, ax_m):
        lines = {ln.get_gid(): ln for ln in ax.get_lines()}
        assert sorted(lines) == sorted(outcomes) and len(ax.get_lines()) == len(outcomes)
        colour = {run: to_rgba(ln.get_color()) for run, ln in lines.items()}
        assert colour["a"] == colour["c"] != colour["b"] == colour["d"]
    m = {ln.get_gid(): ln for ln in ax_m.get_lines()}
    assert all(list(ln.get_xdata()) == STEPS for ln in m.values())
    assert list(m["b"].get_ydata()) == [r["match_mass"] for r in rows if r["run"] == "b"]
    loss = {ln.get_gid(): ln for ln in ax_loss.get_lines()}
    assert list(loss["a"].get_xdata()) == [s for s, _ in CURVE] and list(loss["b"].get_xdata()) == [1, 50, 100]
    assert list(loss["c"].get_xdata()) == STEPS
    assert [t.get_text() for t in ax_loss.get_legend().get_texts()] == ["success (2 runs)", "not a success (2 runs)"]


@pytest.mark.parametrize("d_mlp, name", [(0, "timeline-cell-case3-n5-d4-L1-none-mlp0.png"),
                                         (float("nan"), "timeline-cell-case3-n5-d4-L1-none-mlp0.png"),
                                         (16, "timeline-cell-case3-n5-d4-L1-none-mlp16.png")])
def test_a_cell_figure_is_named_after_its_cell(d_mlp, name):
    assert timeline_report.cell_name({**_rows()[0], "d_mlp": d_mlp}) == name
