"""The package's shape: stages as sub-packages, imports pointing down only, no circles, modules
and functions small enough to read (or explained in their folder's README)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "interp"
#: the stages, lowest first: a module may import from its own stage and the ones before it;
#: inspect and theory are siblings (neither imports the other)
RANK = {"core": 1, "training": 2, "inspect": 3, "theory": 3, "cli": 4}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every module's interp imports, those inside functions included."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("interp"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    is_module = (ROOT / (full.replace(".", "/") + ".py")).exists()
                    deps.add(full if is_module else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("interp")}
        graph[_module_name(path)] = deps - {_module_name(path)}
    return graph


def _stage(module: str) -> str | None:
    """The sub-package a module lives in; None for interp itself and its top-level files."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else None


def test_imports_point_down_only():
    wrong = []
    for module, deps in _imports().items():
        here = _stage(module)
        for dep in deps:
            there = _stage(dep)
            if here is None or there is None or there == here:
                continue  # interp/__init__ and interp/__main__ may name anything; same stage is fine
            if RANK[there] > RANK[here] or (RANK[there] == RANK[here]):
                wrong.append(f"{module} -> {dep}")
    assert not wrong, wrong


def test_no_import_circles():
    graph = _imports()
    state: dict[str, int] = {}
    circles = []

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if d == "interp":
                continue
            if state.get(d) == 1:
                circles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, circles


def _explained(folder: Path) -> str:
    readme = folder / "README.md"
    return readme.read_text() if readme.exists() else ""


def test_modules_and_functions_are_small_or_explained():
    too_big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        why = _explained(path.parent)
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES and f"`{path.name}`" not in why:
            too_big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and not re.search(rf"`{node.name}`", why):
                    too_big.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not too_big, "\n".join(too_big)


def test_printing_is_confined_to_the_cli():
    printing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if _stage(_module_name(path)) == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                printing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not printing, printing


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
