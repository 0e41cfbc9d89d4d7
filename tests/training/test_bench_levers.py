"""experiments/bench/step_levers.py: its stacked-parameter ensemble with the direct fused-Adam
call trains exactly what the trainer's ensemble trains, so the time it saves is a lever that
keeps every seed's bits (torch.optim.Adam and the trainer's Ensemble are the reference)."""

import os
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "experiments" / "bench"))
_env = {k: os.environ.get(k) for k in ("MKL_CBWR", "THP_MEM_ALLOC_ENABLE")}
import step_levers  # noqa: E402  (sets benchmark-process variables; put back for the test session)

for _k, _v in _env.items():
    if _v is None:
        os.environ.pop(_k, None)
    else:
        os.environ[_k] = _v

from interp.training.fast_ensemble import Ensemble  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402


def _configs(**kw):
    cfg = TrainConfig(**{**step_levers.CELLS["f14"], "n": 5, "batch_size": 8, **kw})
    return [cfg.replace(seed=s) for s in range(3)]


def test_stacked_ensemble_equals_the_trainers_bit_for_bit():
    configs = _configs(stop_loss=0.0, max_steps=10**9)
    today, stacked = Ensemble(configs, batched=True), step_levers.StackedEnsemble(configs)
    for _ in range(12):
        today.step(), stacked.step()
    assert step_levers.same_bits(today, stacked)
    # the steps moved the parameters (a lever that trains nothing would also compare equal)
    fresh = Ensemble(configs, batched=True)
    assert not step_levers.same_bits(today, fresh)
    # and the comparison sees a single last-bit change in one parameter
    with torch.no_grad():
        p = stacked.params[1][0]
        p.view(-1)[0] = torch.nextafter(p.view(-1)[0], torch.tensor(float("inf")))
    assert not step_levers.same_bits(today, stacked)
    # bits, not values: the two zeros differ, equal NaNs do not
    bits = step_levers._bits
    assert not torch.equal(bits(torch.tensor([0.0])), bits(torch.tensor([-0.0])))
    assert torch.equal(bits(torch.tensor([float("nan")])), bits(torch.tensor([float("nan")])))


def test_stacked_parameters_are_the_models_and_adam_state_is_torchs():
    configs = _configs(stop_loss=0.0, max_steps=10**9)
    stacked = step_levers.StackedEnsemble(configs)
    stacked.step()
    W = stacked.models[2].blocks[0].attn.W_Q
    big, _ = stacked.stacks[id(stacked.models[0].blocks[0].attn.W_Q)]
    assert W.data_ptr() == big[2].data_ptr()  # the model's parameter is its row of the stack
    state = stacked.opt.state[W]
    assert float(state["step"]) == 1.0 and state["exp_avg"].shape == W.shape
