"""Which cell notebook 03 shows: the bimodal cells of the committed per-seed results.

Reads every committed per-seed accuracy: the per-cell lines of the sweeps' reports
(``experiments/**/report.md``, the column "per-seed accuracy (seed: %)"; not
``experiments/bench/``, whose reports re-time the same cells of Tables 1-2, and not
``experiments/readings/screen/``, whose sweeps set the paper's unstated training choices off
the shipped defaults and whose reports grow while the screen runs, and not
``experiments/paper-check/``, whose reports are a screen off the defaults and Tables 1-2's
cells retrained) and
``experiments/readings/seeds.csv``. A cell is *bimodal* when, by the rule of
``interp analyze-sweep`` (:func:`interp.inspect.studies.analysis.classify`), some seed succeeds
(accuracy >= 99%) and some seed failed (accuracy < max(2/n, 5%), near chance 1/n); cells at
n = 2 are left out, where that rule calls every seed short of success failed (2/n = 100%).

The notebook needs a cell whose checkpoints are small enough to commit (d_token <= 32: about
40 KB a seed) and that retrains in minutes (mean steps <= 10,000, the paper's budget). Among
those it takes the cell with the fewest partial seeds, then the failed seeds nearest chance,
then the fewest steps. Run from the repository root:

    python experiments/notebooks/bimodal-cell/cells.py

It prints the bimodal cells, best first, and the chosen one (``configs.py`` beside this file
declares it; ``tests/cli/test_notebooks.py`` checks that they agree).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from interp.inspect.studies.analysis import classify

ROOT = Path(__file__).resolve().parents[3]
COLUMN = "per-seed accuracy (seed: %)"
MAX_D_TOKEN, MAX_STEPS = 32, 10_000


def _title(path: Path) -> str:
    """A report's first heading: what its sweep holds (e.g. "Table 2: ... case 5, learned PE")."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next((line[2:] for line in lines if line.startswith("# ")), "")


def _cells_of_report(path: Path):
    """(row label, {seed: accuracy in %}, chance in %, mean steps, d_token) per cell line."""
    header = None
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if COLUMN in cells:
            header = cells
            continue
        if header is None or len(cells) != len(header) or not re.match(r"\d+: ", cells[header.index(COLUMN)]):
            continue
        row = dict(zip(header, cells))
        accs = {int(s): float(a) for s, a in (x.split(":") for x in row[COLUMN].split(","))}
        label = ", ".join(f"{k} {v}" for k, v in row.items()
                          if k not in (COLUMN, "runs", "chance", "mean steps") and not k.startswith("s/run"))
        yield label, accs, float(row["chance"]), float(row["mean steps"]), int(row["d_token"])


def _cells_of_seeds_csv(path: Path):
    groups: dict[str, list] = {}
    with path.open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            label = ", ".join(f"{k} {r[k]}" for k in
                              ("reading", "case", "n", "n_layers", "pos_embed", "d_token", "d_mlp"))
            groups.setdefault(label, []).append(r)
    for label, rows in groups.items():
        n = int(rows[0]["n"])
        yield (label, {int(r["seed"]): float(r["accuracy_pct"]) for r in rows}, 100.0 / n,
               sum(float(r["steps"]) for r in rows) / len(rows), int(rows[0]["d_token"]))


def bimodal_cells(root: Path = ROOT) -> list[dict]:
    """Every bimodal cell of the committed per-seed results, best first (module docstring)."""
    sources = [(p, _title(p), _cells_of_report(p)) for p in sorted((root / "experiments").rglob("report.md"))
               if not {"results", "bench", "screen", "paper-check"} & set(p.relative_to(root).parts)]
    seeds_csv = root / "experiments" / "readings" / "seeds.csv"
    sources.append((seeds_csv, "per-seed results of the readings", _cells_of_seeds_csv(seeds_csv)))
    found = []
    for path, title, cells in sources:
        for label, accs, chance, steps, d_token in cells:
            n = round(100.0 / chance)
            outcomes = [classify(a / 100.0, n) for a in accs.values()]
            if n == 2 or "success" not in outcomes or "failed" not in outcomes:
                continue
            found.append(dict(
                source=path.relative_to(root).as_posix(), title=title, cell=label, n=n, accuracy=accs,  # {seed: %}
                success=outcomes.count("success"), failed=outcomes.count("failed"),
                partial=outcomes.count("partial"),
                failed_above_chance=max(a - chance for a, o in zip(accs.values(), outcomes) if o == "failed"),
                mean_steps=steps, small=d_token <= MAX_D_TOKEN and steps <= MAX_STEPS))
    return sorted(found, key=lambda c: (not c["small"], c["partial"], round(c["failed_above_chance"], 1),
                                        c["mean_steps"]))


def main() -> None:
    cells = bimodal_cells()
    print("| source | cell | per-seed accuracy (seed: %) | success / failed / partial | failed: points above "
          "chance | mean steps | small |")
    print("|---|---|---|---|--:|--:|---|")
    for c in cells:
        print(f"| {c['source']} | {c['cell']} | {', '.join(f'{k}: {a:.2f}' for k, a in c['accuracy'].items())} | "
              f"{c['success']} / {c['failed']} / {c['partial']} | {c['failed_above_chance']:.2f} | "
              f"{c['mean_steps']:.0f} | {'yes' if c['small'] else 'no'} |")
    print(f"\nchosen: {cells[0]['source']} ({cells[0]['title']}): {cells[0]['cell']}")


if __name__ == "__main__":
    main()
