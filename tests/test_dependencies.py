"""pyproject.toml says the truth about what interp needs.

* every third-party package that ``interp/`` imports (any ``import`` statement, found with ast)
  is a declared dependency, under its distribution name (``sklearn`` is scikit-learn);
* a declared floor is at least what a declared dependency at *its* floor requires of the same
  package (transformer-lens 3.9 requires torch>=2.6, so ``torch>=2.2`` cannot hold): read from
  the installed metadata of the dependencies whose installed version is their floor;
* the pinned environment (constraints.txt, what CI installs) satisfies every declared range;
* circuitsvis has an upper bound, since interp reads a file inside it that no API promises;
* the distribution name is not the bare ``interp``, and every ``pip install`` hint uses it.

Static checks: they read pyproject.toml, the source and the installed metadata, so they run
without an index and cannot pass by skipping.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "PIL": "pillow", "transformer_lens": "transformer-lens",
                "IPython": "ipython"}
#: imported only where the package is already running: not a dependency of interp
NOT_NEEDED = {"ipython": "imported inside _ipython_display_, a hook only IPython itself calls"}


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extras: bool = False) -> dict[str, Requirement]:
    reqs = list(PYPROJECT["dependencies"])
    if extras:
        reqs += [r for group in PYPROJECT["optional-dependencies"].values() for r in group]
    return {_canon(Requirement(r).name): Requirement(r) for r in reqs}


def third_party_imports(root: Path) -> dict[str, set[str]]:
    """Distribution name -> the files under ``root`` that import it (stdlib and interp left out)."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top not in sys.stdlib_module_names and top != "interp":
                    found.setdefault(_canon(DISTRIBUTION.get(top, top)), set()).add(str(path.relative_to(root)))
    return found


def floor(req: Requirement) -> Version | None:
    lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=", ">")]
    return max(lows) if lows else None


def test_the_import_scan_maps_names_to_distributions(tmp_path):
    (tmp_path / "a.py").write_text("import os\nimport numpy as np\nfrom sklearn.model_selection import KFold\n"
                                   "def f():\n    from PIL import Image\n    from interp.core import tasks\n")
    assert set(third_party_imports(tmp_path)) == {"numpy", "scikit-learn", "pillow"}


def test_every_third_party_import_of_interp_is_declared():
    declared = _declared(extras=True)  # ray: the optional extra, imported only by --backend ray
    missing = {dist: sorted(files) for dist, files in third_party_imports(ROOT / "interp").items()
               if dist not in declared and dist not in NOT_NEEDED}
    assert not missing, f"imported by interp/ but not declared in pyproject.toml: {missing}"


def test_no_floor_is_below_what_a_declared_dependency_at_its_floor_requires():
    declared, low = _declared(), []
    for name, req in declared.items():
        mine = floor(req)
        installed = Version(metadata.version(name))
        if mine is None or installed.release[:len(mine.release)] != mine.release:
            continue  # only a dependency installed at its floor tells what the floor needs
        for line in metadata.requires(name) or []:
            dep = Requirement(line)
            if dep.marker is not None and not dep.marker.evaluate({"extra": ""}):
                continue
            theirs = floor(dep)
            if _canon(dep.name) in declared and theirs is not None:
                ours = floor(declared[_canon(dep.name)])
                if ours is None or ours < theirs:
                    low.append(f"{dep.name}: declared {declared[_canon(dep.name)].specifier or 'no floor'}, "
                               f"but {name} {installed} requires {dep.specifier}")
    assert not low, low


def test_torch_numpy_and_circuitsvis_say_the_truth():
    declared = _declared()
    assert floor(declared["torch"]) >= Version("2.6")  # transformer-lens 3.9's own floor
    assert "numpy" in declared
    assert any(s.operator in ("<", "<=", "~=", "==") for s in declared["circuitsvis"].specifier)
    import circuitsvis  # the file interp.inspect.tools.viz inlines, which the bound protects

    assert (Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js").is_file()


def test_the_pinned_environment_satisfies_every_declared_range():
    outside = {name: (str(req.specifier), metadata.version(name)) for name, req in _declared().items()
               if not req.specifier.contains(metadata.version(name), prereleases=True)}
    assert not outside, outside
    pins = [Requirement(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    for pin in pins:
        assert _declared()[_canon(pin.name)].specifier.contains(next(iter(pin.specifier)).version)


def test_the_distribution_name_is_distinctive_and_every_install_hint_uses_it():
    name = PYPROJECT["name"]
    assert name != "interp" and name.startswith("interp-")
    assert (ROOT / "interp" / "__init__.py").is_file()  # the import package keeps its name
    stale = []
    for path in [*ROOT.glob("interp/**/*.py"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md",
                 *ROOT.glob("tests/**/*.py")]:
        for m in re.finditer(r"pip install '?([A-Za-z0-9_.-]+)\[", path.read_text()):
            if m.group(1) not in (name, "."):
                stale.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not stale, stale
