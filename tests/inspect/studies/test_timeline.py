"""Mechanism timelines (issue 46): snapshots measured and labelled, and what is refused.

A run initialised with the paper's case-3 construction (its weights copied into the trained
architecture, W_Q scaled so the softmax is sharp) is a lookup from step 0; a run folder without
snapshots is trained again with them and saved; a checkpoint this machine does not train again
bit for bit, or a timeline whose last snapshot is not the checkpoint, is refused by name.
"""

from __future__ import annotations

import pytest
import torch

import interp
from interp.inspect.studies import timelines
from interp.training import checkpoints, snapshots
from interp.training.runs import TrainConfig, evaluate_accuracy, init_model

BETA = 100.0


def construction_run():
    """Case 3, n 5 in the trained architecture (d_token 2, no positions), with the softmax
    construction's weights: d_head 2 padded with zeros to the model's 4."""
    config = TrainConfig(case=3, n=5, d_token=2, pos_embed="none", init="pytorch", max_steps=40)
    source = interp.constructions.build(3, 5, attention="softmax", beta=BETA).state_dict()
    model = init_model(config)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            w = source[name] * (BETA if name.endswith("W_Q") else 1.0)
            padded = torch.zeros_like(p)
            padded[tuple(slice(0, d) for d in w.shape)] = w
            p.copy_(padded)
    return config, model


def test_a_construction_initialised_run_is_a_lookup_from_step_0(tmp_path):
    config, model = construction_run()
    assert evaluate_accuracy(model, config) == 1.0
    results, snaps = snapshots.train_with_snapshots([config], models_=[model], keep=3)
    folder = tmp_path / "run"
    checkpoints.save(results[0], folder)
    snapshots.save_snapshots(folder, snaps[0])
    df = timelines.timeline(folder)
    first = df[df.step == 0].iloc[0]
    assert first.acc == 1.0 and first.routing == "lookup", first.to_dict()
    assert first.mechanism == "lookup-untestable"  # n = 5: below the circle test's power (circle.md)
    assert list(df.step) == sorted(snaps[0]) and (df.outcome == "success").all()
    assert timelines.formation(df)["routing_forms"] == 0
    # issue 52: the graded measures are columns, with the version they were measured under; the
    # construction's weights at step 0 route and read out as the construction does
    assert (df.measures_version == timelines.MEASURES_VERSION).all()
    assert first.match_pos == 1.0 and first.readout_acc == 1.0
    # case 3 under softmax: the query token carries the target key as the matching slot does, so
    # the two tie and share the weight (hooks.AttentionReport.self_mass); leftmost gives the slot 1
    assert first.match_mass == pytest.approx(0.5, abs=1e-3)
    assert first.value_iia_code == 1.0 and first.answer_share == pytest.approx(1.0, abs=1e-6)


def _written(tmp_path):
    """A construction-initialised run's timeline written by write_timeline into tmp_path/out."""
    from interp.inspect.studies.timeline_report import write_timeline

    config, model = construction_run()
    results, snaps = snapshots.train_with_snapshots([config], models_=[model], keep=3)
    folder = tmp_path / "run"
    checkpoints.save(results[0], folder)
    snapshots.save_snapshots(folder, snaps[0])
    return folder, write_timeline(folder, tmp_path / "out")


def _reseal(path, edit):
    """Rewrite a sealed timeline.csv with ``edit(DataFrame)`` applied, every row sealed again."""
    import pandas as pd

    from interp.inspect.studies.atlas_cache import SEAL, seal

    df = edit(pd.read_csv(path, dtype={"run": str}).drop(columns=[SEAL]))
    path.write_text(seal(df.to_csv(index=False)))


def test_a_timeline_of_another_measures_version_is_refused_and_measured_again(tmp_path):
    """Issue 52: ``read_timeline`` gives back a table of this version and refuses, saying to
    measure again, one of another version, one written before versions (its seal intact) and an
    edited row; ``write_timeline`` replaces such a table and says which version it held."""
    from interp.inspect.studies.timeline_report import write_timeline

    folder, written = _written(tmp_path)
    path = tmp_path / "out" / "timeline.csv"
    assert written["measures_version"] == timelines.MEASURES_VERSION and written["replaced_version"] is None
    df = timelines.read_timeline(path)
    assert len(df) == written["rows"] == len(written["snapshots"]) and "row_sha" not in df
    first = written["snapshots"][0]
    assert first["step"] == 0 and first["readout_acc"] == 1.0 and first["measures_version"] == timelines.MEASURES_VERSION
    _reseal(path, lambda d: d.assign(measures_version="measure3-progress0"))
    again = f"run `interp timeline RUN_OR_STORE --out {path.parent}` to measure it again"
    with pytest.raises(ValueError, match=rf"holds measures version measure3-progress0; this code measures "
                                         rf"version {timelines.MEASURES_VERSION} .*{again}"):
        timelines.read_timeline(path)
    _reseal(path, lambda d: d.drop(columns=["measures_version"]))  # as written before issue 52
    with pytest.raises(ValueError, match="holds measures version none; this code measures"):
        timelines.read_timeline(path)
    assert write_timeline(folder, tmp_path / "out")["replaced_version"] == "none"
    assert len(timelines.read_timeline(path)) == written["rows"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1].replace(",lookup,", ",mirror,"), *lines[2:]]) + "\n")
    with pytest.raises(ValueError, match=r"1 row\(s\) fail their seal"):
        timelines.read_timeline(path)


