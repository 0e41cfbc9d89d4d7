"""The test files of a change: ``python tests/changed.py [BASE]`` prints them (``make test-changed``).

tests/ mirrors interp/: ``interp/core/x.py`` is tested by ``tests/core/test_x.py`` (a module
without a mirror adds nothing; its tests run in ``make test``). A change is every file that differs
from BASE (default: ``origin/main`` if this clone has it, else ``HEAD~1``), committed or not, and
every untracked file; a changed test file is run as it is. ``tests/test_layout.py`` always runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALWAYS = "tests/test_layout.py"


def tests_for(paths: list[str], root: Path = ROOT) -> list[str]:
    """The test files (relative to ``root``) that mirror ``paths``, ``tests/test_layout.py`` first."""
    found = {ALWAYS}
    for path in paths:
        p = Path(path)
        if p.suffix != ".py" or not p.parts:
            continue
        if p.parts[0] == "tests" and p.name.startswith("test_"):
            candidates = [p] if (root / p).is_file() else []
        elif p.parts[0] == "interp" and not p.name.startswith("__"):
            candidates = [Path("tests", *p.parts[1:-1], f"test_{p.stem}.py")]
        else:
            continue
        found |= {str(c) for c in candidates if (root / c).is_file()}
    return [ALWAYS, *sorted(found - {ALWAYS})]


def base(root: Path = ROOT) -> str:
    """``origin/main`` where this clone has it, else ``HEAD~1``."""
    has = subprocess.run(["git", "rev-parse", "-q", "--verify", "origin/main"], cwd=root,
                         capture_output=True, text=True)
    return "origin/main" if has.returncode == 0 else "HEAD~1"


def changed(against: str, root: Path = ROOT) -> list[str]:
    """Files that differ from ``against`` (working tree included) and untracked files."""
    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
        return out.stdout.split()

    return git("diff", "--name-only", against) + git("ls-files", "--others", "--exclude-standard")


if __name__ == "__main__":
    print(" ".join(tests_for(changed(sys.argv[1] if len(sys.argv) > 1 else base()))))
