"""The package's shape: stages as sub-packages, imports pointing down only, no circles, modules
and functions small enough to read (or explained, with a cap, in their folder's README), and
only the CLI writes to the terminal.

The checks are functions of source text (:func:`imports_of`, :func:`terminal_writes`,
:func:`exemption_cap`), so ``test_the_checks_catch_*`` below feed each one the gaps an earlier
version of this file missed (``from interp import training``, relative imports, ``importlib``,
``sys.stdout.write``, tqdm, a README exemption without a cap) and assert they are caught.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "interp"
#: the stages, lowest first: a module may import from the stages before its own (and from its
#: own stage); inspect and theory are siblings (neither imports the other)
RANK = {"core": 1, "training": 2, "sweeps": 3, "inspect": 4, "theory": 4, "cli": 5}
#: inspect's rooms (issue 50), lowest first: a room imports only from rooms before it and from
#: the modules at inspect's top (its vocabulary), which import no room
ROOMS = {"tools": 1, "mechanism": 2, "studies": 3}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60
#: no README exemption lifts a module or function past these (issue 25)
CEILING_MODULE_LINES, CEILING_FUNCTION_LINES = 500, 100


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(dotted: str, root: Path) -> str:
    """The module or package a dotted name refers to, or its parent for a name inside one
    (``interp.sweeps.store.Store`` -> ``interp.sweeps.store``)."""
    parts = dotted.split(".")
    while parts:
        base = root.joinpath(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return dotted


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every ``interp`` module or package that the file at ``path`` imports, in any form:
    ``import interp.x``, ``from interp.x import y``, ``from interp import training`` (a
    sub-package), relative imports (``from . import x``, ``from ..core import tasks``),
    ``importlib.import_module("interp.x")`` / ``__import__("interp.x")`` with a literal name,
    and the string values of a lazy-export table (``_EXPORTS = {"name": "interp.x"}``);
    imports inside functions included."""
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            called = getattr(func, "attr", None) or getattr(func, "id", None)
            if called in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        elif isinstance(node, ast.Dict):
            names = [v.value for v in node.values
                     if isinstance(v, ast.Constant) and isinstance(v.value, str)
                     and re.fullmatch(r"interp(\.\w+)+", v.value)]
        deps |= {_resolve(n, root) for n in names if n == "interp" or n.startswith("interp.")}
    return deps - {me}


def _imports(root: Path = ROOT) -> dict[str, set[str]]:
    return {_module_name(p, root): imports_of(p, root) for p in (root / "interp").rglob("*.py")}


def _stage(module: str, root: Path = ROOT) -> str | None:
    """The sub-package a module lives in; None for interp itself and its top-level files."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (root / "interp" / parts[1]).is_dir() else None


def wrong_directions(root: Path = ROOT) -> list[str]:
    wrong = []
    for module, deps in _imports(root).items():
        here = _stage(module, root)
        for dep in deps:
            there = _stage(dep, root)
            if dep == "interp" and here is not None:
                wrong.append(f"{module} -> interp (the top level imports every stage)")
            if here is None or there is None or there == here:
                continue  # interp/__init__ and interp/__main__ may name anything; same stage is fine
            if RANK[there] >= RANK[here]:
                wrong.append(f"{module} -> {dep}")
    return sorted(wrong)


def _room(module: str) -> int | None:
    """The rank of an inspect module's room (0: a module at inspect's top); None outside inspect
    and for inspect's ``__init__`` (the table of old paths, like ``interp/__init__``)."""
    parts = module.split(".")
    if parts[:2] != ["interp", "inspect"] or len(parts) < 3:
        return None
    return ROOMS.get(parts[2], 0 if len(parts) == 3 else None)


def wrong_rooms(root: Path = ROOT) -> list[str]:
    """Imports inside ``interp.inspect`` that point up a room (tools -> mechanism, ...) or from
    inspect's top-level modules into a room."""
    wrong = []
    for module, deps in _imports(root).items():
        here = _room(module)
        for dep in deps:
            there = _room(dep)
            if here is not None and there is not None and there > here:
                wrong.append(f"{module} -> {dep}")
    return sorted(wrong)


def circles(root: Path = ROOT) -> list[list[str]]:
    graph = _imports(root)
    state: dict[str, int] = {}
    found = []

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if d == "interp":
                continue
            if state.get(d) == 1:
                found.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


#: ways to reach the terminal: print/pprint, sys.stdout/stderr (and their __dunder__ twins,
#: ``from sys import stdout``), os.write to fd 1 or 2, tqdm, and a logging StreamHandler
_STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}


