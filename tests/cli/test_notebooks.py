"""The notebooks run end to end (nbclient + ipykernel, INTERP_QUICK=1) and are stored clean."""

import ast
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "experiments" / "notebooks").glob("*.ipynb"))
#: third-party modules a notebook may use besides interp (the rest is the standard library)
ALLOWED = {"interp", "torch", "pandas", "IPython"}


def test_there_are_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_constructions.ipynb", "02_trained_vs_construction.ipynb", "03_bimodal_seeds.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs_and_imports_only_interp(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [] and cell.execution_count is None
        source = "\n".join(l for l in cell.source.splitlines() if not l.startswith("%"))  # magics
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [(node.module or "").split(".")[0]]
            else:
                continue
            for mod in mods:
                assert mod in ALLOWED or mod in sys.stdlib_module_names, (path.name, mod)
        assert "sys.path" not in cell.source


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_end_to_end(path, monkeypatch):
    monkeypatch.setenv("INTERP_QUICK", "1")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert any(c.outputs for c in nb.cells if c.cell_type == "code")
