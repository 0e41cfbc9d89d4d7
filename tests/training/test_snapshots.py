"""Snapshots through training (issue 46): kept without changing a bit, chosen, saved checksummed.

``train_with_snapshots`` must give the RunResults ``train_group`` gives (every parameter equal,
curves, accuracies), one layer and two; the snapshots it keeps are at most ``keep``, step 0 and
the last step among them, the last one the trained model; a saved timeline whose file was altered,
removed or belongs to another run is refused by a ValueError naming the run folder and the file.
"""

from __future__ import annotations

import pytest
import torch

from interp.training import checkpoints, snapshots, trainer
from interp.training.runs import TrainConfig, init_model

CONFIGS = {
    "one-layer": dict(case=3, n=5, d_token=4, pos_embed="none"),
    "two-layer": dict(case=5, n=5, d_token=8, n_layers=2),
}


def _group(kind: str, steps: int = 150):
    return [TrainConfig(**CONFIGS[kind], init="pytorch", seed=s, max_steps=steps) for s in (0, 1)]


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_snapshots_change_no_bit_of_training(kind):
    configs = _group(kind)
    results, snaps = snapshots.train_with_snapshots(configs, keep=8)
    plain = trainer.train_group(configs)
    for a, b in zip(results, plain, strict=True):
        sa, sb = a.model.state_dict(), b.model.state_dict()
        assert sa.keys() == sb.keys()
        assert all(torch.equal(sa[k], sb[k]) for k in sa), kind
        assert (a.curve, a.accuracy, a.steps, a.final_loss, a.status) == (b.curve, b.accuracy, b.steps, b.final_loss, b.status)
        kept = snaps[a.config.seed]
        assert len(kept) <= 8 and {0, a.steps} <= set(kept)
        assert all(torch.equal(kept[a.steps][k], sa[k]) for k in sa)  # the last: the trained model
        fresh = init_model(a.config).state_dict()
        assert all(torch.equal(kept[0][k], fresh[k]) for k in fresh)  # step 0: before training
        assert kept.plateau_exit == snapshots.plateau_exit(a.curve, a.config.n)


