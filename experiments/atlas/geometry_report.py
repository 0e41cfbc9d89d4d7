"""geometry.md: the core atlas's successful lookups by code geometry, and atlas G1-G5 decided
(PREDICTIONS-geometry.md, its rule and amendment A2).

    .venv/bin/python experiments/atlas/geometry_report.py            # core-atlas-geometry/geometry.md
    .venv/bin/python experiments/atlas/geometry_report.py --check    # exit 1 if geometry.md is stale

Reads ``core-atlas-geometry/atlas.csv`` (``geometry.sh --finish``) and the committed two-level
atlas (the retrained accuracies checked against it). No model is loaded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from interp.sweeps.paper_check import wilson
from interp.training.files import write_or_check

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "core-atlas-geometry" / "atlas.csv"
COMMITTED = HERE / "core-atlas-2level" / "atlas.csv"
OUT = HERE / "core-atlas-geometry" / "geometry.md"
REGIMES = ("fits", "orthoplex band", "narrow")
MIN_SEEDS = 10
BOOT, BOOT_SEED = 2000, 0
LABELS = ("simplex", "orthoplex", "circle", "codebook", "unnamed", "untestable")


def regime(n: int, d_token: int) -> str:
    """PREDICTIONS-geometry.md, "Where each figure fits": by n and d_token only."""
    if n - 1 <= d_token:
        return "fits"
    return "orthoplex band" if d_token + 2 <= n <= 2 * d_token else "narrow"


def share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.2f} ({lo:.2f}-{hi:.2f})" if n else "0/0"


def verdict_above(k: int, n: int, bar: float) -> str:
    """A share predicted above ``bar``: confirmed when its Wilson interval lies above it."""
    if n < MIN_SEEDS:
        return f"untested ({n} seeds)"
    lo, hi = wilson(k, n)
    return "confirmed" if lo > bar else "refuted" if hi < bar else "undecided"


def verdict_below(k: int, n: int, bar: float) -> str:
    v = verdict_above(k, n, bar)
    return {"confirmed": "refuted", "refuted": "confirmed"}.get(v, v)


def combine(verdicts: list[str]) -> str:
    """All parts confirmed: confirmed; any refuted: refuted; an untested part: untested; else undecided."""
    if any(v.startswith("refuted") for v in verdicts):
        return "refuted"
    if all(v == "confirmed" for v in verdicts):
        return "confirmed"
    return "untested" if any(v.startswith("untested") for v in verdicts) else "undecided"


def load(source=SOURCE) -> pd.DataFrame:
    """The geometry atlas's rows, once every row's seal holds (``interp atlas`` seals them)."""
    import io

    from interp.inspect.studies.atlas_cache import read_sealed

    text = Path(source).read_text()
    ok, bad = read_sealed(text)
    if bad or not ok:
        raise ValueError(f"{source}: {bad} row(s) fail their seal, or it is unsealed; rerun geometry.sh --finish")
    df = pd.read_csv(io.StringIO(text), dtype={"name": str})
    df = df[df["geometry"].notna() & (df["geometry"] != "")].copy()
    df["regime"] = [regime(int(n), int(d)) for n, d in zip(df.n, df.d_token)]
    df["d_model"] = [2 * d if c in (2, 3) else d for c, d in zip(df.case, df.d_token)]
    return df


def retrain_check(df: pd.DataFrame, committed=COMMITTED) -> tuple[int, list[str]]:
    """(equal, differ): retrained seeds whose accuracy equals the committed atlas's to the last digit."""
    old = pd.read_csv(committed, dtype={"name": str}).set_index("name")
    differ = [n for n, a in zip(df.name, df.accuracy) if not old.at[n, "accuracy"] == a]
    return len(df) - len(differ), differ


