"""The notebooks: committed executed, with small outputs (circuitsvis's 1.3 MB script left out,
see interp/inspect/tools/notebook.py) and no machine paths; they run end to end (nbclient +
ipykernel) from a working folder outside the repository, leave nothing behind, and say again
what their committed outputs say (labels, counts of rows and columns, every word: numbers are
masked, since a float's last digits may differ on another CPU), so a stored output cannot go
stale; and their views render in headless Chromium when shown the way a notebook frontend
shows outputs."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "experiments" / "notebooks").glob("*.ipynb"))
#: third-party modules a notebook may use besides interp (the rest is the standard library)
ALLOWED = {"interp", "torch", "pandas", "IPython"}
#: the largest output (its JSON) and the largest notebook file, in bytes; circuitsvis's script
#: alone is 1.3 MB, a view a few KB, a figure some tens of KB
MAX_OUTPUT, MAX_NOTEBOOK = 200_000, 300_000
#: an absolute path of some machine in an output: /tmp/..., /work/..., /home/..., C:\...
MACHINE_PATH = re.compile(r"(?<![\w.:/-])/(tmp|work|home|Users|root|var|private|opt|mnt|usr)/|\b[A-Za-z]:\\")
#: what other libraries leave in the temporary folder on import (torch's compile cache)
FOREIGN_TEMP = ("torchinductor_",)


def _texts(output) -> list[str]:
    """Every text an output shows (images left out: base64 is not text to search)."""
    if output.output_type == "stream":
        return [output.text]
    if output.output_type == "error":
        return [output.ename, output.evalue, *output.traceback]
    return [v if isinstance(v, str) else json.dumps(v) for k, v in output.get("data", {}).items()
            if k.startswith("text/") or k.endswith("json")]


def check_outputs(nb, name: str) -> None:
    """No error, no output above MAX_OUTPUT bytes, no machine path in any output."""
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            where = f"{name}, cell {i}"
            assert output.output_type != "error", (where, output.get("evalue"))
            size = len(json.dumps(output))
            assert size <= MAX_OUTPUT, f"{where}: an output of {size} bytes (limit {MAX_OUTPUT})"
            for text in _texts(output):
                found = MACHINE_PATH.search(text)
                start = max(0, found.start() - 80) if found else 0
                assert not found and str(ROOT) not in text, (where, text[start:start + 200])


#: a number in an output's text (masked: its value may differ in the last digits on another CPU)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def _masked(text: str) -> str:
    return " ".join(NUMBER.sub("#", text).split())


def _table(html: str) -> list[list[str]]:
    """A DataFrame's HTML table row by row: header, index and cells, numbers masked."""
    return [[_masked(re.sub(r"<.*?>", "", cell)) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)]


def signature(nb) -> list[list[tuple]]:
    """Per code cell, what its outputs say that a fresh run must say again: stdout (chunks
    joined), each table's rows and labels, markdown and plain text, numbers masked; the kinds of
    the rest (figures, views). stderr (progress bars, warnings) is left out."""
    cells = []
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        items, stdout = [], ""
        for o in cell.outputs:
            if o.output_type == "stream":
                stdout += o.text if o.name == "stdout" else ""
                continue
            data = o.get("data", {})
            html = data.get("text/html", "")
            if 'class="dataframe"' in html:
                items.append(("table", _table(html)))
            elif "text/markdown" in data:
                items.append(("markdown", _masked(data["text/markdown"])))
            else:
                items.append((o.output_type, tuple(sorted(data)), _masked(data.get("text/plain", ""))))
        cells.append(([("stdout", _masked(stdout))] if stdout else []) + items)
    return cells


def test_the_signature_sees_a_label_a_row_and_a_word_but_not_a_float():
    def nb(html, text):
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
            nbformat.v4.new_output("stream", name="stdout", text=text),
            nbformat.v4.new_output("execute_result", data={"text/html": html, "text/plain": "t"})])])

    row = '<tr><th>{i}</th><td>{v}</td><td>{label}</td></tr>'
    table = '<table class="dataframe"><tr><th></th><th>acc</th><th>mechanism</th></tr>{}</table>'
    base = nb(table.format(row.format(i=0, v="0.997", label="lookup-codebook")), "235 of 512 inputs\n")
    assert signature(base) == signature(nb(table.format(row.format(i=0, v="0.998", label="lookup-codebook")),
                                           "236 of 512 inputs\n"))
    for html, text in [(table.format(row.format(i=0, v="0.997", label="construction")), "235 of 512 inputs\n"),
                       (table.format(row.format(i=0, v="0.997", label="lookup-codebook") * 2), "235 of 512 inputs\n"),
                       (table.format(row.format(i=0, v="0.997", label="lookup-codebook")), "235 of 512 seeds\n")]:
        assert signature(nb(html, text)) != signature(base)


