"""interp train (one run from the shell), interp.train's bar and callback.

The run a subprocess of ``interp train`` writes is checked against the tables' own configs
(experiments/table1, table2: the protocol and init="pytorch"), against ``interp.train`` of the
same config in this process, and against its store row read with sqlite3; ``interp probe``,
``viz`` and ``explore`` then read it. Ctrl-C and SIGTERM are sent to a real subprocess mid-run.
The callback's losses are checked against the curve each engine stores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import runpy
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import interp
from interp.cli import main
from interp.cli import train as train_cli
from interp.training import trainer
from interp.training.runs import TrainConfig

REPO = Path(__file__).resolve().parents[2]
TINY = ["--case", "3", "--n", "4", "--d-token", "16", "--pe", "none"]


def _default_sigint() -> None:
    """In the child: SIGINT back to its default, so Python turns it into KeyboardInterrupt even
    when the test runner was started in the background by a shell (which ignores SIGINT for
    its background jobs, and a child inherits an ignored signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interp(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "interp", *args], start_new_session=True,
                            stdout=subprocess.PIPE, text=True, preexec_fn=_default_sigint, **kw)


def test_defaults_are_the_preset_and_the_protocol_the_tables_run():
    """The protocol flags default to TrainConfig's values; the model is TrainConfig.paper's
    (its default reading f14, said in the help); --reading attention-only is the tables' model."""
    from interp.cli import _parser
    from interp.training.runs import PAPER_INIT

    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for name, value in train_cli.DEFAULTS.items():
        assert value == fields[name], name
    for table in ("table1", "table2"):
        assert runpy.run_path(str(REPO / "experiments" / table / "configs.py"))["INIT"] == PAPER_INIT
    parser = _parser("train")
    args = parser.parse_args(["train", *TINY, "--out", "x"])
    assert train_cli.config_from_args(args) == TrainConfig.paper(3, 4, 16, pos_embed="none")
    assert train_cli.config_from_args(args).d_mlp == 4 * 32 and args.reading == "f14"
    alone = argparse.ArgumentParser()
    train_cli.add_arguments(alone)
    assert "(default f14: issue 28's screen's choice" in " ".join(alone.format_help().split())
    args = parser.parse_args(["train", *TINY, "--reading", "attention-only", "--out", "x"])
    assert train_cli.config_from_args(args) == TrainConfig(case=3, n=4, d_token=16, pos_embed="none",
                                                           init="pytorch")


def test_every_declared_field_has_its_flag_and_reaches_the_config():
    """Each field that declares a flag (interp.core.fields) is parsed and lands in the config, off
    the preset's value; --init overrides the preset's "pytorch"; a bad value is one line."""
    from interp.cli import _parser
    from interp.core import fields as declared

    off = dict(n_layers=2, pos_embed="learned", d_mlp=7, mlp="every", attn_bias=False, unembed_bias=True,
               W_O="free", residual="stream", init="mha", pos_init="zero", embed_scale="sqrt_d_model",
               key_order="sequence")
    elsewhere = {"pe_combine": ("concat", ["--case", "1", "--n", "4", "--d-token", "16"])}  # needs case 1
    flagged = {k: i.flag for k, i in declared.infos(TrainConfig).items() if i.flag and k not in ("case", "n", "d_token")}
    assert set(flagged) == set(off) | set(elsewhere)  # a new field's flag: add its value off the preset here
    argv = [x for k, v in off.items() for x in (flagged[k], str(v).lower() if isinstance(v, bool) else str(v))]
    config = train_cli.config_from_args(_parser("train").parse_args(["train", *TINY[:6], *argv, "--out", "x"]))
    assert {k: getattr(config, k) for k in off} == off
    for k, (v, cell) in elsewhere.items():
        config = train_cli.config_from_args(_parser("train").parse_args(["train", *cell, flagged[k], v, "--out", "x"]))
        assert getattr(config, k) == v
    assert main(["train", *TINY, "--w-o", "diagonal", "--out", "x"]) == 2


