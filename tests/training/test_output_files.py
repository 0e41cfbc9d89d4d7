"""Output files are written whole or not at all, never through a symlink, and a failed write
names the file (issue 24, item 6); the report renders a store with failed runs (item 2).

References: the files' bytes before the fault (compared byte for byte after it), symlink
victims' bytes, and for the failed-runs report the rows an uninterrupted tiny sweep stored, read
with sqlite3 directly (not through the report's code).
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from interp.sweeps import report, store, driver as sweeps

PNG = b"\x89PNG\r\n\x1a\n"

TINY = """
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [TrainConfig(case=case, n=5, d_token=4, pos_embed="none", seed=seed, max_steps=20,
                       batch_size=32, eval_batches=1, curve_every=10)
           for case in (1, 3) for seed in (0, 1)]
LAYOUT = TableLayout(rows=("case",), column="d_token", title="tiny")
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny sweep folder, every run trained for real (4 runs, 20 steps each)."""
    folder = tmp_path_factory.mktemp("sweep") / "tiny"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(TINY))
    sweeps.run_sweep(sweeps.load(folder), workers=1)
    return folder


@pytest.fixture
def sweep(trained, tmp_path):
    folder = tmp_path / "tiny"
    shutil.copytree(trained, folder)
    return sweeps.load(folder)


def _rows(path: Path) -> dict[str, tuple]:
    with sqlite3.connect(path) as db:
        return {name: (seed, status, acc, steps) for name, seed, status, acc, steps in
                db.execute("SELECT name, seed, status, accuracy, steps FROM runs")}


def _fail(sw, name_seed: list[tuple[str, int]], status: str) -> None:
    """Replace these runs' rows by failed rows with no numbers (as a run that failed before it
    had any, e.g. while saving progress, is stored)."""
    by_name = {c.name(): c for c in sw.configs}
    with store.Store(sw.default_store) as db:
        for name, seed in name_seed:
            db.put(store.RunRecord(name=name, sweep="tiny", config=by_name[name].to_dict(),
                                   seed=seed, status=status))


def _change(sw) -> None:
    """Give the first run other numbers, so that a new report differs from the last one."""
    c = sw.configs[0]
    with store.Store(sw.default_store) as db:
        db.put(store.RunRecord(name=c.name(), sweep="tiny", config=c.to_dict(), seed=c.seed,
                               status="ok", accuracy=0.123, steps=7, final_loss=0.5, seconds=1.0))


# --------------------------------------------------------------------------- failed runs


def test_report_renders_failed_runs_without_numbers(sweep):
    before = _rows(sweep.default_store)
    assert all(status == "ok" for _, status, _, _ in before.values()) and len(before) == 4
    by_key = {(c.case, c.seed): c.name() for c in sweep.configs}
    failed = [(by_key[1, 1], 1), (by_key[3, 0], 0), (by_key[3, 1], 1)]
    status = "failed: OSError: [Errno 28] No space left on device"
    _fail(sweep, failed, status)

    written = report.write(sweep)  # the old code: "cannot convert float NaN to integer"
    text = written.markdown.read_text()
    assert written.violins.read_bytes().startswith(PNG)
    assert "**4 of 4 runs are in the store**; 3 failed" in text
    seed0, _, acc0, steps0 = before[by_key[1, 0]]
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()
             if line.startswith("| 1 | 4 |") or line.startswith("| 3 | 4 |")}
    # case 1: only seed 0 has numbers; the failed seed is counted, not averaged as a number
    assert f"| 2/2 (1 failed) | 0: {100 * acc0:.2f} |" in lines["1"]
    assert f"| {steps0:.0f} |" in lines["1"]
    # case 3: every seed failed: no accuracy, no steps
    assert "| 2/2 (2 failed) | — |" in lines["3"]
    assert lines["3"].split(" | ")[5] == "—"  # mean steps
    for name, seed in failed:
        assert f"- `{name}` (seed {seed}): {status}" in text


def test_cli_report_of_failed_runs_exits_0(sweep, capsys):
    from interp import cli

    _fail(sweep, [(c.name(), c.seed) for c in sweep.configs], "failed: progress save failed")
    assert cli.main(["report", str(sweep.root)]) == 0
    out = capsys.readouterr().out
    assert "4 failed" in out and "0 of 4" not in out


# --------------------------------------------------------------------------- symlinks


def test_report_never_writes_through_a_symlink(sweep, tmp_path):
    victims = {}
    for name in ("report.md.tmp", "report.md", "violins.png"):  # the old temp name, the targets
        victim = tmp_path / f"victim-{name}"
        victim.write_bytes(b"another program's file\n")
        victims[name] = victim
        (sweep.root / name).unlink(missing_ok=True)
        (sweep.root / name).symlink_to(victim)
    written = report.write(sweep)
    for victim in victims.values():
        assert victim.read_bytes() == b"another program's file\n"
    for path in (written.markdown, written.violins):  # the links are replaced by the files
        assert not path.is_symlink() and path.is_file()
    assert written.markdown.read_text().startswith("# tiny")
    assert written.violins.read_bytes().startswith(PNG)


# --------------------------------------------------------------------------- failed writes


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_full_disk_leaves_report_and_violins_as_they_were(sweep, monkeypatch):
    written = report.write(sweep)
    old = {p: p.read_bytes() for p in (written.markdown, written.violins)}
    _change(sweep)

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(ValueError) as e:
        report.write(sweep)
    assert str(e.value) == (f"{written.violins}: the disk is full (No space left on device); "
                            "free space and rerun")
    assert {p: p.read_bytes() for p in old} == old
    assert _leftovers(sweep.root) == []


def test_a_file_size_limit_mid_report_leaves_both_files_byte_identical(sweep, capsys):
    """A real fault: `interp report` under RLIMIT_FSIZE, big enough for report.md, too small for
    violins.png (the old code wrote the new report.md and a truncated violins.png). The limit is
    this process's own soft limit, for the one command (Python ignores SIGXFSZ, so a write past
    it fails with EFBIG as in a limited subprocess), restored after it."""
    from interp import cli

    written = report.write(sweep)
    old = {p: p.read_bytes() for p in (written.markdown, written.violins)}
    limit = 3 * len(old[written.markdown])
    assert limit < len(old[written.violins])
    _change(sweep)
    capsys.readouterr()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        code = cli.main(["report", str(sweep.root)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = capsys.readouterr().err
    assert code == 2, err
    assert {p: p.read_bytes() for p in old} == old  # no new report.md beside an old figure
    assert err.startswith(f"interp report: error: {written.violins}: ")
    assert "file-size limit" in err and err.count("\n") == 1
    assert _leftovers(sweep.root) == []


# --------------------------------------------------------------------------- the helper


def test_write_file_replaces_a_symlink_at_the_target_and_keeps_the_mode(tmp_path):
    from interp.training.files import write_file

    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "out.txt"
    link.symlink_to(victim)
    write_file(link, "new")
    assert victim.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"
    link.chmod(0o640)
    write_file(link, b"newer")
    assert link.read_bytes() == b"newer" and (link.stat().st_mode & 0o777) == 0o640


def test_write_file_errors_name_the_target_and_leave_nothing(tmp_path, monkeypatch):
    from interp.training.files import write_file

    target = tmp_path / "a.csv"
    target.write_text("old")

    def too_big(fd, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(os, "write", too_big)
    with pytest.raises(ValueError, match=rf"^{target}: the file is over .*\(File too large\)"):
        write_file(target, "new")
    monkeypatch.undo()
    (tmp_path / "sub").write_text("a file where a folder should be")
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'sub' / 'x.md'}: "):
        write_file(tmp_path / "sub" / "x.md", "new")
    assert target.read_text() == "old" and _leftovers(tmp_path) == []


def test_save_figure_renders_before_it_writes(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from interp.training.files import save_figure

    fig = Figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    path = save_figure(fig, tmp_path / "f.png", dpi=50)
    assert path.read_bytes().startswith(PNG)
    assert save_figure(fig, tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def test_write_or_check_writes_or_only_compares(tmp_path):
    from interp.training.files import write_or_check

    out = tmp_path / "report.md"
    assert write_or_check(out, "a\n", ["--check"], "make it") == (1, "report.md is stale: run make it")
    assert not out.exists()
    assert write_or_check(out, "a\n", [], "make it") == (0, "a\n") and out.read_text() == "a\n"
    assert write_or_check(out, "a\n", ["--check"], "make it") == (0, "report.md is current")
    assert write_or_check(out, "b\n", ["--check"], "make it")[0] == 1 and out.read_text() == "a\n"
