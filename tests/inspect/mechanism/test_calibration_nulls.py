"""Issue 42's trained nulls (interp.inspect.mechanism.calibration.trained_nulls): a store's runs with their
weights permuted, and its case-4 runs read as case 5. Checked against the store's rows read with
sqlite3 and the checkpoints' own weights, not against the labeller."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
import torch

from interp.inspect.mechanism import calibration
from interp.inspect.tools import hooks
from interp.sweeps import driver
from interp.training import checkpoints

# case 4 and case 3 at n = 4, two seeds each, a few steps: enough to have checkpoints
TINY = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=c, n=4, d_token=8, pos_embed=pe, seed=s, init="pytorch", max_steps=20)
           for c, pe in ((4, "learned"), (3, "none")) for s in range(2)]
LAYOUT = TableLayout(rows=("case",), column="d_token", title="tiny")
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("nulls") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    summary = driver.run_sweep(driver.load(folder), store=folder / "results" / "store.sqlite")
    assert summary.trained == 4 and not summary.lost
    return folder / "results" / "store.sqlite"


def test_every_run_shuffled_and_case4_read_as_case5(store):
    with sqlite3.connect(store) as db:
        rows = [(name, json.loads(cfg)["case"], ckpt) for name, cfg, ckpt in
                db.execute("SELECT name, config, checkpoint FROM runs ORDER BY rowid")]
    got = list(calibration.trained_nulls(4, store))
    shuffled = {name: m for kind, name, m in got if kind == "trained-shuffled"}
    other = {name: m for kind, name, m in got if kind == "other-presentation"}
    assert set(shuffled) == {f"{name} shuffled" for name, _, _ in rows}
    assert set(other) == {f"{name} read as case 5" for name, case, _ in rows if case == 4}
    for name, case, ckpt in rows:
        original = checkpoints.load(store.parent / ckpt if not Path(ckpt).is_absolute() else ckpt)
        null = shuffled[f"{name} shuffled"]
        for (pname, p), (_, q) in zip(original.named_parameters(), null.named_parameters(), strict=True):
            # the same entries, another order (a tensor of one value excepted)
            assert torch.equal(p.detach().flatten().sort().values, q.detach().flatten().sort().values), pname
        moved = [pname for (pname, p), (_, q) in zip(original.named_parameters(), null.named_parameters())
                 if p.numel() > 1 and p.detach().unique().numel() > 1 and not torch.equal(p, q)]
        assert moved, name
        if case == 4:
            m5 = other[f"{name} read as case 5"]
            assert m5.task.case == 5 and hooks.check_model(m5)[1] == 4
            for (_, p), (_, q) in zip(original.named_parameters(), m5.named_parameters(), strict=True):
                assert torch.equal(p, q)  # its own weights, another presentation


def test_other_presentation_that_answers_is_a_transfer_not_a_null():
    at = calibration.TRANSFER_ACC
    assert calibration.kind_of({"kind": "other-presentation", "acc": at}) == "transfer"
    assert calibration.kind_of({"kind": "other-presentation", "acc": at - 0.01}) == "other-presentation"
    assert calibration.kind_of({"kind": "trained-shuffled", "acc": 1.0}) == "trained-shuffled"
    assert calibration.EXPECTED["transfer"] == {} and calibration.EXPECTED["other-presentation"] is None


def test_bad_store_is_refused_before_measuring(tmp_path):
    with pytest.raises((ValueError, FileNotFoundError)):
        next(calibration.trained_nulls(4, tmp_path / "nowhere.sqlite"))


def test_calibration_models_include_the_two_layer_controls():
    """Issue 42 asks for hand-built mirror mechanisms among the positive controls; case 5's
    one-hot lookup and its inverted mechanism join cases 1-4's."""
    got = [(kind, name, m) for kind, name, m in calibration.calibration_models(5)]
    kinds = {kind for kind, _, _ in got}
    assert set(calibration.EXPECTED) - {"trained-shuffled", "other-presentation", "transfer"} == kinds
    mirrors = [m for kind, _, m in got if kind == "mirror"]
    assert len(mirrors) == 2 and all(m.cfg.n_layers == 2 and m.task.case == 5 for m in mirrors)
    case5 = {(kind, name) for kind, name, _ in got if name.startswith("case 5 one-hot")}
    assert {k for k, _ in case5} == {"one-hot", "inverted"}
    assert all(hooks.accuracy(m, batch_size=128) == 1.0 for m in mirrors)


def test_shuffling_keeps_what_the_spec_fixes():
    """f14's W_O = identity is architecture, not a learned weight: a shuffled f14 model keeps it
    (so it still is the model its spec describes), and every learned tensor is permuted."""
    from interp.core import models
    from interp.inspect.mechanism import controls
    from interp.training.trainer import TrainConfig, init_model

    model = init_model(TrainConfig.paper(case=1, n=5, d_token=8, reading="f14"))
    fixed = set(models.fixed_weights(model, models.spec_of(model)))
    assert "blocks.0.attn.W_O" in fixed
    null = controls.shuffle_weights(model, seed=1)
    models.check_spec(null)  # raised before: W_O was permuted too
    assert hooks.accuracy(null, batch_size=64) >= 0.0
    for (name, p), (_, q) in zip(model.named_parameters(), null.named_parameters(), strict=True):
        if name in fixed:
            assert torch.equal(p, q), name
        elif p.numel() > 1 and p.detach().unique().numel() > 1:
            assert not torch.equal(p, q), name
