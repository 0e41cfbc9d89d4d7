"""The atlas's phase diagrams: per case, layers, architecture and function one panel, n down and
d_token across, coloured by the cell's success fraction (``atlas-success``) or by the dominant
mechanism among its successful seeds (``atlas-mechanism``), from the atlas table of
:func:`interp.inspect.studies.atlas.build_atlas`.

Where a theorem says the grid becomes expressive enough, a step line marks it (PREDICTIONS.md,
"Where the theorems sit on the map"): Theorem 3.5's d_token = 2n + 2 on one-layer case-5 panels
with an MLP, the hard-attention constructions' width (Theorems 3.1-3.3: d_model >= 4, so
d_token >= 4 in cases 1 and 4; the two-layer case-5 construction: dimension 7) elsewhere; none
on one-layer attention-only case 5 (Theorem 3.6: no such model). Figures use matplotlib's
object API (no pyplot state).
"""

from __future__ import annotations

import math

from interp.inspect.studies.atlas_predictions import ATTN

#: a mechanism's colour; labels not named here take the next colours of :data:`_SPARE`
COLOURS = {"construction": "#1f77b4", "inverted": "#d62728", "mirror": "#2ca02c",
           "mlp-lookup": "#9467bd", "none": "#8c8c8c", "unmeasured": "#bcbd22",
           "lookup": "#aec7e8", "lookup-codebook": "#ff7f0e", "lookup-low-dim": "#17becf",
           "lookup-key-code": "#e377c2", "lookup-untestable": "#c7c7c7", "other": "#8c564b"}
_SPARE = ("#7f7f7f", "#dbdb8d", "#9edae5", "#c49c94", "#f7b6d2")
NO_SUCCESS, NO_SUCCESS_COLOUR = "no successful seed", "#f2f2f2"
SUCCESS_TITLE = "fraction of seeds successful (accuracy >= 99%) per cell"
MECHANISM_TITLE = "dominant mechanism among each cell's successful seeds"
#: a label's letter in a cell's mechanism mix (a label not named here is written whole)
ABBREV = {"construction": "c", "lookup": "L", "lookup-codebook": "Lb", "lookup-low-dim": "Ld",
          "lookup-key-code": "Lk", "lookup-uneven-circle": "Le", "lookup-untestable": "Lu", "lookup-unread": "Lr",
          "inverted": "i", "mirror": "m", "mlp-lookup": "l", "other": "x", "none": "o",
          "untestable": "u", "unmeasured": "?"}


def panels(df) -> list[tuple[str, object]]:
    """The atlas's panels: (title, rows) per case, layers, architecture and function, in the
    table's order."""
    out = []
    for (case, layers, arch, function), sub in df.groupby(
            ["case", "n_layers", "architecture", "function"], sort=False):
        out.append((f"case {int(case)}, {int(layers)} layer{'s' if layers > 1 else ''}, {arch}, "
                    f"{function}", sub))
    return out


def mix(sub) -> str:
    """A cell's successful seeds by label, e.g. ``c3 m1`` (:data:`ABBREV`)."""
    ok = sub[sub["outcome"] == "success"]["label"].value_counts()
    order = [k for k in ABBREV if k in ok.index] + sorted(k for k in ok.index if k not in ABBREV)
    return " ".join(f"{ABBREV.get(k, k + ' ')}{int(ok[k])}" for k in order)


def dominant(sub, order) -> str:
    """The most frequent label among a cell's successful seeds (a tie goes to the label first
    in ``order``), or :data:`NO_SUCCESS`."""
    ok = sub[sub["outcome"] == "success"]["label"].value_counts()
    if not len(ok):
        return NO_SUCCESS
    return max(ok.index, key=lambda k: (int(ok[k]), -order.index(k)))


def theory_line(case: int, n_layers: int, arch: str):
    """(legend text, least d_token as a function of n) of the theorem line a panel carries, or
    None (module docstring)."""
    if case == 5 and n_layers == 1:  # an attention-only model under another reading too (atlas.architecture)
        return None if arch.split("[")[0] == ATTN else ("Theorem 3.5: d_token >= 2n + 2", lambda n: 2 * n + 2)
    if case == 5:
        return ("two-layer case-5 construction: d_token >= 7", lambda n: 7)
    least = 4 if case in (1, 4) else 2  # d_model >= 4, d_model = 2 d_token in cases 2-3
    return (f"Theorems 3.1-3.3: d_model >= 4 (d_token >= {least})", lambda n: least)


def _style(text: str) -> dict:
    """Theorem 3.5's line dashed red, the constructions' dotted black."""
    if text.startswith("Theorem 3.5"):
        return dict(color="#e41a1c", linestyle="--", linewidth=1.8)
    return dict(color="black", linestyle=":", linewidth=1.8)


