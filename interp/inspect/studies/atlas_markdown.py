"""``atlas.md``: the mechanism atlas's report (:func:`markdown`), written by
:func:`interp.inspect.studies.atlas.write_atlas`: how to regenerate it, a legend, a summary per panel,
the two label levels (:mod:`interp.inspect.studies.atlas_levels`), one table per panel, the theorems'
lines and the predictions."""

from __future__ import annotations

from interp.core import bounds
from interp.inspect.studies import analysis
from interp.inspect.studies.atlas_figures import ABBREV, mix, panels, theory_line
from interp.inspect.studies.atlas_levels import formation_markdown, levels_markdown
from interp.inspect.studies.atlas_predictions import shared_readings

FAILED, UNMEASURED = "failed", "unmeasured"


def cell_text(sub) -> str:
    """``k/t success, mix``: successful seeds of the seeds run, and their labels."""
    k = int((sub["outcome"] == "success").sum())
    return f"{k}/{len(sub)} " + mix(sub) if k else f"0/{len(sub)}"


def _table(sub) -> list[str]:
    ds = sorted(int(d) for d in sub["d_token"].unique())
    lines = ["| n \\ d_token | " + " | ".join(str(d) for d in ds) + " |", "|---" + "|--:" * len(ds) + "|"]
    for n, row in sub.groupby("n"):
        cells = {int(d): cell_text(c) for d, c in row.groupby("d_token")}
        lines.append(f"| {int(n)} | " + " | ".join(cells.get(d, "") for d in ds) + " |")
    return lines


