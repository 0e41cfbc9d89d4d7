"""interp curves / interp.inspect.tools.curves: the drawn lines and stop markers checked against the
store's rows read with sqlite3 directly (steps, curve, status), not through interp's reader."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from interp.cli import main
from interp.inspect.tools import curves
from interp.sweeps import driver

# case 3, n = 4: at d_token 16 every seed goes below the stop loss 1.3 within 60 steps (a dot),
# at d_token 4 none does (a cross at step 60); 3 and 2 seeds, so the panels differ in lines
TINY = """
from interp.sweeps import TableLayout
from interp.training import TrainConfig

CONFIGS = [TrainConfig(case=3, n=4, d_token=d, pos_embed="none", seed=s, init="pytorch",
                       max_steps=60, curve_every=10, stop_loss=1.3)
           for d, seeds in ((16, 3), (4, 2)) for s in range(seeds)]
LAYOUT = TableLayout(rows=("case",), column="d_token", title="tiny")
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("curves") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    summary = driver.run_sweep(driver.load(folder), store=folder / "results" / "store.sqlite")
    assert summary.trained == 5 and not summary.lost
    return folder


def stored(folder: Path) -> dict[int, list[dict]]:
    """d_token -> the runs of that cell (seed, steps, status, curve, stop_loss), by sqlite3."""
    cells: dict[int, list[dict]] = {}
    with sqlite3.connect(folder / "results" / "store.sqlite") as db:
        for config, status, steps, curve in db.execute(
                "SELECT config, status, steps, curve FROM runs ORDER BY rowid"):
            c = json.loads(config)
            cells.setdefault(c["d_token"], []).append(
                dict(seed=c["seed"], steps=steps, status=status, curve=json.loads(curve),
                     stop_loss=c["stop_loss"]))
    return cells


def _parts(ax):
    lines = [ln for ln in ax.get_lines() if ln.get_gid() is None]
    stops = [ln for ln in ax.get_lines() if ln.get_gid() == "stop"]
    return lines, stops


def test_small_multiples_one_panel_per_cell_seeds_and_stop_steps(sweep):
    cells = stored(sweep)
    fig = curves.curves_figure(sweep)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    # numbers sort as numbers: d_token 4 before 16 (as text "16" < "4")
    assert [ax.get_title() for ax in axes] == ["case3 n4 d4 L1 pe=none", "case3 n4 d16 L1 pe=none"]
    early_seen = set()
    for ax, d_token in zip(axes, (4, 16)):
        runs = sorted(cells[d_token], key=lambda r: r["seed"])
        lines, stops = _parts(ax)
        assert len(lines) == len(runs) and len(stops) == len(runs)
        assert [ln.get_label().split(" (")[0] for ln in lines] == [f"seed {r['seed']}" for r in runs]
        for run, line, stop in zip(runs, lines, stops):
            assert list(line.get_xdata()) == [s for s, _ in run["curve"]]
            assert list(line.get_ydata()) == pytest.approx([v for _, v in run["curve"]], rel=1e-12)
            last_step, last_loss = run["curve"][-1]
            assert last_step == run["steps"]  # the stop step is always recorded
            assert list(stop.get_xdata()) == [run["steps"]]
            assert list(stop.get_ydata()) == pytest.approx([last_loss], rel=1e-12)
            early = last_loss < run["stop_loss"]
            early_seen.add(early)
            assert stop.get_marker() == ("o" if early else "x")
        assert [ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_gid() == "threshold"] == [1.3]
        assert ax.get_xlabel() == "step" and ax.get_ylabel() == "training-batch loss"
        assert ax.get_yscale() == "log"
    assert early_seen == {True, False}  # both kinds of marker were drawn
    assert "tiny" in fig.get_suptitle()


def test_where_picks_cells(sweep):
    fig = curves.curves_figure(sweep, where={"d_token": "16"})
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 1 and len(_parts(axes[0])[0]) == 3
    with pytest.raises(ValueError, match="where names 'colour'"):
        curves.curves_figure(sweep, where={"colour": "red"})


def test_one_run_folder_its_curve_and_stop(sweep, tmp_path, assert_drawn):
    """A sweep's checkpoint folder is a run folder: one panel, its curve, its stop marker."""
    from interp.training import checkpoints

    cells = stored(sweep)
    run = sorted(cells[16], key=lambda r: r["seed"])[0]
    folder = next(p for p in (sweep / "results" / "checkpoints").iterdir()
                  if checkpoints.read_meta(p)["train_config"]["d_token"] == 16
                  and checkpoints.read_meta(p)["train_config"]["seed"] == 0)
    fig = curves.curves_figure(folder)
    (ax,) = fig.axes
    lines, stops = _parts(ax)
    assert len(lines) == 1 and [s for s in lines[0].get_xdata()] == [s for s, _ in run["curve"]]
    assert list(stops[0].get_xdata()) == [run["steps"]] and stops[0].get_marker() == "o"
    assert f"stopped below the stop loss at step {run['steps']}" in ax.get_title()
    out = curves.write_curves(folder, tmp_path / "one.png")
    assert_drawn(out)


def test_cli_curves_writes_the_figure_and_refuses_bad_input(sweep, tmp_path, capsys, assert_drawn):
    assert main(["curves", str(sweep), "--out", str(tmp_path / "all.png")]) == 0
    assert_drawn(tmp_path / "all.png")
    assert "loss curves written" in capsys.readouterr().out
    assert main(["curves", str(sweep), "--out", str(tmp_path / "all.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "accepted: .png, .svg, .pdf" in err[0]
    assert main(["curves", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["curves", str(tmp_path)]) == 2  # a folder without a store
    assert "no results store" in capsys.readouterr().err
    assert not (tmp_path / "all.txt").exists()