@pytest.mark.slow
def test_a_run_from_the_shell_loads_and_probe_viz_explore_read_it(tmp_path, capsys):
    out = tmp_path / "run"
    # the tables' attention-only model (interp train's default reading is f14 since issue 45)
    proc = _interp("train", *TINY, "--reading", "attention-only", "--steps", "300", "--out", str(out),
                   stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-2000:]
    config = TrainConfig(case=3, n=4, d_token=16, pos_embed="none", max_steps=300, init="pytorch")
    assert "case3 n4 d16 L1 pe=none seed0" in stderr and re.search(r"loss \d+\.\d{4}", stderr)  # the bar
    assert "test accuracy" in stderr and f"written: {out}" in stdout

    run = interp.load_run(out)
    assert run.config == config
    same = interp.train(config)  # the library's run of the same config, in this process
    assert run.metrics["steps"] == same.steps and run.metrics["accuracy"] == pytest.approx(same.accuracy, abs=0.01)
    for name, w in same.model.state_dict().items():
        torch.testing.assert_close(run.model.state_dict()[name], w, rtol=1e-4, atol=1e-5)
    with sqlite3.connect(out / "store.sqlite") as db:  # its one-run store, read independently
        (row,) = db.execute("SELECT name, checkpoint, steps, accuracy, curve FROM runs").fetchall()
    assert row == (config.name(), ".", run.metrics["steps"], run.metrics["accuracy"],
                   json.dumps(run.metrics["curve"]))
    df = interp.read_runs(out)
    assert df.checkpoint.tolist() == [str(out.resolve())] and df.steps.tolist() == [run.metrics["steps"]]

    assert main(["probe", str(out), "--json", "--batch-size", "64"]) == 0
    probed = json.loads(capsys.readouterr().out)
    assert (probed["case"], probed["n"]) == (3, 4) and "d_token 16" in probed["model"]
    assert main(["viz", str(out), "--out", str(tmp_path / "viz"), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert all(Path(p).is_file() for p in written.values()) and "attention" in written
    assert main(["explore", str(out), "--out", str(tmp_path / "explore"), "--json",
                 "--batch-size", "64"]) == 0
    index = Path(json.loads(capsys.readouterr().out)["index"])
    assert f'data-seed="{config.name()}"' in index.read_text()


def _wait_for_steps(err_file: Path, proc, steps: int = 20, timeout: float = 300) -> float:
    """Wait until the bar on stderr shows ``steps`` steps; the time it first showed one."""
    deadline, first = time.monotonic() + timeout, None
    while True:
        counts = [int(k) for k in re.findall(r"\| *(\d+)/10000", err_file.read_text())]
        if counts and counts[-1] > 0 and first is None:
            first = time.monotonic()
        if counts and counts[-1] >= steps:
            return first
        assert proc.poll() is None, err_file.read_text()[-2000:]
        assert time.monotonic() < deadline, "no progress shown"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_mid_run_leaves_nothing_and_the_bar_redraws_a_few_times_a_second(tmp_path, sig):
    out = tmp_path / "run"
    err_file = tmp_path / "stderr"
    with open(err_file, "w") as err:
        proc = _interp("train", *TINY, "--stop-loss", "0", "--out", str(out), stderr=err)
        try:
            first = _wait_for_steps(err_file, proc)
            shown = time.monotonic() - first
            os.kill(proc.pid, sig)
            proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = err_file.read_text()
    assert proc.returncode == 130, text[-2000:]
    assert f"interrupted: nothing written ({out} is as it was)" in text
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["stderr"]
    redraws = len(re.findall(r"\| *\d+/10000", text))  # each redraw rewrites the counter
    assert redraws <= 4 * (shown + 1) + 3, (redraws, shown)


def _tiny_result(**kw):
    return interp.train(TrainConfig(case=3, n=4, d_token=16, pos_embed="none", max_steps=5, **kw))


def test_an_interrupted_write_leaves_the_folder_absent_or_as_it_was(tmp_path, monkeypatch):
    from interp.sweeps import store

    result = _tiny_result()
    out = tmp_path / "run"

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(store.Store, "put", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train_cli.write_run(result, out)
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary sibling
    train_cli.write_run(result, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with monkeypatch.context() as m:
        m.setattr(store.Store, "put", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train_cli.write_run(_tiny_result(seed=1), out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_out_refused_before_training_unless_force_on_an_earlier_run(tmp_path, capsys, monkeypatch):
    calls = []
    real = trainer.train
    monkeypatch.setattr(trainer, "train", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    (tmp_path / "file").write_text("x")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")  # empty: "." is refused as the current folder only
    for args, says in (
        (["--out", str(busy)], f"--out {busy} exists and is not empty; pass --force"),
        (["--out", str(busy), "--force"], f"--out {busy} is not only an earlier run's files (notes.txt"),
        (["--out", str(tmp_path / "file")], f"--out {tmp_path / 'file'} is a file"),
        (["--out", "."], "--out . is the current folder or holds it"),
        (["--out", ".."], "--out .. is the current folder or holds it"),
        (["--out", str(tmp_path / "new"), "--case", "-1"], "case=-1"),
        (["--out", str(tmp_path / "new"), "--pe", "sideways"], "sideways"),
    ):
        assert main(["train", *TINY, "--steps", "5", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert not calls and (busy / "notes.txt").read_text() == "keep me"
    assert not (tmp_path / "new").exists()

    run = tmp_path / "run"
    assert main(["train", *TINY, "--steps", "5", "--out", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 5
    assert main(["train", *TINY, "--steps", "7", "--out", str(run)]) == 2
    assert main(["train", *TINY, "--steps", "7", "--out", str(run), "--force"]) == 0
    assert interp.load_run(run).metrics["steps"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "file", "here", "run"]
    assert not any((tmp_path / "here").iterdir())


# ------------------------------------------------------------------ the library's bar and callback


class FakeBar:
    """A tqdm-like bar that records what it was told."""

    made: list["FakeBar"] = []

    def __init__(self, *, total, desc, unit):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.postfix, self.closed = [], 0
        FakeBar.made.append(self)

    def update(self, k):
        assert k >= 0
        self.n += k

    def set_postfix_str(self, s, refresh=True):
        self.postfix.append(s)

    def close(self):
        self.closed += 1


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_the_callback_gets_every_steps_loss_as_the_stored_curve_has_it(engine):
    config = TrainConfig(case=3, n=4, d_token=16, pos_embed="none", max_steps=60, curve_every=7,
                         stop_loss=1.3, init="pytorch")
    seen = []
    FakeBar.made.clear()
    result = interp.train(config, engine=engine, callback=lambda s, v: seen.append((s, v)),
                          progress=FakeBar)
    assert [s for s, _ in seen] == list(range(1, result.steps + 1))
    losses = dict(seen)
    assert result.curve and all(losses[s] == v for s, v in result.curve)
    (bar,) = FakeBar.made
    assert (bar.total, bar.desc, bar.unit) == (60, config.label(), "step")
    assert bar.n == result.steps and bar.closed == 1
    assert bar.postfix[-2] == f"loss {result.final_loss:.4f}"
    assert f"test accuracy {100 * result.accuracy:.1f}%" in bar.postfix[-1]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_groups_callback_gets_each_live_seeds_loss(engine):
    configs = [TrainConfig(case=3, n=4, d_token=16, pos_embed="none", max_steps=60, seed=s,
                           stop_loss=1.3, init="pytorch") for s in (4, 9)]
    seen: dict[int, dict[int, float]] = {}
    FakeBar.made.clear()
    results = interp.train_group(configs, engine=engine, progress=FakeBar,
                                 callback=lambda step, losses: seen.setdefault(step, {}).update(losses))
    for c, r in zip(configs, results):
        steps = [s for s in sorted(seen) if c.seed in seen[s]]
        assert steps == list(range(1, r.steps + 1))
        assert all(seen[s][c.seed] == v for s, v in r.curve)
    (bar,) = FakeBar.made
    assert bar.n == (max(r.steps for r in results) if engine == "fast" else sum(r.steps for r in results))


def test_a_callback_that_raises_stops_training_with_its_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    def stop_at_5(step, loss):
        calls.append(step)
        if step == 5:
            raise RuntimeError("enough")

    FakeBar.made.clear()
    with pytest.raises(RuntimeError, match="enough"):
        interp.train(TrainConfig(case=3, n=4, d_token=16, max_steps=50), callback=stop_at_5,
                     progress=FakeBar)
    assert calls == [1, 2, 3, 4, 5] and FakeBar.made[0].closed == 1
    assert list(tmp_path.iterdir()) == []


def test_progress_true_draws_the_tqdm_bar_on_stderr(capsys):
    from interp.cli import bars

    result = interp.train(TrainConfig(case=3, n=4, d_token=16, max_steps=20), progress=True)
    err = capsys.readouterr().err
    assert "case3 n4 d16 L1 pe=learned seed0" in err and "20/20" in err
    assert f"test accuracy {100 * result.accuracy:.1f}%" in err
    assert bars.REDRAW >= 0.25  # at most 4 redraws a second
    assert bars.step_bar(total=3, desc="x").mininterval == bars.REDRAW


def test_bad_progress_and_callback_are_refused_with_what_is_accepted(tmp_path):
    config = TrainConfig(case=3, n=4, d_token=16, max_steps=5)
    with pytest.raises(ValueError, match="interp.train"):
        trainer.train(config, progress=True)  # the library alone: tqdm is interp.cli's
    with pytest.raises(ValueError, match="state_file"):
        trainer.train_group([config], progress=tmp_path / "state")
    with pytest.raises(ValueError, match="callback=3"):
        interp.train(config, callback=3)
    with pytest.raises(ValueError, match="progress='fast'"):
        interp.train(config, progress="fast")
