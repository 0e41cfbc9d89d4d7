"""Loss milestones and snapshot plans (issue 52, item 2).

Milestones are checked against a curve whose answers are worked out by hand beside it; a run
trained again at its milestones keeps exactly those steps (and 0 and its last), each equal bit
for bit to the snapshot a dense plan (every step) copies there, its last the plain
``train_group`` model; a plan or milestone that cannot apply is refused by name before any
training (training calls counted).
"""

from __future__ import annotations

import math

import pytest
import torch

from interp.training import milestones, snapshot_plans, snapshots, trainer
from interp.training.runs import TrainConfig

N = 10  # ln 10 = 2.3026: plateau bound 0.9 ln n = 2.0723, half 1.1513, low 0.2303, least drop 0.1151
CONFIG = TrainConfig(case=3, n=N, d_token=4, pos_embed="none", curve_every=10, max_steps=100)
CURVE = [(1, 2.40), (10, 2.30), (20, 2.31), (30, 2.00), (40, 1.10), (50, 2.9), (60, 0.60),
         (70, 0.20), (80, 0.19), (90, 0.18), (93, 0.005)]
# by hand: plateau exit 30 (2.00 < 2.0723); half-loss 40 (1.10 < 1.1513); low loss 70 (0.20 < 0.2303);
# steepest drop: the regular points 10..90 smoothed by medians of three are (20: 2.30) (30: 2.00)
# (40: 2.00) (50: 1.10) (60: 0.60) (70: 0.20) (80: 0.19); falls 0.30, 0, 0.90, 0.50, 0.40, 0.01:
# the largest ends at step 50 (the spike of 2.9 at step 50 is smoothed to 1.10; step 93, chosen
# by the stopping rule, is not regular)
BY_HAND = {"plateau_exit": 30, "half_loss": 40, "steepest_drop": 50, "low_loss": 70}


