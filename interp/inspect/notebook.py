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
* :func:`attention` and :func:`side_by_side` are small outputs (a few KB): the views of
  :func:`interp.inspect.viz.attention_views`, their attention tables, and a few lines of
  script that render them if ``CircuitsVis`` is loaded.
* The notebook's last cell replaces the bundle's output by :func:`script_note`
  (``handle.update(notebook.script_note())``). The browser has run the script by then, so
  the views stay rendered, and the saved notebook keeps a line of text, not 1.3 MB.

A reader who opens the saved notebook (on GitHub, say, where scripts never run) sees every
view's table of attention weights and a note that the interactive heads render when the
notebook runs. Frontends that put each output in its own frame (Colab) do not share the
script between outputs; there, :func:`attention` with ``inline=True`` inlines it into that
view. Nothing is displayed or printed here: every function returns an object that Jupyter
shows through its ``_repr_html_``.
"""

from __future__ import annotations

import html
import itertools
import secrets
from dataclasses import dataclass

from interp.core import tasks
from interp.inspect import hooks, viz

#: a prefix unique to this kernel session, so the views of two open notebooks never share ids
_SESSION = secrets.token_hex(3)
_COUNTER = itertools.count()
#: renders the views under ``root`` not yet rendered (as :mod:`interp.inspect.viz`'s page
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
#: the styles of :mod:`interp.inspect.viz`'s pages, scoped to the views' container so that
#: they leave the rest of the notebook alone
_CSS = """.interp-cv table.attn { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
.interp-cv table.attn td, .interp-cv table.attn th {
  border: 1px solid #ccc; padding: 1px 4px; text-align: center; }
.interp-cv td.construction { outline: 2px solid #1a8f3a; outline-offset: -2px; }
.interp-cv td.argmax, .interp-cv .wrong { font-weight: bold; color: #c0142c; }
.interp-cv .side { display: flex; gap: 2em; align-items: flex-start; }
.interp-cv .side > div { flex: 1 1 0; min-width: 0; }"""
_PENDING = ("<p class=\"interp-cv-pending\"><i>The interactive circuitsvis heads render when this "
            "notebook runs (its saved copy leaves circuitsvis's script out); the tables show the "
            "same attention weights.</i></p>\n")


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


@tasks.reads_task
def attention(model, tokens=None, *, case: int | None = None, n: int | None = None,
              title: str | None = None, inputs: int = 3, mechanism: str | None = None,
              seed: int = 0, inline: bool = False) -> Html:
    """:func:`interp.inspect.viz.attention_html`'s views as a notebook output of a few KB (the
    script comes from :func:`script`, or is inlined into this output with ``inline``)."""
    task, n = hooks.check_model(model, case=case, n=n)
    body = viz.attention_views(model, tokens, case=task.case, n=n, inputs=inputs,
                               mechanism=mechanism, key=_key(), seed=seed)
    head = f"<h4>{html.escape(title)}</h4>\n" if title else ""
    return _wrap(head + body, f"attention views: case {task.case}, n = {n}", inline)


def side_by_side(views, *, inputs: int = 3, seed: int = 0, inline: bool = False) -> Html:
    """Several models next to each other, as :func:`interp.inspect.viz.side_by_side_html`
    (``views``: ``(title, model, mechanism)`` tuples), as one notebook output."""
    viz.check_inputs(inputs)
    views = viz.check_views(views)  # every label checked before any forward pass
    cols = [f"<div>\n<h4>{html.escape(str(name))}</h4>\n"
            + viz.attention_views(model, inputs=inputs, mechanism=mech, key=_key(), seed=seed)
            + "</div>\n" for name, model, mech in views]
    return _wrap(f"<div class=\"side\">\n{''.join(cols)}</div>\n",
                 f"attention views of {len(views)} models side by side", inline)
