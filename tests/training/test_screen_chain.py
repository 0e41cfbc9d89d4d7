"""experiments/readings/screen/run_rest.sh: the screen's steps after block 2 run in the declared
order and train exactly the folders each decision step printed (score.py and run_block.sh
stubbed in a copy of the script's layout: the chain's control flow, not the training)."""

import os
import pathlib
import shutil
import stat
import subprocess

import pytest

SCREEN = pathlib.Path(__file__).resolve().parents[2] / "experiments" / "readings" / "screen"

#: run_block.sh's stub: --prepare makes the pinned worktree's folder unless NO_WORKTREE
RUN_BLOCK = '''#!/usr/bin/env bash
PIN=0123456789abcdef
echo "run_block $*" >> "$(dirname "$0")/calls.log"
if [ "$1" = --prepare ] && [ -z "$NO_WORKTREE" ]; then mkdir -p "$TMPDIR/interp-screen-${PIN:0:12}/interp"; fi
'''
#: score.py's stub: prints what the real one prints for each step (CLOSE: the close call's output)
SCORE = '''#!/usr/bin/env bash
if [ "$1" = -P ]; then  # the run-name check: the pinned interp (PYTHONPATH set) names alike unless NAMES_DIFFER
  if [ -n "$NAMES_DIFFER" ] && [ -n "$PYTHONPATH" ]; then echo other; else echo same; fi; exit 0
fi
shift  # the script's path
log="$(dirname "$0")/../../experiments/readings/screen/calls.log"
echo "score ${*:-write}" >> "$log"
case "${1:-}" in
  --compose) echo "c1: + + + - + - - - under last-4d"; echo "c2: not written: last-4d is block M's best" ;;
  --close-call) printf '%b' "$CLOSE"; [ -z "$CLOSE_RC" ] || exit "$CLOSE_RC" ;;
  --tables) printf 'f07/table1\\nf07/table2\\na-every-4d/table1\\na-every-4d/table2\\n' ;;
  --incomplete) shift; for f in "$@"; do case " $COMPLETE " in *" $f "*) ;; *) echo "$f" ;; esac; done ;;
esac
'''


BLOCK_2 = ["f09", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "m-last-2048"]


def _chain(tmp_path, close, close_rc="", names_differ="", complete=" ".join(BLOCK_2[:6]), no_worktree=""):
    """Runs the copied chain; ``complete``: the folders the stubbed ``score.py --incomplete``
    finds recorded (by default block 2's six committed at the time of writing)."""
    screen = tmp_path / "experiments" / "readings" / "screen"
    screen.mkdir(parents=True)
    shutil.copy(SCREEN / "run_rest.sh", screen)
    for name, text in (("run_block.sh", RUN_BLOCK), ("../../../.venv/bin/python", SCORE)):
        path = screen / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (screen / "c2").mkdir()  # left over from an earlier run: compose says "not written", so not trained
    (screen / "c2" / "configs.py").write_text("CONFIGS = []\n")
    for folder in (*BLOCK_2, "c1", "f07-s59", "f01-s59", "f07/table1", "f07/table2", "a-every-4d/table1", "a-every-4d/table2"):
        (screen / folder).mkdir(parents=True)
        (screen / folder / "configs.py").write_text("CONFIGS = []\n")
    env = {**os.environ, "CLOSE": close, "CLOSE_RC": close_rc, "NAMES_DIFFER": names_differ, "COMPLETE": complete,
           "TMPDIR": str(tmp_path), "NO_WORKTREE": no_worktree}
    done = subprocess.run(["bash", str(screen / "run_rest.sh"), "-w", "2"], capture_output=True, text=True,
                          env=env, timeout=60)
    calls = (screen / "calls.log").read_text().splitlines() if (screen / "calls.log").exists() else []
    return done, calls


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="run_rest.sh needs pgrep (procps)")
def test_the_chain_trains_what_each_step_wrote_in_the_declared_order(tmp_path):
    done, calls = _chain(tmp_path, "f07-s59\\nf01-s59\\n")
    assert done.returncode == 0, done.stderr
    tables = "f07/table1 f07/table2 a-every-4d/table1 a-every-4d/table2"
    assert calls == ["run_block --prepare", "score --incomplete " + " ".join(BLOCK_2),
                     "run_block f15 f16 m-last-2048 -w 2", "score --compose", "score --incomplete c1",
                     "run_block c1 -w 2", "score --close-call", "score --incomplete f07-s59 f01-s59",
                     "run_block f07-s59 f01-s59 -w 2", "score --tables", "score --incomplete " + tables,
                     f"run_block {tables} -w 2", "score write"]


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="run_rest.sh needs pgrep (procps)")
def test_a_fresh_checkout_trains_only_folders_with_runs_not_recorded(tmp_path):
    """No store (a fresh checkout): block 2 and a composed copy of a candidate are recorded in
    seeds.csv, so nothing of them trains; the tables train only the folders left. (That score.py
    then scores the copy from the candidate's committed rows is test_screen.py's.)"""
    done, calls = _chain(tmp_path, "f07-s59\\nf01-s59\\n", complete=" ".join(BLOCK_2) + " c1 f07-s59 f07/table1")
    assert done.returncode == 0, done.stderr
    assert [c for c in calls if c.startswith("run_block")] == [
        "run_block --prepare", "run_block f01-s59 -w 2", "run_block f07/table2 a-every-4d/table1 a-every-4d/table2 -w 2"]


def test_block_2_is_run_block_sh_s_block_2():
    text = (SCREEN / "run_block.sh").read_text()
    declared = text.split("    2) names=\"$names ", 1)[1].split('"', 1)[0].split()
    assert declared == BLOCK_2 and " ".join(BLOCK_2) in (SCREEN / "run_rest.sh").read_text()


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="run_rest.sh needs pgrep (procps)")
def test_no_close_call_goes_on_and_a_refused_step_stops_the_chain(tmp_path):
    done, calls = _chain(tmp_path / "a", "score.py --close-call: no close call (the top two differ by more than 2 in W)\\n", "1")
    assert done.returncode == 0, done.stderr
    assert "score --tables" in calls and not any("s59" in c for c in calls)
    done, calls = _chain(tmp_path / "b", "score.py --close-call: the top two are not known yet; waiting for: c1\\n", "1")
    assert done.returncode == 1 and "waiting for: c1" in done.stdout
    assert calls[-1] == "score --close-call"  # nothing after the refused step


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="run_rest.sh needs pgrep (procps)")
def test_the_chain_stops_before_scoring_when_the_pinned_interp_names_runs_otherwise(tmp_path):
    done, calls = _chain(tmp_path, "f07-s59\\nf01-s59\\n", names_differ="1")
    assert done.returncode == 1 and "run names under this checkout's interp differ" in done.stderr
    assert calls == ["run_block --prepare"]  # checked before anything trains: nothing trained, composed or scored


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="run_rest.sh needs pgrep (procps)")
def test_without_the_pinned_worktree_the_name_check_stops_the_chain(tmp_path):
    """With no pinned worktree PYTHONPATH would name a missing folder and the check would compare
    this checkout's interp with itself: it stops instead."""
    done, calls = _chain(tmp_path, "f07-s59\\nf01-s59\\n", no_worktree="1")
    assert done.returncode == 1 and "no pinned worktree at" in done.stderr
    assert calls == ["run_block --prepare"]
