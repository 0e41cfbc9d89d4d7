"""The Ray backend: a quick sweep on a local Ray instance (2 CPUs, no dashboard) started here
gives the local backend's results bit for bit, and only the driver writes the store.

Independent references: the local backend's rows for the same seeds (trained in this process),
and TransformerLens's own forward pass on the checkpoints the Ray workers sent back.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from interp import cli
from interp.cli.sweep import format_summary
from interp.training import checkpoints, fast_train, trainer as training
from interp.sweeps import ray_backend, store, driver as sweeps
from test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)


def _rows(path):
    return store.read(path).set_index("name").sort_index()


def test_ray_backend_gives_the_local_backends_store(tmp_path, monkeypatch):
    import ray  # the [ray] extra, installed by `make test`

    # MKL's mode (MKL_CBWR) changes the bits of a product and is fixed when a process first
    # multiplies, which this one already may have: give the workers the mode it really has
    if fast_train.mkl_reproducible():
        monkeypatch.setenv("MKL_CBWR", "AUTO")
    else:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    folder = make_sweep(tmp_path)  # 2 groups x 2 seeds, n = 5, 30 steps
    sw = sweeps.load(folder)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        remote = sweeps.run_sweep(sw, store=tmp_path / "ray" / "store.sqlite", backend="ray")

        def worker_view():  # local, so Ray ships it by value (workers cannot import tests/)
            import os

            return os.environ.get("MKL_CBWR"), os.environ.get("OMP_NUM_THREADS")

        probe = ray.remote(worker_view).options(**ray_backend.task_options(1))
        assert ray.get(probe.remote()) == (os.environ.get("MKL_CBWR"), "1")
    finally:
        ray.shutdown()
    assert (remote.trained, remote.backend) == (4, "ray")
    assert "4 trained now (0 failed) with Ray worker(s)" in format_summary(remote)
    local = sweeps.run_sweep(sw, store=tmp_path / "local" / "store.sqlite", threads=1)
    assert local.trained == 4 and local.backend == "local"

    a, b = _rows(tmp_path / "ray" / "store.sqlite"), _rows(tmp_path / "local" / "store.sqlite")
    names = sorted(c.name() for c in sw.configs)
    assert list(a.index) == list(b.index) == names  # one row per config in each store
    for col in ("accuracy", "steps", "final_loss", "curve", "status", "seed"):
        assert list(a[col]) == list(b[col]), col
    assert [s["model.safetensors"] for s in a["checksums"]] == [
        s["model.safetensors"] for s in b["checksums"]]
    assert store.verify(tmp_path / "ray" / "store.sqlite", files=True)["files"] == 8

    ckpt_root = tmp_path / "ray" / "checkpoints"  # the workers' checkpoints, placed by the driver
    assert sorted(p.name for p in ckpt_root.iterdir()) == names
    for c in sw.configs:
        row = a.loc[c.name()]
        model = checkpoints.load(row["checkpoint"])
        assert training.evaluate_accuracy(model, c) == pytest.approx(row["accuracy"], abs=0)

    env = json.loads(store.read_sweeps(tmp_path / "ray" / "store.sqlite").iloc[0]["environment"])
    assert env["backend"] == "ray" and env["address"] is None and env["threads"] == 1
    env = json.loads(store.read_sweeps(tmp_path / "local" / "store.sqlite").iloc[0]["environment"])
    assert env["backend"] == "local"


def test_worker_env_carries_the_drivers_mkl_cbwr_and_huge_pages(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "1")
    assert ray_backend.worker_env(1) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                         "MKL_CBWR": "COMPATIBLE", "THP_MEM_ALLOC_ENABLE": "1"}
    monkeypatch.delenv("MKL_CBWR")
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE")
    assert set(ray_backend.worker_env(2)) == {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}


def test_backend_ray_without_ray_is_a_clear_cli_error(tmp_path, monkeypatch, capsys):
    folder = make_sweep(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    assert cli.main(["sweep", str(folder), "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--backend ray needs Ray, which is not installed: pip install 'interp-funceval[ray]'" in err
    assert "Traceback" not in err and not (folder / "results").exists()
    with pytest.raises(ValueError, match="interp-funceval\\[ray\\]"):
        sweeps.run_sweep(sweeps.load(folder), backend="ray")
    assert not (folder / "results").exists()


def test_bad_backend_and_address_are_refused(tmp_path, capsys):
    folder = make_sweep(tmp_path)
    assert cli.main(["sweep", str(folder), "--address", "auto"]) == 2
    assert "needs backend='ray'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="backend='dask'; accepted"):
        sweeps.run_sweep(sweeps.load(folder), backend="dask")
    assert not (folder / "results").exists()