def crosstab(df: pd.DataFrame, width: str) -> list[str]:
    """Per (n, width): successful lookups, then the count of each label (untestable last)."""
    ws = sorted(df[width].unique())
    out = [f"| n \\ {width} | " + " | ".join(str(w) for w in ws) + " |", "|--:|" + "---|" * len(ws)]
    for n in sorted(df.n.unique()):
        cells = []
        for w in ws:
            g = df[(df.n == n) & (df[width] == w)]
            counts = g["geometry"].value_counts()
            cells.append(" ".join(f"{lab[:3]} {int(counts[lab])}" for lab in LABELS if lab in counts) or "")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out


def regime_table(df: pd.DataFrame) -> list[str]:
    out = ["| regime | seeds | testable | " + " | ".join(LABELS[:-1]) + " |", "|---|--:|--:|" + "---|" * (len(LABELS) - 1)]
    for r in REGIMES:
        g = df[df.regime == r]
        t = g[g.geometry != "untestable"]
        out.append(f"| {r} | {len(g)} | {len(t)} | " + " | ".join(share(int((t.geometry == lab).sum()), len(t))
                                                               for lab in LABELS[:-1]) + " |")
    return out


def g1(df) -> tuple[str, str]:
    t = df[(df.regime == "fits") & (df.geometry != "untestable")]
    k = int((t.geometry == "simplex").sum())
    mode = t.geometry.mode().tolist()
    return verdict_above(k, len(t), 0.5), f"simplex {share(k, len(t))}; commonest {', '.join(mode)}"


def g2(df) -> tuple[str, str]:
    parts, words = [], []
    for r in REGIMES[1:]:
        t = df[(df.regime == r) & (df.geometry != "untestable")]
        k = int((t.geometry == "simplex").sum())
        mode = t.geometry.value_counts()
        parts.append(verdict_below(k, len(t), 0.1))
        if len(t):
            parts.append("refuted" if mode.index[0] == "circle" else "confirmed")
        words.append(f"{r}: simplex {share(k, len(t))}, commonest {mode.index[0] if len(t) else '-'} ({combine(parts[-2:])})")
    return combine(parts), "; ".join(words)


def g3(df) -> tuple[str, str]:
    parts, words = [], []
    for r in REGIMES:
        t = df[(df.regime == r) & (df.d_token >= 4) & (df.geometry != "untestable")]
        k = int((t.geometry == "circle").sum())
        parts.append(verdict_below(k, len(t), 0.05))
        lo, hi = wilson(k, len(t))
        words.append(f"{r} {k}/{len(t)} ({lo:.2f}-{hi:.2f}, {parts[-1]})")
    two = df[(df.d_token == 2) & df.n.isin([10, 20])]
    k = int(two["code"].isin(["circle", "uneven-circle"]).sum())
    parts.append(verdict_above(k, len(two), 0.5))
    words = ["circle at d_token >= 4: " + "; ".join(words),
             f"circle or uneven-circle (code level) at d_token 2, n 10-20: {k}/{len(two)} ({parts[-1]})"]
    return combine(parts), "; ".join(words)


def spearman_ci(x, y, seed: int = BOOT_SEED) -> tuple[float, float, float]:
    x, y = np.asarray(x, float), np.asarray(y, float)
    rho = stats.spearmanr(x, y).statistic
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(BOOT):
        i = rng.integers(0, len(x), len(x))
        if len(set(x[i])) > 1 and len(set(y[i])) > 1:
            boots.append(stats.spearmanr(x[i], y[i]).statistic)
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return float(rho), float(lo), float(hi)


def g4(df) -> tuple[str, str]:
    parts, words = [], []
    slices = [("n", 10, "d_token"), ("n", 20, "d_token"), ("d_token", 8, "n"), ("d_token", 16, "n")]
    words.append("Spearman of the learned dimension with the other width, at fixed")
    for fixed, value, across in slices:
        g = df[(df[fixed] == value) & df.value_das_dim.notna()]
        if len(g) < MIN_SEEDS or g[across].nunique() < 2:
            parts.append(f"untested ({len(g)} seeds)")
            words.append(f"{fixed} {value}: untested ({len(g)} seeds)")
            continue
        rho, lo, hi = spearman_ci(g[across], g.value_das_dim)
        parts.append("confirmed" if lo > 0 else "refuted" if hi < 0 else "undecided")
        words.append(f"{fixed} {value}: rho {rho:.2f} ({lo:.2f}-{hi:.2f}, {len(g)} seeds, {parts[-1]})")
    return combine(parts), words[0] + " " + "; ".join(words[1:])