def test_there_are_four_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_constructions.ipynb", "02_trained_vs_construction.ipynb", "03_bimodal_seeds.ipynb",
        "04_interventions.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_imports_only_interp_and_leaves_sys_path_alone(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(l for l in cell.source.splitlines() if not l.startswith("%"))  # magics
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [(node.module or "").split(".")[0]]
            else:
                continue
            for mod in mods:
                assert mod in ALLOWED or mod in sys.stdlib_module_names, (path.name, mod)
        assert "sys.path" not in cell.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_executed_with_small_outputs(path):
    """Executed top to bottom in one kernel (execution counts 1, 2, ...), so a reader sees the
    results on opening it; small, and free of machine paths."""
    size = path.stat().st_size
    assert size <= MAX_NOTEBOOK, f"{path.name}: {size} bytes (limit {MAX_NOTEBOOK})"
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
        f"{path.name} is not stored executed in order; run `jupyter nbconvert --to notebook "
        f"--execute --inplace {path.relative_to(ROOT)}`")
    assert sum(len(c.outputs) for c in code) >= len(code) // 2
    check_outputs(nb, path.name)


#: a view's picture (interp.inspect.tools.notebook.View.png), in bytes
MAX_PNG = 60_000
#: the calls that show attention views (interp.inspect.tools.notebook's functions returning a View)
VIEW_CALLS = {"attention", "side_by_side"}


