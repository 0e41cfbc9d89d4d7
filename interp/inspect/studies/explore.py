"""The sweep explorer: one offline HTML page to browse a sweep's seeds and what each one does.

:func:`write_explorer` reads a results store (:func:`interp.sweeps.store.read`), measures every
finished run that has a checkpoint (:func:`interp.inspect.mechanism.measure.measure`), labels it
(:func:`~interp.inspect.studies.analysis.classify`, :func:`~interp.inspect.studies.analysis.mechanism`) and
writes into ``DIR``:

==================== =========================================================================
index.html           titled after the sweep (the ``sweep`` its runs recorded), the sweep's
                     table (group, seed, accuracy, outcome, mechanism, the main measures),
                     its violins, the mechanism legend, a seed selector, and one hidden
                     section per seed, about a screen tall: its mechanism verdict, a compact
                     attention view (per input, the final query's attention row as a small
                     heatmap), a "show all" button for circuitsvis's full views, its loss
                     curve under them (an inline SVG, :func:`interp.inspect.tools.curves.curve_svg`:
                     log loss by step, the stop step marked), probes beside, QK/OV heatmaps
                     and embedding circles side by side, every measure
circuitsvis.js       circuitsvis's bundled script, written once and referenced by every view
violins.png          accuracy per d_token, one panel per config (seeds as dots)
measures.png         per-seed measures by outcome (:func:`interp.inspect.tools.viz.plot_seed_measures`)
seeds/<id>/          the seed's ``circuits.png`` (QK and OV) and ``circles.png`` (embeddings)
==================== =========================================================================

A run whose checkpoint cannot be used is skipped, and the page says which run, its folder and
why under "Skipped runs", so one bad checkpoint does not cost the page: a folder that is not the
run's (:func:`interp.sweeps.store.checked_checkpoint`: files that do not hash as the store
recorded, swapped with another run's or replaced, a ``config.json`` of another run, case or
shape), corrupt or missing, with NaN/inf weights (:func:`interp.training.checkpoints.load`), or
a model the measures refuse. Every file is written
whole or not at all (:func:`interp.training.files.write_file`).

``<id>`` is the run's name in the store. The page works from ``file://`` with no network:
``index.html#seed=<id>`` opens a seed, and the selector and the table's links set that hash; a
``#seed=`` naming no seed (or any other ``#...``) is said so on the page, above the first seed
shown instead. Seeds are listed by group in numeric order
(:func:`interp.inspect.mechanism.labels.sort_by_group`). A seed's circuitsvis views render
(``renderViews``, :func:`interp.inspect.tools.viz.html_page`) only when its "show all" button opens
them, so a sweep of many seeds opens quickly and a seed fits a screen.

When the sweep has a mechanism atlas (``interp atlas``'s ``atlas.csv``: ``atlas=PATH``, or one
found in or beside ``DIR``, in the sweep folder or beside the store), the page also has an
"Atlas" section (:mod:`interp.inspect.studies.explore_atlas`): its phase diagrams as clickable grids,
a cell listing its seeds with links to their views here; an atlas that does not list some of the
runs shown (older than its store) is marked so. Without one the page is unchanged.
"""

from __future__ import annotations

import html
import logging
import math
import re
from pathlib import Path

from interp.inspect.mechanism import labels
from interp.inspect.studies import analysis, atlas_cache, explore_atlas, explore_timeline
from interp.inspect.tools import circuits, curves, hooks, viz
from interp.sweeps import store
from interp.training.files import save_figure, write_file

log = logging.getLogger(__name__)

