"""Progress files: a group saved mid-training and resumed ends with the bits of one that ran
straight through.

Independent reference: the same ensemble (or sweep) run uninterrupted in this process. Every
parameter, Adam's state, the curves, steps, losses and test accuracies are compared exactly.
The tiny configs include two layers with MLPs (every kind of parameter and Adam state) and a
stopping rule that ends seeds at different steps (the live-seed list must come back too).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch

from interp.training import fast_train, progress, trainer as training
from interp.sweeps import driver as sweeps
from interp.training.trainer import TrainConfig
from sweeps.test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)


def _group(**kw) -> list[TrainConfig]:
    base = dict(case=5, n=5, d_token=8, pos_embed="learned", n_layers=2, d_mlp=16, max_steps=40,
                batch_size=32, eval_batches=2, curve_every=5, stop_loss=0.0)
    base.update(kw)
    return [TrainConfig(seed=s, **base) for s in (0, 1, 2)]


def _run(ens: fast_train.Ensemble) -> fast_train.Ensemble:
    while not ens.done:
        ens.step()
    return ens


def _same_state(a: fast_train.Ensemble, b: fast_train.Ensemble) -> None:
    for ma, mb in zip(a.models, b.models, strict=True):
        for (name, pa), (_, pb) in zip(ma.named_parameters(), mb.named_parameters(), strict=True):
            assert torch.equal(pa, pb), name
    sa, sb = a.opt.state_dict()["state"], b.opt.state_dict()["state"]
    assert sa.keys() == sb.keys() and sa
    for i in sa:
        for key in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][key]), torch.as_tensor(sb[i][key])), (i, key)
    assert (a.t, a.steps, a.status, a.active) == (b.t, b.steps, b.status, b.active)
    assert a.curves == b.curves and a.last == b.last


@pytest.mark.parametrize("kw, stop_at", [
    (dict(), 17),  # two layers with MLPs, every seed to max_steps
    (dict(stop_loss=1.58, max_steps=100), 9),  # seeds stop apart (at 11, 7, 7): saved with one live
])
def test_a_group_saved_and_resumed_ends_with_the_uninterrupted_bits(tmp_path, kw, stop_at):
    configs = _group(**kw)
    straight = _run(fast_train.Ensemble(configs))
    first = fast_train.Ensemble(configs)
    for _ in range(stop_at):
        first.step()
    path = tmp_path / "g.safetensors"
    progress.save(first, path)
    del first
    resumed = fast_train.Ensemble(configs)  # a fresh ensemble: step 0, fresh init
    assert progress.resume(resumed, path)
    assert resumed.t == stop_at
    _same_state(straight, _run(resumed))
    if kw.get("stop_loss"):
        assert len(set(straight.steps)) > 1, "the seeds should stop at different steps here"
    acc = [r.accuracy for r in straight.results()]
    assert acc == [r.accuracy for r in resumed.results()]


def test_train_ensemble_saves_as_it_goes_and_goes_on_from_the_file(tmp_path):
    configs = _group(max_steps=12)
    path = tmp_path / "g.safetensors"
    calls = []

    class Stop(Exception):
        pass

    real_step = fast_train.Ensemble.step

    def step_then_stop(self):
        calls.append(self.t)
        if len(calls) == 7:
            raise Stop  # a process ending mid-group, after six saved steps
        real_step(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", step_then_stop)
        with pytest.raises(Stop):
            fast_train.train_ensemble(configs, progress=path, every=0.0)
    assert path.is_file()
    resumed = fast_train.train_ensemble(configs, progress=path, every=0.0)
    straight = fast_train.train_ensemble(configs)
    for a, b in zip(straight, resumed, strict=True):
        assert (a.curve, a.steps, a.final_loss, a.accuracy) == (b.curve, b.steps, b.final_loss, b.accuracy)
        for (name, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters()):
            assert torch.equal(pa, pb), name


def test_a_damaged_or_foreign_progress_file_is_set_aside_and_the_group_starts_at_zero(tmp_path):
    configs = _group(max_steps=6)
    path = tmp_path / "g.safetensors"
    path.write_bytes(b"not a safetensors file")
    ens = fast_train.Ensemble(configs)
    assert not progress.resume(ens, path) and ens.t == 0
    assert not path.exists() and (tmp_path / "g.safetensors.bad").is_file()
    other = fast_train.Ensemble(_group(max_steps=7))  # other configs, same shapes
    other.step()
    progress.save(other, path)
    assert not progress.resume(ens, path) and ens.t == 0


TWO_GROUPS = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=5, n=5, d_token=d, pos_embed="learned", n_layers=2, d_mlp=8, seed=s,
                       max_steps=25, stop_loss=0.0, batch_size=32, eval_batches=2, curve_every=5)
           for d in (4, 8) for s in (0, 1)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="two")
"""

COMPARED = ("accuracy", "steps", "final_loss", "curve", "status", "seed", "config")


def _rows(store_path: Path) -> dict:
    """Each run's numbers and its weights' sha256 (config.json also holds the run's seconds)."""
    with sqlite3.connect(store_path) as db:
        db.row_factory = sqlite3.Row
        return {r["name"]: {**{k: r[k] for k in COMPARED},
                            "weights": json.loads(r["checksums"])["model.safetensors"]}
                for r in db.execute("SELECT * FROM runs")}