def terminal_writes(source: str) -> list[str]:
    """``"line: what"`` for every place in ``source`` that writes to stdout/stderr."""
    tree = ast.parse(source)
    flushed = {id(n.value) for n in ast.walk(tree)  # sys.stdout.flush(): writes nothing new
               if isinstance(n, ast.Attribute) and n.attr == "flush"}
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if isinstance(node.func, ast.Name) and name in ("print", "pprint"):
                what = name
            elif name == "write" and isinstance(node.func, ast.Attribute) and \
                    getattr(node.func.value, "id", None) == "os" and node.args and \
                    isinstance(node.args[0], ast.Constant) and node.args[0].value in (1, 2):
                what = f"os.write({node.args[0].value}, ...)"
            elif name == "StreamHandler":
                what = "logging.StreamHandler"
        elif isinstance(node, ast.Attribute) and node.attr in _STREAMS and \
                getattr(node.value, "id", None) == "sys" and id(node) not in flushed:
            what = f"sys.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and \
                any(a.name in _STREAMS for a in node.names):
            what = "from sys import a stream"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in ("tqdm", "pprint") for m in mods):
                what = "tqdm/pprint import"
        if what is not None:
            found.append(f"{node.lineno}: {what}")
    return found


def exemption_cap(readme: str, name: str) -> int | None:
    """The cap a folder's README gives a module (```store.py` (at most 650 lines)``) or a
    function (```answer` (at most 85 lines)``); None if it names no cap. An exemption is a
    promise with a number, so a module cannot grow past it unnoticed."""
    m = re.search(rf"`{re.escape(name)}`\s+\(at\s+most\s+(\d+)\s+lines", readme)
    return int(m.group(1)) if m else None


def oversized(root: Path = ROOT) -> list[str]:
    too_big = []
    for path in sorted((root / "interp").rglob("*.py")):
        readme = path.parent / "README.md"
        why = readme.read_text() if readme.exists() else ""
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            cap = exemption_cap(why, path.name)
            if cap is None or lines > cap or cap > CEILING_MODULE_LINES:
                too_big.append(f"{path.relative_to(root)}: {lines} lines (README cap: {cap})")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    cap = exemption_cap(why, node.name)
                    if cap is None or length > cap or cap > CEILING_FUNCTION_LINES:
                        too_big.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: "
                                       f"{length} lines (README cap: {cap})")
    return too_big


def test_imports_point_down_only():
    assert not wrong_directions()


def test_inspect_rooms_import_down_only():
    assert not wrong_rooms()


def test_no_import_circles():
    assert not circles()


def test_modules_and_functions_are_small_or_explained_with_a_cap():
    too_big = oversized()
    assert not too_big, "\n".join(too_big)


def test_only_the_cli_writes_to_the_terminal():
    writing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _stage(_module_name(path)) == "cli" or path.name == "__main__.py":
            continue
        writing += [f"{path.relative_to(ROOT)}:{w}" for w in terminal_writes(path.read_text())]
    assert not writing, writing


def test_the_package_docstring_names_every_sub_package():
    import interp

    stages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert stages == sorted(RANK)
    for stage in stages:
        assert f":mod:`interp.{stage}`" in interp.__doc__, stage
        sub = __import__(f"interp.{stage}", fromlist=["_"])
        modules = sorted(p.stem for p in (PACKAGE / stage).glob("*.py") if p.stem != "__init__")
        missing = [m for m in modules if f"interp.{stage}.{m}" not in (sub.__doc__ or "")]
        assert not missing, f"interp/{stage}/__init__.py does not name {missing}"
    rooms = sorted(p.name for p in (PACKAGE / "inspect").iterdir() if (p / "__init__.py").exists())
    assert rooms == sorted(ROOMS)
    inspect = __import__("interp.inspect", fromlist=["_"])
    for room in rooms:
        assert f":mod:`interp.inspect.{room}`" in inspect.__doc__, room
        sub = __import__(f"interp.inspect.{room}", fromlist=["_"])
        modules = sorted(p.stem for p in (PACKAGE / "inspect" / room).glob("*.py") if p.stem != "__init__")
        missing = [m for m in modules if f"interp.inspect.{room}.{m}" not in (sub.__doc__ or "")]
        assert not missing, f"interp/inspect/{room}/__init__.py does not name {missing}"