INDEX = "index.html"
#: the sweep table's measure columns (every measure is in each seed's section)
TABLE_MEASURES = ("mass", "hit", "qk_diag", "ov_diag", "follow", "acc_any")
_JS = """
var SHOW = "show all attention views (circuitsvis, every layer)", HIDE = "hide the full attention views";
function note(text) { var el = document.getElementById("hash-note"); el.textContent = text; el.hidden = !text; }
function named(s) { return s.querySelector("h2").textContent + " (run " + s.dataset.seed + ")"; }
function showSeed(id, asked) {
  var sections = document.querySelectorAll("section.seed"), shown = null;
  sections.forEach(function (s) { if (s.dataset.seed === id) shown = s; });
  if (!shown && sections.length) shown = sections[0];
  if (!shown) return;
  if (asked !== undefined && shown.dataset.seed !== asked) {
    note("No seed named '" + asked + "' in this sweep; showing the first seed, " + named(shown) +
         ". Pick one below or click a row of the table."); }
  id = shown.dataset.seed;
  sections.forEach(function (s) { s.hidden = s !== shown; });
  document.querySelectorAll("tr[data-seed]").forEach(function (r) {
    r.classList.toggle("selected", r.dataset.seed === id); });
  document.getElementById("seed-select").value = id;
}
function fromHash() {
  var h = location.hash.replace(/^#/, "");
  try { h = decodeURIComponent(h); } catch (e) { }
  note("");
  var m = /^seed=(.*)$/.exec(h);
  if (m) { showSeed(m[1], m[1]); return; }
  showSeed("");
  var first = document.querySelector("section.seed");
  if (h) note("The address asks for '#" + h + "', which this page does not know (it opens a " +
              "seed with #seed=<run name>); showing the first seed" +
              (first ? ", " + named(first) : "") + ".");
}
function toggleFull(button) {
  var full = button.closest("section.seed").querySelector("div.full");
  full.hidden = !full.hidden;
  button.textContent = full.hidden ? SHOW : HIDE;
  button.setAttribute("aria-expanded", full.hidden ? "false" : "true");
  if (!full.hidden) renderViews(full);
}
window.addEventListener("hashchange", fromHash);
document.addEventListener("DOMContentLoaded", function () {
  var select = document.getElementById("seed-select");
  if (select) select.addEventListener("change", function (e) { location.hash = "seed=" + e.target.value; });
  document.querySelectorAll("tr[data-seed]").forEach(function (r) {
    r.addEventListener("click", function () { location.hash = "seed=" + r.dataset.seed; }); });
  document.querySelectorAll("button.show-all").forEach(function (b) {
    b.textContent = SHOW; b.addEventListener("click", function () { toggleFull(b); }); });
  fromHash();
});
"""
_STYLE = """<style>
table.sweep, table.measures { border-collapse: collapse; font-size: 13px; }
table.sweep td, table.sweep th, table.measures td, table.measures th {
  border: 1px solid #ccc; padding: 2px 6px; }
table.sweep tr[data-seed] { cursor: pointer; } tr.selected { background: #fff3b0; }
section.seed { border-top: 3px solid #444; margin-top: 1.5em; } img { max-width: 100%; }
.note { background: #fff3b0; border: 1px solid #c9a400; padding: 4px 8px; }
.row { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.row > div { flex: 1 1 0; min-width: 0; } div.scroll { overflow-x: auto; max-width: 100%; }
p.key { font-size: 12px; margin: 2px 0; max-width: 40em; }
table.compact { border-collapse: collapse; font-size: 11px; margin: 2px 0; }
table.compact td, table.compact th { border: 1px solid #ccc; padding: 0 3px; text-align: center; }
table.compact td.what { text-align: left; white-space: nowrap; }
</style>
"""


def seed_id(name: str) -> str:
    """The run's name as an HTML id and URL fragment (letters, digits, '_' and '-')."""
    return re.sub(r"[^\w-]", "_", str(name))


