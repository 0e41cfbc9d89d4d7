"""Pictures of a task model: attention (circuitsvis HTML), circles, QK/OV heatmaps, spectra.

Every function takes data or a model and returns a ``matplotlib.figure.Figure`` or an HTML
string; nothing is shown or printed. Figures use matplotlib's object API (no pyplot state).

Attention pages load nothing remote. circuitsvis's ``RenderedHTML`` imports its script from a
CDN or inlines its 1.3 MB bundle (``dist/cdn/iife.js``, which defines the global ``CircuitsVis``)
once per view. We call ``CircuitsVis.render(id, CircuitsVis.AttentionHeads, props)`` ourselves,
as its ``render_local`` does, with the bundle either inlined once per page (``script_src=None``)
or written beside the page and referenced (``script_src="circuitsvis.js"``,
:func:`write_circuitsvis_script`). A view's props sit in a ``<script type="application/json"
class="cv-props">`` beside its ``<div>``; the page's ``renderViews(root)`` renders the views
under ``root`` not yet rendered (the explorer renders a seed's views when it is shown).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import torch

from interp.core import tasks
from interp.inspect import vocabulary
from interp.inspect.tools import circuits, hooks, probes
from interp.training.files import save_figure, write_file

# ------------------------------------------------------------------------- attention (HTML)

#: file name of circuitsvis's bundled script when written beside a page
CIRCUITSVIS_JS = "circuitsvis.js"
MAX_INPUTS = 32
_RENDER_JS = """function renderViews(root) {
  (root || document).querySelectorAll("script.cv-props").forEach(function (s) {
    var el = document.getElementById(s.dataset.target);
    if (el && !el.dataset.rendered) { el.dataset.rendered = "1";
      CircuitsVis.render(el.id, CircuitsVis[s.dataset.element], JSON.parse(s.textContent)); }
  });
}"""
_CSS = """body { font-family: sans-serif; margin: 1em 2em; }
table.attn { border-collapse: collapse; font-size: 12px; margin: 4px 0; }
table.attn td, table.attn th { border: 1px solid #ccc; padding: 1px 4px; text-align: center; }
td.construction { outline: 2px solid #1a8f3a; outline-offset: -2px; }
td.argmax, .wrong { font-weight: bold; color: #c0142c; }
.side { display: flex; gap: 2em; align-items: flex-start; } .side > div { flex: 1 1 0; min-width: 0; }
"""
_KEY = ("Table: the last layer's attention from the final position (the query) to each position; "
        "<span style=\"outline: 2px solid #1a8f3a\">outlined</span>: the position the construction "
        "attends, <b style=\"color: #c0142c\">bold red</b>: the model's argmax.")


def circuitsvis_bundle() -> str:
    """The script circuitsvis ships (``dist/cdn/iife.js``), safe to inline in ``<script>``."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    return path.read_text(encoding="utf-8").replace("</script", "<\\/script")  # in a JS string


def write_circuitsvis_script(folder, name: str = CIRCUITSVIS_JS) -> Path:
    """Write circuitsvis's bundle to ``folder/name`` (once: an identical file is kept)."""
    _check_script_src(name)
    path = Path(folder) / name
    text = circuitsvis_bundle()
    if not (path.is_file() and path.read_bytes() == text.encode("utf-8")):
        write_file(path, text)
    return path


def _check_script_src(src: str | None) -> None:
    if src is not None and (not src or re.match(r"\s*([A-Za-z][\w+.-]*:|/)", src)):
        raise ValueError(f"script_src={src!r}; accepted: None (inline the script) or a relative "
                         f"path beside the page such as {CIRCUITSVIS_JS!r} (nothing remote)")


def check_inputs(inputs: int) -> int:
    """``inputs`` (how many sampled inputs a view shows) if in 1..MAX_INPUTS, else ValueError."""
    if isinstance(inputs, bool) or not isinstance(inputs, int) or not 1 <= inputs <= MAX_INPUTS:
        raise ValueError(f"inputs={inputs!r}; accepted: an integer in 1..{MAX_INPUTS}")
    return inputs


def mechanism_html(mechanism: str | None) -> str:
    """One line naming a mechanism label and what it means ('' for None)."""
    if mechanism is None:
        return ""
    if mechanism not in vocabulary.MECHANISMS:
        raise ValueError(f"mechanism={mechanism!r}; accepted: None or one of {list(vocabulary.MECHANISMS)}")
    return (f'<p class="mechanism" data-mechanism="{mechanism}"><b>mechanism: {mechanism}</b>'
            f" &mdash; {html.escape(vocabulary.MECHANISMS[mechanism], quote=False)}</p>\n")


def token_labels(case: int, n: int, tokens) -> list[str]:
    """Readable labels of one input's positions, e.g. ``'k2'``, ``'(2,7)'``, ``'i*=4'``
    (:meth:`interp.core.tasks.Task.position_labels`)."""
    return tasks.get(case).position_labels(n, tokens)


def _input_html(model, task: tasks.Task, n: int, tokens, patterns, view_id: str) -> str:
    """One input: what the construction and the model do in words, the final query's attention
    row with both positions marked, and the circuitsvis view (one head per layer)."""
    labels = task.position_labels(n, tokens)
    view = hooks.read(task.case, n, tokens)
    target, answer, built = int(view.target[0]), int(view.answer[0]), int(view.attended[0])
    said = int(hooks.predictions(model, tokens)[0])
    row = patterns[-1, -1]  # last layer, final query: [key_pos]
    top = int(row.argmax())
    cls = "" if said == answer else ' class="wrong"'
    text = (f"target i* = {target}, answer f(i*) = {answer}, model answers <span{cls}>{said}</span>; "
            f"construction attends position {built} <code>{html.escape(labels[built])}</code>, the "
            f"model's last layer attends position {top} <code>{html.escape(labels[top])}</code> most: weight "
            f"{float(row[top]):.2f} (on the construction's {float(row[built]):.2f})")

    def cell(p, body):
        marks = [c for c, on in (("construction", p == built), ("argmax", p == top)) if on]
        return f'<td class="{" ".join(marks)}">{body}</td>' if marks else f"<td>{body}</td>"

    table = ("<table class=\"attn\"><tr><th>position</th>"
             + "".join(f"<th>{p}</th>" for p in range(len(labels))) + "</tr>\n<tr><th>token</th>"
             + "".join(cell(p, html.escape(lab)) for p, lab in enumerate(labels))
             + "</tr>\n<tr><th>attention</th>"
             + "".join(cell(p, f"{float(w):.2f}") for p, w in enumerate(row)) + "</tr></table>")
    props = {"attention": patterns.double().numpy().tolist(), "tokens": labels,
             "attentionHeadNames": [f"layer {layer}" for layer in range(patterns.shape[0])],
             "maskUpperTri": False}
    data = json.dumps(props).replace("</", "<\\/")
    return (f'<div class="input">\n<p>{text}</p>\n{table}\n<div id="{view_id}" class="cv-view">'
            f'</div>\n<script type="application/json" class="cv-props" data-target="{view_id}" '
            f'data-element="AttentionHeads">{data}</script>\n</div>\n')


@tasks.reads_task
def attention_views(model, tokens=None, *, case: int | None = None, n: int | None = None,
                    inputs: int = 3, mechanism: str | None = None, key: str = "view",
                    seed: int = 0) -> str:
    """An HTML fragment: the mechanism line, then per input (``tokens`` [batch, pos], its first
    ``inputs`` rows; by default :func:`interp.inspect.tools.hooks.sample_inputs` with ``seed``) the
    target, answer, model's answer, the construction's and the model's attended positions, and
    circuitsvis's attention heads. ``key`` makes the element ids unique on a page; the views
    render when the page calls ``renderViews`` (:func:`html_page`)."""
    check_inputs(inputs)
    head = mechanism_html(mechanism)
    if not re.fullmatch(r"[\w-]+", key):
        raise ValueError(f"key={key!r}; accepted: letters, digits, '_' and '-'")
    task, n = hooks.check_model(model, case=case, n=n)
    tokens = hooks.sample_inputs(task.case, n, inputs, seed=seed) if tokens is None else tokens
    tokens = tasks.check_tokens(task.case, n, tokens)[:inputs]
    patterns = hooks.attention_patterns(model, tokens)  # [layer, batch, query_pos, key_pos]
    parts = [head, f"<p class=\"key\">{_KEY}</p>\n"]
    for k in range(len(tokens)):
        parts.append(f"<h4>input {k + 1}</h4>\n")
        parts.append(_input_html(model, task, n, tokens[k:k + 1], patterns[:, k], f"cv-{key}-{k}"))
    return "".join(parts)


def html_page(title: str, body: str, *, script_src: str | None = None, js: str = "",
              render_on_load: bool = True) -> str:
    """A full HTML document around ``body``: circuitsvis's bundle inlined (``script_src=None``)
    or referenced (a relative path), ``renderViews``, then ``js``; with ``render_on_load`` every
    view renders when the page loads."""
    _check_script_src(script_src)
    bundle = (f'<script src="{html.escape(script_src)}"></script>' if script_src
              else f"<script>\n{circuitsvis_bundle()}\n</script>")
    load = ('document.addEventListener("DOMContentLoaded", function () { renderViews(document); });'
            if render_on_load else "")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n{bundle}\n"
            f"<script>{_RENDER_JS}{js}\n{load}\n</script>\n</head>\n<body>\n{body}</body>\n</html>\n")


@tasks.reads_task
def attention_html(model, tokens=None, *, case: int | None = None, n: int | None = None,
                   title: str | None = None, inputs: int = 3, mechanism: str | None = None,
                   script_src: str | None = None, seed: int = 0) -> str:
    """An HTML page with circuitsvis's attention heads (one per layer; bidirectional, nothing
    masked) on ``inputs`` inputs, each stated in words (:func:`attention_views`), and the
    model's ``mechanism`` label explained. ``tokens``: [pos] or [batch, pos] (its first
    ``inputs`` rows); by default sampled with ``seed``. ``script_src``: see :func:`html_page`."""
    _check_script_src(script_src)
    task, n = hooks.check_model(model, case=case, n=n)
    title = title or f"case {task.case}, n = {n}"
    views = attention_views(model, tokens, case=task.case, n=n, inputs=inputs, mechanism=mechanism, seed=seed)
    body = f"<h3>{html.escape(title)}</h3>\n{views}"
    return html_page(title, body, script_src=script_src)


def check_views(views) -> list:
    """``views`` as a list of ``(title, model, mechanism)`` tuples, every mechanism label checked."""
    views = list(views)
    if not views or any(not isinstance(v, tuple) or len(v) != 3 for v in views):
        raise ValueError("views: a non-empty list of (title, model, mechanism) tuples (case and n "
                         "now come from each model)")
    for _, _, mech in views:
        mechanism_html(mech)
    return views


def side_by_side_html(views, *, title: str = "Attention side by side", inputs: int = 3,
                      script_src: str | None = None, seed: int = 0) -> str:
    """Several models side by side (``views``: :func:`check_views`); one task, one set of inputs."""
    check_inputs(inputs)
    views = check_views(views)  # every label checked before any forward pass
    cols = [f"<div>\n<h3>{html.escape(str(name))}</h3>\n"
            + attention_views(model, inputs=inputs, mechanism=mech, key=f"m{i}", seed=seed)
            + "</div>\n" for i, (name, model, mech) in enumerate(views)]
    body = f"<h2>{html.escape(title)}</h2>\n<div class=\"side\">\n{''.join(cols)}</div>\n"
    return html_page(title, body, script_src=script_src)


def save_html(path, text: str, *, script_src: str | None = None) -> Path:
    """Write a page to ``path`` (folders created) and, with ``script_src``, circuitsvis's bundle
    beside it (:func:`write_circuitsvis_script`); returns the page's path."""
    path = Path(path)
    if script_src is not None:
        write_circuitsvis_script(path.parent, script_src)
    return write_file(path, text)


@tasks.reads_task
def save_attention_html(path, model, tokens=None, *, script_src: str | None = None, **kw) -> Path:
    """Write :func:`attention_html` (``kw``: its keywords) to ``path``: self-contained, or with
    circuitsvis's bundle written beside it (``script_src="circuitsvis.js"``)."""
    text = attention_html(model, tokens, script_src=script_src, **kw)
    return save_html(path, text, script_src=script_src)


def save_side_by_side_html(path, views, *, script_src: str | None = None, **kw) -> Path:
    """Write :func:`side_by_side_html` to ``path`` (as :func:`save_attention_html`)."""
    return save_html(path, side_by_side_html(views, script_src=script_src, **kw), script_src=script_src)


# ------------------------------------------------------------------------- matplotlib figures


def _figure(ncols: int, *, width: float = 4.0, height: float = 4.0):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def circle_axes(ax, points, labels, *, title: str = "") -> None:
    """Figure 1 style on ``ax``: the points in their top-2 plane, labelled, joined in label order,
    with the fitted circle and dashed radial lines."""
    P, centre, r, _ = probes.circle_plane(points)
    fit = probes.circle_test(points)
    P, (a, b) = P.numpy(), centre.tolist()
    t = np.linspace(0, 2 * np.pi, 200)
    ax.plot(a + r * np.cos(t), b + r * np.sin(t), color="0.7", lw=1)
    for x, y in P:
        ax.plot([a, x], [b, y], ls="--", color="0.8", lw=0.7)
    order = np.argsort(np.asarray(labels))
    ax.plot(P[order, 0], P[order, 1], color="tab:blue", lw=0.6, alpha=0.5)
    ax.scatter(P[:, 0], P[:, 1], s=18, color="tab:blue", zorder=3)
    if len(P) <= 40:
        for (x, y), k in zip(P, labels):
            ax.annotate(str(int(k)), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ax.set_aspect("equal")
    ax.set_xlabel("principal component 1", fontsize=8), ax.set_ylabel("principal component 2", fontsize=8)
    title = f"{title}\ntop-2 var {fit.top2_var:.2f}, radius cv {fit.radius_cv:.2f}"
    ax.set_title(title, fontsize=9)


@tasks.reads_task
def plot_circles(model, *, case: int | None = None, n: int | None = None, title: str = ""):
    """Every embedding table of the model (token, pair tables, positional) on its circle."""
    task, n = hooks.check_model(model, case=case, n=n)
    tables = probes.embedding_tables(model, case=task.case, n=n)
    fig, axes = _figure(len(tables))
    for ax, (name, (rows, keys)) in zip(axes, tables.items()):
        probe = probes.probe_table(rows, keys, n=n, source=name)
        circle_axes(ax, rows, keys,
                    title=f"{name}: R2 {probes.r2_text(probe.r2, '.3f')} at m={probe.m}, N={probe.N}")
    if title:
        fig.suptitle(title)
    return fig


def plot_circuits(qk, ov, *, title: str = ""):
    """QK and OV heatmaps (:class:`interp.inspect.tools.circuits.CircuitMatrix` or arrays)."""
    fig, axes = _figure(2, width=4.6)
    for ax, mat, xl, yl in ((axes[0], qk, "stored key b", "target key a"),
                            (axes[1], ov, "output u", "attended value v")):
        data = mat.matrix if isinstance(mat, circuits.CircuitMatrix) else torch.as_tensor(mat)
        im = ax.imshow(data.numpy(), cmap="RdBu_r", norm=_centered(data))
        ax.figure.colorbar(im, ax=ax, shrink=0.8)
        name = mat.name if isinstance(mat, circuits.CircuitMatrix) else ""
        sub = ""
        if isinstance(mat, circuits.CircuitMatrix):
            sub = f"\ndiagonal rows {mat.diag_frac:.0%}, margin {mat.margin:.3g}"
        ax.set_title(f"{name}{sub}", fontsize=9)
        ax.set_xlabel(xl), ax.set_ylabel(yl)
    if title:
        fig.suptitle(title)
    return fig


def _centered(data):
    from matplotlib.colors import TwoSlopeNorm

    lim = float(data.abs().max()) or 1.0
    return TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim)


@tasks.reads_task
def plot_spectra(model, *, case: int | None = None, n: int | None = None, title: str = ""):
    """Fourier power spectrum (fraction per frequency) of every embedding table."""
    tables = probes.embedding_tables(model, case=case, n=n)
    fig, axes = _figure(len(tables), height=3.0)
    for ax, (name, (rows, _)) in zip(axes, tables.items()):
        spec = probes.fourier_spectrum(rows)
        ax.bar(spec.freq, spec.fraction, color="tab:purple")
        ax.set_xlabel("frequency (cycles over the table)"), ax.set_ylabel("power fraction")
        ax.set_title(name, fontsize=9)
        ax.set_ylim(0, 1)
    if title:
        fig.suptitle(title)
    return fig


def _violins(ax, data: list, labels: list) -> None:
    """Violins (where a group has spread), every seed as a dot, the mean as a green bar."""
    pos = np.arange(len(data))
    keep = [i for i, d in enumerate(data) if len(d) > 1 and np.ptp(d) > 0]
    if keep:
        parts = ax.violinplot([data[i] for i in keep], positions=pos[keep], showextrema=False)
        for body in parts["bodies"]:
            body.set_facecolor("tab:purple"), body.set_alpha(0.4)
    for i, d in enumerate(data):
        ax.scatter(np.full(len(d), pos[i]), d, s=10, color="black", zorder=3)
        if len(d):
            ax.hlines(d.mean(), pos[i] - 0.25, pos[i] + 0.25, color="tab:green", lw=2)
    ax.set_xticks(pos, [str(x) for x in labels])


def plot_violins(df, *, value: str = "accuracy", by: str = "d_token", panel: str | None = None,
                 title: str = ""):
    """Per-seed violins (the paper's Appendix H style): one violin per ``by`` value, seeds as
    dots, means as green bars; one panel per ``panel`` value (e.g. a config label)."""
    panels = [None] if panel is None else sorted(dict.fromkeys(df[panel]), key=vocabulary.group_sort_key)
    fig, axes = _figure(len(panels), width=4.2, height=3.2)
    for ax, key in zip(axes, panels):
        sub = df if key is None else df[df[panel] == key]
        xs = sorted(dict.fromkeys(sub[by]), key=vocabulary.group_sort_key)
        _violins(ax, [sub[sub[by] == x][value].astype(float).to_numpy() for x in xs], xs)
        ax.set_xlabel(by), ax.set_ylabel(value)
        if key is not None:
            ax.set_title(str(key), fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


@tasks.reads_task
def write_all(model, out_dir, *, case: int | None = None, n: int | None = None, title: str = "",
              tokens=None, inputs: int = 3) -> dict[str, Path]:
    """Write attention.html (self-contained, ``inputs`` inputs), circles.png, circuits.png and
    spectra.png into ``out_dir``."""
    task, n = hooks.check_model(model, case=case, n=n)
    kw, out = dict(case=task.case, n=n), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    title = title or f"case {task.case}, n = {n}"
    paths = {"attention": save_attention_html(out / "attention.html", model, tokens, title=title,
                                              inputs=inputs, **kw)}
    figs = {
        "circles": plot_circles(model, title=title, **kw),
        "circuits": plot_circuits(circuits.qk_matrix(model, **kw), circuits.ov_matrix(model, **kw),
                                  title=title),
        "spectra": plot_spectra(model, title=title, **kw),
    }
    for name, fig in figs.items():
        paths[name] = save_figure(fig, out / f"{name}.png", dpi=110)
    return paths


def plot_seed_measures(table, *, measures=("accuracy", "acc_any", "mass", "qk_diag", "ov_diag", "keys_top2"),
                       by: str = "outcome", title: str = ""):
    """Per-seed violins of several measures (one panel each), seeds grouped by ``by``."""
    measures = [m for m in measures if m in table.columns]
    fig, axes = _figure(len(measures), width=3.2, height=3.0)
    order = {"success": 0, "partial": 1, "failed": 2}
    for ax, m in zip(axes, measures):
        xs = sorted(dict.fromkeys(table[by]), key=lambda x: order.get(x, 9))
        _violins(ax, [table[table[by] == x][m].astype(float).to_numpy() for x in xs], xs)
        ax.set_title(m, fontsize=9)
        ax.set_xlabel(f"{by} (dots: seeds)", fontsize=8)
        ax.set_ylabel(vocabulary.axis_label(m), fontsize=8)
    fig.suptitle(title or f"per-seed measures by {by}")
    return fig
