"""Issue 52's formation study: its cells, seeds and power, computed from committed atlas rows.

Committed with DESIGN.md before any run of the study (git order). The rule (DESIGN.md section 1)
reads only ``experiments/atlas/store-rows.sqlite`` (the core atlas, seeds 0-4); no study run
enters it.

    .venv/bin/python experiments/formation/design.py           # the cells, the split, the power
    .venv/bin/python experiments/formation/design.py --check   # fails if DESIGN.md's table differs
    .venv/bin/python experiments/formation/design.py --write-folders   # discovery/, held-out/ sweep folders
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent
ATLAS_ROWS = HERE.parents[0] / "atlas" / "store-rows.sqlite"
SWEEP = "attention-only"
CASES = (1, 3, 4)  # case 2 without PE is case 3's learning problem (atlas P8); case 5: cost
MIN_N = 10
SUCCESS = 0.99
MIN_EACH = 2  # at least this many successes and non-successes among the atlas's 5 seeds
SEEDS = {"discovery": 1000, "held-out": 2000}  # first seed of each set; disjoint from 0-19
TARGET_PER_CLASS = 40  # expected seeds of each class per set at the pooled rate
FLOOR_PER_CLASS = 25  # ... and at the rate's worse 95% bound
#: the atlas's protocol (experiments/atlas/grid.py's PE and INIT; a test holds them equal)
PE = {1: "learned", 3: "none", 4: "learned"}
INIT = "pytorch"


def atlas_cells() -> dict[tuple, list[float]]:
    """(case, n, d_token) -> final accuracies of the atlas's one-layer permutation seeds."""
    out = defaultdict(list)
    with sqlite3.connect(ATLAS_ROWS) as con:
        for config, acc in con.execute("select config, accuracy from runs where sweep = ? and status = 'ok'",
                                       (SWEEP,)):
            c = json.loads(config)
            if c["n_layers"] == 1 and c["function"] == "permutation" and c["case"] in CASES and c["n"] >= MIN_N:
                out[(c["case"], c["n"], c["d_token"])].append(float(acc))
    return out


def qualifying(cells: dict) -> list[tuple]:
    """Cells with at least MIN_EACH successes and MIN_EACH non-successes, sorted."""
    keep = []
    for cell, accs in sorted(cells.items()):
        s = sum(a >= SUCCESS for a in accs)
        if s >= MIN_EACH and len(accs) - s >= MIN_EACH:
            keep.append(cell)
    return keep


def split(cells: list[tuple]) -> dict[str, list[tuple]]:
    """Within each case, cells by (n, d_token) alternate discovery, held-out, discovery, ..."""
    out = {"discovery": [], "held-out": []}
    for case in CASES:
        for i, cell in enumerate(c for c in cells if c[0] == case):
            out["discovery" if i % 2 == 0 else "held-out"].append(cell)
    return out


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = stats.beta.ppf(a, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def seeds_per_cell(cells: dict, sets: dict) -> tuple[int, dict]:
    """The least N per cell meeting both power targets in the smaller set (DESIGN.md section 2)."""
    accs = [a for s in sets.values() for c in s for a in cells[c]]
    k = sum(a >= SUCCESS for a in accs)
    p = k / len(accs)
    lo, hi = clopper_pearson(k, len(accs))
    worst = min(lo, 1 - hi)  # the rarer class at the interval's worse end
    m = min(len(s) for s in sets.values())
    n = max(math.ceil(TARGET_PER_CLASS / (m * min(p, 1 - p))), math.ceil(FLOOR_PER_CLASS / (m * worst)))
    return n, {"successes": k, "seeds": len(accs), "rate": p, "ci": (lo, hi), "worst_minor": worst,
               "smallest_set": m}


def table(cells: dict, sets: dict, n_seeds: int) -> str:
    lines = ["| set | case | n | d_token | atlas successes (seeds 0-4) | study seeds |", "|---|--:|--:|--:|--:|---|"]
    for name, group in sets.items():
        first = SEEDS[name]
        for case, n, d in group:
            accs = cells[(case, n, d)]
            lines.append(f"| {name} | {case} | {n} | {d} | {sum(a >= SUCCESS for a in accs)}/{len(accs)} "
                         f"| {first}-{first + n_seeds - 1} |")
    return "\n".join(lines)


def configs(name: str) -> list:
    """The TrainConfigs of one set (``discovery`` or ``held-out``): its cells, N seeds each from
    the set's first seed, trained as the atlas's ``attention-only`` grid trains
    (``experiments/atlas/grid.py``: one layer, f a permutation, the case's PE, init pytorch)."""
    from interp.training.runs import TrainConfig

    if name not in SEEDS:
        raise ValueError(f"set {name!r}; accepted: one of {list(SEEDS)}")
    cells = atlas_cells()
    sets = split(qualifying(cells))
    n_seeds, _ = seeds_per_cell(cells, sets)
    return [TrainConfig(case=case, n=n, d_token=d, n_layers=1, pos_embed=PE[case], function="permutation",
                        init=INIT, seed=SEEDS[name] + i)
            for case, n, d in sets[name] for i in range(n_seeds)]


CONFIGS_PY = '''"""The formation study's {name} set (DESIGN.md; written by experiments/formation/design.py --write-folders)."""

import importlib.util
from pathlib import Path

from interp.sweeps import TableLayout

# design.py by its path, under a name of its own (another folder has a design.py too)
_spec = importlib.util.spec_from_file_location("formation_design", Path(__file__).resolve().parents[1] / "design.py")
design = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(design)

CONFIGS = design.configs({name!r})
LAYOUT = TableLayout(rows=("case", "n"), column="d_token", title="Formation study, {name} set: accuracy (%)")
'''


def write_folders() -> None:
    for name in SEEDS:
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        (folder / "configs.py").write_text(CONFIGS_PY.format(name=name))
        print(folder.relative_to(HERE.parents[1]), len(configs(name)), "runs")


def main(argv: list[str]) -> int:
    if argv == ["--write-folders"]:
        write_folders()
        return 0
    cells = atlas_cells()
    sets = split(qualifying(cells))
    n_seeds, power = seeds_per_cell(cells, sets)
    text = table(cells, sets, n_seeds)
    if "--check" in argv:
        ok = text in (HERE / "DESIGN.md").read_text()
        print("DESIGN.md's cell table matches the rule" if ok else "DESIGN.md's cell table differs from the rule")
        return 0 if ok else 1
    print(text)
    print(f"\npooled atlas success rate in these cells: {power['successes']}/{power['seeds']} = {power['rate']:.2f} "
          f"(95% CI {power['ci'][0]:.2f}-{power['ci'][1]:.2f}); rarer class at the worse bound "
          f"{power['worst_minor']:.2f}; smallest set {power['smallest_set']} cells -> {n_seeds} seeds per cell")
    runs = n_seeds * sum(len(s) for s in sets.values())
    print(f"runs: {runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
