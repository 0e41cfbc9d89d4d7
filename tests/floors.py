"""The floors of pyproject.toml's runtime dependencies, for ``make test-floors``.

``python tests/floors.py pins`` prints one ``name==floor`` line per runtime dependency (a pip
constraints file): the job installs exactly the declared minimum of every package, and caps
the packages in :data:`TRANSITIVE` whose newest release breaks a floor. torch is
left out: its pin stays constraints.txt's CPU wheel (2.13.0), since torch from the package
index is a multi-GB CUDA build; transformer-lens's own floor (torch>=2.6) is what
``tests/test_dependencies.py`` checks our torch floor against.

``python tests/floors.py check`` exits 1 naming every runtime dependency whose installed
version is not its floor (so the job cannot pass on newer versions pip picked instead).
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: runtime dependencies the job does not install at their floor, and why
NOT_AT_FLOOR = {"torch": "constraints.txt's CPU wheel: the index's torch is a multi-GB CUDA build"}
#: packages we do not import whose newest release breaks a floor: a user at the floors needs these too
TRANSITIVE = {"pyarrow<26": "pyarrow 26 (datasets, a transformer-lens dependency) requires NumPy 2; numpy 1.24 "
                            "imports with pyarrow 25"}


def floors() -> dict[str, Version]:
    """Distribution name -> its declared floor (every runtime dependency must have one)."""
    out = {}
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(line)
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        if not lows:
            raise SystemExit(f"{req.name} has no floor (>=) in pyproject.toml")
        out[req.name] = max(lows)
    return out


def main(argv: list[str]) -> int:
    if argv == ["pins"]:
        for name, low in floors().items():
            if name not in NOT_AT_FLOOR:
                print(f"{name}=={low}")
        for pin, why in TRANSITIVE.items():
            print(f"{pin}  # {why}")
        return 0
    if argv == ["check"]:
        off = [f"{name} {metadata.version(name)} (floor {low})" for name, low in floors().items()
               if name not in NOT_AT_FLOOR and Version(metadata.version(name)) != low]
        for name, why in NOT_AT_FLOOR.items():
            print(f"{name} {metadata.version(name)}: not at its floor ({why})")
        if off:
            print("not at their floors:", ", ".join(off))
            return 1
        print(f"{len(floors()) - len(NOT_AT_FLOOR)} runtime dependencies at their declared floors")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
