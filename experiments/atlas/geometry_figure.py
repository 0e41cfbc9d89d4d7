"""codes.png: a typical value code of each geometry label the core atlas's lookups carry, beside
the paper's construction (issue 51, item 5).

    .venv/bin/python experiments/atlas/geometry_figure.py   # needs geometry.sh's checkpoints on disk

Per label (in ``figures.FIGURES`` order, then ``unnamed``) found among the testable successful
lookups of ``core-atlas-geometry/atlas.csv``: its commonest (n, d_token) cell, and there the seed
whose participation ratio ``value_fig_pr`` is the cell's median (the lower one of two). The last
columns are two references, not trained seeds: the paper's case-3 construction at n = 10 (built
here) and a hand-built simplex ETF of 20 points (``figure_controls.simplex``, seed 0), the
figure neural collapse predicts, which no trained lookup drew. Top row: the value code in the
residual stream (:func:`figures.stream_code`, centred means) on its top two principal axes, each
point numbered by its symbol. Bottom row: the cosines between the symbols' vectors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import torch

HERE = Path(__file__).resolve().parent
ATLAS = HERE / "core-atlas-geometry" / "atlas.csv"
STORE = HERE / "geometry" / "results" / "store.sqlite"
OUT = HERE / "core-atlas-geometry" / "codes.png"
SHOWN = ("simplex", "orthoplex", "circle", "codebook", "unnamed")


def typical(df: pd.DataFrame) -> list[dict]:
    """One row per label present: the median-``pr`` seed of the label's commonest cell."""
    out = []
    for label in SHOWN:
        g = df[df.geometry == label]
        if g.empty:
            continue
        n, d = g.groupby(["n", "d_token"]).size().idxmax()
        cell = g[(g.n == n) & (g.d_token == d)].sort_values(["value_fig_pr", "name"])
        out.append(cell.iloc[(len(cell) - 1) // 2].to_dict())
    return out


def code_table(model, at: str) -> torch.Tensor:
    from interp.inspect.mechanism import figures
    from interp.inspect.tools import hooks

    task, n = hooks.check_model(model)
    view = hooks.read(task.case, n, hooks.sample_inputs(task.case, n, 512, seed=0))
    return figures.stream_code(model, "value", view, at=at).mean(0)


def panel(ax_top, ax_bottom, means: torch.Tensor, title: str) -> None:
    from interp.inspect.mechanism import figures

    C = figures.centred(means)
    _, _, Vh = torch.linalg.svd(C, full_matrices=False)
    P = (C @ Vh[:2].T).numpy()
    ax_top.scatter(P[:, 0], P[:, 1], s=18)
    for u, (x, y) in enumerate(P):
        ax_top.annotate(str(u), (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points")
    ax_top.set_aspect("equal", adjustable="datalim")
    ax_top.set_title(title, fontsize=8)
    ax_top.set_xticks([]), ax_top.set_yticks([])
    im = ax_bottom.imshow(figures.cosines(means).numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
    ax_bottom.set_xticks([]), ax_bottom.set_yticks([])
    return im


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interp.core import constructions
    from interp.inspect.mechanism import figure_controls
    from interp.sweeps import store
    from interp.sweeps.store import checked_model

    df = pd.read_csv(ATLAS, dtype={"name": str})
    rows = typical(df[df.geometry.isin(SHOWN)])
    stored = {str(r["name"]): r for r in store.read(STORE).to_dict("records")}
    tables = []
    for r in rows:
        model = checked_model(STORE, stored[r["name"]])
        tables.append((code_table(model, str(r["at"])),
                       f"{r['geometry']} (trained, {r['architecture']})\ncase {r['case']}, n {r['n']}, "
                       f"d_token {r['d_token']}, seed {r['seed']}\npr {r['value_fig_pr']:.1f}, "
                       f"simplex_dev {r['value_fig_simplex_dev']:.2f}"))
    tables.append((code_table(constructions.build(3, 10), "value"), "reference: the paper's\nconstruction (circle)\ncase 3, n 10"))
    tables.append((figure_controls.simplex(20, torch.Generator().manual_seed(0)).double(),
                   "reference: a hand-built\nsimplex ETF, n 20 (no\ntrained lookup draws one)"))
    fig, axes = plt.subplots(2, len(tables), figsize=(3.0 * len(tables), 6.0), squeeze=False)
    for j, (means, title) in enumerate(tables):
        im = panel(axes[0, j], axes[1, j], means, title)
    fig.colorbar(im, ax=axes[1, :].tolist(), shrink=0.8, label="cosine")
    fig.suptitle("Value codes in the residual stream: top two principal axes (top), cosines (bottom)", fontsize=9, y=1.03)
    fig.savefig(OUT, dpi=110, bbox_inches="tight")
    print(f"wrote {OUT.relative_to(HERE.parents[1])}: " + "; ".join(t.split(':')[0] for _, t in tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