def test_a_sweep_stopped_mid_group_goes_on_from_its_progress_file(tmp_path):
    folder = make_sweep(tmp_path, TWO_GROUPS, "two")
    sweep = sweeps.load(folder)
    stopped, straight = tmp_path / "stopped" / "runs.sqlite", tmp_path / "straight" / "runs.sqlite"
    real_step, calls = fast_train.Ensemble.step, []

    def step_then_stop(self):
        calls.append(self.t)
        if len(calls) == 25 + 10:  # the first group done, the second stopped in its step 10
            raise KeyboardInterrupt
        real_step(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", step_then_stop)
        with pytest.raises(KeyboardInterrupt):
            sweeps.run_sweep(sweep, store=stopped, save_every=1e-9)
    saved = list(progress.folder(stopped).glob("*.safetensors"))
    assert len(saved) == 1 and len(_rows(stopped)) == 2
    calls.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fast_train.Ensemble, "step", lambda self: (calls.append(self.t), real_step(self)))
        sweeps.run_sweep(sweep, store=stopped, save_every=1e-9)
    assert calls[0] == 9 and len(calls) == 16  # it went on after step 9 (the last save), not from 0
    assert list(progress.folder(stopped).iterdir()) == []  # deleted once the rows committed
    sweeps.run_sweep(sweep, store=straight, save_every=None)
    assert not progress.folder(straight).exists()
    assert _rows(stopped) == _rows(straight)


def test_bad_progress_settings_are_refused_before_anything_is_written(tmp_path):
    folder = make_sweep(tmp_path, TWO_GROUPS, "two")
    store_path = tmp_path / "s" / "runs.sqlite"
    for bad in (-1, 0, "often", True):
        with pytest.raises(ValueError, match="save_every"):
            sweeps.run_sweep(sweeps.load(folder), store=store_path, save_every=bad)
    assert not store_path.parent.exists()
    with pytest.raises(ValueError, match="engine='fast'"):
        training.train_group(_group(max_steps=2), engine="reference", state_file=tmp_path / "p")
    with pytest.raises(ValueError, match="every"):
        training.train_group(_group(max_steps=2), every=-3)


def test_resuming_on_another_machine_says_the_bits_may_differ(tmp_path, monkeypatch, caplog):
    configs = _group(max_steps=4)
    ens = fast_train.Ensemble(configs)
    ens.step()
    path = tmp_path / "g.safetensors"
    progress.save(ens, path)
    same = fast_train.Ensemble(configs)
    with caplog.at_level("WARNING", logger="interp.training.progress"):
        assert progress.resume(same, path)
    assert "float rounding" not in caplog.text and "resumed group" in caplog.text
    monkeypatch.setattr(progress, "_machine", lambda: {"cpu": "another CPU", "mkl_branch": 1})
    caplog.clear()
    with caplog.at_level("WARNING", logger="interp.training.progress"):
        assert progress.resume(fast_train.Ensemble(configs), path)
    assert "another CPU" in caplog.text and "float rounding" in caplog.text


def test_a_file_that_does_not_fit_changes_nothing(tmp_path):
    """A progress file of the same configs but another model shape (say, edited by hand) is
    refused before any parameter is touched: the group starts from its own fresh init."""
    configs = _group(max_steps=3)
    ens = fast_train.Ensemble(configs)
    ens.step()
    path = tmp_path / "g.safetensors"
    progress.save(ens, path)
    tensors, meta = progress.snapshot(ens)
    last = sorted(k for k in tensors if k.startswith("model.2."))[-1]  # the last seed's last parameter
    tensors[last] = torch.zeros(3, 3)
    fresh = fast_train.Ensemble(configs)
    before = [p.clone() for m in fresh.models for p in m.parameters()]
    with pytest.raises(ValueError, match="another shape"):
        progress.restore(fresh, tensors, meta)
    after = [p for m in fresh.models for p in m.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True)) and fresh.t == 0


def test_a_file_saved_before_the_newer_spec_fields_still_resumes(tmp_path):
    """Configs stored without the fields added since (attn_bias, W_O, residual, ...) are read
    with those fields at their defaults: the group goes on from the file, same bits."""
    from safetensors.torch import load_file, save_file

    configs = _group(max_steps=12)
    straight = _run(fast_train.Ensemble(configs))
    first = fast_train.Ensemble(configs)
    for _ in range(5):
        first.step()
    path = tmp_path / "g.safetensors"
    progress.save(first, path)
    tensors = load_file(str(path))
    meta = json.loads(safe_open_meta(path)[progress.META_KEY])
    new_fields = ("mlp", "attn_bias", "unembed_bias", "W_O", "residual")
    assert all(f in meta["configs"][0] for f in new_fields)
    meta["configs"] = [{k: v for k, v in c.items() if k not in new_fields} for c in meta["configs"]]
    meta_json = json.dumps(meta)
    save_file(tensors, str(path), metadata={progress.META_KEY: meta_json,
                                             progress.SUM_KEY: progress.digest(tensors, meta_json)})
    resumed = fast_train.Ensemble(configs)
    assert progress.resume(resumed, path) and resumed.t == 5
    _same_state(straight, _run(resumed))


def safe_open_meta(path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return f.metadata()
