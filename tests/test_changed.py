"""``make test-changed``: the test files that mirror a change (tests/changed.py)."""

import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("changed", ROOT / "tests" / "changed.py")
changed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(changed)


def test_a_module_maps_to_its_mirror_and_the_layout_check_always_runs():
    paths = ["interp/core/tasks.py", "interp/sweeps/folders.py", "interp/core/__init__.py",
             "interp/training/fast_data.py", "README.md", "tests/cli/test_docs.py", "tests/gone/test_x.py"]
    assert changed.tests_for(paths) == ["tests/test_layout.py", "tests/cli/test_docs.py",
                                        "tests/core/test_tasks.py", "tests/sweeps/test_folders.py"]
    assert changed.tests_for([]) == ["tests/test_layout.py"]


def test_a_change_is_what_differs_from_the_base_committed_or_not(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    for name in ("interp/core/x.py", "interp/core/z.py", "tests/core/test_x.py",
                 "tests/core/test_y.py", "tests/core/test_z.py", "tests/test_layout.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    (tmp_path / "interp/core/x.py").write_text("x = 1\n")  # changed, not committed
    (tmp_path / "interp/core/y.py").write_text("")  # new, untracked
    assert changed.base(tmp_path) == "HEAD~1"  # no origin/main in this clone
    files = changed.tests_for(changed.changed("HEAD", tmp_path), tmp_path)
    assert files == ["tests/test_layout.py", "tests/core/test_x.py", "tests/core/test_y.py"]


def test_the_make_target_runs_them():
    out = subprocess.run(["make", "-n", "test-changed", "BASE=HEAD"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "pytest" in out and "tests/changed.py HEAD" in out
