"""The core atlas at both levels (issue 42): the report of ``core-atlas-2level/atlas.csv``.

    .venv/bin/python experiments/atlas/two_level.py     # -> core-atlas-2level/two-level.md

``core-atlas-2level/`` is written by ``bash experiments/atlas/relabel.sh --finish`` (the core
grid's measured cells retrained and measured at both levels). This script reads its atlas.csv
and writes one table per question, the predictions C1 and C2 of ``PREDICTIONS-two-level.md``
decided by its rule, and how many retrained runs reproduce the committed atlas's accuracy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "core-atlas-2level"
sys.path.insert(0, str(HERE))

GROUPS = (("cases 1-4, one layer, attention-only", lambda d: d.case.le(4) & d.n_layers.eq(1) & d.architecture.eq("attention-only")),
          ("cases 1-4, one layer, mlp-4x[f14]", lambda d: d.case.le(4) & d.architecture.str.startswith("mlp")),
          ("case 5, two layers, attention-only", lambda d: d.case.eq(5) & d.n_layers.eq(2)),
          ("case 5, one layer, mlp-4x[f14]", lambda d: d.case.eq(5) & d.n_layers.eq(1) & d.architecture.str.startswith("mlp")))
ROUTES = ("lookup", "mirror", "inverted", "mlp-lookup", "other")
CODES = ("circle", "uneven-circle", "low-dim", "codebook", "unread", "untestable")


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(df, column, kinds, subset) -> list[str]:
    lines = [_row(["group", "seeds", *kinds, "rest"]), "|---|--:|" + "--:|" * (len(kinds) + 1)]
    for name, pick in GROUPS:
        d = subset(df)[pick(subset(df))]
        counts = [int((d[column] == k).sum()) for k in kinds]
        lines.append(_row([name, len(d), *counts, len(d) - sum(counts)]))
    d = subset(df)
    counts = [int((d[column] == k).sum()) for k in kinds]
    lines.append(_row(["**all**", len(d), *counts, len(d) - sum(counts)]))
    return lines


def dims(look) -> list[str]:
    """Median value-code dimension of the successful lookups by n (rows) and d_token (columns)."""
    t = look[look.n >= 4]
    ds = sorted(t.d_token.unique())
    lines = [_row(["n \\ d_token", *ds]), "|--:|" + "--:|" * len(ds)]
    for n, sub in t.groupby("n"):
        cells = []
        for d in ds:
            v = sub[sub.d_token == d]["value_dim"].dropna()
            cells.append(f"{v.median():g} ({len(v)})" if len(v) else "")
        lines.append(_row([n, *cells]))
    return lines


def predictions(look) -> list[str]:
    t = look[(look.n >= 5) & (look.code != "untestable")]
    lines = [_row(["prediction", "verdict", "numbers"]), "|---|---|---|"]
    if len(t) < 10:
        return lines + [_row(["C1", "untested", f"{len(t)} lookup seeds with codes"]),
                        _row(["C2", "untested", f"{len(t)} lookup seeds with codes"])]
    share = float((t.code == "circle").mean())
    common = t.code.value_counts().idxmax()
    c1 = share < 0.2 and common == "codebook"
    lines.append(_row(["C1", "confirmed" if c1 else "refuted",
                       f"circle {int((t.code == 'circle').sum())} of {len(t)} ({share:.1%}); commonest code {common}"]))
    med = t.groupby("n")["value_dim"].median()
    rising = bool((med.diff().dropna() >= 0).all())
    d_model = t.d_token * t.case.map(lambda c: 2 if c in (2, 3) else 1)
    within = bool((t.value_dim.dropna() <= d_model[t.value_dim.notna()]).all())
    narrow, wide = t[t.d_token < t.n - 1], t[t.d_token >= t.n - 1]
    low = lambda d: float(d.code.isin(["circle", "uneven-circle", "low-dim"]).mean()) if len(d) else float("nan")
    c2 = rising and within and low(narrow) > low(wide)
    lines.append(_row(["C2", "confirmed" if c2 else "refuted",
                       "median dimension by n " + ", ".join(f"{n}: {v:g}" for n, v in med.items())
                       + f"; at most d_model: {'yes' if within else 'no'}; circle or low-dim where d_token < n - 1: "
                       f"{low(narrow):.1%} of {len(narrow)}, elsewhere {low(wide):.1%} of {len(wide)}"]))
    return lines


def markdown(df, same: int, differ: list) -> str:
    ok = df[df.outcome == "success"]
    look = ok[ok.routing == "lookup"]
    return "\n".join([
        "# The core atlas at both levels (issue 42)", "",
        "Written by `.venv/bin/python experiments/atlas/two_level.py` from `atlas.csv` (written by "
        "`bash experiments/atlas/relabel.sh --finish`: the core grid's cells with a measured seed, "
        "trained again and measured at both levels). Labels: `interp.inspect.mechanism.levels`; thresholds: "
        "`experiments/calibration/thresholds.json`.", "",
        f"Retrained runs whose accuracy equals the committed atlas's: {same} of {same + len(differ)}.", "",
        f"Seeds: {len(df)}; successful: {len(ok)}; routed like the construction (lookup): {len(look)}.", "",
        "## How do successful seeds route?", "", *table(df, "routing", ROUTES, lambda d: d[d.outcome == "success"]), "",
        "## How do the lookups write their values?", "",
        *table(df, "code", CODES, lambda d: d[(d.outcome == "success") & (d.routing == "lookup")]), "",
        "## How do they write the target key?", "",
        *table(df, "key_code", CODES, lambda d: d[(d.outcome == "success") & (d.routing == "lookup")]), "",
        "## The value code's dimension", "",
        "Median interchange dimension of the successful lookups' value code (seeds in brackets), n >= 4:", "",
        *dims(look), "",
        "## Predictions (PREDICTIONS-two-level.md)", "", *predictions(look), ""])


def main() -> int:
    import relabel

    df = pd.read_csv(OUT / "atlas.csv", dtype={"name": str})
    same, differ = relabel.compare(OUT / "atlas.csv")
    text = markdown(df, same, differ)
    (OUT / "two-level.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
