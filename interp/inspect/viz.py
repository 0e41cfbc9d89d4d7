"""Pictures of a task model: attention (circuitsvis HTML), circles, QK/OV heatmaps, spectra.

Every function takes data or a model and returns a ``matplotlib.figure.Figure`` or an HTML
string; nothing is shown or printed. Figures are built with matplotlib's object API (no pyplot
state), so they save the same way in scripts, tests and notebooks.

The attention HTML is self-contained: circuitsvis's ``RenderedHTML`` carries two sources, one
that imports its script from a CDN (what ``str()`` gives) and ``local_src``, which inlines the
``dist/cdn/iife.js`` bundled in the installed package. We write ``local_src`` in a full HTML
document, so the file renders offline and loads nothing remote.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from interp.core import tasks
from interp.inspect import circuits, hooks, probes


# ------------------------------------------------------------------------- attention (HTML)


def token_labels(case: int, n: int, tokens) -> list[str]:
    """Readable labels of one input's positions, e.g. ``'3:k2'``, ``'(2,7)'``, ``'i*=4'``."""
    toks = [int(t) for t in tasks.check_tokens(case, n, tokens)[0]]
    labels = []
    for p, t in enumerate(toks[:-1]):
        if case == 1:
            labels.append(f"f({p})={t}")
        elif case in tasks.SAME_POSITION:
            labels.append(f"({t // n},{t % n})")
        else:
            labels.append(f"{'k' if p % 2 == 0 else 'v'}{t}")
    target = toks[-1] - (n * n if case in tasks.SAME_POSITION else 0)
    return labels + [f"i*={target}"]


def attention_html(model, case: int, n: int, tokens=None, *, title: str | None = None) -> str:
    """A self-contained HTML page with circuitsvis's attention heads for one input.

    One "head" per layer (our models have one head per layer); bidirectional, so nothing is
    masked. ``tokens`` is one input ([pos] or [1, pos]); by default the first of
    :func:`interp.inspect.hooks.sample_inputs`.
    """
    import html

    import circuitsvis as cv

    hooks.check_model(model, case, n)
    tokens = hooks.sample_inputs(case, n, 1) if tokens is None else tokens
    tokens = tasks.check_tokens(case, n, tokens)[:1]
    patterns = hooks.attention_patterns(model, tokens)[:, 0]  # [layer, query_pos, key_pos]
    view = hooks.read(case, n, tokens)
    rendered = cv.attention.attention_heads(
        attention=patterns.double().numpy(),
        tokens=token_labels(case, n, tokens),
        attention_head_names=[f"layer {layer}" for layer in range(patterns.shape[0])],
        mask_upper_tri=False,
    )
    title = title or f"case {case}, n = {n}"
    note = (
        f"target i* = {int(view.target[0])}, answer f(i*) = {int(view.answer[0])}, "
        f"construction attends position {int(view.attended[0])} in the last layer; "
        f"model answers {int(hooks.predictions(model, tokens)[0])}"
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n"
        f"<h3>{html.escape(title)}</h3>\n<p>{html.escape(note)}</p>\n"
        f"{rendered.local_src}\n</body>\n</html>\n"
    )


def save_attention_html(path, model, case: int, n: int, tokens=None, **kw) -> Path:
    """Write :func:`attention_html` to ``path`` (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(attention_html(model, case, n, tokens, **kw), encoding="utf-8")
    return path


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
    title = f"{title}\ntop-2 var {fit.top2_var:.2f}, radius cv {fit.radius_cv:.2f}"
    ax.set_title(title, fontsize=9)


def plot_circles(model, case: int, n: int, *, title: str = ""):
    """Every embedding table of the model (token, pair tables, positional) on its circle."""
    tables = probes.embedding_tables(model, case, n)
    fig, axes = _figure(len(tables))
    for ax, (name, (rows, labels)) in zip(axes, tables.items()):
        probe = probes.probe_table(rows, labels, n=n, source=name)
        circle_axes(ax, rows, labels,
                    title=f"{name}: R2 {probe.r2:.3f} at m={probe.m}, N={probe.N}")
    if title:
        fig.suptitle(title)
    return fig


def plot_circuits(qk, ov, *, title: str = ""):
    """QK and OV heatmaps (:class:`interp.inspect.circuits.CircuitMatrix` or arrays)."""
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


def plot_spectra(model, case: int, n: int, *, title: str = ""):
    """Fourier power spectrum (fraction per frequency) of every embedding table."""
    tables = probes.embedding_tables(model, case, n)
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
    panels = [None] if panel is None else list(dict.fromkeys(df[panel]))
    fig, axes = _figure(len(panels), width=4.2, height=3.2)
    for ax, key in zip(axes, panels):
        sub = df if key is None else df[df[panel] == key]
        xs = sorted(dict.fromkeys(sub[by]))
        _violins(ax, [sub[sub[by] == x][value].astype(float).to_numpy() for x in xs], xs)
        ax.set_xlabel(by), ax.set_ylabel(value)
        if key is not None:
            ax.set_title(str(key), fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def write_all(model, case: int, n: int, out_dir, *, title: str = "", tokens=None) -> dict[str, Path]:
    """Write attention.html, circles.png, circuits.png and spectra.png into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    title = title or f"case {case}, n = {n}"
    paths = {"attention": save_attention_html(out / "attention.html", model, case, n, tokens,
                                              title=title)}
    figs = {
        "circles": plot_circles(model, case, n, title=title),
        "circuits": plot_circuits(circuits.qk_matrix(model, case, n),
                                  circuits.ov_matrix(model, case, n), title=title),
        "spectra": plot_spectra(model, case, n, title=title),
    }
    for name, fig in figs.items():
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=110)
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
    if title:
        fig.suptitle(title)
    return fig
