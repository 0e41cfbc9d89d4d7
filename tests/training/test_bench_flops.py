"""experiments/bench/flops.py: its FLOP count is torch's count of TransformerLens's own step."""

import os
import pathlib
import sys

import pytest
from torch.utils.flop_counter import FlopCounterMode

from interp.training.trainer import TrainConfig

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "experiments" / "bench"))
_mkl = os.environ.get("MKL_CBWR")
import flops  # noqa: E402  (sets MKL_CBWR for a benchmark process; not for the test session's children)
from bench_train import Reference  # noqa: E402

if _mkl is None:
    os.environ.pop("MKL_CBWR", None)
else:
    os.environ["MKL_CBWR"] = _mkl


@pytest.mark.parametrize("config", [
    TrainConfig(case=5, n=5, d_token=16, n_layers=2, d_mlp=64, pos_embed="learned", batch_size=8),
    TrainConfig(case=3, n=10, d_token=8, n_layers=1, pos_embed="none", batch_size=8),
    TrainConfig(case=1, n=10, d_token=8, n_layers=1, pos_embed="learned", batch_size=8),
], ids=["case5-2L-mlp", "case3", "case1"])
def test_the_analytic_count_is_torchs_count_of_the_plain_step(config):
    plain = Reference(config)
    plain.step()
    with FlopCounterMode(display=False) as counter:
        plain.step()
    f = flops.model_flops(config)
    assert counter.get_total_flops() == f["full_step"]
    # the fast engine regroups over table rows: it executes less than even the final-position count
    assert 0 < flops.step_flops(config) < f["final_step"] < f["full_step"]


def test_the_peak_is_read_from_the_committed_measurement():
    assert flops.peak_from("x\nPeak used below: 69.0 GFLOP/s (one thread).\n") == 69.0e9
    with pytest.raises(ValueError, match="Peak used below"):
        flops.peak_from("no such line")