def median_ci(x, seed: int = BOOT_SEED) -> tuple[float, float, float]:
    x = np.asarray(x, float)
    rng = np.random.default_rng(seed)
    boots = [np.median(x[rng.integers(0, len(x), len(x))]) for _ in range(BOOT)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(np.median(x)), float(lo), float(hi)


def g5(df) -> tuple[str, str]:
    fits = df[(df.regime == "fits") & df.value_fig_dual.notna()].value_fig_dual
    narrow = df[(df.regime == "narrow") & df.value_fig_dual.notna()].value_fig_dual
    if min(len(fits), len(narrow)) < MIN_SEEDS:
        return "untested", f"{len(fits)} and {len(narrow)} seeds"
    med, lo, hi = median_ci(fits)
    first = "confirmed" if lo >= 0.8 else "refuted" if hi < 0.8 else "undecided"
    p = stats.mannwhitneyu(fits, narrow, alternative="greater").pvalue
    q = stats.mannwhitneyu(fits, narrow, alternative="less").pvalue
    second = "confirmed" if p < 0.05 else "refuted" if q < 0.05 else "undecided"
    return combine([first, second]), (f"fits: median dual {med:.2f} ({lo:.2f}-{hi:.2f}), {len(fits)} seeds; "
                                       f"narrow: median {float(np.median(narrow)):.2f}, {len(narrow)} seeds; "
                                       f"Mann-Whitney one-sided p = {p:.2g}")


def dims_table(df) -> list[str]:
    out = ["| n \\ d_token | " + " | ".join(str(d) for d in sorted(df.d_token.unique())) + " |",
           "|--:|" + "--:|" * df.d_token.nunique()]
    for n in sorted(df.n.unique()):
        cells = []
        for d in sorted(df.d_token.unique()):
            g = df[(df.n == n) & (df.d_token == d)]
            cells.append("" if g.empty else f"{g.value_das_dim.median():g} / {g.value_dim.median():g} ({len(g)})")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out


EXPLORED = ("norm_cv", "cos_sd", "simplex_dev", "cos_max", "pr", "collapse", "dual", "margin")


def exploratory(df: pd.DataFrame) -> list[str]:
    """Not pre-registered: each figure's detector where it is testable, and the measures' medians."""
    from interp.inspect.mechanism import figures
    from interp.inspect.mechanism.calibration import THRESHOLDS
    from interp.inspect.studies import atlas_geometry

    out = ["| figure | testable at n | seeds there | its test passes |", "|---|---|--:|---|"]
    for f in figures.FIGURES:
        ns = sorted(THRESHOLDS["geometry_testable"][f])
        g = df[[figures.calibrated_size(int(n)) in ns for n in df.n]]
        if f == "orthoplex":
            g = g[g.n % 2 == 0]
        fired = sum(figures.detects({**{m: r[f"value_fig_{m}"] for m in atlas_geometry.MEASURES}, "n": int(r["n"])})[f]
                    for _, r in g.iterrows())
        out.append(f"| {f} | {', '.join(map(str, ns))} | {len(g)} | {share(int(fired), len(g))} |")
    out += ["", "| regime | n | seeds | " + " | ".join(EXPLORED) + " | pr / (n - 1) |",
            "|---|--:|--:|" + "--:|" * (len(EXPLORED) + 1)]
    for (r, n), g in df.groupby(["regime", "n"]):
        med = [f"{g[f'value_fig_{m}'].median():.2f}" for m in EXPLORED]
        out.append(f"| {r} | {n} | {len(g)} | " + " | ".join(med) + f" | {(g.value_fig_pr / (n - 1)).median():.2f} |")
    return out


def lower_line(df: pd.DataFrame) -> str:
    g = df[df.value_das_dim.notna() & df.value_dim.notna()]
    lower = g[g.value_das_dim < g.value_dim]
    by_n = ", ".join(f"n {n}: {int((lower.n == n).sum())} of {int((g.n == n).sum())}" for n in sorted(g.n.unique()))
    return (f"A learned rotation finds the value in fewer dimensions than the principal axes in "
            f"{len(lower)} of {len(g)} seeds with both ({by_n}); the search tries k <= 3 below the bound.")


def markdown(df: pd.DataFrame) -> str:
    same, differ = retrain_check(df)
    preds = {"atlas G1": g1(df), "atlas G2": g2(df), "atlas G3": g3(df), "atlas G4": g4(df), "atlas G5": g5(df)}
    lines = [
        "# The core atlas's successful lookups: the figure their codes draw (issue 51, item 3)", "",
        "Written by `.venv/bin/python experiments/atlas/geometry_report.py` from `atlas.csv` here "
        "(`bash experiments/atlas/geometry.sh`, then `--finish`: the successful lookups of "
        "`core-atlas-2level/` retrained and measured by `interp atlas --das --geometry`). Labels: "
        "`interp/inspect/mechanism/figures.py`, thresholds and testable sizes from "
        "`experiments/calibration/geometry.md`, chosen on hand-built controls before any atlas "
        "model was measured. Predictions: `PREDICTIONS-geometry.md` (committed first).", "",
        f"Seeds: {len(df)} successful lookups; {same} retrained to the committed accuracy to the last "
        f"digit, {len(differ)} not{(': ' + ', '.join(differ)) if differ else ''}.", "",
        "## Predictions", "", "| prediction | verdict | numbers |", "|---|---|---|",
        *[f"| {k} | {v} | {w} |" for k, (v, w) in preds.items()], "",
        "Shares: Wilson 95% intervals over the testable seeds (label not `untestable`) of the regime; "
        f"a part with fewer than {MIN_SEEDS} seeds is untested. Regimes (by n and d_token, the value "
        "table's width): fits n - 1 <= d_token; orthoplex band d_token + 2 <= n <= 2 d_token; narrow "
        "beyond.", "",
        "## Geometry by regime", "", *regime_table(df), "",
        "## Geometry by (n, d_token)", "",
        "Counts of the value code's label per cell, pooled over cases and architectures "
        "(sim simplex, ort orthoplex, cir circle, cod codebook, unn unnamed, unt untestable).", "",
        *crosstab(df, "d_token"), "",
        "## Geometry by (n, d_model)", "",
        "The same seeds by the residual width (d_model = 2 d_token in cases 2 and 3, d_token otherwise).", "",
        *crosstab(df, "d_model"), "",
        "## Learned dimension", "",
        "Median learned (DAS) dimension / median principal-axes bound of the value code (seeds), "
        "per (n, d_token).", "", *dims_table(df), "", lower_line(df), "",
        "## Target key", "", "| key_geometry | seeds |", "|---|--:|",
        *[f"| {k} | {v} |" for k, v in df.key_geometry.value_counts().items()], "",
        "## Exploratory: how far from each figure (not pre-registered)", "",
        "Each figure's own test (`figures.detects`), counted only at the n where the calibration "
        "certifies it, whatever the first-passing label is; then the value code's measures, median "
        "over the seeds of each regime and n (`figures.table_measures`; `dual` self-duality with "
        "W_U, `margin` the read-out's lead in logit standard deviations). A simplex has norm_cv 0, "
        "simplex_dev 0, cos_max 1/(n - 1) and pr / (n - 1) = 1. These were read after the verdicts "
        "above and decide nothing.", "",
        *exploratory(df), "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    code, message = write_or_check(OUT, markdown(load()), argv, "experiments/atlas/geometry_report.py")
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