# ------------------------------------------------------------------ the checks catch each gap


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A throw-away ``interp`` tree with every stage, plus ``files`` (path -> source)."""
    for stage in RANK:
        (tmp_path / "interp" / stage).mkdir(parents=True, exist_ok=True)
        (tmp_path / "interp" / stage / "__init__.py").write_text("")
        (tmp_path / "interp" / stage / "base.py").write_text("X = 1\n")
    (tmp_path / "interp" / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("source", [
    "from interp.training import base\n",
    "from interp import training\n",
    "import interp.training.base\n",
    "from ..training import base\n",
    "from ..training.base import X\n",
    "import importlib\nimportlib.import_module('interp.training.base')\n",
    "__import__('interp.training')\n",
    "_EXPORTS = {'X': 'interp.training.base'}\n",
    "def f():\n    from interp.training.base import X\n",
])
def test_the_checks_catch_every_import_form(tmp_path, source):
    root = _package(tmp_path, {"interp/core/bad.py": source})
    assert [w for w in wrong_directions(root) if w.startswith("interp.core.bad")], source


@pytest.mark.parametrize("source", [
    "from interp.inspect.mechanism import base\n",
    "from ..mechanism.base import X\n",
    "def f():\n    from interp.inspect.studies import base\n",
])
def test_the_room_check_catches_an_import_up_a_room(tmp_path, source):
    rooms = {f"interp/inspect/{r}/{f}": "X = 1\n" for r in ROOMS for f in ("__init__.py", "base.py")}
    for r in ROOMS:
        (tmp_path / "interp" / "inspect" / r).mkdir(parents=True)
    root = _package(tmp_path, {**rooms, "interp/inspect/tools/bad.py": source,
                               "interp/inspect/words.py": "from interp.inspect.tools import base\n"})
    wrong = wrong_rooms(root)
    assert [w for w in wrong if w.startswith("interp.inspect.tools.bad")], source
    assert "interp.inspect.words -> interp.inspect.tools.base" in wrong  # the top imports no room
    assert not [w for w in wrong if w.startswith("interp.inspect.mechanism")]


def test_the_checks_catch_a_relative_import_circle(tmp_path):
    root = _package(tmp_path, {"interp/core/a.py": "from . import b\n",
                               "interp/core/b.py": "from .a import X\n"})
    assert circles(root)
    assert not wrong_directions(root)  # same stage: a circle, not a wrong direction


def test_the_checks_pass_imports_that_point_down(tmp_path):
    root = _package(tmp_path, {"interp/training/ok.py": "from ..core import base\nfrom . import base as b\n"
                                                         "from interp import core\n"})
    assert not wrong_directions(root) and not circles(root)


@pytest.mark.parametrize("source", [
    "print('x')\n",
    "import sys\nsys.stdout.write('x')\n",
    "import sys\nsys.stderr.write('x')\n",
    "import sys\nsys.__stdout__.write('x')\n",
    "from sys import stderr\n",
    "import os\nos.write(1, b'x')\n",
    "import os\nos.write(2, b'x')\n",
    "from tqdm import tqdm\n",
    "import tqdm.auto\n",
    "from pprint import pprint\n",
    "import logging\nlogging.StreamHandler()\n",
    "import sys\nf = sys.stderr\n",
])
def test_the_checks_catch_every_way_to_the_terminal(source):
    assert terminal_writes(source), source


def test_the_checks_let_files_logging_and_flushes_be():
    assert not terminal_writes("import os, sys, logging\nlog = logging.getLogger(__name__)\n"
                               "log.warning('x')\nos.write(fd, b'x')\nopen('f', 'w').write('x')\n"
                               "sys.stdout.flush()\n")


def test_an_exemption_needs_a_cap_and_is_held_to_it(tmp_path):
    big = "x = 1\n" * (MAX_MODULE_LINES + 10)
    root = _package(tmp_path, {"interp/training/big.py": big})
    readme = root / "interp" / "training" / "README.md"
    readme.write_text("- `big.py` (about 410 lines): named, but no cap\n")
    assert oversized(root)
    readme.write_text(f"- `big.py` (at most {MAX_MODULE_LINES + 5} lines): a cap it exceeds\n")
    assert oversized(root)
    readme.write_text(f"- `big.py` (at most {CEILING_MODULE_LINES + 1} lines): above the ceiling\n")
    assert oversized(root)
    readme.write_text(f"- `big.py` (at most {MAX_MODULE_LINES + 20} lines): held\n")
    assert not oversized(root)
    body = "".join(f"    y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES + 5))
    (root / "interp" / "training" / "long.py").write_text(f"def long():\n{body}")
    assert oversized(root)
    readme.write_text(readme.read_text() + f"- `long` (at most {MAX_FUNCTION_LINES + 10} lines)\n")
    assert not oversized(root)


def pytest_module_name(path: Path) -> str:
    """The name pytest's default (prepend) import mode gives a test file: its basename, prefixed
    by every enclosing folder that holds an ``__init__.py``."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_test_files_import_under_distinct_names():
    """Two test files with one module name break collection ("import file mismatch"): the second
    is never run. A mirror of interp/ (tests/changed.py) can need two equal basenames; the
    folder then gets an ``__init__.py``, as tests/inspect/mechanism/ has."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(pytest_module_name(path), []).append(str(path.relative_to(ROOT)))
    assert not {k: v for k, v in seen.items() if len(v) > 1}


def test_the_name_check_sees_a_package_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "__init__.py").write_text("")
    assert pytest_module_name(tmp_path / "a" / "b" / "test_x.py") == "b.test_x"
    assert pytest_module_name(tmp_path / "a" / "test_x.py") == "test_x"