def _calls_a_view(source: str) -> bool:
    source = "\n".join(l for l in source.splitlines() if not l.startswith("%"))  # magics
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr in VIEW_CALLS and isinstance(node.func.value, ast.Name)
               and node.func.value.id == "notebook" for node in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_committed_view_has_its_picture(path):
    """Every code cell that calls notebook.attention or notebook.side_by_side keeps, after the
    view's HTML, a PNG output: what GitHub shows, since it runs no scripts. The PNG is decoded
    (Pillow), small, and not blank."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and _calls_a_view(c.source)]
    for cell in cells:
        kinds = [sorted(o.get("data", {})) for o in cell.outputs]
        html = [i for i, k in enumerate(kinds) if "text/html" in k and "interp-cv" in cell.outputs[i].data["text/html"]]
        assert html, (path.name, cell.source, kinds)
        for i in html:
            assert i + 1 < len(kinds) and "image/png" in kinds[i + 1], (path.name, cell.source, kinds)
            png = base64.b64decode(cell.outputs[i + 1].data["image/png"])
            assert len(png) <= MAX_PNG, (path.name, len(png))
            pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
            assert pixels.shape[0] >= 150 and pixels.shape[1] >= 300, pixels.shape
            assert 0.02 < (pixels < 200).mean() < 0.8, (path.name, (pixels < 200).mean())  # drawn on, not blank


def test_the_notebooks_show_views():
    """The check above has something to check: notebooks 01-04 all show views."""
    shown = [p.stem for p in NOTEBOOKS
             if any(_calls_a_view(c.source) for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")]
    assert shown == [p.stem for p in NOTEBOOKS], shown


# ------------------------------------------------------------------ notebook 03's bimodal cell

CELL = ROOT / "experiments" / "notebooks" / "bimodal-cell"


def test_notebook_03s_cell_is_table_2s_bimodal_cell():
    """configs.py declares Table 2's cell n = 10, two layers, d_token 32 (the same run names),
    cells.py picks that cell from the committed per-seed results, and Table 2's report line for
    it has a seed >= 99% and a seed below 2/n = 20% (read here from the report's text)."""
    import runpy

    from interp import sweeps

    ours = sorted(c.name() for c in sweeps.load(CELL).configs)
    table2 = sorted(c.name() for c in sweeps.load(ROOT / "experiments" / "table2").configs
                    if (c.n, c.n_layers, c.d_token) == (10, 2, 32))
    assert ours == table2 and len(ours) == 5
    chosen = runpy.run_path(str(CELL / "cells.py"))["bimodal_cells"](ROOT)[0]
    assert (chosen["source"], chosen["cell"]) == ("experiments/table2/report.md", "n 10, n_layers 2, d_token 32")
    line = next(l for l in (ROOT / "experiments" / "table2" / "report.md").read_text().splitlines()
                if l.startswith("| 10 | 2 | 32 | 5/5 |"))
    accs = [float(x.split(":")[1]) for x in line.split("|")[5].split(",")]
    assert max(accs) >= 99 and min(accs) < 20 and chosen["accuracy"] == dict(enumerate(accs))


def test_notebook_03s_committed_models_are_small_checked_and_bimodal():
    """The store's rows and checkpoint files match their checksums, weigh well under 1 MB, and
    the five models split when measured here: each checkpoint's answers on 1024 fresh inputs,
    scored against tasks.answers (the plain-Python lookup of f(i*)), are >= 97% right for some
    seeds and at most 2/n = 20% for another."""
    import torch

    from interp import sweeps
    from interp.core import tasks
    from interp.inspect.tools import hooks
    from interp.sweeps import store
    from interp.training import checkpoints

    data = [p for p in CELL.rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert sum(p.stat().st_size for p in data) < 500_000, sum(p.stat().st_size for p in data)
    assert store.verify(CELL / "store.sqlite", files=True)
    runs = store.read(CELL / "store.sqlite")
    assert sorted(runs.name) == sorted(c.name() for c in sweeps.load(CELL).configs)
    tokens = hooks.sample_inputs(5, 10, 1024, seed=11)
    accuracy = {}
    for run in runs.itertuples():
        with torch.no_grad():
            said = checkpoints.load(run.checkpoint)(tokens)[:, -1].argmax(-1)
        accuracy[run.seed] = float((said == tasks.answers(5, 10, tokens)).float().mean())
    assert any(a >= 0.97 for a in accuracy.values()) and any(a <= 0.2 for a in accuracy.values()), accuracy


def test_notebook_03_shows_successful_and_failed_seeds_side_by_side():
    """The committed notebook's view puts a successful and a failed seed of the cell next to
    each other, titled with the outcome and accuracy computed when it ran."""
    nb = nbformat.read(ROOT / "experiments" / "notebooks" / "03_bimodal_seeds.ipynb", as_version=4)
    views = [o.data["text/html"] for c in nb.cells if c.cell_type == "code" and "side_by_side" in c.source
             for o in c.outputs if "text/html" in o.get("data", {})]
    assert len(views) == 1
    titles = re.findall(r"<h4>seed (\d): (success|failed|partial) \((\d+\.\d)%\)", views[0])
    outcomes = {outcome for _, outcome, _ in titles}
    assert {"success", "failed"} <= outcomes, titles
    for _, outcome, pct in titles:
        assert (float(pct) >= 99) if outcome == "success" else (float(pct) < 99), titles
    assert all(float(pct) < 20 for _, outcome, pct in titles if outcome == "failed"), titles


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_anywhere_says_what_it_stores_and_cleans_up(path, tmp_path, monkeypatch):
    """Run in a kernel whose working folder is outside the repository and whose temporary
    folder is empty: every output says what the committed notebook's says (:func:`signature`),
    the temporary folder holds nothing of the notebook's afterwards, the notebooks' folder (and
    03's committed store beside it) has no new files, and the outputs pass the checks of the
    committed notebooks."""
    temp, work = tmp_path / "tmp", tmp_path / "elsewhere"
    temp.mkdir()
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the kernel inherits it (tempfile.gettempdir)
    before = sorted(path.parent.rglob("*"))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    check_outputs(nb, path.name)
    stored, fresh = signature(nbformat.read(path, as_version=4)), signature(nb)
    for i, (was, now) in enumerate(zip(stored, fresh, strict=True)):
        assert was == now, (f"{path.name}, code cell {i + 1}: a fresh run says otherwise; re-run the "
                            "notebook and commit it (jupyter nbconvert --to notebook --execute --inplace)", was, now)
    assert not list(work.iterdir()), f"{path.name} wrote into its working folder"
    left = [p.name for p in temp.iterdir() if not p.name.startswith(FOREIGN_TEMP)]
    assert not left, f"{path.name} left {left} in its temporary folder"
    assert sorted(path.parent.rglob("*")) == before


# ------------------------------------------------------------------ the views in a frontend

#: one page standing in for a notebook frontend (JupyterLab's renderHTML): each output's HTML is
#: set as innerHTML, its scripts re-created so that they run, and the output attached; STEPS
#: then shows and updates outputs; the title reports which views circuitsvis rendered
_FRONTEND = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><div id="nb"></div>
<script>window.onerror = function (m) { document.title = "error: " + m; };</script>
<script>
var outs = OUTPUTS;
function show(src) {
  var host = document.createElement("div");
  host.innerHTML = src;
  Array.from(host.getElementsByTagName("script")).forEach(function (s) {
    var c = document.createElement("script");
    Array.from(s.attributes).forEach(function (a) { c.setAttribute(a.name, a.value); });
    c.textContent = s.textContent; s.parentNode.replaceChild(c, s);
  });
  document.getElementById("nb").appendChild(host);
  return host;
}
STEPS
setTimeout(function () {
  var views = Array.from(document.querySelectorAll(".cv-view"));
  var notes = Array.from(document.querySelectorAll(".interp-cv-pending"));
  if (!document.title) document.title = JSON.stringify({
    rendered: views.filter(function (v) { return v.dataset.rendered && v.children.length; }).length,
    views: views.length, notes: notes.filter(function (p) { return p.style.display !== "none"; }).length,
    tables: document.querySelectorAll("table.attn").length});
}, 1500);
</script></body></html>"""


def _frontend(outputs, steps: str, tmp_path) -> dict:
    """What the page reports after ``steps`` (JavaScript over ``outs`` and ``show``)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed: apt-get install -y chromium (make test installs it)"
    page = tmp_path / "frontend.html"
    data = json.dumps([o._repr_html_() for o in outputs]).replace("</", "<\\/")
    page.write_text(_FRONTEND.replace("OUTPUTS", data).replace("STEPS", steps), encoding="utf-8")
    out = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
         page.as_uri()], check=True, capture_output=True, timeout=120, text=True)
    title = re.search(r"<title>(.*?)</title>", out.stdout, re.S)
    assert title and title.group(1).startswith("{"), title and title.group(1)
    return json.loads(title.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def outputs():
    from interp.core import constructions
    from interp.inspect.tools import notebook

    model = constructions.build(5, 6)
    one = notebook.attention(model, inputs=2, title="case 5", mechanism="construction")
    two = notebook.side_by_side([("a", model, "construction"), ("b", model, None)], inputs=1)
    return notebook.script(), one, two, notebook.script_note()


def test_views_are_small_and_the_script_is_shown_once(outputs):
    script, one, two, note = outputs
    bundle = "var CircuitsVis="
    assert bundle in script._repr_html_() and len(script._repr_html_()) > 1_000_000
    for small in (one, two, note):
        assert bundle not in small._repr_html_() and len(small._repr_html_()) < 50_000
        assert not repr(small).startswith("Html(")  # a short text/plain stand-in
    from interp.core import constructions
    from interp.inspect.tools import notebook

    inlined = notebook.attention(constructions.build(5, 6), inputs=1, inline=True)
    assert bundle in inlined._repr_html_()  # for frontends that frame every output (Colab)
    with pytest.raises(ValueError, match="mechanism="):
        notebook.side_by_side([("a", constructions.build(5, 6), "backwards")])


def test_views_render_while_the_notebook_runs_and_after_the_script_is_dropped(outputs, tmp_path):
    """As in a notebook: the script's output, views, the script's output replaced by the note
    (the last cell), then a view shown later in the same session: all three views render."""
    got = _frontend(outputs, "var s = show(outs[0]); show(outs[1]); s.innerHTML = outs[3]; show(outs[2]);",
                    tmp_path)
    assert got == {"rendered": 4, "views": 4, "notes": 0, "tables": 4}, got


def test_a_saved_notebook_shows_tables_and_renders_when_the_script_comes_back(outputs, tmp_path):
    """Reopened without the script, the views show their tables and the note; showing the
    script again (re-running the first cell) renders every view already on the page."""
    saved = _frontend(outputs, "show(outs[3]); show(outs[1]); show(outs[2]);", tmp_path)
    assert saved == {"rendered": 0, "views": 4, "notes": 2, "tables": 4}, saved
    rerun = _frontend(outputs, "show(outs[1]); show(outs[2]); show(outs[0]);", tmp_path)
    assert rerun == {"rendered": 4, "views": 4, "notes": 0, "tables": 4}, rerun
