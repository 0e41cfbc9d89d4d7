"""The explorer's atlas view (issue 29): a sweep's mechanism atlas as clickable grids.

``interp atlas`` (:func:`interp.inspect.studies.atlas.write_atlas`) writes ``atlas.csv``, one row per
seed: its cell (case, n, d_token, layers, architecture, function), accuracy, steps, outcome and
mechanism label. When a sweep has one, the explorer page (:mod:`interp.inspect.studies.explore`) gains
an "Atlas" section from :func:`section`:

* one grid per panel (:func:`interp.inspect.studies.atlas_figures.panels`: case, layers, architecture,
  function), n down and d_token across in numeric order;
* each cell that was run is a button coloured by its success fraction (the colours of
  ``atlas-success.png``) and showing :func:`interp.inspect.studies.atlas.cell_text` (``3/5 c2 m1``: 3
  of 5 seeds successful, 2 labelled construction, 1 mirror); a cell not run is blank;
* clicking a cell shows its seeds under the grids: seed, accuracy, steps, outcome, label, and a
  link to the seed's view on the same page (``#seed=<id>``) where the page has that seed.

Nothing is recomputed: the page shows what ``atlas.csv`` says. :func:`load` finds and reads
it (:func:`locate`: ``--atlas PATH``, or an ``atlas.csv`` in or beside the page's folder, in
the sweep folder or beside the store), and refuses a file that is no atlas table before any
work. The cells' seed lists are written into the page (hidden until chosen), so the view needs
no network and only :data:`JS`'s few lines.
"""

from __future__ import annotations

import html
import logging
import math
from pathlib import Path

from interp.inspect.studies.atlas import CELL, RUN, cell_text
from interp.inspect.studies.atlas_figures import ABBREV, panels

log = logging.getLogger(__name__)

FILE = "atlas.csv"
#: the seed list's columns (the atlas table's names)
SEED_COLUMNS = ("seed", "accuracy", "steps", "outcome", "label")
JS = """
function showCell(key) {
  document.querySelectorAll("div.atlas-seeds").forEach(function (d) { d.hidden = d.dataset.cell !== key; });
  document.querySelectorAll("button.atlas-cell").forEach(function (b) {
    var on = b.dataset.cell === key;
    b.classList.toggle("chosen", on); b.setAttribute("aria-pressed", on ? "true" : "false"); });
  document.getElementById("atlas-hint").hidden = true;
}
function openSeed(link, e) {
  e.preventDefault();
  var id = link.dataset.seed;
  if (location.hash !== "#seed=" + id) location.hash = "seed=" + id;
  showSeed(id);
  var s = document.getElementById("seed-" + id);
  if (s) s.scrollIntoView();
}
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.atlas-cell").forEach(function (b) {
    b.addEventListener("click", function () { showCell(b.dataset.cell); }); });
  document.querySelectorAll("a.atlas-view").forEach(function (a) {
    a.addEventListener("click", function (e) { openSeed(a, e); }); });
});
"""
_STYLE = """<style>
table.atlas { border-collapse: collapse; font-size: 12px; margin: 4px 0 12px; }
table.atlas td, table.atlas th { border: 1px solid #ccc; padding: 2px; text-align: center; }
button.atlas-cell { width: 100%; min-width: 6em; border: 1px solid #888; font: inherit;
  padding: 4px; cursor: pointer; }
button.atlas-cell.chosen { outline: 3px solid #c9a400; }
div.atlas-seeds table td, div.atlas-seeds table th { border: 1px solid #ccc; padding: 2px 6px; }
div.atlas-seeds table { border-collapse: collapse; font-size: 13px; }
</style>
"""


def locate(store_path, out_dir, given=None) -> Path | None:
    """The atlas table to show: ``given`` (ValueError when it is not a file), else the first
    ``atlas.csv`` found in ``out_dir``, beside it, in the folder ``store_path`` names, or
    beside its store file; None when there is none."""
    from interp.sweeps.frame import find_store

    if given is not None:
        if not Path(given).is_file():
            raise ValueError(f"atlas {given}: no such file; accepted: an {FILE} written by "
                             "`interp atlas`")
        return Path(given)
    out, path = Path(out_dir), Path(store_path)
    places = [out / FILE, out.parent / FILE, *([path / FILE] if path.is_dir() else []),
              find_store(path).parent / FILE]
    return next((p for p in places if p.is_file()), None)