def test_the_grid_and_the_choice():
    grid = snapshots.candidate_steps(10_000)
    assert grid[:10] == list(range(1, 11)) and grid[-1] == 10_000 and len(grid) < 120
    pool = [0, *grid]
    chosen = snapshots.choose(pool, 10_000, 2_300, keep=20)
    assert len(chosen) <= 20 and chosen[0] == 0 and chosen[-1] == 10_000
    nearest = sorted(pool, key=lambda s: abs(s - 2_300))[:6]
    assert set(nearest) <= set(chosen)
    assert snapshots.choose(pool, 40, None, keep=5) == sorted(set(snapshots.choose(pool, 40, None, keep=5)))
    assert len(snapshots.choose(pool, 40, None, keep=5)) <= 5
    assert snapshots.plateau_exit([(1, 1.7), (50, 1.5), (100, 1.4), (150, 0.2)], 5) == 100  # 0.9 ln 5 = 1.45
    assert snapshots.plateau_exit([(1, 1.7)], 5) is None
    with pytest.raises(ValueError, match="keep"):
        snapshots.choose(pool, 40, None, keep=1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    configs = _group("one-layer", steps=60)[:1]
    results, snaps = snapshots.train_with_snapshots(configs, keep=5)
    folder = tmp_path_factory.mktemp("run") / "run"
    checkpoints.save(results[0], folder)
    snapshots.save_snapshots(folder, snaps[0])
    return folder, snaps[0]


def test_saved_snapshots_load_back_equal(saved):
    folder, snaps = saved
    back = snapshots.load_snapshots(folder)
    assert sorted(back) == sorted(snaps) and back.config == snaps.config
    assert back.plateau_exit == snaps.plateau_exit and back.losses == snaps.losses
    for step in snaps:
        assert all(torch.equal(back[step][k], snaps[step][k]) for k in snaps[step])


def _copy(folder, tmp_path):
    import shutil

    dest = tmp_path / "copy"
    shutil.copytree(folder, dest)
    return dest


def test_a_tampered_snapshot_is_refused_by_name(saved, tmp_path):
    folder, snaps = saved
    dest = _copy(folder, tmp_path)
    step = sorted(snaps)[1]
    target = dest / "timeline" / f"step-{step}.safetensors"
    data = bytearray(target.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    target.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"run {dest}: snapshot timeline/step-{step}\.safetensors does not match"):
        snapshots.load_snapshots(dest)
    target.unlink()
    with pytest.raises(ValueError, match=rf"step-{step}\.safetensors is missing"):
        snapshots.load_snapshots(dest)


def test_a_timeline_of_another_run_is_refused(saved, tmp_path):
    folder, snaps = saved
    dest = _copy(folder, tmp_path)
    other = snapshots.SeedSnapshots(dict(snaps), config=snaps.config.replace(seed=7), losses=snaps.losses)
    snapshots.save_snapshots(dest, other)
    with pytest.raises(ValueError, match=rf"run {dest}: timeline/manifest.json holds the snapshots of another run"):
        snapshots.load_snapshots(dest)
    (dest / "timeline" / "manifest.json").write_text("{")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        snapshots.load_snapshots(dest)


# ------------------------------------------------------------------ issue 55: sealed and cross-checked


def _edit_manifest(dest, edit, *, reseal: bool):
    import json

    path = dest / "timeline" / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    if reseal:  # the forger recomputes the seal (a plain sha256)
        manifest["seal"] = snapshots.manifest_seal(manifest)
    path.write_text(json.dumps(manifest))


def test_an_edited_manifest_fails_its_seal(saved, tmp_path):
    folder, snaps = saved
    dest = _copy(folder, tmp_path)
    _edit_manifest(dest, lambda m: m.update(plateau_exit=6), reseal=False)
    with pytest.raises(ValueError, match=rf"run {dest}: timeline/manifest.json does not match its seal"):
        snapshots.load_snapshots(dest)


@pytest.mark.parametrize("reseal", [True, False], ids=["resealed", "legacy-unsealed"])
def test_a_forged_manifest_is_caught_by_the_runs_own_record(saved, tmp_path, reseal):
    """The seal recomputed (or removed, as a manifest written before seals): the plateau exit,
    a loss, the steps list are compared with the checkpoint's recorded result (its curve and
    steps, read here from config.json by hand)."""
    import json

    folder, snaps = saved
    result = json.loads((folder / "config.json").read_text())["result"]
    curve = {int(s): v for s, v in result["curve"]}
    strip = (lambda m: m.pop("seal")) if not reseal else (lambda m: None)
    steps = sorted(snaps)
    forgeries = {
        "plateau exit": lambda m: m.update(plateau_exit=(m["plateau_exit"] or 0) + 1),
        "loss": lambda m: m["losses"].update({"0": 5.0}),  # step 0 holds step 1's loss
        "steps": lambda m: m.update(steps=steps[:-1], sha256={k: v for k, v in m["sha256"].items()
                                                             if k != snapshots.file_name(steps[-1])}),
    }
    assert 1 in curve and steps[-1] == result["steps"]
    for what, edit in forgeries.items():
        dest = _copy(folder, tmp_path / what.replace(" ", "-"))
        _edit_manifest(dest, lambda m: (edit(m), strip(m)), reseal=reseal)
        with pytest.raises(ValueError, match=rf"run {dest}: timeline/manifest.json "
                                             r"(says plateau exit|says loss 5.0 at step 0|does not list step-)"):
            snapshots.load_snapshots(dest)
    dest = _copy(folder, tmp_path / "kept")
    _edit_manifest(dest, strip, reseal=reseal)  # unchanged but for the seal: read as it is
    assert sorted(snapshots.load_snapshots(dest)) == steps


def test_a_timeline_elsewhere_is_checked_against_its_checkpoint(saved, tmp_path):
    folder, snaps = saved
    into = tmp_path / "out" / "snapshots" / "run"
    assert snapshots.save_snapshots(folder, snaps, into=into) == into
    assert snapshots.has_snapshots(folder, into) and sorted(snapshots.load_snapshots(folder, into)) == sorted(snaps)
    other = snapshots.SeedSnapshots(dict(snaps), config=snaps.config.replace(seed=7), losses=snaps.losses)
    snapshots.save_snapshots(tmp_path / "x", other, into=into)
    with pytest.raises(ValueError, match=rf"run {folder}: {into}/manifest.json holds the snapshots of another run"):
        snapshots.load_snapshots(folder, into)


def test_a_failed_write_names_the_folder_and_leaves_nothing(saved, tmp_path, monkeypatch):
    import errno

    from interp.training import files

    folder, snaps = saved
    dest = _copy(folder, tmp_path)
    import shutil

    shutil.rmtree(dest / "timeline")

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file named

    monkeypatch.setattr(files, "write_synced", full)
    with pytest.raises(ValueError, match=rf"^{dest / 'timeline'}: the disk is full"):
        snapshots.save_snapshots(dest, snaps)
    assert not snapshots.has_snapshots(dest) and snapshots.stale_temporaries(dest) == []
    (dest / ".timeline.tmp-0123abcd").mkdir()  # what a SIGKILL mid-write leaves
    assert snapshots.stale_temporaries(dest) == [dest / ".timeline.tmp-0123abcd"]
