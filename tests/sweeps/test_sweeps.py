"""Sweeps: loading configs.py, planning, the driver, resume, atomicity, the pool, the CLI.

Tiny configs (n = 5, a few dozen steps) keep this fast; the real trainer runs throughout.
Independent references: stored accuracies are recomputed from the stored checkpoints with
TransformerLens's own forward pass; trainer calls are counted; the pool's results are compared
with the in-process results of the same seeds.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from interp import cli
from interp.training import checkpoints, trainer as training
from interp.sweeps import store, driver as sweeps
from interp.training.trainer import TrainConfig

REPO = Path(__file__).resolve().parents[2]

TINY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [
    TrainConfig(case=case, n=5, d_token=4, pos_embed=pe, seed=seed, max_steps=30,
                batch_size=64, eval_batches=2, curve_every=10)
    for case, pe in [(1, "learned"), (3, "none")]
    for seed in (0, 1)
]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token",
                     paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title="tiny")
"""


def make_sweep(root: Path, text: str = TINY, name: str = "tiny") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configs.py").write_text(textwrap.dedent(text))
    shutil.copy(REPO / "experiments" / "table1" / "paper.csv", folder / "paper.csv")
    return folder


@pytest.fixture
def calls(monkeypatch):
    """Record every train_group call (the list of seeds) while still training for real."""
    seen: list[list[int]] = []
    real = training.train_group

    def counting(configs, **kw):
        seen.append([c.seed for c in configs])
        return real(configs, **kw)

    monkeypatch.setattr(training, "train_group", counting)
    return seen


# --------------------------------------------------------------------------- loading


def test_load_reads_configs_and_layout(tmp_path):
    sw = sweeps.load(make_sweep(tmp_path))
    assert sw.name == "tiny"
    assert [(c.case, c.pos_embed, c.seed) for c in sw.configs] == [
        (1, "learned", 0), (1, "learned", 1), (3, "none", 0), (3, "none", 1)]
    assert sw.layout.rows == ("case", "pos_embed") and sw.layout.column == "d_token"
    assert sw.paper_csv == tmp_path / "tiny" / "paper.csv"
    assert sw.default_store == tmp_path / "tiny" / "results" / "store.sqlite"


@pytest.mark.parametrize("table, runs, groups", [("table1", 150, 30), ("table2", 160, 32)])
def test_paper_sweeps_declare_the_issue_grid(table, runs, groups):
    sw = sweeps.load(REPO / "experiments" / table)
    assert len(sw.configs) == runs and len(sweeps.group_by_seed(sw.configs)) == groups
    for c in sw.configs:  # the paper's protocol, untouched
        assert (c.lr, c.batch_size, c.max_steps, c.stop_loss, c.eval_batches) == (
            1e-3, 256, 10_000, 0.01, 100)
    cells = {(c.case, c.pos_embed, c.n, c.n_layers, c.d_token) for c in sw.configs}
    seeds = {c.seed for c in sw.configs}
    assert seeds == {0, 1, 2, 3, 4}
    if table == "table1":
        rows = [(1, "learned"), (1, "none"), (2, "none"), (3, "none"), (4, "learned"), (4, "none")]
        assert cells == {(c, pe, 100, 1, d) for c, pe in rows for d in (2, 4, 8, 16, 32)}
    else:
        assert cells == {(5, "learned", n, L, d) for n in (2, 5, 10, 20) for L in (1, 2)
                         for d in (16, 32, 100, 200)}


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "configs.py not found"),
        ("CONFIGS = [\n", "syntax error"),
        ("from interp.training.trainer import TrainConfig\nCONFIGS = [TrainConfig(case=1, n=1, d_token=2)]\n",
         "n=1"),
        ("from interp.training.trainer import TrainConfig\nCONFIGS = [TrainConfig(case=-1, n=5, d_token=2)]\n",
         "case=-1"),
        ("from interp.training.trainer import TrainConfig\n"
         "CONFIGS = [TrainConfig(case=1, n=5, d_token=2, n_layers=3)]\n", "n_layers=3"),
        ("from interp.training.trainer import TrainConfig\n"
         "CONFIGS = [TrainConfig(case=1, n=5, d_token=2, stop_loss=-1)]\n", "stop_loss=-1"),
        ("from interp.training.trainer import TrainConfig\nCONFIGS = [TrainConfig(case=1, n=5, d_token=0)]\n",
         "d_token=0"),
        ("CONFIGS = []\nLAYOUT = None\n", "CONFIGS is empty"),
        ("from interp.training.trainer import TrainConfig\nCONFIGS = [TrainConfig(case=1, n=5, d_token=2)]\n",
         "defines no LAYOUT"),
        ("from interp.training.trainer import TrainConfig\nfrom interp.sweeps import TableLayout\n"
         "CONFIGS = [TrainConfig(case=1, n=5, d_token=2)] * 2\n"
         "LAYOUT = TableLayout(rows=('case',), column='d_token')\n", "repeats CONFIGS[0]"),
        ("from interp.training.trainer import TrainConfig\nfrom interp.sweeps import TableLayout\n"
         "CONFIGS = [TrainConfig(case=1, n=5, d_token=2)]\n"
         "LAYOUT = TableLayout(rows=('colour',), column='d_token')\n", "colour"),
        ("CONFIGS = [1]\nLAYOUT = None\n", "CONFIGS[0] is a int"),
    ],
)
def test_bad_sweep_folders_fail_naming_the_fault(tmp_path, text, message):
    folder = tmp_path / "bad"
    folder.mkdir()
    if text is not None:
        (folder / "configs.py").write_text(text)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        sweeps.load(folder)


