"""The sweep explorer: one offline HTML page to browse a sweep's seeds and what each one does.

:func:`write_explorer` reads a results store (:func:`interp.sweeps.store.read`), measures every
finished run that has a checkpoint (:func:`interp.inspect.analysis.measure`), labels it
(:func:`~interp.inspect.analysis.classify`, :func:`~interp.inspect.analysis.mechanism`) and
writes into ``DIR``:

==================== =========================================================================
index.html           the sweep's table (group, seed, accuracy, outcome, mechanism, the main
                     measures), its violins, the mechanism legend, a seed selector, and one
                     hidden section per seed: its mechanism verdict, attention on several
                     inputs, QK/OV heatmaps, probes and circle test, every measure
circuitsvis.js       circuitsvis's bundled script, written once and referenced by every view
violins.png          accuracy per d_token, one panel per config (seeds as dots)
measures.png         per-seed measures by outcome (:func:`interp.inspect.viz.plot_seed_measures`)
seeds/<id>/          the seed's ``circuits.png`` (QK and OV) and ``circles.png`` (embeddings)
==================== =========================================================================

A run whose checkpoint cannot be used (corrupt, missing, or with NaN/inf weights:
:func:`interp.training.checkpoints.load` refuses it) is skipped, and the page says which run and
why under "Skipped runs", so one bad checkpoint does not cost the page. Every file is written
whole or not at all (:func:`interp.training.files.write_file`).

``<id>`` is the run's name in the store. The page works from ``file://`` with no network:
``index.html#seed=<id>`` opens a seed, and the selector and the table's links set that hash. A
seed's attention views render (``renderViews``, :func:`interp.inspect.viz.html_page`) when its
section is first shown, so a sweep of many seeds opens quickly.
"""

from __future__ import annotations

import html
import logging
import math
import re
from pathlib import Path

from interp.inspect import analysis, circuits, labels, viz
from interp.training.files import save_figure, write_file

log = logging.getLogger(__name__)

INDEX = "index.html"
#: the sweep table's measure columns (every measure is in each seed's section)
TABLE_MEASURES = ("mass", "hit", "qk_diag", "ov_diag", "follow", "acc_any")
_JS = """
function showSeed(id) {
  var sections = document.querySelectorAll("section.seed"), shown = null;
  sections.forEach(function (s) { if (s.dataset.seed === id) shown = s; });
  if (!shown && sections.length) { shown = sections[0]; id = shown.dataset.seed; }
  if (!shown) return;
  sections.forEach(function (s) { s.hidden = s !== shown; });
  document.querySelectorAll("tr[data-seed]").forEach(function (r) {
    r.classList.toggle("selected", r.dataset.seed === id); });
  document.getElementById("seed-select").value = id;
  renderViews(shown);
}
function fromHash() { var m = /seed=([\\w-]+)/.exec(location.hash); showSeed(m ? m[1] : ""); }
window.addEventListener("hashchange", fromHash);
document.addEventListener("DOMContentLoaded", function () {
  document.getElementById("seed-select").addEventListener("change", function (e) {
    location.hash = "seed=" + e.target.value; });
  document.querySelectorAll("tr[data-seed]").forEach(function (r) {
    r.addEventListener("click", function () { location.hash = "seed=" + r.dataset.seed; }); });
  fromHash();
});
"""
_STYLE = """<style>
table.sweep, table.measures { border-collapse: collapse; font-size: 13px; }
table.sweep td, table.sweep th, table.measures td, table.measures th {
  border: 1px solid #ccc; padding: 2px 6px; }
table.sweep tr[data-seed] { cursor: pointer; } tr.selected { background: #fff3b0; }
section.seed { border-top: 3px solid #444; margin-top: 1.5em; } img { max-width: 100%; }
</style>
"""


def seed_id(name: str) -> str:
    """The run's name as an HTML id and URL fragment (letters, digits, '_' and '-')."""
    return re.sub(r"[^\w-]", "_", str(name))


def runs(store_path, where: dict | None = None):
    """The finished runs of a store that have a checkpoint (matching ``where``: field -> value
    strings), with ``group`` (:func:`interp.inspect.analysis.group_label`) and ``outcome``;
    ValueError, naming the store, when there are none."""
    from interp.sweeps import store

    path = analysis.find_store(store_path)
    df = store.read(path)
    if df.empty:
        raise ValueError(f"{path} holds no runs; run `interp sweep` first")
    df = df[(df.status == "ok") & df.checkpoint.map(lambda c: isinstance(c, str) and bool(c))]
    for k, v in (where or {}).items():
        if k not in df.columns:
            raise ValueError(f"where names {k!r}; accepted: one of {list(analysis.GROUP_FIELDS)}")
        df = df[df[k].astype(str) == str(v)]
    if df.empty:
        raise ValueError(f"no finished runs with a checkpoint in {path} match {where or {}}")
    df = df.copy()
    df["outcome"] = [analysis.classify(a, int(n)) for a, n in zip(df.accuracy, df.n)]
    df["group"] = [analysis.group_label(r) for _, r in df.iterrows()]
    return df.reset_index(drop=True)