def read(path):
    """The atlas table at ``path`` (run names kept as text); ValueError naming the file when it
    is not one (unreadable, or without the atlas's columns)."""
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype={"name": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not an atlas table ({e}); accepted: an {FILE} written by "
                         "`interp atlas`") from e
    lacking = [c for c in (*CELL, "architecture", *RUN) if c not in df.columns]
    if lacking:
        raise ValueError(f"{path} is not an atlas table (no columns {lacking}); accepted: an "
                         f"{FILE} written by `interp atlas`")
    return df


def load(store_path, out_dir, given=None, names=()):
    """(path, table) of the sweep's atlas (:func:`locate`, :func:`read`), or None. An atlas
    found (not ``given``) that names none of the runs ``names`` belongs to another store and is
    left out, said in the log; a ``given`` one is always shown."""
    path = locate(store_path, out_dir, given)
    if path is None:
        return None
    df = read(path)
    if given is None and not set(df["name"]) & {str(n) for n in names}:
        log.warning("%s names none of this store's runs; the page shows no atlas", path)
        return None
    return path, df


def _colour(frac: float) -> str:
    """A success fraction's colour, as ``atlas-success.png`` draws it (viridis), and its ink."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    ink = "white" if frac < 0.5 else "black"
    return f"background: {to_hex(colormaps['viridis'](frac))}; color: {ink}"


def _attrs(values: dict) -> str:
    return " ".join(f'data-{k}="{html.escape(str(v))}"' for k, v in values.items())


def _cell(key: str, panel: dict, n: int, d: int, sub) -> str:
    """One run cell: a button, its success fraction as colour and ``k/t``, its mix as text."""
    k, t = int((sub["outcome"] == "success").sum()), len(sub)
    title = f"n = {n}, d_token = {d}: {k} of {t} seeds successful; click for its seeds"
    return (f'<td><button type="button" class="atlas-cell" aria-pressed="false" '
            f'aria-controls="atlas-chosen" data-cell="{key}" {_attrs(panel)} data-n="{n}" '
            f'data-d="{d}" data-success="{k}/{t}" title="{html.escape(title)}" '
            f'style="{_colour(k / t)}">{html.escape(cell_text(sub))}</button></td>')


def _number(v, fmt: str) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return html.escape(str(v))
    return "n/a" if math.isnan(v) else format(v, fmt)


def _seeds(key: str, heading: str, sub, views: dict[str, str]) -> str:
    """The hidden list of one cell's seeds, each linked to its view where the page has one."""
    rows = []
    for r in sub.sort_values(["seed", "name"]).to_dict("records"):
        sid = views.get(str(r["name"]))
        view = (f'<a class="atlas-view" href="#seed={sid}" data-seed="{sid}">view</a>' if sid
                else "no view on this page")
        cells = [html.escape(str(r["seed"])), _number(r["accuracy"], ".4f"), _number(r["steps"], ".0f"),
                 html.escape(str(r["outcome"])), html.escape(str(r["label"])), view]
        rows.append(f'<tr data-name="{html.escape(str(r["name"]))}">'
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>\n")
    head = "".join(f"<th>{c}</th>" for c in (*SEED_COLUMNS, "view"))
    return (f'<div class="atlas-seeds" data-cell="{key}" hidden>\n<h3>{html.escape(heading)}</h3>\n'
            f"<table>\n<tr>{head}</tr>\n{''.join(rows)}</table>\n</div>\n")


def _panel(p: int, title: str, sub, views: dict[str, str]) -> tuple[str, list[str]]:
    """One panel's grid, and the seed lists of its cells."""
    first = sub.iloc[0]
    panel = {"case": int(first["case"]), "layers": int(first["n_layers"]),
             "architecture": first["architecture"], "function": first["function"]}
    ns = sorted({int(n) for n in sub["n"]})
    ds = sorted({int(d) for d in sub["d_token"]})
    cells = {(int(n), int(d)): c for (n, d), c in sub.groupby(["n", "d_token"])}
    lines, lists = [], []
    for n in ns:
        row = []
        for d in ds:
            if (n, d) not in cells:
                row.append('<td class="not-run"></td>')
                continue
            key = f"atlas-{p}-{n}-{d}"
            row.append(_cell(key, panel, n, d, cells[n, d]))
            lists.append(_seeds(key, f"{title}: n = {n}, d_token = {d}", cells[n, d], views))
        lines.append(f"<tr><th>{n}</th>{''.join(row)}</tr>\n")
    head = "<tr><th>n \\ d_token</th>" + "".join(f"<th>{d}</th>" for d in ds) + "</tr>\n"
    grid = (f"<h3>{html.escape(title)}</h3>\n<table class=\"atlas\" {_attrs(panel)}>\n{head}"
            + "".join(lines) + "</table>\n")
    return grid, lists


def older(df, store_runs, checksums: dict | None = None) -> list[str]:
    """The runs of ``store_runs`` (the store's runs the page shows) that the atlas table ``df``
    does not list, or lists as an earlier training of the run: its row's ``checksum`` digest
    (:func:`interp.inspect.studies.atlas_cache.run_checksum`) is not ``checksums[name]``, the store's
    (a run retrained since; rows of atlases written before digests are compared by name only).
    In the store's order: the atlas is older than its store (or was made for part of it)."""
    from interp.inspect.studies import atlas_cache

    digests = df["checksum"] if "checksum" in df.columns else [""] * len(df)
    listed = {str(n): atlas_cache.text(c) for n, c in zip(df["name"], digests)}
    checksums = checksums or {}
    return [str(n) for n in store_runs if str(n) not in listed
            or (listed[str(n)] and checksums.get(str(n)) and listed[str(n)] != checksums[str(n)])]


def section(df, source, views: dict[str, str], store_runs=(), checksums: dict | None = None) -> str:
    """The page's "Atlas" section for the atlas table ``df`` read from ``source``; ``views``:
    run name -> the page's seed id, for the seeds that have a view on the page; ``store_runs``:
    the store's runs the page shows, those the atlas does not list or lists as trained before
    (:func:`older`, with the store's ``checksums`` digests) marked in a note above the grids."""
    missing = older(df, store_runs, checksums)
    note = ""
    if missing:
        log.warning("%s does not list %d of the store's runs shown (e.g. %s): older than its store; "
                    "rerun `interp atlas`", source, len(missing), missing[0])
        note = (f'<p class="note atlas-older">This atlas is older than its store: it does not list (or lists '
                f"an earlier training of) {len(missing)} of the {len(list(store_runs))} runs shown on this page (e.g. run "
                f"<code>{html.escape(missing[0])}</code>), so its cells count fewer seeds than the "
                "store holds. Rerun <code>interp atlas</code> on the store to include them.</p>\n")
    grids, lists = [], []
    for p, (title, sub) in enumerate(panels(df)):
        grid, cells = _panel(p, title, sub, views)
        grids.append(grid)
        lists += cells
    shown = sum(str(name) in views for name in df["name"])
    return (f'{_STYLE}<section id="atlas">\n<h2>Atlas</h2>\n<p>The mechanism atlas '
            f"(<code>{html.escape(str(source))}</code>, written by <code>interp atlas</code>): "
            f"{len(df)} seeds, {shown} of them with a view on this page. Each cell: seeds "
            "successful of those run, then the successful seeds' mechanisms ("
            + ", ".join(f"{v} {k}" for k, v in ABBREV.items()) + "); colour: the success "
            "fraction (dark: none, yellow: all); blank: not run. Click a cell for its seeds.</p>\n"
            + note + "".join(grids) + '<div id="atlas-chosen">\n<p id="atlas-hint">No cell chosen.</p>\n'
            + "".join(lists) + "</div>\n</section>\n")