def test_cli_reports_a_bad_config_before_training(tmp_path, capsys, calls):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "configs.py").write_text(
        "from interp.training.trainer import TrainConfig\nCONFIGS = [TrainConfig(case=1, n=5, d_token=2, lr=5)]\n")
    assert cli.main(["sweep", str(folder)]) == 2
    assert "lr=5" in capsys.readouterr().err
    assert calls == [] and not (folder / "results").exists()


@pytest.mark.parametrize("device, message", [
    ("tpu", "device='tpu'; accepted: one of ('cpu', 'cuda')"),
    ("cuda:one", "device='cuda:one'; accepted"),
    ("cuda", "CUDA is not available here"),
])
def test_cli_refuses_a_bad_device_before_anything(tmp_path, capsys, calls, device, message):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here: --device cuda is accepted")
    folder = make_sweep(tmp_path)
    assert cli.main(["sweep", str(folder), "--device", device]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert calls == [] and not (folder / "results").exists()
    with pytest.raises(ValueError, match="device="):
        sweeps.run_sweep(sweeps.load(folder), device=device)
    assert not (folder / "results").exists()


# --------------------------------------------------------------------------- planning


def test_plan_groups_seeds_and_skips_finished():
    base = TrainConfig(case=1, n=5, d_token=2)
    configs = [base.replace(seed=s) for s in range(3)] + [base.replace(d_token=4, seed=s) for s in range(2)]
    groups = sweeps.plan(configs, {})
    assert [[c.seed for c in g] for g in groups] == [[0, 1, 2], [0, 1]]
    done = {configs[0].name(): "ok", configs[1].name(): "failed: nan", configs[3].name(): "ok"}
    assert [[(c.d_token, c.seed) for c in g] for g in sweeps.plan(configs, done)] == [[(2, 2)], [(4, 1)]]
    assert [[(c.d_token, c.seed) for c in g] for g in sweeps.plan(configs, done, retry_failed=True)] == [
        [(2, 1), (2, 2)], [(4, 1)]]
    assert sum(len(g) for g in sweeps.plan(configs, {}, limit=4)) == 4
    with pytest.raises(ValueError, match="limit=-1"):
        sweeps.plan(configs, {}, limit=-1)


def test_where_filters_and_names_unknown_fields():
    base = TrainConfig(case=1, n=5, d_token=2)
    configs = [base, base.replace(case=3, pos_embed="none")]
    assert sweeps.select(configs, sweeps.parse_where(["case=3"])) == [configs[1]]
    assert sweeps.select(configs, sweeps.parse_where(["pos_embed=learned", "n=5"])) == [configs[0]]
    with pytest.raises(ValueError, match="colour"):
        sweeps.select(configs, {"colour": "red"})
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        sweeps.parse_where(["case"])


# --------------------------------------------------------------------------- the driver


def test_sweep_stores_runs_and_resume_trains_only_what_is_missing(tmp_path, calls):
    sw = sweeps.load(make_sweep(tmp_path))
    first = sweeps.run_sweep(sw, limit=3)
    assert (first.trained, first.skipped) == (3, 0)
    assert calls == [[0, 1], [0]]  # seeds of a config train as one group
    before = store.read(sw.default_store).set_index("name")

    second = sweeps.run_sweep(sw)
    assert (second.trained, second.skipped, second.total) == (1, 3, 4)
    assert calls[2:] == [[1]]  # only the missing run
    third = sweeps.run_sweep(sw)
    assert (third.trained, third.skipped) == (0, 4) and len(calls) == 3

    df = store.read(sw.default_store).set_index("name")

    assert sorted(df.index) == sorted(c.name() for c in sw.configs)  # one row each, no duplicates
    for name in before.index:  # finished rows were not rewritten
        assert df.loc[name, "finished_at"] == before.loc[name, "finished_at"]
        assert df.loc[name, "accuracy"] == before.loc[name, "accuracy"]
    log = store.read_sweeps(sw.default_store)
    assert list(log["runs_done"]) == [3, 1, 0] and log["wall_seconds"].notna().all()
    assert list(log["outcome"]) == ["done"] * 3
    for text in log["environment"]:  # the machine's load at both ends of each invocation
        env = json.loads(text)
        assert env["device"] == "cpu" and len(env["load_average"]) == len(env["load_average_end"]) == 3
        cpuinfo = Path("/proc/cpuinfo")  # the CPU, read here independently of interp
        if cpuinfo.is_file() and "model name" in cpuinfo.read_text():
            model = next(ln for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name"))
            assert env["cpu_model"] == model.split(":", 1)[1].strip()
        head = _git_head(Path(__file__).resolve().parents[2])  # read from .git, not by interp
        assert (env["code"] or "").split("+")[0] == (head or "")
    assert (df["cpu_seconds"] > 0).all()  # process CPU seconds beside wall seconds, per run

    for c in sw.configs:  # each row matches its config and its checkpoint
        row = df.loc[c.name()]
        assert row["status"] == "ok" and row["seed"] == c.seed and row["case"] == c.case
        assert TrainConfig.from_dict(json.loads(row["config"])) == c
        assert row["curve"][0][0] == 1 and row["curve"][-1][0] == row["steps"]
        model = checkpoints.load(row["checkpoint"])  # TransformerLens's own forward:
        assert training.evaluate_accuracy(model, c) == pytest.approx(row["accuracy"], abs=0)
        assert Path(row["checkpoint"]).parent == sw.root / "results" / "checkpoints"
        assert Path(row["checkpoint"]).name == c.name()


def test_a_sweep_without_checkpoints_keeps_rows_and_resumes(tmp_path, calls):
    sw = sweeps.load(make_sweep(tmp_path))
    first = sweeps.run_sweep(sw, checkpoints=False, limit=2)
    assert first.trained == 2
    ckpts = sw.root / "results" / "checkpoints"
    assert not ckpts.exists() or not any(ckpts.iterdir())  # no model files written
    df = store.read(sw.default_store)
    assert df["checkpoint"].isna().all() and (df["status"] == "ok").all()
    assert store.verify(sw.default_store, files=True)["verified"] == 2
    again = sweeps.run_sweep(sw)  # the rows without files count as done: only the rest trains
    assert (again.trained, again.skipped) == (2, 2) and len(calls) == 2
    with_files = store.read(sw.default_store).dropna(subset=["checkpoint"])
    assert len(with_files) == 2 and all(Path(p).is_dir() for p in with_files["checkpoint"])


def test_rows_without_checkpoints_carry_a_sweep_to_a_machine_without_its_files(tmp_path, calls):
    """``interp store rows``: the copy keeps every row but the checkpoint (its digests recomputed,
    so it verifies), the driver on a fresh folder holding only the copy trains none of the copied
    runs again, and a copy is refused onto the store itself or from an edited store."""
    sw = sweeps.load(make_sweep(tmp_path / "here"))
    sweeps.run_sweep(sw, limit=3)
    before = store.read(sw.default_store).set_index("name")
    dest = tmp_path / "rows.sqlite"
    assert cli.main(["store", "rows", str(sw.root), str(dest)]) == 0
    after = store.read(dest).set_index("name")
    assert after["checkpoint"].isna().all() and after["checksums"].isna().all()
    keep = [c for c in before.columns if c not in ("checkpoint", "checksums", "row_sha256", "extra_sha256")]
    assert after[keep].equals(before[keep])  # accuracies, curves, times: bit for bit
    assert store.read_sweeps(dest)["id"].tolist() == store.read_sweeps(sw.default_store)["id"].tolist()
    assert store.verify(dest, files=True) == {"verified": 3, "unverified": 0, "files": 0}

    there = make_sweep(tmp_path / "there")  # another checkout: same configs.py, no results
    (there / "results").mkdir()
    shutil.copy(dest, there / "results" / "store.sqlite")
    summary = sweeps.run_sweep(sweeps.load(there))
    assert (summary.trained, summary.skipped) == (1, 3) and calls[-1] == [1]  # only the run never trained

    with pytest.raises(ValueError, match="is the store itself"):
        store.copy_rows(sw.default_store, sw.default_store)
    with sqlite3.connect(sw.default_store) as db:  # an edit the digests catch
        db.execute("UPDATE runs SET accuracy = 0.123 WHERE rowid = 1")
    dest.write_bytes(b"the earlier copy")
    with pytest.raises(ValueError, match="does not match its row_sha256"):
        store.copy_rows(sw.default_store, dest)
    assert dest.read_bytes() == b"the earlier copy" and not (tmp_path / "rows.sqlite.tmp").exists()


def test_the_pool_schedules_the_costliest_groups_first():
    from interp.sweeps import workers

    base = TrainConfig(case=5, n=5, d_token=32, n_layers=2)
    small, wide, long = base.replace(n_layers=1), base.replace(d_mlp=2048), base.replace(n=20)
    assert workers.cost([wide]) > workers.cost([base]) > workers.cost([small])
    assert workers.cost([long]) > workers.cost([base])
    assert workers.cost([base, base.replace(seed=1)]) == 2 * workers.cost([base])


def test_a_driver_killed_between_checkpoint_and_row_reruns_that_run(tmp_path, monkeypatch, calls):
    sw = sweeps.load(make_sweep(tmp_path))
    real_put = store.Store.put
    puts = []

    def dying_put(self, record, checkpoint=None, checksums=None):
        if len(puts) == 1:  # the second run: checkpoint placed, row never committed
            raise KeyboardInterrupt
        puts.append(record.name)
        return real_put(self, record, checkpoint, checksums)

    monkeypatch.setattr(store.Store, "put", dying_put)
    with pytest.raises(KeyboardInterrupt):
        sweeps.run_sweep(sw)
    monkeypatch.setattr(store.Store, "put", real_put)
    assert list(store.read_sweeps(sw.default_store)["outcome"]) == ["interrupted: KeyboardInterrupt"]
    df = store.read(sw.default_store)
    assert list(df["name"]) == puts == [sw.configs[0].name()]
    orphan = sw.root / "results" / "checkpoints" / sw.configs[1].name()
    assert orphan.is_dir()  # a complete checkpoint without a row: it will be redone

    summary = sweeps.run_sweep(sw)
    assert (summary.trained, summary.skipped) == (3, 1)
    assert calls == [[0, 1], [1], [0, 1]]
    df = store.read(sw.default_store)
    assert sorted(df["name"]) == sorted(c.name() for c in sw.configs)
    assert not [p for p in (sw.root / "results" / "checkpoints").iterdir() if p.name.startswith(".")]
    row = df.set_index("name").loc[sw.configs[1].name()]
    assert row["checkpoint"] == str(orphan.resolve())
    assert checkpoints.read_meta(orphan)["sha256"] == row["checksums"]["model.safetensors"]


def test_a_trainer_exception_marks_the_group_failed_and_the_sweep_goes_on(tmp_path, monkeypatch):
    sw = sweeps.load(make_sweep(tmp_path))
    real = training.train_group

    def flaky(configs, **kw):
        if configs[0].case == 1:
            raise FloatingPointError("loss is nan at step 7")
        return real(configs, **kw)

    monkeypatch.setattr(training, "train_group", flaky)
    summary = sweeps.run_sweep(sw)
    assert (summary.trained, summary.failed) == (4, 2)
    df = store.read(sw.default_store)
    statuses = {(r.case, r.seed): r.status for r in df.itertuples()}
    assert statuses[(1, 0)] == statuses[(1, 1)] == "failed: FloatingPointError: loss is nan at step 7"
    assert statuses[(3, 0)] == statuses[(3, 1)] == "ok"
    # failed runs are finished: skipped on resume unless asked to retry
    monkeypatch.setattr(training, "train_group", real)
    assert sweeps.run_sweep(sw).trained == 0
    again = sweeps.run_sweep(sw, retry_failed=True)
    assert (again.trained, again.failed) == (2, 0)
    assert set(store.read(sw.default_store)["status"]) == {"ok"}


def test_pool_of_two_workers_gives_the_in_process_results(tmp_path):
    sw = sweeps.load(make_sweep(tmp_path))
    local = sweeps.run_sweep(sw, store=tmp_path / "local" / "store.sqlite")
    pooled = sweeps.run_sweep(sw, store=tmp_path / "pool" / "store.sqlite", workers=2, threads=1)
    assert local.trained == pooled.trained == 4
    a = store.read(tmp_path / "local" / "store.sqlite").set_index("name").sort_index()
    b = store.read(tmp_path / "pool" / "store.sqlite").set_index("name").sort_index()
    assert list(a["accuracy"]) == list(b["accuracy"]) and list(a["steps"]) == list(b["steps"])
    assert list(a["final_loss"]) == list(b["final_loss"])
    assert [x["model.safetensors"] for x in a["checksums"]] == [x["model.safetensors"] for x in b["checksums"]]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(),
                    reason="CUDA is not available here: the sweep on a GPU runs only where one is present")
def test_a_sweep_on_cuda_stores_the_cpu_sweeps_results_to_float_rounding(tmp_path):
    sw = sweeps.load(make_sweep(tmp_path))
    sweeps.run_sweep(sw, store=tmp_path / "cpu" / "store.sqlite")
    assert cli.main(["sweep", str(sw.root), "--device", "cuda", "--store", str(tmp_path / "gpu" / "store.sqlite")]) == 0
    a = store.read(tmp_path / "cpu" / "store.sqlite").set_index("name").sort_index()
    b = store.read(tmp_path / "gpu" / "store.sqlite").set_index("name").sort_index()
    assert list(a.index) == list(b.index) and list(a["steps"]) == list(b["steps"])  # same run names
    assert (abs(a["final_loss"] - b["final_loss"]) < 1e-3).all()
    assert (abs(a["accuracy"] - b["accuracy"]) <= 0.02).all()
    assert json.loads(store.read_sweeps(tmp_path / "gpu" / "store.sqlite").iloc[0]["environment"])["device"] == "cuda"
    for path in b["checkpoint"]:  # saved from CPU tensors, loadable anywhere
        checkpoints.load(path)


def test_cli_sweep_runs_and_prints_a_summary(tmp_path, capsys):
    folder = make_sweep(tmp_path)
    assert cli.main(["sweep", str(folder), "--where", "case=3", "--limit", "1",
                     "--store", str(tmp_path / "s" / "x.sqlite")]) == 0
    out = capsys.readouterr()
    assert "4 runs declared" not in out.out and "2 runs declared, 0 already stored, 1 trained now" in out.out
    assert "run" in out.err  # the progress bar
    with sqlite3.connect(tmp_path / "s" / "x.sqlite") as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert (tmp_path / "s" / "checkpoints").is_dir()


def test_a_tampered_store_row_stops_the_sweep_before_training(tmp_path, capsys, calls):
    sw = sweeps.load(make_sweep(tmp_path))
    first = sw.configs[0]
    with store.Store(sw.default_store) as db:
        db.put(store.RunRecord(name=first.name(), sweep="tiny", config=first.to_dict(),
                               seed=first.seed, status="ok", accuracy=0.2, steps=30))
    with sqlite3.connect(sw.default_store) as raw:  # someone edits a result by hand
        raw.execute("UPDATE runs SET accuracy=1.0")
    assert cli.main(["sweep", str(sw.root)]) == 2
    err = capsys.readouterr().err
    assert f"run {first.name()} in {sw.default_store}" in err and "Traceback" not in err
    assert calls == []


def test_a_refused_second_driver_leaves_the_store_byte_identical(tmp_path, capsys):
    """The CLI sizes its progress bar only after the lock is held: a driver refused because
    another one holds the store reads and writes nothing of it (its SQLite files keep their
    bytes, the change counter included)."""
    folder = make_sweep(tmp_path)
    path = tmp_path / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path), "--limit", "1"]) == 0
    files = sorted(p for p in tmp_path.iterdir() if p.name.startswith("store.sqlite") and p.suffix != ".lock")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    capsys.readouterr()
    with store.DriverLock(path):
        assert cli.main(["sweep", str(folder), "--store", str(path)]) == 2
    assert "another driver" in capsys.readouterr().err
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(
        p for p in tmp_path.iterdir() if p.name.startswith("store.sqlite") and p.suffix != ".lock")}
    assert after == before