def _numbers_text(numbers: dict) -> str:
    def fmt(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    return "; ".join(f"{k}: {fmt(v)}" for k, v in numbers.items())


def predictions_markdown(preds: list[dict], shown: int = 10) -> list[str]:
    """The predictions' table (verdict and numbers), then what refutes each, ``shown`` at most."""
    lines = ["| prediction | verdict | numbers |", "|---|---|---|"]
    lines += [f"| **{p['name']}** {p['claim']} | {p['verdict']} | {_numbers_text(p['numbers'])} |"
              for p in preds]
    lines += ["", "How the predictions read their declarations (`interp/inspect/studies/atlas_predictions.py`, "
              "fixed before the first atlas run); shared by all:", ""]
    lines += [f"- {t}" for t in shared_readings()]
    lines += [""] + [f"- {p['name']}: {p['reading']}" for p in preds if p.get("reading")]
    for p in preds:
        if p["offending"]:
            more = len(p["offending"]) - shown
            lines += ["", f"{p['name']} ({p['verdict']}), against it:", ""]
            lines += [f"- {t}" for t in p["offending"][:shown]]
            lines += [f"- ... and {more} more (all in `interp atlas --json`)"] if more > 0 else []
    return lines


#: the labels :func:`summary_markdown` counts in columns of their own, in this order
SUMMARY_LABELS = ("construction", "mirror", "inverted", "mlp-lookup", "none", UNMEASURED)
#: Theorems 3.4 and 3.7 read at one head and float32's 32 bits (PREDICTIONS.md, "Where the
#: theorems sit on the map")
HEADS, BITS = 1, 32


def summary_markdown(df) -> list[str]:
    """One row per panel: cells run, cells with a successful seed, successful seeds of those run,
    the successful seeds by label, and the cells whose successful seeds are mostly the
    construction's mechanism against those with successes but no construction seed."""
    lines = ["| panel | cells | cells with a success | seeds successful | "
             + " | ".join(SUMMARY_LABELS) + " | other labels | cells mostly construction | "
             "cells with successes, none construction |",
             "|---|--:|--:|--:|" + "--:|" * len(SUMMARY_LABELS) + "--:|--:|--:|"]
    for title, sub in panels(df):
        cells = [c for _, c in sub.groupby(["n", "d_token"])]
        ok = sub[sub["outcome"] == "success"]
        counts = ok["label"].value_counts()
        won = [c[c["outcome"] == "success"]["label"] for c in cells]
        won = [w for w in won if len(w)]
        mostly = sum(int((w == "construction").sum()) * 2 > len(w) for w in won)
        never = sum(not (w == "construction").any() for w in won)
        other = int(len(ok) - sum(int(counts.get(k, 0)) for k in SUMMARY_LABELS))
        lines.append(f"| {title} | {len(cells)} | {len(won)} | {len(ok)} of {len(sub)} | "
                     + " | ".join(str(int(counts.get(k, 0))) for k in SUMMARY_LABELS)
                     + f" | {other} | {mostly} | {never} |")
    return lines


def theory_markdown(df) -> list[str]:
    """Where the theorems sit on the map, counted (PREDICTIONS.md, "Where the theorems sit on
    the map"): per panel that carries a theorem line (:func:`~interp.inspect.studies.atlas_figures.theory_line`)
    and per n, the line's least d_token beside d_min (the smallest d_token with a successful
    seed) and the successful seeds below and at or above it; then the one-layer case-5 cells
    where Theorems 3.4 and 3.7 bind at h = 1, p = 32, with their best accuracy against Theorem
    3.7's error bound."""
    lines = ["| panel | theorem | n | least d_token | d_min | successful seeds below the line | at or above |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for title, sub in panels(df):
        first = sub.iloc[0]
        line = theory_line(int(first["case"]), int(first["n_layers"]), first["architecture"])
        if line is None:
            continue
        text, least = line
        for n, row in sub.groupby("n"):
            ok = row[row["outcome"] == "success"]
            below = int((ok["d_token"] < least(int(n))).sum())
            d_min = int(ok["d_token"].min()) if len(ok) else "-"
            lines.append(f"| {title} | {text} | {int(n)} | {least(int(n))} | {d_min} | {below} | {len(ok) - below} |")
    bind = []
    for (n, d), sub in df[(df["case"] == 5) & (df["n_layers"] == 1)].groupby(["n", "d_token"]):
        bound = bounds.theorem_3_7_bound(int(n), HEADS, int(d), BITS)
        if bound["R"] > 0:
            acc = sub["accuracy"].astype(float)
            best = f"{100 * acc.max():.2f}%" if acc.notna().any() else "-"
            bind.append(f"| {int(n)} | {int(d)} | {bound['R']:.1f} | {100 * bound['bound']:.2f}% | "
                        f"{100 * (1 - bound['bound']):.2f}% | {best} | {len(sub)} |")
    lines += ["", f"Theorems 3.4 and 3.7 at h = {HEADS}, p = {BITS} bind where R = n log2 n - 3hdp > 0 (one layer, "
              "case 5; d = d_token): " + (f"{len(bind)} cell{'s' if len(bind) != 1 else ''} of this atlas. "
              "Theorem 3.7 bounds the error on its own inputs (f any function, target key 0); the accuracy "
              "here is on the training distribution, so the comparison is a guide, not a test." if bind else
              "no cell of this atlas.")]
    if bind:
        lines += ["", "| n | d_token | R | Theorem 3.7's least error | so accuracy at most | best seed | seeds |",
                  "|--:|--:|--:|--:|--:|--:|--:|", *bind]
    return lines


def markdown(df, preds: list[dict], source: str = "STORE_OR_DIR") -> str:
    """``atlas.md``: how to regenerate it, a legend, one table per panel, the predictions."""
    counts = df["outcome"].value_counts()
    cells = df.groupby(["case", "n_layers", "architecture", "function", "n", "d_token"]).ngroups
    lines = [
        "# The mechanism atlas", "",
        f"Regenerate: `interp atlas {source}` (it measures only the runs `atlas.csv` does not "
        "hold yet; `--remeasure` measures every run again). Predictions, declared before the "
        "first run: `experiments/atlas/PREDICTIONS.md`; how each is computed: "
        "`interp/inspect/studies/atlas_predictions.py`.", "",
        f"{len(df)} seeds in {cells} cells: {int(counts.get('success', 0))} successful (accuracy "
        f">= {analysis.SUCCESS:.0%}), {int(counts.get('partial', 0))} partial, "
        f"{int(counts.get(FAILED, 0))} failed (accuracy < max(2/n, 5%), or training failed).", "",
        "Each cell: `k/t`, seeds successful of those run, then the successful seeds' mechanisms "
        "(`interp.inspect.mechanism.levels.mechanism`): " + ", ".join(f"`{a}` {k}" for k, a in ABBREV.items())
        + ", any other label written whole; e.g. `4/5 c3 m1`. An empty cell was not run.", "",
    ]
    lines += ["## Summary", "", "Per panel: its cells, those with a successful seed, the successful seeds "
              "by label, and the cells whose successful seeds are mostly (more than half) the construction's "
              "mechanism against those whose successful seeds include none.", "", *summary_markdown(df), ""]
    lines += ["## Two levels", "", *levels_markdown(df), ""]
    lines += ["## Formation (timelines)", "", *formation_markdown(df), ""]
    for title, sub in panels(df):
        lines += [f"## {title}", "", *_table(sub), ""]
    lines += ["## The theorems on the map", "", "The line each panel's figure carries (the width at which a "
              "theorem's construction exists; none on one-layer attention-only case 5, where Theorem 3.6 "
              "rules out hard attention at n >= 4), and which successful seeds lie on either side of it.", "",
              *theory_markdown(df), ""]
    lines += ["## Predictions", "", *predictions_markdown(preds), ""]
    return "\n".join(lines)