def _draw_line(ax, ns, ds, least, style) -> bool:
    """The step between each row's widths below ``least(n)`` and those at or above it; False
    when it would run along the panel's left edge (every width is enough)."""
    cols = [next((j for j, d in enumerate(ds) if d >= least(n)), len(ds)) for n in ns]
    if not any(cols):
        return False
    xs, ys = [], []
    for i, j in enumerate(cols):
        xs += [j - 0.5, j - 0.5]
        ys += [i - 0.5, i + 0.5]
    limits = ax.get_xlim(), ax.get_ylim()
    ax.plot(xs, ys, **style)
    ax.set_xlim(limits[0])
    ax.set_ylim(limits[1])
    return True


def _axes(fig, count: int):
    cols = min(4, count)
    rows = math.ceil(count / cols)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[count:]:
        ax.set_visible(False)
    return axes[:count]


def _cells(sub):
    ns = sorted(int(n) for n in sub["n"].unique())
    ds = sorted(int(d) for d in sub["d_token"].unique())
    return ns, ds, {(int(n), int(d)): c for (n, d), c in sub.groupby(["n", "d_token"])}


def _frame(ax, title, sub, ns, ds) -> dict:
    """Title, ticks and axis labels of one panel, and its theorem line: {legend text: True} if
    one is drawn."""
    ax.set_title(title, fontsize=9)
    ax.set_xticks(range(len(ds)), [str(d) for d in ds])
    ax.set_yticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("d_token")
    ax.set_ylabel("n")
    first = sub.iloc[0]
    line = theory_line(int(first["case"]), int(first["n_layers"]), first["architecture"])
    drawn = line is not None and _draw_line(ax, ns, ds, line[1], _style(line[0]))
    return {line[0]: True} if drawn else {}


def _figure(count: int, suptitle: str):
    from matplotlib.figure import Figure

    cols = min(4, count)
    fig = Figure(figsize=(3.9 * cols, 3.3 * math.ceil(count / cols) + 1.0), layout="constrained")
    fig.suptitle(suptitle)
    return fig


def success_figure(df, title: str = ""):
    """Each panel's success fraction per cell, ``k/t`` written in it (NaN: not run, white)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    groups = panels(df)
    fig = _figure(len(groups), title or "Atlas: " + SUCCESS_TITLE)
    cmap = colormaps["viridis"].with_extremes(bad="white")
    lines, image = {}, None
    for ax, (name, sub) in zip(_axes(fig, len(groups)), groups):
        ns, ds, cells = _cells(sub)
        M = np.full((len(ns), len(ds)), np.nan)
        for (n, d), c in cells.items():
            k = int((c["outcome"] == "success").sum())
            M[ns.index(n), ds.index(d)] = k / len(c)
            ax.text(ds.index(d), ns.index(n), f"{k}/{len(c)}", ha="center", va="center", fontsize=7,
                    color="white" if k / len(c) < 0.5 else "black")
        image = ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        lines.update(_frame(ax, name, sub, ns, ds))
    fig.colorbar(image, ax=list(fig.axes), label="success fraction", shrink=0.8)
    if lines:
        fig.legend(handles=[Line2D([], [], label=t, **_style(t)) for t in lines],
                   loc="outside lower center", ncols=len(lines), fontsize=8)
    return fig


def mechanism_figure(df, title: str = ""):
    """Each cell coloured by the dominant label among its successful seeds (:func:`dominant`),
    its mix (:func:`mix`) written in it; a categorical legend."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    groups = panels(df)
    found = [x for x in df.loc[df["outcome"] == "success", "label"].unique() if x not in COLOURS]
    colours = {**COLOURS, **dict(zip(sorted(found), _SPARE * 4)), NO_SUCCESS: NO_SUCCESS_COLOUR}
    order = list(colours)
    fig = _figure(len(groups), title or "Atlas: " + MECHANISM_TITLE)
    cmap = ListedColormap([colours[k] for k in order]).with_extremes(bad="white")
    lines = {}
    for ax, (name, sub) in zip(_axes(fig, len(groups)), groups):
        ns, ds, cells = _cells(sub)
        M = np.full((len(ns), len(ds)), np.nan)
        for (n, d), c in cells.items():
            M[ns.index(n), ds.index(d)] = order.index(dominant(c, order))
            ax.text(ds.index(d), ns.index(n), mix(c) or "-", ha="center", va="center", fontsize=6)
        ax.imshow(np.ma.masked_invalid(M), cmap=cmap, vmin=-0.5, vmax=len(order) - 0.5,
                  aspect="auto", interpolation="nearest")
        lines.update(_frame(ax, name, sub, ns, ds))
    handles = [Patch(facecolor=colours[k], edgecolor="#444444", label=k) for k in order]
    handles += [Line2D([], [], label=t, **_style(t)) for t in lines]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8,
               title="dominant mechanism (cell text: c construction, i inverted, m mirror, "
                     "l mlp-lookup, o none, ? not measured); white: not run")
    return fig


def figures(df, title: str = "") -> dict:
    """``{"atlas-success": Figure, "atlas-mechanism": Figure}`` (``title`` prefixes both)."""
    head = f"{title}: " if title else "Atlas: "
    return {"atlas-success": success_figure(df, head + SUCCESS_TITLE),
            "atlas-mechanism": mechanism_figure(df, head + MECHANISM_TITLE)}