def runs(store_path, where: dict | None = None):
    """The finished runs of a store that have a checkpoint (matching ``where``: field -> value
    strings), with ``group`` (:func:`interp.inspect.studies.analysis.group_label`) and ``outcome``;
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
    return labels.sort_by_group(df)


def write_explorer(store_path, out_dir, *, where: dict | None = None, inputs: int = 3,
                   batch_size: int = 256, progress=None, atlas=None) -> Path:
    """Write the explorer of the module docstring into ``out_dir``; returns ``index.html``.

    ``store_path``: a sweep folder or a store file (:func:`interp.inspect.studies.analysis.find_store`);
    ``inputs``: sampled inputs per attention view; ``batch_size``: inputs per measure. Bad
    arguments and empty stores raise ValueError before anything is measured or written.
    ``progress``: a wrapper ``progress(iterable, total=, desc=)`` (e.g. ``tqdm.tqdm``) that
    shows the seeds as they are measured; None: quiet. ``atlas``: the ``atlas.csv`` to show
    (default: one found as the module docstring says; a file that is no atlas table raises).
    """
    import pandas as pd

    viz.check_inputs(inputs)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: a positive integer")
    df = runs(store_path, where)
    out = Path(out_dir)
    found = explore_atlas.load(store_path, out, atlas, names=df["name"])  # before any work
    timelines, cells = explore_timeline.prepare(store_path, df, out)  # the table, a figure per cell
    (out / "seeds").mkdir(parents=True, exist_ok=True)
    viz.write_circuitsvis_script(out)
    rows, sections, skipped = [], [], {}
    it = df.iterrows()
    if progress is not None:  # the CLI's bar: only interp.cli writes to the terminal
        it = progress(it, total=len(df), desc="exploring seeds")
    store_file = analysis.find_store(store_path)
    for _, r in it:
        try:
            row, model = _measured(store_file, r, batch_size)
        except ValueError as e:  # this run only, said on the page with its folder
            why = str(e) if isinstance(e, store.CheckpointMismatch) else f"checkpoint folder {r.checkpoint}: {e}"
            log.warning("run %s skipped: %s", r["name"], why)
            skipped[r["name"]] = why
            continue
        timeline = explore_timeline.section(timelines, r["name"], out / "seeds" / row["id"], r, cells)
        sections.append(_seed_section(row, model, out, inputs, _loss_curve(r) + timeline))
        rows.append(row)
    table = pd.DataFrame(rows)
    atlas_html = "" if found is None else explore_atlas.section(
        found[1], found[0], {r["name"]: r["id"] for r in rows}, store_runs=df["name"],
        checksums={str(r["name"]): atlas_cache.run_checksum(r["checksums"]) for _, r in df.iterrows()})
    path = analysis.find_store(store_path)
    title = f"Sweep explorer: {analysis.sweep_name(df, path)}"  # whatever form the path took
    body = (f"{_STYLE}<h1>{html.escape(title)}</h1>\n<p>store <code>{html.escape(str(path))}"
            '</code></p>\n<p id="hash-note" class="note" role="status" hidden></p>\n'
            + _skipped(skipped))
    if len(table):
        body += (f"<p>{len(table)} seeds in {table.group.nunique()} config(s); choose a seed below "
                 "or click a row.</p>\n" + _legend() + atlas_html + _sweep_table(table) + _selector(table)
                 + _sweep_figures(table, out) + "".join(sections))
    else:
        body += "<p>No run of this store could be shown (see above).</p>\n" + atlas_html
    page = viz.html_page(title, body, script_src=viz.CIRCUITSVIS_JS, render_on_load=False,
                         js=_JS + (explore_atlas.JS if atlas_html else ""))
    index = write_file(out / INDEX, page)
    log.info("explorer of %d seeds written to %s (%d skipped)", len(table), index, len(skipped))
    if not len(table):  # nothing could be read: the page says why, the command fails (issue 55)
        raise ValueError(f"no run of {path} could be shown: {len(skipped)} skipped, each named in {index}")
    return index


def _measured(store_file, r, batch_size: int) -> tuple[dict, object]:
    """(the seed's row of measures, its model) for the store row ``r``: its checkpoint folder
    checked against the row first (checksums, config: :func:`interp.sweeps.store.checked_checkpoint`),
    so a swapped, replaced or foreign checkpoint is never measured as this run; then loaded
    (finite weights) and measured with the store's case and n (checked against the model's)."""
    from interp.sweeps import store

    model = store.checked_model(store_file, r)  # files, config.json, shape, accuracy (issues 43, 55)
    row = {k: r[k] for k in ("name", "group", *analysis.GROUP_FIELDS, "seed", "outcome")}
    row.update(accuracy=float(r.accuracy), id=seed_id(r["name"]))
    row.update(analysis.measure(model, case=int(r.case), n=int(r.n), batch_size=batch_size))
    row.update(labels.labels_of(row))  # routing, code, key_code, mechanism (issue 42)
    return row, model


def _skipped(skipped: dict[str, str]) -> str:
    """The runs left out, each with why (the loader's one-line reason)."""
    if not skipped:
        return ""
    items = "".join(f"<li>run <code>{html.escape(str(name))}</code>: {html.escape(why)}</li>\n"
                    for name, why in skipped.items())
    return (f'<div class="skipped"><h2>Skipped runs</h2>\n<p>{len(skipped)} run(s) are not shown: '
            f"their checkpoint cannot be used.</p>\n<ul>\n{items}</ul>\n</div>\n")


def _fmt(v, key: str = "") -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and key.startswith("r2_") and not math.isnan(v):
        return html.escape(labels.r2_text(v, ".3g"))  # a floored R^2 says so
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.3g}"
    return html.escape(str(v))


