"""interp report's loss curves (issue 26, item 2): one panel per table cell, laid out as the
report's table, one line per seed, the stop step marked; report.md links the figure; runs that
stored no curve are named, not drawn, and never crash the report.

The reference is the store read with sqlite3 directly (config, status, steps, curve), not
through interp's reader, and the sweep's grid written out below from its configs.py.
"""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from pathlib import Path

import pytest

from interp import cli
from interp.inspect.tools import curves
from interp.sweeps import driver, report, store
from interp.training import files
from interp.training.trainer import TrainConfig

# case 3, n = 4, 60 steps, stop loss 1.3: at d_token 16 most seeds go below the stop loss (a
# dot), at d_token 4 none does (a cross at step 60); two layout rows (pos_embed) by two columns
TINY = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=3, n=4, d_token=d, pos_embed=pe, seed=s, init="pytorch",
                       max_steps=60, curve_every=10, stop_loss=1.3)
           for pe in ("none", "learned") for d in (16, 4) for s in range(2)]
LAYOUT = TableLayout(rows=("case", "pos_embed"), column="d_token", title="tiny")
"""
#: the panels in the report table's order (its rows, then its columns), from TINY by hand
PANELS = [("none", 16), ("none", 4), ("learned", 16), ("learned", 4)]
SEEDS = [0, 1]
#: the figure's file, beside report.md (the name docs/training-and-sweeps.md gives)
FIGURE = "loss-curves.png"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report-curves") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    summary = driver.run_sweep(driver.load(folder), store=folder / "results" / "store.sqlite")
    assert summary.trained == 8 and not summary.lost
    return folder


def stored(store_file: Path) -> dict[tuple[str, int], list[dict]]:
    """(pos_embed, d_token) -> that cell's runs (name, seed, steps, status, curve, stop_loss)
    by seed, read with sqlite3."""
    cells: dict[tuple[str, int], list[dict]] = {}
    with sqlite3.connect(store_file) as db:
        for name, config, status, steps, curve in db.execute(
                "SELECT name, config, status, steps, curve FROM runs ORDER BY rowid"):
            c = json.loads(config)
            cells.setdefault((c["pos_embed"], c["d_token"]), []).append(
                dict(name=name, seed=c["seed"], steps=steps, status=status,
                     curve=json.loads(curve) if curve else [], stop_loss=c["stop_loss"]))
    return {k: sorted(v, key=lambda r: r["seed"]) for k, v in cells.items()}


@pytest.fixture
def caught(monkeypatch):
    """file name -> Figure of every figure saved while the test runs."""
    seen = {}
    real = files.save_figure

    def keep(fig, path, **kw):
        seen[Path(path).name] = fig
        return real(fig, path, **kw)

    monkeypatch.setattr(files, "save_figure", keep)
    monkeypatch.setattr(report, "save_figure", keep)
    return seen


def _parts(ax):
    lines = [ln for ln in ax.get_lines() if ln.get_gid() is None]
    stops = [ln for ln in ax.get_lines() if ln.get_gid() == "stop"]
    return lines, stops


def test_one_panel_per_cell_one_line_per_seed_and_the_stop_step_marked(sweep, tmp_path, caught,
                                                                       capsys, assert_drawn):
    assert cli.main(["report", str(sweep), "--out", str(tmp_path)]) == 0
    assert f"{tmp_path / FIGURE}" in capsys.readouterr().out
    assert sorted(caught) == [FIGURE, "violins.png"]
    assert_drawn(tmp_path / FIGURE)
    fig = caught[FIGURE]
    assert "tiny" in fig.get_suptitle()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title().replace("\n", " ") for ax in axes] == [f"case 3, pos_embed {pe}, d_token {d}" for pe, d in PANELS]
    cells, markers, colour = stored(sweep / "results" / "store.sqlite"), set(), {}
    for ax, cell in zip(axes, PANELS):
        runs = cells[cell]
        lines, stops = _parts(ax)
        assert [ln.get_label().split(" (")[0] for ln in lines] == [f"seed {s}" for s in SEEDS]
        assert len(stops) == len(runs)
        for run, line, stop in zip(runs, lines, stops):
            assert list(line.get_xdata()) == [s for s, _ in run["curve"]]
            assert list(line.get_ydata()) == pytest.approx([v for _, v in run["curve"]], rel=1e-12)
            assert colour.setdefault(run["seed"], line.get_color()) == line.get_color()  # one per seed
            last_step, last_loss = run["curve"][-1]
            assert list(stop.get_xdata()) == [run["steps"]] and last_step == run["steps"]
            assert list(stop.get_ydata()) == pytest.approx([last_loss], rel=1e-12)
            assert stop.get_marker() == ("o" if last_loss < run["stop_loss"] else "x")
            markers.add(stop.get_marker())
        assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_gid() == "threshold"] == [1.3]
        assert ax.get_xlabel() == "step" and "loss" in ax.get_ylabel() and ax.get_yscale() == "log"
    assert markers == {"o", "x"}  # both kinds of stop were drawn
    assert len(set(colour.values())) == len(SEEDS)


def _links(md: str) -> list[str]:
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", md)


def test_report_md_links_the_figure_and_counts_the_runs_drawn(sweep, tmp_path, capsys):
    assert cli.main(["report", str(sweep), "--out", str(tmp_path)]) == 0
    md = (tmp_path / report.REPORT_FILE).read_text()
    assert FIGURE in _links(md)
    for link in _links(md):
        assert (tmp_path / link).is_file(), link
    n = sum(len(v) for v in stored(sweep / "results" / "store.sqlite").values())
    section = md.split("## Loss curves", 1)[1].split("\n## ", 1)[0]
    assert f"{n} run(s) drawn" in section and "no loss curve" not in section


# ------------------------------------------------------------------ runs without a curve


def _put_null_curve(path: Path, rec: store.RunRecord) -> None:
    """A row whose curve is SQL NULL, as a store written before curves were kept has it."""
    values = (rec.name, rec.sweep, json.dumps(rec.config, sort_keys=True), rec.seed, rec.status,
              rec.accuracy, rec.steps, rec.final_loss, rec.seconds, None, None, None,
              rec.started_at, store.now())
    with sqlite3.connect(path) as raw:
        raw.execute(f"INSERT INTO runs ({', '.join(store.RUN_COLUMNS)}, row_sha256) "
                    f"VALUES ({', '.join('?' * 15)})", (*values, store.row_digest(values)))


def _old_sweep(root: Path, seed0_curve: bool) -> Path:
    """Seeds 0-2 of one cell: seed 0 stored a curve if ``seed0_curve`` (else an empty list),
    seed 1 an empty list, seed 2 a NULL (a raw row with its checksum)."""
    folder = root / "old"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent("""
        from interp.sweeps import TableLayout
        from interp.training import TrainConfig
        CONFIGS = [TrainConfig(case=3, n=4, d_token=4, pos_embed="none", seed=s, max_steps=30)
                   for s in range(3)]
        LAYOUT = TableLayout(rows=("case",), column="d_token")
    """))
    path = folder / "results" / "store.sqlite"
    path.parent.mkdir()
    records = []
    for seed in range(3):
        cfg = TrainConfig(case=3, n=4, d_token=4, pos_embed="none", seed=seed, max_steps=30)
        records.append(store.RunRecord(
            name=cfg.name(), sweep="old", config=cfg.to_dict(), seed=seed, status="ok",
            accuracy=0.25, steps=30, final_loss=1.38,
            curve=[[1, 1.5], [10, 1.45], [30, 1.38]] if seed == 0 and seed0_curve else []))
    with store.Store(path) as db:
        for rec in records[:2]:
            db.put(rec)
    _put_null_curve(path, records[2])
    return folder


def test_runs_without_a_curve_are_named_and_left_out(tmp_path, caught, capsys):
    folder = _old_sweep(tmp_path, seed0_curve=True)
    names = {r["seed"]: r["name"] for r in stored(folder / "results" / "store.sqlite")[("none", 4)]}
    written = report.write(driver.load(folder), out=tmp_path, curves=curves.report_curves)
    (ax,) = [ax for ax in caught[FIGURE].axes if ax.get_visible()]
    assert [ln.get_label().split(" (")[0] for ln in _parts(ax)[0]] == ["seed 0"]
    assert written.curves.drawn == 1 and sorted(written.curves.missing) == sorted([names[1], names[2]])
    md = written.markdown.read_text()
    assert FIGURE in _links(md)
    assert "2 run(s) in the store have no loss curve" in md
    assert f"`{names[1]}`" in md and f"`{names[2]}`" in md


def test_a_store_without_any_curve_gets_a_report_and_no_figure(tmp_path, caught, capsys):
    folder = _old_sweep(tmp_path, seed0_curve=False)
    assert cli.main(["report", str(folder), "--out", str(tmp_path)]) == 0
    assert FIGURE not in capsys.readouterr().out
    assert sorted(caught) == ["violins.png"] and not (tmp_path / FIGURE).exists()
    md = (tmp_path / report.REPORT_FILE).read_text()
    assert "3 run(s) in the store have no loss curve" in md
    assert FIGURE not in md