def write_explorer(store_path, out_dir, *, where: dict | None = None, inputs: int = 3,
                   batch_size: int = 256, progress=None) -> Path:
    """Write the explorer of the module docstring into ``out_dir``; returns ``index.html``.

    ``store_path``: a sweep folder or a store file (:func:`interp.inspect.analysis.find_store`);
    ``inputs``: sampled inputs per attention view; ``batch_size``: inputs per measure. Bad
    arguments and empty stores raise ValueError before anything is measured or written.
    ``progress``: a wrapper ``progress(iterable, total=, desc=)`` (e.g. ``tqdm.tqdm``) that
    shows the seeds as they are measured; None: quiet.
    """
    import pandas as pd

    from interp.training import checkpoints

    viz.check_inputs(inputs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: a positive integer")
    df = runs(store_path, where)
    out = Path(out_dir)
    (out / "seeds").mkdir(parents=True, exist_ok=True)
    viz.write_circuitsvis_script(out)
    rows, sections, skipped = [], [], {}
    it = df.iterrows()
    if progress is not None:  # the CLI's bar: only interp.cli writes to the terminal
        it = progress(it, total=len(df), desc="exploring seeds")
    for _, r in it:
        try:
            model = checkpoints.load(r.checkpoint)
        except ValueError as e:  # corrupt or non-finite weights: this run only, said on the page
            log.warning("run %s skipped: %s", r["name"], e)
            skipped[r["name"]] = str(e)
            continue
        row = {k: r[k] for k in ("name", "group", *analysis.GROUP_FIELDS, "seed", "outcome")}
        row.update(accuracy=float(r.accuracy), id=seed_id(r["name"]))
        row.update(analysis.measure(model, int(r.case), int(r.n), batch_size=batch_size))
        row["mechanism"] = analysis.mechanism(row)
        sections.append(_seed_section(row, model, out, inputs))
        rows.append(row)
    table = pd.DataFrame(rows)
    path = analysis.find_store(store_path)  # DIR/results/store.sqlite: named after DIR
    title = f"Sweep explorer: {path.parent.parent.name if path.parent.name == 'results' else path.stem}"
    body = f"{_STYLE}<h1>{html.escape(title)}</h1>\n" + _skipped(skipped)
    if len(table):
        body += (f"<p>{len(table)} seeds in {table.group.nunique()} config(s); choose a seed below "
                 "or click a row.</p>\n" + _legend() + _sweep_table(table) + _selector(table)
                 + _sweep_figures(table, out) + "".join(sections))
    else:
        body += "<p>No run of this store could be shown (see above).</p>\n"
    page = viz.html_page(title, body, script_src=viz.CIRCUITSVIS_JS, js=_JS, render_on_load=False)
    index = write_file(out / INDEX, page)
    log.info("explorer of %d seeds written to %s (%d skipped)", len(table), index, len(skipped))
    return index


def _skipped(skipped: dict[str, str]) -> str:
    """The runs left out, each with why (the loader's one-line reason)."""
    if not skipped:
        return ""
    items = "".join(f"<li>run <code>{html.escape(str(name))}</code>: {html.escape(why)}</li>\n"
                    for name, why in skipped.items())
    return (f'<div class="skipped"><h2>Skipped runs</h2>\n<p>{len(skipped)} run(s) are not shown: '
            f"their checkpoint cannot be used.</p>\n<ul>\n{items}</ul>\n</div>\n")


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.3g}"
    return html.escape(str(v))


def _legend() -> str:
    items = "".join(f"<li><b>{k}</b>: {html.escape(v, quote=False)}</li>\n" for k, v in labels.MECHANISMS.items())
    return (f"<h2>Mechanisms</h2>\n<p>Labels of <code>interp.inspect.analysis.mechanism</code>, "
            f"read off each seed's measures:</p>\n<ul class=\"legend\">\n{items}</ul>\n")


