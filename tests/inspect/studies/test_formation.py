"""The formation study's analysis and causal arms (experiments/formation), against independent
references: sklearn's ROC AUC (one cell: the within-cell AUC is the plain AUC), Newcombe's
published example (1998, method 10: 56/70 against 48/80 -> 0.0524 to 0.3339), a hand-made
timeline, and a plain ``train_group`` (a transplant from a seed's own initial model is no
transplant: bit for bit the plain run)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

HERE = Path(__file__).resolve().parents[3] / "experiments" / "formation"


def _load(name: str):
    """An experiments/formation script under a name of its own: ``design`` and ``analysis`` are
    also other folders' script names, and every xdist worker collects every test file."""
    import importlib.util

    key = f"formation_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


analysis, causal, design = _load("analysis"), _load("causal"), _load("design")


def test_within_cell_auc_is_the_plain_auc_in_one_cell_and_ignores_between_cell_pairs():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.random(40) < 0.5
    x = rng.normal(size=40) + y
    df = pd.DataFrame(dict(cell=[(1, 10, 8)] * 40, success=y))
    assert analysis.within_auc(df, x) == pytest.approx(roc_auc_score(y, x))
    # a second cell whose scores are all higher and all successes adds no pair
    two = pd.concat([df, pd.DataFrame(dict(cell=[(3, 10, 4)] * 5, success=[True] * 5))], ignore_index=True)
    assert analysis.within_auc(two, np.concatenate([x, np.full(5, 99.0)])) == pytest.approx(roc_auc_score(y, x))


def test_newcombe_matches_the_published_example():
    lo, hi = analysis.newcombe(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def test_completion_is_the_first_step_from_which_a_measure_stays_above():
    rows = pd.DataFrame(dict(step=[0, 50, 100, 150, 200], m=[0.1, 0.95, 0.5, 0.92, 0.99]))
    assert analysis.completion(rows, "m") == 150
    assert analysis.completion(rows.assign(m=[0.1, 0.95, 0.96, 0.97, 0.5]), "m") is None
    assert analysis.completion(rows.assign(m=[0.9] * 5), "m") == 0


def test_stall_quadrants_count_each_non_success_once():
    df = pd.DataFrame(dict(success=[False] * 4 + [True], final_readout=[0.95, 0.95, 0.2, 0.2, 1.0],
                           final_margin=[0.1, 0.8, 0.1, 0.8, 1.0]))
    _, words = analysis.hyp_c(df)
    assert words.startswith("read-out, no routing 1/4") and "read-out and routing 1/4" in words
    assert "neither 1/4" in words and "routing, no read-out 1/4" in words


def _configs():
    from interp.training.runs import TrainConfig

    return [TrainConfig.paper(3, 5, 4, reading="attention-only", seed=s, max_steps=60, batch_size=64,
                              eval_batches=2) for s in (0, 1)]


def test_a_transplant_from_a_seeds_own_initial_model_is_the_plain_run():
    from interp.training.trainer import train_group

    configs = _configs()
    plain = train_group(configs)
    same = train_group(configs, models_=causal.arm_models(configs, [0, 1], causal.PARAMS["qk"]))
    for a, b in zip(plain, same):
        assert (a.accuracy, a.steps, a.curve) == (b.accuracy, b.steps, b.curve)


def test_the_transplant_takes_exactly_the_named_parameters_from_the_donor():
    from interp.training.runs import init_model

    configs = _configs()
    got = causal.arm_models(configs[:1], [1], causal.PARAMS["qk"])[0].state_dict()
    own, donor = init_model(configs[0]).state_dict(), init_model(configs[1]).state_dict()
    for key, value in got.items():
        want = donor if key.split(".")[-1] in causal.PARAMS["qk"] and key.startswith("blocks.0.attn.") else own
        assert torch.equal(value, want[key]), key
    assert not torch.equal(own["blocks.0.attn.W_Q"], donor["blocks.0.attn.W_Q"])  # the test can fail


def test_the_study_trains_as_the_atlas_grid_does():
    """design.py's protocol constants are the atlas grid's (no script imports another folder)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("formation_test_grid", HERE.parent / "atlas" / "grid.py")
    grid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grid)
    assert design.INIT == grid.INIT and all(design.PE[c] == grid.PE[c] for c in design.CASES)
    names = {c.replace(seed=0).name() for c in design.configs("discovery") + design.configs("held-out")}
    assert names <= {c.name() for c in grid.configs("core", "attention-only")}
