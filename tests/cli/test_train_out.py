"""``interp train --out``: what it may replace and what it refuses before training (issue 43).

``--force`` replaces a folder holding exactly an earlier run's files; a folder with anything
else (the user's notes, another program's model) is refused naming the foreign files; a
folder inside a results store's folder (a sweep's ``results/checkpoints/<run>``) is refused with
or without ``--force``; a name too long once the temporary names are added is refused before
training. Each refusal: exit 2, one line naming the path, no training, the bytes kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from interp.cli import main
from interp.sweeps import driver as sweeps
from interp.sweeps import store
from interp.training import trainer
from sweeps.test_sweeps import make_sweep  # tests/ is on sys.path (pytest rootdir conftest)

TINY = ["--case", "3", "--n", "4", "--d-token", "16", "--pe", "none", "--steps", "5"]


@pytest.fixture
def trained(monkeypatch):
    calls = []
    real = trainer.train
    monkeypatch.setattr(trainer, "train", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    return calls


def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(args, says, capsys) -> None:
    assert main(["train", *TINY, *map(str, args)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(s in err[0] for s in says), err


def test_force_never_replaces_a_sweeps_checkpoint_folder(tmp_path, trained, capsys):
    sw = sweeps.load(make_sweep(tmp_path))
    sweeps.run_sweep(sw, limit=2)
    results = sw.default_store.parent
    before = _files(results)
    run = next((results / "checkpoints").iterdir())
    for out in (run, results / "checkpoints" / "new", results / "mine"):
        for force in ([], ["--force"]):
            _refused(["--out", out, *force], [f"--out {out} is inside the folder of the results store",
                                             str(sw.default_store)], capsys)
    assert not trained and _files(results) == before
    assert store.verify(sw.default_store, files=True)["verified"] == 2


def test_force_replaces_only_exactly_a_runs_files(tmp_path, trained, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    (run / "notes.txt").write_text("my notes")
    (run / "figures").mkdir()
    (run / "figures" / "a.png").write_bytes(b"png")
    before = _files(run)
    _refused(["--out", run, "--force"], [f"--out {run} is not only an earlier run's files",
                                         "figures/", "notes.txt"], capsys)
    assert _files(run) == before
    (run / "notes.txt").unlink()
    (run / "figures" / "a.png").unlink()
    (run / "figures").rmdir()
    assert main(["train", *TINY, "--out", str(run), "--force", "--json"]) == 0
    capsys.readouterr()
    # another program's model folder: a config.json and model.safetensors that are not interp's
    hf = tmp_path / "hf-model"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (hf / "model.safetensors").write_bytes(b"weights")
    before = _files(hf)
    _refused(["--out", hf, "--force"], [f"--out {hf} is not only", "not an interp checkpoint"], capsys)
    assert _files(hf) == before
    # a store.sqlite that is a user's file
    (run / "store.sqlite").write_text("a user's file")
    _refused(["--out", run, "--force"], ["store.sqlite (not a results store)"], capsys)
    assert (run / "store.sqlite").read_text() == "a user's file"
    assert len(trained) == 2


def test_an_overlong_out_is_refused_before_training(tmp_path, trained, capsys):
    for out in (tmp_path / ("r" * 242), tmp_path / ("r" * 300), tmp_path / ("d" * 200) / ("e" * 200) / ("f" * 60) / "run"):
        _refused(["--out", out], [f"--out {out}: ", "accepted: at most"], capsys)
        assert not os.path.exists(out)
    assert not trained
    fits = tmp_path / ("r" * 200)
    assert main(["train", *TINY, "--out", str(fits), "--json"]) == 0
    assert store.verify(fits / "store.sqlite", files=True)["files"] == 2


def test_out_below_a_linked_folder_stores_its_checkpoint_where_readers_look(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    out = tmp_path / "link" / "run"
    assert main(["train", *TINY, "--out", str(out), "--json"]) == 0
    assert main(["store", "verify", str(out)]) == 0
    assert store.read(out / "store.sqlite")["checkpoint"].tolist() == [str(real / "run")]


def test_force_replaces_a_run_with_its_own_timeline_but_not_a_foreign_one(tmp_path, trained, capsys):
    """Issue 46's remainder: ``interp timeline`` writes ``timeline/`` into a run folder; that is
    the run's own (checked against its manifest), so ``--force`` replaces the folder whole; an
    altered snapshot makes it foreign, and the folder is kept."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--out", str(run), "--json"]) == 0
    assert main(["timeline", str(run), "--out", str(tmp_path / "tl"), "--keep", "3", "--json"]) == 0
    capsys.readouterr()
    assert (run / "timeline").is_dir()
    snapshot = next(p for p in sorted((run / "timeline").iterdir()) if p.suffix == ".safetensors")
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    before = _files(run)
    _refused(["--out", run, "--force"], ["timeline/ (not this run's timeline)"], capsys)
    assert _files(run) == before
    snapshot.write_bytes(data)
    assert main(["train", *TINY, "--out", str(run), "--force", "--seed", "1", "--json"]) == 0
    assert not (run / "timeline").exists()  # the new run has no snapshots of the old one