def _legend() -> str:
    items = "".join(f"<li><b>{k}</b>: {html.escape(v, quote=False)}</li>\n" for k, v in labels.MECHANISMS.items())
    return (f"<h2>Mechanisms</h2>\n<p>Labels of <code>interp.inspect.mechanism.levels.mechanism</code> (the "
            f"routing and the code together), read off each seed's measures:</p>\n<ul class=\"legend\">\n{items}</ul>\n")


def _sweep_table(table) -> str:
    cols = ["seed", "group", "accuracy", "outcome", "mechanism", "routing", "code"]
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


def _loss_curve(r) -> str:
    """The store row ``r``'s loss curve as the seed view shows it (:func:`curves.curve_svg`),
    with a line saying how the run stopped; a note where the run stored no curve."""
    stop_loss = r.get("stop_loss")  # NaN or None: a store from before the field (its default)
    stop_loss = 0.01 if stop_loss is None or math.isnan(stop_loss) else float(stop_loss)
    run = dict(curve=list(r["curve"] or []), steps=r["steps"], status=r["status"],
               config={"stop_loss": stop_loss})
    svg = curves.curve_svg(run)
    if not svg.startswith("<svg"):
        return f"<h3>Loss curve</h3>\n{svg}"
    how = curves.stop_text(run)
    return (f"<h3>Loss curve</h3>\n{svg}<p class=\"key\">{html.escape(how[:1].upper() + how[1:])} "
            "(the red mark: a dot, below the stop loss; a cross, out of steps or failed).</p>\n")


def _seed_section(row: dict, model, out: Path, inputs: int, loss_curve: str = "") -> str:
    """One seed's section (hidden until selected); writes its figures under ``seeds/<id>/``;
    ``loss_curve``: the HTML of its loss curve (:func:`_loss_curve`), under the attention view."""
    sid, own = row["id"], dict(case=int(row["case"]), n=int(row["n"]))
    folder = out / "seeds" / sid
    folder.mkdir(parents=True, exist_ok=True)
    title = f"{row['group']}, seed {int(row['seed'])}"
    save_figure(viz.plot_circuits(circuits.qk_matrix(model, **own), circuits.ov_matrix(model, **own),
                                  title=title), folder / "circuits.png", dpi=80, close=True)
    save_figure(viz.plot_circles(model, title=title, **own), folder / "circles.png", dpi=80, close=True)
    tokens = hooks.sample_inputs(own["case"], own["n"], inputs, seed=0)  # the same in both views
    views = viz.attention_views(model, tokens, inputs=inputs, key=sid, **own)
    return (f'<section class="seed" id="seed-{sid}" data-seed="{sid}" hidden>\n'
            f"<h2>{html.escape(title)}</h2>\n<p>run <code>{html.escape(str(row['name']))}</code>: "
            f"accuracy {row['accuracy']:.3f} ({row['outcome']}); routing <b>{row['routing']}</b>, code: "
            f"values <b>{row['code']}</b>, target key <b>{row['key_code']}</b></p>\n"
            + viz.mechanism_html(row["mechanism"])
            + f'<div class="row">\n<div>\n<h3>Attention on {inputs} input(s)</h3>\n'
            + compact_attention(model, tokens, **own)
            + '<p><button type="button" class="show-all" aria-expanded="false">show all</button></p>\n'
            + f"{loss_curve}</div>\n<div>\n{_probes(row)}</div>\n</div>\n"
            + f'<div class="full" hidden>\n{views}</div>\n'
            + "<h3>QK and OV circuits; the embeddings on their circles</h3>\n<div class=\"row\">"
            + f'<div><img src="seeds/{sid}/circuits.png" alt="QK and OV"></div>'
            + f'<div><img src="seeds/{sid}/circles.png" alt="embedding circles"></div></div>\n'
            + _measures(row) + "</section>\n")


