"""Orphaned progress files (issue 43): a progress file of runs no longer declared by configs.py
(edited between a killed sweep and its resume), of runs all stored, or set aside as damaged, is
named by ``interp store verify``, ``interp runs`` and the driver, and removed by ``interp store
verify --remove-orphans``; the file of an unfinished group that configs.py still declares is
never reported or removed."""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path

from interp import cli
from interp.sweeps import driver as sweeps
from interp.training import progress
from interp.training.runs import TrainConfig
from test_sweeps import make_sweep  # tests/sweeps is on sys.path (pytest rootdir conftest)


def _progress_file(folder: Path, configs) -> Path:
    """A file with a progress file's metadata (the group's configs) and no tensors: what the
    reporting reads (the driver's resume would set it aside, which is not tested here)."""
    meta = {"__metadata__": {progress.META_KEY: json.dumps({"configs": [c.to_dict() for c in configs]})}}
    text = json.dumps(meta).encode()
    path = progress.path_for(folder, [c.name() for c in configs])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(text)) + text)
    return path


def test_orphaned_progress_files_are_reported_and_removed_by_name(tmp_path, capsys, caplog):
    sw = sweeps.load(make_sweep(tmp_path))
    sweeps.run_sweep(sw, limit=2)  # the first group (case 1, seeds 0 and 1) stored
    folder = progress.folder(sw.default_store)
    first = [c for c in sw.configs if c.case == 1]
    rest = [c for c in sw.configs if c.case == 3]
    gone = [TrainConfig(case=2, n=5, d_token=4, seed=s, max_steps=30) for s in (0, 1)]  # edited away
    resumable = _progress_file(folder, rest)
    orphan = _progress_file(folder, gone)
    done = _progress_file(folder, first)
    bad = folder / "0123456789ab.safetensors.bad"
    bad.write_bytes(b"damaged")

    assert cli.main(["store", "verify", str(sw.root)]) == 0
    out, err = capsys.readouterr()
    assert "3 orphaned progress file(s)" in out
    assert f"progress file {orphan}: its 2 run(s)" in err and "no longer declared by configs.py" in err
    assert f"progress file {done}: every run it holds is stored already" in err
    assert f"progress file {bad}: set aside" in err and str(resumable) not in err
    assert f"`interp store verify {sw.root} --remove-orphans` removes them" in err

    assert cli.main(["runs", str(sw.root)]) == 0
    err = capsys.readouterr().err
    assert f"orphaned progress file {orphan}" in err and str(resumable) not in err

    with caplog.at_level(logging.WARNING):
        sweeps.run_sweep(sw, limit=0, save_every=None)
    assert any("orphaned progress file(s)" in r.getMessage() and "--remove-orphans" in r.getMessage()
               for r in caplog.records)

    assert cli.main(["store", "verify", str(sw.root), "--remove-orphans"]) == 0
    err = capsys.readouterr().err
    assert f"removed progress file {orphan}" in err
    assert sorted(folder.iterdir()) == [resumable]
    assert cli.main(["store", "verify", str(sw.root)]) == 0
    assert "orphaned progress" not in "".join(capsys.readouterr())