def _sweep_table(table) -> str:
    cols = ["seed", "group", "accuracy", "outcome", "mechanism"]
    cols += [c for c in TABLE_MEASURES if c in table.columns]
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for _, r in table.iterrows():
        cells = [f'<td><a href="#seed={r.id}">{int(r.seed)}</a></td>']
        cells += [f"<td>{_fmt(r[c])}</td>" for c in cols[1:]]
        body.append(f'<tr data-seed="{r.id}">{"".join(cells)}</tr>\n')
    return (f"<h2>Seeds</h2>\n<table class=\"sweep\" id=\"sweep\">\n<tr>{head}</tr>\n"
            + "".join(body) + "</table>\n")


def _selector(table) -> str:
    groups = []
    for group, sub in table.groupby("group", sort=False):
        opts = "".join(f'<option value="{r.id}">seed {int(r.seed)} ({r.accuracy:.3f}, '
                       f"{r.mechanism})</option>" for _, r in sub.iterrows())
        groups.append(f'<optgroup label="{html.escape(group)}">{opts}</optgroup>')
    return (f'<p><label for="seed-select"><b>Seed:</b></label> <select id="seed-select">'
            f'{"".join(groups)}</select></p>\n')


def _sweep_figures(table, out: Path) -> str:
    table = table.assign(config=[f"case {r.case}, n={r.n}, {r.n_layers}L, PE {r.pos_embed}"
                                 for _, r in table.iterrows()])
    save_figure(viz.plot_violins(table, value="accuracy", by="d_token", panel="config",
                                 title="accuracy per seed"), out / "violins.png", dpi=90, close=True)
    save_figure(viz.plot_seed_measures(table, title="per-seed measures by outcome"),
                out / "measures.png", dpi=90, close=True)
    return ("<h2>Violins</h2>\n<img src=\"violins.png\" alt=\"accuracy per seed\">\n"
            "<img src=\"measures.png\" alt=\"per-seed measures by outcome\">\n")


def _seed_section(row: dict, model, out: Path, inputs: int) -> str:
    """One seed's section (hidden until selected); writes its figures under ``seeds/<id>/``."""
    sid, case, n = row["id"], int(row["case"]), int(row["n"])
    folder = out / "seeds" / sid
    folder.mkdir(parents=True, exist_ok=True)
    title = f"{row['group']}, seed {int(row['seed'])}"
    save_figure(viz.plot_circuits(circuits.qk_matrix(model, case, n), circuits.ov_matrix(model, case, n),
                                  title=title), folder / "circuits.png", dpi=80, close=True)
    save_figure(viz.plot_circles(model, case, n, title=title), folder / "circles.png", dpi=80, close=True)
    views = viz.attention_views(model, case, n, inputs=inputs, key=sid)
    return (f'<section class="seed" id="seed-{sid}" data-seed="{sid}" hidden>\n'
            f"<h2>{html.escape(title)}</h2>\n<p>run <code>{html.escape(str(row['name']))}</code>: "
            f"accuracy {row['accuracy']:.3f} ({row['outcome']})</p>\n"
            + viz.mechanism_html(row["mechanism"])
            + f"<h3>Attention on {inputs} input(s)</h3>\n{views}"
            + f'<h3>QK and OV circuits</h3>\n<img src="seeds/{sid}/circuits.png" alt="QK and OV">\n'
            + _probes(row) + f'<img src="seeds/{sid}/circles.png" alt="embedding circles">\n'
            + _measures(row) + "</section>\n")


def _probes(row: dict) -> str:
    """The cos/sin probes of every embedding table and of the final residual, and the circle
    test of the last layer's key vectors."""
    sources = [k[3:] for k, v in row.items() if k.startswith("r2_") and not math.isnan(v)]
    lines = "".join(f"<tr><td>{s}</td><td>{_fmt(row[f'r2_{s}'])}</td><td>{_fmt(row.get(f'm_{s}'))}"
                    f"</td><td>{_fmt(row.get(f'N_{s}'))}</td></tr>\n" for s in sources)
    return ("<h3>Probes</h3>\n<table class=\"measures\"><tr><th>table</th><th>held-out R^2</th>"
            f"<th>frequency m</th><th>angles N</th></tr>\n{lines}</table>\n"
            f"<p>Key vectors (last layer, after W_K): top-2 variance {_fmt(row['keys_top2'])}, "
            f"radius cv {_fmt(row['keys_rcv'])}, smallest gap / even gap {_fmt(row['keys_gap'])}, "
            f"cyclic order kept: {_fmt(row['keys_in_order'])}.</p>\n")


def _measures(row: dict) -> str:
    skip = {"name", "group", "id", *analysis.GROUP_FIELDS}
    cells = "".join(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>"
                    for k, v in row.items() if k not in skip)
    return ("<details><summary>Every measure (see <code>interp/inspect/analysis.py</code>)"
            f"</summary>\n<table class=\"measures\">{cells}</table>\n</details>\n")
