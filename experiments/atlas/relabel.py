"""Relabel the committed core atlas at both levels (issue 42).

    .venv/bin/python experiments/atlas/relabel.py     # -> core-atlas/routing.md (no model loaded)
    bash experiments/atlas/relabel.sh                 # retrain, measure both levels -> core-atlas-2level/

The routing (:func:`interp.inspect.mechanism.levels.routing`, calibrated thresholds) reads only measures
that ``core-atlas/atlas.csv`` already holds, so the first command loads no model; predictions
R1 and R2 of ``PREDICTIONS-two-level.md`` are decided there by its rule.

The code level needs the checkpoints, which are not committed. The runs are deterministic on one
kind of CPU, so ``relabel.sh`` trains again the core grid's cells that have a measured seed
(:func:`retrain_configs`; sweep folders ``relabel/<part>/``, cheapest part first, into
``relabel/results/store.sqlite``), then ``interp atlas`` measures both levels into
``core-atlas-2level/``; :func:`compare` checks every retrained seed's accuracy against the
committed atlas's (a seed that trained otherwise is named, and counted apart).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interp.inspect.mechanism import levels

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


#: the retraining's parts, cheapest first: (folder name, architecture, n range)
PARTS = (("attention-only-small", "attention-only", (3, 10)), ("attention-only-large", "attention-only", (20, 50)),
         ("mlp-4x", "mlp-4x", (3, 50)))


def retrain_configs(part: str) -> list:
    """The TrainConfigs of one part (:data:`PARTS`): the core grid's runs of the cells where the
    committed atlas measured a seed (success or partial), n inside the part's range."""
    import sys

    sys.path.insert(0, str(HERE))
    import grid

    by = {p[0]: p for p in PARTS}
    if part not in by:
        raise ValueError(f"part={part!r}; accepted: one of {list(by)}")
    _, arch, (lo, hi) = by[part]
    df = pd.read_csv(HERE / "core-atlas" / "atlas.csv", dtype={"name": str})
    measured = set(df[~df["label"].isin(["failed", "unmeasured"])]["name"])
    cells = {(r.case, r.n, r.d_token, r.n_layers, r.function) for r in df.itertuples() if r.name in measured}
    return [c for c in grid.configs("core", arch)
            if (c.case, c.n, c.d_token, c.n_layers, c.function) in cells and lo <= c.n <= hi]


CONFIGS_PY = '''"""Issue 42's retraining, part {part} (written by experiments/atlas/relabel.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grid  # noqa: E402
import relabel  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = relabel.retrain_configs({part!r})
LAYOUT = TableLayout(**grid.layout_args("core", {arch!r}))
'''


def write_folders() -> list[Path]:
    out = []
    for part, arch, _ in PARTS:
        folder = HERE / "relabel" / part
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "configs.py").write_text(CONFIGS_PY.format(part=part, arch=arch))
        out.append(folder)
    return out


def compare(new_csv=HERE / "core-atlas-2level" / "atlas.csv", old_csv=HERE / "core-atlas" / "atlas.csv"):
    """(same, differ): retrained runs whose accuracy equals the committed atlas's to the last
    digit written, and the names of those that do not."""
    new = pd.read_csv(new_csv, dtype={"name": str}).set_index("name")
    old = pd.read_csv(old_csv, dtype={"name": str}).set_index("name")
    both = new.index.intersection(old.index)
    differ = [n for n in both if not (new.at[n, "accuracy"] == old.at[n, "accuracy"])]
    return len(both) - len(differ), differ


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write-folders"]:
        for folder in write_folders():
            print(folder.relative_to(HERE.parents[1]), len(retrain_configs(folder.name)), "runs")
        raise SystemExit(0)
    text = markdown(relabel())
    (HERE / "core-atlas" / "routing.md").write_text(text)
    print(text)