def test_milestones_on_a_curve_worked_by_hand():
    assert math.isclose(0.9 * math.log(N), 2.0723, abs_tol=1e-4)
    assert milestones.milestones(CURVE, CONFIG) == BY_HAND
    assert milestones.plateau_exit(CURVE, N) == snapshots.plateau_exit(CURVE, N) == 30
    nan = [(1, 2.4), (10, float("nan")), (20, 2.3)]
    assert milestones.milestones(nan, CONFIG) == dict.fromkeys(milestones.NAMES)  # NaN passes nothing
    flat = [(s, 2.3 + 0.05 * (-1) ** (s // 10)) for s in range(10, 101, 10)]  # noise of 0.1 < 0.115
    assert milestones.steepest_drop(flat, N, 10) is None
    assert milestones.steps_for(CONFIG, CURVE, "half_loss,low_loss") == [40, 70]
    assert milestones.steps_for(CONFIG, CURVE, ["all"]) == [30, 40, 50, 70]


@pytest.mark.parametrize("names, message", [
    ("knee", r"milestone 'knee'; accepted: one or more of plateau_exit, half_loss, steepest_drop, low_loss, or all"),
    ("", r"no milestone named"),
])
def test_unknown_milestones_are_refused_by_name(names, message):
    with pytest.raises(ValueError, match=message):
        milestones.check_names(names)


def test_a_milestone_the_curve_never_reaches_is_refused_by_name():
    stalled = [(s, v) for s, v in CURVE if s <= 40]
    with pytest.raises(ValueError, match=rf"run {CONFIG.name()} .*milestone low_loss is never reached by its "
                                         r"curve \(loss < 0.1 ln n = 0.2303 needed, lowest 1.1 at step 40\)"):
        milestones.steps_for(CONFIG, stalled, ["plateau_exit", "low_loss"])


@pytest.mark.parametrize("value, message", [
    (0, r"--snapshots 0; accepted: a whole number N >= 1"),
    (-5, r"--snapshots -5; accepted"),
    ("dense", r"--snapshots 'dense'; accepted: .*'curve'"),
    (2.5, r"--snapshots 2.5; accepted"),
    (True, r"--snapshots True; accepted"),
])
def test_bad_snapshot_values_are_refused_by_name(value, message):
    with pytest.raises(ValueError, match=message):
        snapshot_plans.parse(value)
    assert snapshot_plans.parse("curve") == snapshot_plans.Curve() and snapshot_plans.parse("7") == snapshot_plans.Every(7)


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("trained although the plan was refused")

    monkeypatch.setattr(trainer, "train_group", refuse)


@pytest.mark.parametrize("plan, message", [
    (snapshot_plans.Every(101), r"snapshot interval 101 is beyond run .* which trains at most 100 steps; accepted: 1 to 100"),
    (snapshot_plans.At({0: (5, 101)}), r"snapshot step 101 for run .*accepted: whole numbers from 1 to its max_steps 100"),
    (snapshot_plans.At({1: (5,)}), r"snapshot steps name no steps for run .* \(seed 0\)"),
])
def test_a_plan_that_cannot_apply_is_refused_before_training(plan, message, no_training):
    with pytest.raises(ValueError, match=message):
        snapshots.train_with_snapshots([CONFIG], plan=plan)


def test_snapshots_that_would_not_fit_in_memory_are_refused_before_training(monkeypatch, no_training):
    from interp.core import limits

    group = [CONFIG.replace(seed=s) for s in range(3)]
    one = limits.train_step_bytes(3, N, 4, pos_embed="none", batch_size=0) // 4  # one snapshot's bytes
    monkeypatch.setattr(limits, "memory_bytes", lambda: 2 * 2 * one * 3 * 40)  # half: 40 per seed
    snapshots_ok = snapshot_plans.Every(3)  # 100 // 3 + 2 = 35 per seed: fits
    snapshot_plans.check_memory(snapshots_ok, group)
    with pytest.raises(ValueError, match=r"--snapshots 2: 52 snapshots per seed of .* x 3 seeds need .* GiB held "
                                         r"in memory; .*accepted: at most half of it, about 40 snapshots per seed"):
        snapshots.train_with_snapshots(group, plan=snapshot_plans.Every(2))


def test_a_run_trained_again_at_its_milestones_keeps_exactly_them():
    config = TrainConfig(case=3, n=5, d_token=4, pos_embed="none", init="pytorch", max_steps=300,
                         curve_every=10)
    plain = trainer.train_group([config])[0]
    found = milestones.milestones(plain.curve, config)
    reached = [k for k, v in found.items() if v is not None]
    assert {"plateau_exit", "half_loss", "steepest_drop"} <= set(reached), found  # this run leaves its plateau
    plan = milestones.plan([(config, plain.curve)], reached)
    results, at = snapshots.train_with_snapshots([config], plan=plan)
    _, dense = snapshots.train_with_snapshots([config], plan=snapshot_plans.Every(1))
    kept = at[config.seed]
    assert sorted(kept) == sorted({0, *(found[k] for k in reached), plain.steps})
    assert kept.plan == "at chosen steps"
    for step in kept:
        assert all(torch.equal(kept[step][k], dense[config.seed][step][k]) for k in kept[step]), step
    final = plain.model.state_dict()
    assert all(torch.equal(kept[plain.steps][k], final[k]) for k in final)
    assert results[0].curve == plain.curve
    with pytest.raises(ValueError, match=r"milestone low_loss is never reached"):
        milestones.plan([(config, plain.curve)], ["low_loss"])


def test_has_milestones_says_whether_a_saved_timeline_has_the_milestones(tmp_path):
    from interp.training import checkpoints

    config = TrainConfig(case=3, n=5, d_token=4, pos_embed="none", init="pytorch", max_steps=300,
                         curve_every=10)
    results, snaps = snapshots.train_with_snapshots([config], plan=snapshot_plans.Curve())
    folder = tmp_path / "run"
    checkpoints.save(results[0], folder)
    curve = results[0].curve
    assert not snapshots.has_milestones(folder, config, curve, ["plateau_exit"])  # nothing saved yet
    snapshots.save_snapshots(folder, snaps[config.seed])
    assert snapshots.has_milestones(folder, config, curve, ["plateau_exit", "half_loss", "steepest_drop"])
    found = milestones.milestones(curve, config)
    thin = snapshots.SeedSnapshots({k: v for k, v in snaps[config.seed].items() if k != found["half_loss"]},
                                   config=config, losses=snaps[config.seed].losses,
                                   plateau_exit=snaps[config.seed].plateau_exit)
    snapshots.save_snapshots(folder, thin)
    assert not snapshots.has_milestones(folder, config, curve, ["half_loss"])
    assert snapshots.saved_steps(folder) == sorted(thin)
    with pytest.raises(ValueError, match="milestone low_loss is never reached"):
        snapshots.has_milestones(folder, config, curve, ["low_loss"])
