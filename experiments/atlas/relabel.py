"""Relabel the committed core atlas at the routing level (issue 42), from its stored measures.

    .venv/bin/python experiments/atlas/relabel.py     # -> core-atlas/routing.md

The routing (:func:`interp.inspect.levels.routing`, calibrated thresholds) reads only measures
that ``core-atlas/atlas.csv`` already holds, so no model is loaded. The code level needs the
checkpoints, which are not committed: it is left for a session that retrains the seeds (the
predictions' file, ``PREDICTIONS-two-level.md``, says how it will be judged). Predictions R1 and
R2 of that file are decided here by its rule.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interp.inspect import levels

HERE = Path(__file__).resolve().parent
GROUPS = {  # R2's groups: (case set, layers, architecture, function)
    "one-layer cases 1, 3, 4, attention-only, f any": ((1, 3, 4), 1, "attention-only", "any"),
    "two-layer case 5, attention-only, f a permutation": ((5,), 2, "attention-only", "permutation"),
}


def relabel(atlas_csv=HERE / "core-atlas" / "atlas.csv"):
    df = pd.read_csv(atlas_csv, dtype={"name": str})
    measured = ~df["label"].isin(["failed", "unmeasured"])
    df["routing"] = [levels.routing(r) if m else r["label"]
                     for r, m in zip(df.to_dict("records"), measured)]
    return df


def markdown(df) -> str:
    ok = df[df.outcome == "success"]
    cross = pd.crosstab(ok["label"].rename("old label"), ok["routing"].rename("routing"))
    lines = ["# The core atlas's routing level (issue 42)", "",
             "Written by `.venv/bin/python experiments/atlas/relabel.py` from `atlas.csv` (its "
             "stored measures; thresholds `experiments/calibration/thresholds.json`). The code "
             "level is not measured here: it needs the checkpoints (PREDICTIONS-two-level.md).", "",
             f"Successful seeds: {len(ok)} of {len(df)}.", "",
             "## Old label against the routing, successful seeds", "",
             "| old label | " + " | ".join(cross.columns) + " |",
             "|---|" + "--:|" * len(cross.columns)]
    for label, row in cross.iterrows():
        lines.append(f"| {label} | " + " | ".join(str(int(v)) for v in row) + " |")
    counts = ok["routing"].value_counts()
    lookup, old = int(counts.get("lookup", 0)), int((ok["label"] == "construction").sum())
    none_old = ok[ok["label"] == "none"]
    moved = int((none_old["routing"] != "none").sum())
    other = int(counts.get("other", 0))
    r1 = lookup >= old and moved >= len(none_old) / 2 and other < 0.15 * len(ok)
    lines += ["", "## Predictions", "", "| prediction | verdict | numbers |", "|---|---|---|",
              f"| R1 | {'confirmed' if r1 else 'refuted'} | lookup {lookup} (old construction "
              f"{old}); old none successes moved {moved} of {len(none_old)}; other {other} of "
              f"{len(ok)} ({other / len(ok):.1%}) |"]
    verdicts = []
    for name, (cases, layers, arch, fn) in GROUPS.items():
        g = ok[ok.case.isin(cases) & (ok.n_layers == layers) & (ok.architecture == arch) & (ok.function == fn)]
        share = float((g.routing == "lookup").mean()) if len(g) else float("nan")
        verdicts.append((name, int((g.routing == "lookup").sum()), len(g), share))
    r2 = verdicts[0][3] >= 0.8 and verdicts[1][3] < 0.5
    lines.append(f"| R2 | {'confirmed' if r2 else 'refuted'} | " + "; ".join(
        f"{n}: lookup {k} of {t} ({s:.1%})" for n, k, t, s in verdicts) + " |")
    lines += ["", "C1 and C2 (the code level): untested, no seed of the core atlas has code "
              "measures yet."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = markdown(relabel())
    (HERE / "core-atlas" / "routing.md").write_text(text)
    print(text)