def test_corrupt_or_missing_checkpoints_are_flagged_and_retrained(tmp_path, capsys):
    """A flipped byte in one run's weights and another run's deleted checkpoint folder:
    `interp store verify` names both (exit 1), `interp report` flags them, `interp sweep`
    retrains exactly those two, saying which, and the repaired store equals the original."""
    folder = make_sweep(tmp_path)
    path = tmp_path / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 0
    original = store.read(path).set_index("name")
    flipped, deleted = original.index[0], original.index[2]
    weights = Path(original.loc[flipped, "checkpoint"]) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    shutil.rmtree(original.loc[deleted, "checkpoint"])
    capsys.readouterr()

    assert cli.main(["store", "verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{flipped}: checkpoint file" in err and "corrupt" in err and f"{deleted}: checkpoint folder" in err

    out = tmp_path / "report"
    assert cli.main(["report", str(folder), "--store", str(path), "--out", str(out)]) == 0
    assert "run(s) have a missing or corrupt checkpoint" in (out / "report.md").read_text()
    assert flipped in capsys.readouterr().err

    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 0
    said = capsys.readouterr().out
    assert f"retrained 2 run(s) whose checkpoint was missing or corrupt: {', '.join(sorted([flipped, deleted]))}" in said
    assert store.verify(path, files=True)["files"] > 0  # every file hashes as stored again
    assert cli.main(["store", "verify", str(path)]) == 0
    repaired = store.read(path).set_index("name").loc[original.index]
    cols = ["accuracy", "steps", "final_loss", "status"]
    assert repaired[cols].equals(original[cols])  # deterministic training: the same numbers back
    weights_sum = lambda df: [c["model.safetensors"] for c in df["checksums"]]  # noqa: E731
    assert weights_sum(repaired) == weights_sum(original)  # and the same weights, bit for bit
    # (config.json records each run's wall seconds, so only the weights are compared)


def test_a_configs_py_that_exits_is_an_error(tmp_path, capsys):
    folder = make_sweep(tmp_path, "import sys\nsys.exit(0)\n", name="exits")
    assert cli.main(["sweep", str(folder), "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "called sys.exit(0) while being loaded" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def test_runs_lists_checkpoints_by_config_and_load_run_gives_the_run(tmp_path, capsys):
    import interp

    folder = make_sweep(tmp_path)
    path = tmp_path / "store.sqlite"
    assert cli.main(["sweep", str(folder), "--store", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["runs", str(path), "--where", "case=3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    configs = [c for c in sweeps.load(folder).configs if c.case == 3]
    assert sorted(r["name"] for r in rows) == sorted(c.name() for c in configs)
    stored = store.read(path).set_index("name")
    for r in rows:
        run = interp.load_run(r["checkpoint"])
        assert run.config.name() == r["name"] and (run.case, run.n) == (3, 5)
        assert run.metrics["accuracy"] == stored.loc[r["name"], "accuracy"] == r["accuracy"]
    assert cli.main(["runs", str(path), "--where", "colour=red"]) == 2
    assert "no field 'colour'" in capsys.readouterr().err


def _git_head(root: Path) -> str | None:
    """The checked-out commit, read from the files of ``root/.git`` (a clone's directory)."""
    git = root / ".git"
    if not git.is_dir():
        return None if not git.exists() else _git_head_of(Path(git.read_text().split(":", 1)[1].strip()))
    return _git_head_of(git)


def _git_head_of(git: Path) -> str | None:
    head = (git / "HEAD").read_text().strip()
    if not head.startswith("ref: "):
        return head
    ref = head[5:]
    common = git / "commondir"
    base = (git / common.read_text().strip()).resolve() if common.is_file() else git
    for d in (git, base):
        if (d / ref).is_file():
            return (d / ref).read_text().strip()
    packed = base / "packed-refs"
    for line in packed.read_text().splitlines() if packed.is_file() else []:
        if line.endswith(" " + ref):
            return line.split()[0]
    return None
