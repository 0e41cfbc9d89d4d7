"""The pre-declared score of every reading that has results (README.md, "Score").

    .venv/bin/python experiments/readings/score.py

Per reading and diagnostic cell: max and mean accuracy over its finished seeds, beside the
paper's; the score is how many of the 28 comparisons are within 5 points (ties: the smaller mean
|ours - paper|). A reading's seeds come from its store (``<reading>/results/store.sqlite``); the
``attention-only`` reading's runs are the runs of experiments/table1 and table2 (same configs,
same names), so without a store of its own its seeds are read from the per-cell lines of those
tables' reports as today's code trained them (experiments/bench/tables-cpu; the committed
experiments/table1 and table2 reports, from older code, give 9 of 28 instead of 10).
Writes ``scores.md``; a cell with fewer than 5 finished seeds is marked and scored as it stands.

Stores are local (not committed), so every seed read from a store is also written to
``seeds.csv`` (committed): a reading without a store here is scored from its lines there, and
a run found in both keeps the store's numbers.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import readings

HERE = Path(__file__).resolve().parent
SEEDS_CSV = HERE / "seeds.csv"
CSV_FIELDS = ["reading", "case", "n", "n_layers", "pos_embed", "d_token", "d_mlp", "seed",
              "accuracy_pct", "steps", "run"]
sys.path.insert(0, str(HERE.parent / "analysis"))


def store_rows(name: str) -> list[dict] | None:
    """The finished runs of a reading's diagnostic cells in its local store (None: no store)."""
    from interp.sweeps import store

    path = HERE / name / "results" / "store.sqlite"
    if not path.is_file():
        return None
    df = store.read(path)
    rows = []
    if df.empty:
        return rows
    df = df[df.status == "ok"]
    for case, n, layers, pe, d, _ in readings.CELLS:
        sub = df[(df.case == case) & (df.n == n) & (df.n_layers == layers) & (df.pos_embed == pe)
                 & (df.d_token == d) & (df.d_mlp == readings.d_mlp(name, case, d))]
        rows += [dict(reading=name, case=case, n=n, n_layers=layers, pos_embed=pe, d_token=d,
                      d_mlp=int(r.d_mlp), seed=int(r.seed), accuracy_pct=repr(100 * float(r.accuracy)),
                      steps=int(r.steps), run=r["name"]) for _, r in sub.iterrows()]
    return rows


def csv_rows() -> list[dict]:
    if not SEEDS_CSV.is_file():
        return []
    return list(csv.DictReader(SEEDS_CSV.read_text().splitlines()))


def seeds_by_cell(rows: list[dict]) -> dict:
    out = {cell[:5]: [] for cell in readings.CELLS}
    for r in rows:
        key = (int(r["case"]), int(r["n"]), int(r["n_layers"]), r["pos_embed"], int(r["d_token"]))
        out[key].append(float(r["accuracy_pct"]))
    return out


def seeds_from_store(name: str) -> dict | None:
    """A reading's seeds: its store's runs, plus seeds.csv's lines for runs the store lacks."""
    stored = store_rows(name)
    saved = [r for r in csv_rows() if r["reading"] == name]
    if stored is None and not saved:
        return None
    have = {r["run"] for r in stored or []}
    return seeds_by_cell((stored or []) + [r for r in saved if r["run"] not in have])