def _run_folder(factory, d_token: int, max_steps: int):
    """A run folder as a sweep leaves it (a checkpoint with its result), without snapshots."""
    from interp.training import trainer

    config = TrainConfig(case=3, n=5, d_token=d_token, pos_embed="none", init="pytorch", max_steps=max_steps)
    folder = factory.mktemp(f"run-d{d_token}") / "run"
    checkpoints.save(trainer.train(config), folder)
    return folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run that stops at its 60-step budget (case 3, n 5, d_token 4)."""
    return _run_folder(tmp_path_factory, 4, 60)


def test_a_run_without_snapshots_is_trained_again_and_saved(trained, tmp_path):
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    df = interp.timeline(folder, keep=3)
    assert snapshots.has_snapshots(folder) and len(df) == 3 and list(df.step)[0] == 0
    assert set(df.columns) >= {"step", "loss", "acc", "qk_diag", "follow", "value_dim", "routing",
                               "code", "key_code", "mechanism", "plateau_exit", "outcome"}
    assert df.loss.notna().all() and df.step.iloc[-1] == checkpoints.load_run(folder).metrics["steps"]
    # a timeline whose last snapshot is not the checkpoint's model
    saved = snapshots.load_snapshots(folder)
    last = max(saved)
    saved[last] = {k: v + 1.0 if k.endswith("W_U") else v for k, v in saved[last].items()}
    snapshots.save_snapshots(folder, saved)
    with pytest.raises(ValueError, match=rf"run {folder}: snapshot timeline/step-{last}\.safetensors is not the checkpoint's model"):
        timelines.timeline(folder)


def test_a_checkpoint_this_machine_does_not_train_again_is_refused(trained, tmp_path):
    run = checkpoints.load_run(trained)
    with torch.no_grad():
        run.model.unembed.b_U.add_(1e-6)
    folder = tmp_path / "run"
    checkpoints.save(run.model, folder, config=run.config)
    with pytest.raises(ValueError, match=rf"run {folder}: this machine trains another model than the stored one"):
        timelines.timeline(folder, keep=3)
    assert not snapshots.has_snapshots(folder)


def test_formation_follows_the_preregistered_definitions():
    def rows(routes, codes):
        return [dict(run="r", seed=0, step=s, routing=r, code=c, mechanism=r, plateau_exit=20, outcome="success")
                for s, r, c in zip((0, 10, 20, 30, 40), routes, codes)]

    f = timelines.formation(rows(["none", "lookup", "none", "lookup", "lookup"],
                                 ["unread", "codebook", "circle", "codebook", "codebook"]))
    assert (f["routing_forms"], f["code_settles"]) == (30, 30)
    f = timelines.formation(rows(["none", "other", "other", "other", "other"], ["unread"] * 5))
    assert (f["routing_forms"], f["code_settles"]) == (None, 0)
    assert timelines.changes(rows(["none", "lookup", "lookup", "lookup", "lookup"], ["unread"] * 5)) == [
        (10, "routing none -> lookup")]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A run that learns (case 3, n 5, d_token 8: loss 1.69 at step 1, 0.01 at step 572)."""
    return _run_folder(tmp_path_factory, 8, 600)


def test_milestones_are_snapshotted_where_the_curve_reaches_them(learned, tmp_path):
    import math
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(learned, folder)
    run = checkpoints.load_run(folder)
    curve, ln = run.metrics["curve"], math.log(5)
    first_below = {f: next(s for s, loss in curve if loss < f * ln) for f in (0.9, 0.5, 0.1)}  # by hand
    df = interp.timeline(folder, milestones="plateau_exit,half_loss,low_loss")
    assert set(first_below.values()) <= set(df.step)
    assert {0, run.metrics["steps"]} <= set(df.step) and len(df) == 5
    assert snapshots.has_milestones(folder, run.config, curve, ["plateau_exit", "low_loss"])


def test_a_milestone_the_curve_never_reaches_is_refused_before_training(trained, tmp_path, monkeypatch):
    import shutil

    from interp.training import trainer

    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    calls = []
    original = trainer.train_group
    monkeypatch.setattr(trainer, "train_group", lambda *a, **k: calls.append(1) or original(*a, **k))
    with pytest.raises(ValueError, match=r"milestone low_loss is never reached by its curve"):
        interp.timeline(folder, milestones="low_loss")
    with pytest.raises(ValueError, match=r"milestone 'plateau'; accepted: one or more of plateau_exit"):
        interp.timeline(folder, milestones="plateau")
    assert not calls and not snapshots.has_snapshots(folder)
    interp.timeline(folder, keep=3)  # the counter counts: a plain timeline of the same folder trains
    assert calls
