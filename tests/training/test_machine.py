"""interp.training.machine.one_thread: the one thread limiter (torch's intra-op threads and,
through threadpoolctl's threadpool_limits, numpy's and scipy's BLAS)."""

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from interp.training import machine


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    """Two torch and two BLAS threads to come back to, whatever the machine has."""
    import scipy.linalg  # noqa: F401 - scipy's own BLAS loaded, so it is counted too

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            assert _blas_threads() and set(_blas_threads()) == {2}
            yield
    finally:
        torch.set_num_threads(before)


def test_one_thread_limits_torch_and_blas_and_restores_both(two_threads):
    with machine.one_thread():
        assert torch.get_num_threads() == 1
        assert set(_blas_threads()) == {1}
    assert torch.get_num_threads() == 2 and set(_blas_threads()) == {2}
    with pytest.raises(RuntimeError, match="inside"), machine.one_thread():  # restored on errors too
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 2 and set(_blas_threads()) == {2}


def test_the_probes_fit_inside_one_thread(two_threads, monkeypatch):
    from scipy import linalg

    from interp.inspect.tools import probes

    seen, lstsq = [], linalg.lstsq

    def counting(*args, **kwargs):
        seen.append((torch.get_num_threads(), set(_blas_threads())))
        return lstsq(*args, **kwargs)

    monkeypatch.setattr(linalg, "lstsq", counting)
    rng = np.random.default_rng(0)
    probes.heldout_predictions(rng.normal(size=(20, 3)), rng.normal(size=(20, 2)))
    assert seen and all(s == (1, {1}) for s in seen)
    assert torch.get_num_threads() == 2 and set(_blas_threads()) == {2}