def compact_attention(model, tokens, *, case: int, n: int) -> str:
    """A seed's attention in a few lines: per input (``tokens`` [batch, pos]), the target, the
    answer and the model's, and the last layer's attention from the final position (the query)
    to every position as a small heatmap under the positions' tokens; the construction's
    position outlined, the model's argmax in bold red (:func:`interp.inspect.tools.viz.html_page`'s
    classes). circuitsvis shows every layer and query (the "show all" views)."""
    task, n = hooks.check_model(model, case=case, n=n)
    view = hooks.read(task.case, n, tokens)
    said = hooks.predictions(model, tokens)
    rows = hooks.attention_patterns(model, tokens)[-1, :, -1]  # last layer, final query: [batch, key_pos]
    lines = []
    for k in range(len(tokens)):
        names = task.position_labels(n, tokens[k:k + 1])
        built, top = int(view.attended[k]), int(rows[k].argmax())
        answer, model_says = int(view.answer[k]), int(said[k])
        wrong = "" if model_says == answer else ' class="wrong"'
        weights = [float(w) for w in rows[k]]
        lines.append(f'<tr><th rowspan="2">{k + 1}</th><td class="what" rowspan="2">i* = '
                     f"{int(view.target[k])}, f(i*) = {answer}, model <span{wrong}>{model_says}</span></td>"
                     + "".join(_cell(p, built, top, html.escape(lab)) for p, lab in enumerate(names))
                     + "</tr>\n<tr>" + "".join(_cell(p, built, top, f"{w:.2f}", _shade(w))
                                               for p, w in enumerate(weights)) + "</tr>\n")
    return ('<p class="key">Per input: the positions\' tokens, then the last layer\'s attention from '
            "the final position (darker: more); outlined: where the construction attends, bold red: "
            'the model\'s argmax.</p>\n<div class="scroll"><table class="compact">\n'
            + "".join(lines) + "</table></div>\n")


def _cell(p: int, built: int, top: int, body: str, style: str = "") -> str:
    """A compact view's cell at position ``p``: outlined where the construction attends
    (``built``), bold red at the model's argmax (``top``)."""
    marks = [c for c, on in (("construction", p == built), ("argmax", p == top)) if on]
    cls = f' class="{" ".join(marks)}"' if marks else ""
    return f"<td{cls}{style}>{body}</td>"


def _shade(weight: float) -> str:
    """A heatmap cell's colour for an attention weight in [0, 1]."""
    ink = "; color: white" if weight > 0.55 else ""
    return f' style="background: rgba(31, 119, 180, {weight:.2f}){ink}"'


def _probes(row: dict) -> str:
    """The cos/sin probes of every embedding table and of the final residual, and the circle
    test of the last layer's key vectors."""
    sources = [k[3:] for k, v in row.items() if k.startswith("r2_") and not math.isnan(v)]
    lines = "".join(f"<tr><td>{s}</td><td>{_fmt(row[f'r2_{s}'], 'r2_')}</td><td>{_fmt(row.get(f'm_{s}'))}"
                    f"</td><td>{_fmt(row.get(f'N_{s}'))}</td></tr>\n" for s in sources)
    return ("<h3>Probes</h3>\n<table class=\"measures\"><tr><th>table</th><th>held-out R^2</th>"
            f"<th>frequency m</th><th>angles N</th></tr>\n{lines}</table>\n"
            f"<p>Key vectors (last layer, after W_K): top-2 variance {_fmt(row['keys_top2'])}, "
            f"radius cv {_fmt(row['keys_rcv'])}, smallest gap / even gap {_fmt(row['keys_gap'])}, "
            f"cyclic order kept: {_fmt(row['keys_in_order'])}.</p>\n")


def _measures(row: dict) -> str:
    skip = {"name", "group", "id", *analysis.GROUP_FIELDS}
    cells = "".join(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v, k)}</td></tr>"
                    for k, v in row.items() if k not in skip)
    return ("<details><summary>Every measure (see <code>interp/inspect/studies/analysis.py</code>)"
            f"</summary>\n<table class=\"measures\">{cells}</table>\n</details>\n")
