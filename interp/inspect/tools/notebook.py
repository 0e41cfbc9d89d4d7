"""circuitsvis attention views in Jupyter: the 1.3 MB script once per kernel session, and never
in the saved notebook.

A circuitsvis view needs circuitsvis's bundled script (``dist/cdn/iife.js``, 1.3 MB, which
defines the global ``CircuitsVis``). ``RenderedHTML`` inlines it into every view or imports it
from a CDN. Neither suits a notebook that is committed with its outputs and must render
offline, and a relative ``<script src>`` does not either: JupyterLab and Notebook 7 resolve it
against the application's URL (``/lab/tree/...``, which serves the app, not the file; the
server's ``/files/`` URL depends on the folder it was started in) and VS Code against its
webview, never against the notebook's folder. So:

* :func:`script` is the bundle as one output, shown once near the top of a notebook with a
  display id (``handle = display(notebook.script(), display_id=True)``). Every frontend that
  shows a notebook's outputs in one page (JupyterLab, Notebook 7, VS Code) then has
  ``CircuitsVis`` for the rest of the session; the script also renders the views already on
  the page (after re-running that cell, say).
* :func:`attention` and :func:`side_by_side` return a :class:`View`, which shows as two
  small outputs: the HTML (a few KB: the views of :func:`interp.inspect.tools.viz.attention_views`,
  their attention tables, and a few lines of script that render them if ``CircuitsVis`` is
  loaded), then a PNG of the same attention patterns (:func:`attention_png`, tens of KB): one
  heatmap per model, input and layer, token labels on both axes, the construction's positions
  boxed. The PNG is what a static renderer shows (GitHub runs no scripts and draws no
  circuitsvis view).
* The notebook's last cell replaces the bundle's output by :func:`script_note`
  (``handle.update(notebook.script_note())``). The browser has run the script by then, so
  the views stay rendered, and the saved notebook keeps a line of text, not 1.3 MB.

A reader who opens the saved notebook (on GitHub, say, where scripts never run) sees every
view's table of attention weights, its picture, and a note that the interactive heads render
when the notebook runs. Frontends that put each output in its own frame (Colab) do not share the
script between outputs; there, :func:`attention` with ``inline=True`` inlines it into that
view. Nothing is displayed or printed here: every function returns an object that Jupyter
shows through its ``_repr_html_`` (a :class:`View` through ``_ipython_display_``, which
publishes its two outputs).
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import secrets
from dataclasses import dataclass

import torch

from interp.core import tasks
from interp.inspect.tools import hooks, viz

#: a prefix unique to this kernel session, so the views of two open notebooks never share ids
_SESSION = secrets.token_hex(3)
_COUNTER = itertools.count()
#: renders the views under ``root`` not yet rendered (as :mod:`interp.inspect.tools.viz`'s page
#: script), then hides ``root``'s note that the views are not rendered
_RENDER_JS = """window.interpRenderViews = function (root) {
  if (!window.CircuitsVis) return;
  root.querySelectorAll("script.cv-props").forEach(function (s) {
    var el = document.getElementById(s.dataset.target);
    if (el && !el.dataset.rendered) { el.dataset.rendered = "1";
      CircuitsVis.render(el.id, CircuitsVis[s.dataset.element], JSON.parse(s.textContent)); }
  });
  root.querySelectorAll(".interp-cv-pending").forEach(function (p) { p.style.display = "none"; });
};"""
#: the styles of :mod:`interp.inspect.tools.viz`'s pages, scoped to the views' container so that
#: they leave the rest of the notebook alone
_CSS = """.interp-cv table.attn { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
.interp-cv table.attn td, .interp-cv table.attn th {
  border: 1px solid #ccc; padding: 1px 4px; text-align: center; }
.interp-cv td.construction { outline: 2px solid #1a8f3a; outline-offset: -2px; }
.interp-cv td.argmax, .interp-cv .wrong { font-weight: bold; color: #c0142c; }
.interp-cv .side { display: flex; gap: 2em; align-items: flex-start; }
.interp-cv .side > div { flex: 1 1 0; min-width: 0; }"""
_PENDING = ("<p class=\"interp-cv-pending\"><i>The interactive circuitsvis heads render when this "
            "notebook runs (its saved copy leaves circuitsvis's script out); the tables and the "
            "picture below show the same attention weights.</i></p>\n")


@dataclass(frozen=True)
class Html:
    """An HTML output: Jupyter shows ``source``; ``text`` is its plain-text stand-in."""

    source: str
    text: str

    def _repr_html_(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return self.text


def script() -> Html:
    """circuitsvis's bundle (1.3 MB) and the render function, as one output to show once per
    kernel session with a display id, then replace by :func:`script_note`."""
    return Html(f"<script>\n{viz.circuitsvis_bundle()}\n</script>\n<script>{_RENDER_JS}\n"
                "window.interpRenderViews(document);</script>\n"
                "<p><i>circuitsvis's script is loaded for this session.</i></p>",
                "circuitsvis's script (loaded for this session)")


def script_note() -> Html:
    """What the saved notebook keeps where :func:`script` was shown."""
    text = ("circuitsvis's script (1.3 MB) was loaded here while the notebook ran; it is left "
            "out of the saved notebook. Run the notebook to see the interactive views.")
    return Html(f"<p><i>{text}</i></p>", text)


def _wrap(body: str, what: str, inline: bool) -> Html:
    """The views' container: scoped styles, ``body``, the not-rendered note and the script that
    renders the container's views (``inline``: after circuitsvis's bundle itself)."""
    bundle = f"<script>\n{viz.circuitsvis_bundle()}\n</script>\n" if inline else ""
    run = (f"<script>(function () {{ var root = document.currentScript.parentElement;\n"
           f"if (!window.interpRenderViews) {{ {_RENDER_JS} }}\n"
           "window.interpRenderViews(root); })();</script>\n")
    return Html(f'<div class="interp-cv">\n<style>{_CSS}</style>\n{_PENDING}{body}{bundle}{run}</div>',
                f"<{what} (HTML)>")


def _key() -> str:
    return f"nb{_SESSION}-{next(_COUNTER)}"


@dataclass(frozen=True)
class View:
    """An attention view as two notebook outputs: ``html`` (circuitsvis, interactive while the
    notebook runs) and ``png`` (the same patterns as a picture, :func:`attention_png`)."""

    html: Html
    png: bytes
    what: str  # e.g. "attention views: case 5, n = 6", the outputs' plain-text stand-ins

    def outputs(self) -> list[dict]:
        """The two outputs' mime bundles, in order (PNG as base64 text, as Jupyter stores it)."""
        return [{"text/html": self.html.source, "text/plain": self.html.text},
                {"image/png": base64.b64encode(self.png).decode("ascii"),
                 "text/plain": f"<{self.what} (PNG)>"}]

    def _ipython_display_(self) -> None:  # IPython's hook: shows both outputs, returns nothing
        from IPython.display import display

        for bundle in self.outputs():
            display(bundle, raw=True)

    def _repr_html_(self) -> str:  # the HTML alone (where a frontend asks for one output)
        return self.html.source

    def __repr__(self) -> str:
        return self.html.text


#: the picture's limits: inches per position of a heatmap's side, its smallest and largest
#: side, the dots per inch and the colours of its palette (a view of 10 heatmaps of 21
#: positions stays under 60 KB)
_INCH_PER_POS, _MIN_SIDE, _MAX_SIDE, _DPI, _COLOURS = 0.17, 2.4, 4.0, 80, 128
#: at most this many tick labels per axis (every k-th position beyond)
_MAX_TICKS = 24
#: the heatmaps' colours: matplotlib's "Blues" in 10 steps of 0.1 (each kept by the palette)
_CMAP = ("Blues", 10)


def _heatmap(ax, pattern, labels: list[str], boxes, title: str):
    """One layer's [query_pos, key_pos] pattern on ``ax``, 0 white to 1 dark, token labels on
    both axes, the construction's (query, key) cells boxed green, each row's argmax a red dot."""
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

    size = len(labels)
    im = ax.imshow(pattern.numpy(), cmap=colormaps[_CMAP[0]].resampled(_CMAP[1]), vmin=0.0, vmax=1.0,
                   interpolation="nearest")
    ticks = list(range(0, size, -(-size // _MAX_TICKS)))
    ax.set_xticks(ticks, [labels[p] for p in ticks], rotation=90, fontsize=6)
    ax.set_yticks(ticks, [labels[p] for p in ticks], fontsize=6)
    ax.set_xlabel("key position", fontsize=7)
    ax.set_ylabel("query position", fontsize=7)
    ax.set_title(title, fontsize=7)
    for q, k in boxes:
        ax.add_patch(Rectangle((k - 0.5, q - 0.5), 1, 1, fill=False, edgecolor="#1a8f3a", lw=1.2))
    top = pattern.argmax(-1)
    ax.scatter(top.numpy(), range(size), s=4, color="#c0142c", linewidths=0)
    return im


def attention_png(panels) -> bytes:
    """A PNG of attention patterns: a heatmap per model, input and layer, each model's in one
    column (a single model's in one row).

    ``panels``: ``(title, model, tokens)`` per model, ``tokens`` [batch, pos] of that model's
    task (every row shown). The heatmaps share one colour scale (weight 0 to 1 in steps of
    0.1), so the picture changes with the weights; green boxes: where the construction
    attends (:func:`interp.inspect.tools.hooks.construction_targets`); red dots: each query's argmax."""
    from matplotlib.figure import Figure

    cells = []  # (model index, title, labels, [query_pos, key_pos] pattern, boxes)
    for i, (title, model, tokens) in enumerate(panels):
        task, n = hooks.check_model(model)
        tokens = tasks.check_tokens(task.case, n, tokens)
        patterns = hooks.attention_patterns(model, tokens)  # [layer, batch, query_pos, key_pos]
        built = hooks.construction_targets(task.case, n, model.cfg.n_layers, tokens)  # [layer, batch, query_pos]
        for k in range(tokens.shape[0]):
            labels = task.position_labels(n, tokens[k:k + 1])
            for layer in range(patterns.shape[0]):
                boxes = [(q, int(t)) for q, t in enumerate(built[layer, k]) if t >= 0]
                name = f"input {k + 1}, layer {layer}"
                cells.append((i, f"{title}\n{name}" if title else name, labels, patterns[layer, k], boxes))
    per_model = max(sum(c[0] == i for c in cells) for i in range(len(panels)))
    nrows, ncols = (1, per_model) if len(panels) == 1 else (per_model, len(panels))
    side = min(_MAX_SIDE, max(_MIN_SIDE, _INCH_PER_POS * max(len(c[2]) for c in cells)))
    height = (side + 0.6) * nrows + 0.4
    fig = Figure(figsize=(side * ncols + 1.0, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    filled = [0] * len(panels)
    for i, title, labels, pattern, boxes in cells:
        j, filled[i] = filled[i], filled[i] + 1
        ax = axes[0, j] if len(panels) == 1 else axes[j, i]
        ax.set_axis_on()
        im = _heatmap(ax, pattern, labels, boxes, title)
    fig.colorbar(im, ax=axes, shrink=min(0.9, 3.0 / height), label="attention weight")
    fig.suptitle("green box: where the construction attends; red dot: each query's argmax", fontsize=8)
    return _png(fig)


def _png(fig) -> bytes:
    """``fig`` as a PNG of at most :data:`_COLOURS` colours (flat heatmap cells and text need
    few; the file is a third of matplotlib's RGBA PNG)."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    buf.seek(0)
    image = Image.open(buf).convert("RGB").quantize(colors=_COLOURS)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _tokens(model, tokens, inputs: int, seed: int) -> torch.Tensor:
    """The view's inputs: ``tokens``' first ``inputs`` rows, or ``inputs`` sampled with ``seed``."""
    task, n = hooks.check_model(model)
    if tokens is None:
        return hooks.sample_inputs(task.case, n, inputs, seed=seed)
    return tasks.check_tokens(task.case, n, tokens)[:inputs]


@tasks.reads_task
def attention(model, tokens=None, *, case: int | None = None, n: int | None = None,
              title: str | None = None, inputs: int = 3, mechanism: str | None = None,
              seed: int = 0, inline: bool = False) -> View:
    """:func:`interp.inspect.tools.viz.attention_html`'s views as a notebook output of a few KB (the
    script comes from :func:`script`, or is inlined into this output with ``inline``), and
    their picture (:func:`attention_png`) as a second output."""
    viz.check_inputs(inputs)
    viz.mechanism_html(mechanism)  # a bad label is refused before any forward pass
    task, n = hooks.check_model(model, case=case, n=n)
    tokens = _tokens(model, tokens, inputs, seed)
    body = viz.attention_views(model, tokens, case=task.case, n=n, inputs=inputs,
                               mechanism=mechanism, key=_key(), seed=seed)
    head = f"<h4>{html.escape(title)}</h4>\n" if title else ""
    what = f"attention views: case {task.case}, n = {n}"
    return View(_wrap(head + body, what, inline), attention_png([(title or "", model, tokens)]), what)


def side_by_side(views, *, inputs: int = 3, seed: int = 0, inline: bool = False) -> View:
    """Several models next to each other, as :func:`interp.inspect.tools.viz.side_by_side_html`
    (``views``: ``(title, model, mechanism)`` tuples), as one notebook output, and their
    pictures (:func:`attention_png`, one column per model) as a second."""
    viz.check_inputs(inputs)
    views = viz.check_views(views)  # every label checked before any forward pass
    tokens = [_tokens(model, None, inputs, seed) for _, model, _ in views]
    cols = [f"<div>\n<h4>{html.escape(str(name))}</h4>\n"
            + viz.attention_views(model, tok, inputs=inputs, mechanism=mech, key=_key(), seed=seed)
            + "</div>\n" for (name, model, mech), tok in zip(views, tokens)]
    what = f"attention views of {len(views)} models side by side"
    png = attention_png([(str(name), model, tok) for (name, model, _), tok in zip(views, tokens)])
    return View(_wrap(f"<div class=\"side\">\n{''.join(cols)}</div>\n", what, inline), png, what)
