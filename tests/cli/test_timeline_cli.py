"""``interp timeline``: on a tiny ``interp train`` run it trains the run again with snapshots,
saves them beside the checkpoint, and writes the CSV, the Markdown and a drawn figure per run;
on the run's store file it reads the saved snapshots; bad options are refused before any work."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from interp import cli
from interp.training import snapshots

TINY = ["--case", "3", "--n", "5", "--d-token", "4", "--pe", "none", "--steps", "80"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeline") / "run"
    assert cli.main(["train", *TINY, "--out", str(out), "--json"]) == 0
    return out


def test_timeline_of_a_train_run_writes_its_files(run_dir, tmp_path, capsys, assert_drawn):
    capsys.readouterr()
    out = tmp_path / "report"
    assert cli.main(["timeline", str(run_dir), "--out", str(out), "--keep", "4", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert snapshots.has_snapshots(run_dir)
    df = pd.read_csv(written["csv"])
    assert len(df) == written["rows"] <= 4 and df.step.iloc[0] == 0 and df.step.iloc[-1] == 80
    assert {"routing", "code", "mechanism", "plateau_exit", "outcome", "qk_diag", "loss"} <= set(df.columns)
    # issue 52: each snapshot's graded measures in the JSON, as the CSV holds them, with the version
    from interp.inspect.mechanism.progress import COLUMNS
    from interp.inspect.studies.timelines import MEASURES_VERSION

    assert [s["step"] for s in written["snapshots"]] == list(df.step)
    for s, (_, row) in zip(written["snapshots"], df.iterrows()):
        assert s["measures_version"] == row["measures_version"] == MEASURES_VERSION
        assert all(0.0 <= s[c] <= 1.0 and s[c] == row[c] for c in COLUMNS if c != "match_margin")
    md = (out / "timeline.md").read_text()
    assert "routing forms" in md and "code settles" in md and "plateau exit" in md
    [figure] = written["figures"]
    assert figure.endswith("-seed0.png") and f"]({figure.rsplit('/', 1)[-1]})" in md
    assert_drawn(figure)
    [cell] = written["cell_figures"]  # issue 52: the cell's runs overlaid, linked from the Markdown
    assert cell.endswith(f"timeline-cell-case3-n5-d4-L1-none-mlp{int(df.d_mlp.iloc[0])}.png") and f"]({cell.rsplit('/', 1)[-1]})" in md
    assert_drawn(cell)
    # the store of the same folder: the snapshots saved above are read, not trained again
    stamp = (run_dir / "timeline" / "manifest.json").stat().st_mtime_ns
    assert cli.main(["timeline", str(run_dir / "store.sqlite"), "--out", str(tmp_path / "again")]) == 0
    assert "1 run(s)" in capsys.readouterr().out
    assert (run_dir / "timeline" / "manifest.json").stat().st_mtime_ns == stamp
    assert pd.read_csv(tmp_path / "again" / "timeline.csv").equals(df)
    # a table of another measures version there is measured again, and the line says so
    from interp.inspect.studies.atlas_cache import SEAL, seal

    old = df.drop(columns=[SEAL]).assign(measures_version="measure3-progress0")
    (out / "timeline.csv").write_text(seal(old.to_csv(index=False)))
    assert cli.main(["timeline", str(run_dir), "--out", str(out), "--keep", "4"]) == 0
    assert "held measures version measure3-progress0, this one holds" in capsys.readouterr().err
    assert pd.read_csv(out / "timeline.csv").equals(df)


@pytest.mark.parametrize("args, says", [
    (["--keep", "1"], "--keep 1"),
    (["--batch-size", "0"], "--batch-size 0"),
    (["--milestones", "plateau"], "milestone 'plateau'; accepted: one or more of plateau_exit"),
])
def test_bad_options_are_refused_before_any_work(run_dir, tmp_path, capsys, args, says):
    assert cli.main(["timeline", str(run_dir), "--out", str(tmp_path / "x"), *args]) != 0
    assert says in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_a_milestone_the_run_never_reaches_is_named_and_nothing_is_written(run_dir, tmp_path, capsys):
    before = snapshots.saved_steps(run_dir) if snapshots.has_snapshots(run_dir) else None
    assert cli.main(["timeline", str(run_dir), "--out", str(tmp_path / "x"), "--milestones", "low_loss"]) != 0
    assert "milestone low_loss is never reached by its curve" in capsys.readouterr().err
    assert not (tmp_path / "x" / "timeline.csv").exists()
    assert (snapshots.saved_steps(run_dir) if snapshots.has_snapshots(run_dir) else None) == before


def test_a_missing_source_is_named(tmp_path, capsys):
    assert cli.main(["timeline", str(tmp_path / "nowhere")]) != 0
    assert "nowhere does not exist" in capsys.readouterr().err


def test_the_explorer_shows_a_runs_timeline_where_one_was_written(run_dir, tmp_path, capsys):
    """Issue 46: the explorer's seed view draws the timeline ``interp timeline`` wrote beside the
    run (its CSV), and nothing where there is none."""
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(run_dir, bare, ignore=shutil.ignore_patterns("timeline", "timeline.*"))
    assert cli.main(["explore", str(bare), "--out", str(tmp_path / "page0"), "--inputs", "1"]) == 0
    assert "<h3>Timeline</h3>" not in (tmp_path / "page0" / "index.html").read_text()
    assert cli.main(["timeline", str(run_dir), "--keep", "4"]) == 0  # timeline.csv in the run folder
    assert cli.main(["explore", str(run_dir), "--out", str(tmp_path / "page"), "--inputs", "1"]) == 0
    page = (tmp_path / "page" / "index.html").read_text()
    assert "<h3>Timeline</h3>" in page and "routing formed at step" in page or "routing never formed" in page
    assert len(list((tmp_path / "page" / "seeds").glob("*/timeline.png"))) == 1
    [cell] = (tmp_path / "page" / "timeline-cells").glob("*.png")  # issue 52: its cell's figure too
    assert f'<img src="timeline-cells/{cell.name}"' in page


def test_the_atlas_gains_per_cell_formation_steps(run_dir, tmp_path):
    """Issue 46: with a timeline beside the store, atlas.md has a per-cell formation table whose
    numbers are the timeline's own (recounted here with formation on the CSV)."""
    from interp.inspect.studies.timelines import formation

    assert cli.main(["timeline", str(run_dir), "--keep", "4"]) == 0
    f = formation(pd.read_csv(run_dir / "timeline.csv", dtype={"run": str}))
    assert cli.main(["atlas", str(run_dir), "--out", str(tmp_path / "atlas"), "--batch-size", "64"]) == 0
    md = (tmp_path / "atlas" / "atlas.md").read_text()
    section = md.split("## Formation (timelines)")[1].split("##")[0]
    row = next(line for line in section.splitlines() if line.startswith("| 3, 5, 4, 1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    def shown(v):  # as atlas.md writes a median of one value, or no value
        return "n/a" if v is None or v != v else f"{float(v):g}"

    assert cells[1] == "1" and cells[2] == str(int(f["routing_forms"] is not None))
    assert cells[3:] == [shown(f["routing_forms"]), shown(f["code_settles"]), shown(f["plateau_exit"])]