def write_seeds_csv() -> int:
    """seeds.csv := its lines, updated with every store present here (a store's run wins)."""
    rows = {(r["reading"], r["run"]): r for r in csv_rows()}
    for name in readings.READINGS:
        for r in store_rows(name) or []:
            rows[(name, r["run"])] = {k: str(v) for k, v in r.items()}
    ordered = sorted(rows.values(), key=lambda r: (list(readings.READINGS).index(r["reading"]),
                                                  int(r["case"]), int(r["n"]), int(r["n_layers"]),
                                                  int(r["d_token"]), int(r["seed"])))
    with open(SEEDS_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(ordered)
    return len(ordered)


#: the attention-only reading's full tables trained by today's code (the MLP readings' code):
#: experiments/bench/tables-cpu; experiments/table1 and table2's committed reports are older
REPORTS = HERE.parent / "bench" / "tables-cpu"


def seeds_from_reports(root: Path = REPORTS) -> dict:
    from retrained import reported

    t1, t2 = reported("table1", root / "table1"), reported("table2", root / "table2")
    out = {}
    for case, n, layers, pe, d, _ in readings.CELLS:
        src, key = (t2, (str(n), str(layers), str(d))) if case == 5 else (t1, (str(case), pe, str(d)))
        out[(case, n, layers, pe, d)] = [v for k, v in src.items() if k[:3] == key]
    return out


def score(name: str, seeds: dict, source: str) -> tuple[list[str], tuple]:
    paper = {(int(r["case"]), int(r["n"]), int(r["layers"]), r["pe"], int(r["d_token"])): r
             for r in readings.paper_rows()}
    within, diffs, lines = 0, [], []
    for cell, accs in seeds.items():
        p = paper[cell]
        if not accs:
            lines.append(f"| {name} | {cell} | 0 | - | - | {p['max']} | {p['avg']} | |")
            continue
        mx, avg = max(accs), sum(accs) / len(accs)
        d = (mx - float(p["max"]), avg - float(p["avg"]))
        within += sum(abs(x) <= 5 for x in d)
        diffs += [abs(x) for x in d]
        lines.append(f"| {name} | {cell} | {len(accs)} | {mx:.2f} | {avg:.2f} | {p['max']} | "
                     f"{p['avg']} | {sum(abs(x) <= 5 for x in d)} |")
    mean = sum(diffs) / len(diffs) if diffs else float("nan")
    comparisons = len(diffs)
    return lines, (name, within, comparisons, mean, source)


def chosen(totals: list[tuple]) -> str | None:
    """The declared rule: most comparisons within 5 points, ties to the smaller mean |diff|.

    The winner is a reading with all its cells run; it is named as soon as no result of the
    cells other readings still have to run could change it: a reading with ``k`` comparisons
    left could at best add ``k`` within 5 points at |diff| 0. None while that is not settled,
    or while a reading has no results at all.
    """
    full = 2 * len(readings.CELLS)
    complete = [t for t in totals if t[2] == full]
    if {t[0] for t in totals} != set(readings.READINGS) or not complete:
        return None
    best = min(complete, key=lambda t: (-t[1], t[3]))
    for name, within, comparisons, mean, _ in totals:
        left = full - comparisons
        if left == 0:
            continue  # already compared by min()
        at_best = within + left
        best_mean = (mean * comparisons / full) if comparisons else 0.0
        if at_best > best[1] or (at_best == best[1] and best_mean <= best[3]):
            return None
    return best[0]


def undecided_by(totals: list[tuple], winner: str) -> list[str]:
    """The readings with cells left to run when ``winner`` was named (their results cannot change it)."""
    return [t[0] for t in totals if t[2] < 2 * len(readings.CELLS) and t[0] != winner]


def main(argv: list[str] | None = None) -> str | None:
    """Score every reading, write scores.md; with ``--chosen`` print only the winner's name
    (nothing, exit status 1, while the cells left to run could change it)."""
    argv = sys.argv[1:] if argv is None else argv
    write_seeds_csv()
    rows, totals, found = [], [], {}
    for name in readings.READINGS:
        seeds, source = seeds_from_store(name), "its store (seeds.csv)"
        if seeds is None and name == "attention-only":
            seeds, source = seeds_from_reports(), "experiments/bench/tables-cpu reports"
        if seeds is None:
            continue
        found[name] = seeds
        lines, total = score(name, seeds, source)
        rows += lines
        totals.append(total)
    head = ["| reading | within 5 points | of comparisons | mean abs diff | seeds from |", "|---|--:|--:|--:|---|"]
    head += [f"| {n} | {w} | {c} | {m:.2f} | {s} |" for n, w, c, m, s in
             sorted(totals, key=lambda t: (-t[1], t[3]))]
    # the fair comparison while readings are still running: the cells every reading has finished
    common = [c for c in (cell[:5] for cell in readings.CELLS)
              if all(len(seeds[c]) == len(readings.SEEDS) for seeds in found.values())]
    head += ["", f"On the {len(common)} cells every reading above has finished "
             f"({2 * len(common)} comparisons):", "",
             "| reading | within 5 points | mean abs diff |", "|---|--:|--:|"]
    for name, seeds in found.items():
        _, (_, w, _, m, _) = score(name, {c: seeds[c] for c in common}, "")
        head.append(f"| {name} | {w} | {m:.2f} |")
    cells = ["| reading | cell (case, n, layers, PE, d_token) | seeds | max | avg | paper max | paper avg | within 5 |",
             "|---|---|--:|--:|--:|--:|--:|--:|"] + rows
    winner = chosen(totals)
    verdict = (f"**Chosen reading: `{winner}`** (the declared rule: most of the "
               f"{2 * len(readings.CELLS)} comparisons within 5 points, ties to the smaller mean |diff|)."
               if winner else "No reading chosen yet: the cells still to run could change the winner.")
    if winner and undecided_by(totals, winner):
        verdict += (f" Settled with cells of {', '.join(undecided_by(totals, winner))} still to run: "
                    "even if every comparison left were within 5 points at |diff| 0, it would not win.")
    text = ("# Readings scored on the diagnostic cells\n\nWritten by `experiments/readings/score.py` "
            "(the score declared in README.md). A reading with fewer than 28 comparisons has cells "
            "still running.\n\n" + verdict + "\n\n" + "\n".join(head) + "\n\n" + "\n".join(cells) + "\n")
    (HERE / "scores.md").write_text(text)
    if "--chosen" in argv:
        if winner:
            print(winner)
    else:
        print(text)
    return winner


if __name__ == "__main__":
    sys.exit(0 if main() or "--chosen" not in sys.argv else 1)
