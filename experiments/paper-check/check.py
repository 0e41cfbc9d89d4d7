"""Issue 53's check of both tables under `attention-only` (unselected) and `f14` (the screen's
choice), with every seed committed: writes check.md (DESIGN.md says what is tested and how).

    .venv/bin/python experiments/paper-check/check.py

Seeds 0-4 of each cell are the committed reports' per-seed lines (``stages.SOURCES``); the extra
seeds are the rows of ``store-rows.sqlite`` (``run.sh``), each stage folder's sweep name saying
its reading and table. The test is ``interp.sweeps.report_check`` on those seeds, the same code
``interp report`` runs on a store. ``f14``'s verdict is also given on the screen's 14 screening
cells, where it was chosen, and on the 48 others (DESIGN.md section 4), each its own Holm family.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stages  # noqa: E402

ROWS = HERE / "store-rows.sqlite"
OUT = HERE / "check.md"
FOLDERS = {  # (reading, table) -> the sweep folder whose configs are the reading's table
    ("attention-only", "table1"): stages.EXP / "table1", ("attention-only", "table2"): stages.EXP / "table2",
    ("f14", "table1"): stages.EXP / "readings" / "screen" / "f14" / "table1",
    ("f14", "table2"): stages.EXP / "readings" / "screen" / "f14" / "table2",
}
SEEDS_CSV = stages.EXP / "readings" / "screen" / "seeds.csv"


def cell_of(d: dict) -> tuple:
    """A config's (case, n, n_layers, pos_embed, d_token) as stages.CELLS writes it."""
    return (int(d["case"]), int(d["n"]), int(d["n_layers"]), d["pos_embed"], int(d["d_token"]))


def extra_rows() -> list[dict]:
    """The trained extra seeds: reading, table, cell, seed, accuracy (%), wall and CPU seconds."""
    if not ROWS.is_file():
        return []
    out = []
    with sqlite3.connect(ROWS) as con:
        for sweep, config, seed, acc, secs, cpu, status in con.execute(
                "select sweep, config, seed, accuracy, seconds, cpu_seconds, status from runs"):
            reading, table, _ = stages.folder(sweep)
            if status == "ok" and acc is not None:
                out.append(dict(reading=reading, table=table, cell=cell_of(json.loads(config)), seed=int(seed),
                                acc=100 * float(acc), seconds=secs, cpu=cpu, sweep=sweep,
                                config=json.loads(config)))
    return out


def seeds_by_cell(reading: str, table: str, extra: list[dict], first_only: int | None = None) -> dict:
    """cell -> accuracies (%) in seed order: the committed 5, then the extra seeds trained."""
    out = {cell: list(accs) for cell, accs, _ in stages._report_cells(stages.SOURCES[(reading, table)])}
    for r in sorted((r for r in extra if (r["reading"], r["table"]) == (reading, table)), key=lambda r: r["seed"]):
        out[r["cell"]].append(r["acc"])
    return {c: a[:first_only] for c, a in out.items()} if first_only else out


def table_for(reading: str, table: str, accs: dict):
    """report_table.cells of the reading's table folder, its accuracies replaced by ``accs``."""
    from interp.sweeps import report_table
    from interp.sweeps.loader import load

    sweep = load(FOLDERS[(reading, table)])
    frame = report_table.cells(sweep, None, report_table.paper_table(sweep))
    frame["accuracies"] = [accs[cell_of({**r, "n": r.get("n", 100), "n_layers": r.get("n_layers", 1),
                                         "case": r.get("case", 5), "pos_embed": r.get("pos_embed", "learned")})]
                           for _, r in frame.iterrows()]
    return sweep, frame


def label(r) -> str:
    if "case" in r and r["case"] is not None and "pos_embed" in r:
        return f"case {r['case']}, {'learned PE' if r['pos_embed'] == 'learned' else 'no PE'}, d_token {r['d_token']}"
    return f"n = {r['n']}, {r['n_layers']} layer{'s' * (r['n_layers'] != 1)}, d_token {r['d_token']}"


def checked(reading: str, table: str, extra: list[dict], first_only: int | None = None):
    """(sweep, frame, checks) of one reading's table."""
    from interp.sweeps import report_check

    sweep, frame = table_for(reading, table, seeds_by_cell(reading, table, extra, first_only))
    return sweep, frame, report_check.checks(sweep, frame)


def headline(reading: str, table: str, frame, found) -> str:
    inf = [(r, c) for (_, r), c in zip(frame.iterrows(), found) if c is not None and c.informative]
    out = [label(r) for r, c in inf if c.outside]
    rate = sum(c.rate_differs for _, c in inf)
    ns = sorted({c.n_seeds for _, c in inf})
    apart = sum(1 for c in found if c is not None and not c.informative)
    return (f"{reading}, {table}: {len(inf)} informative cells tested ({apart} apart by construction), "
            f"the paper outside our distribution in {len(out)}, success rate differing in {rate}; "
            f"seeds per cell {ns[0]}-{ns[-1]}")


def selection(extra: list[dict]) -> list[str]:
    """f14 on the 14 screening cells (chosen there) and on the 48 others, each its own Holm family."""
    sys.path.insert(0, str(stages.EXP / "readings" / "screen"))
    import design
    from interp.sweeps import paper_check as pc

    fams: dict[str, list] = {"screening (chosen on)": [], "held out": []}
    for table in ("table1", "table2"):
        _, frame, found = checked("f14", table, extra)
        for (_, r), c in zip(frame.iterrows(), found):
            if c is None or not c.informative:
                continue
            key = cell_of({**r, "n": r.get("n", 100), "n_layers": r.get("n_layers", 1),
                           "case": r.get("case", 5), "pos_embed": r.get("pos_embed", "learned")})
            fams["screening (chosen on)" if key in design.SCREENING else "held out"].append((label(r), table, c))
    lines = ["| f14's cells | informative | the paper outside (Holm within the family) | cells outside |",
             "|---|--:|--:|---|"]
    for name, members in fams.items():
        adj = pc.holm([c.predictive.p for _, _, c in members])
        out = [f"{t} {lab}" for (lab, t, _), p in zip(members, adj) if p < 0.05]
        lines.append(f"| {name} | {len(members)} | {len(out)} | {'; '.join(out) or '—'} |")
    return lines


def stability(extra: list[dict]) -> list[str]:
    """Cells with extra seeds: the decision on the first 5 seeds, the first 10 and all (Holm in each
    family); DESIGN.md section 2: a cell with 15 seeds whose decision on its first 10 differs from
    its decision on all 15 is **unstable**."""
    def yes(c) -> str:
        return "yes" if c.outside else "no"

    lines = ["| reading, table | cell | N | outside on 5 seeds | on 10 | on all | stable (10 against 15) |",
             "|---|---|--:|---|---|---|---|"]
    for reading, table in stages.CELLS:
        _, frame, five = checked(reading, table, extra, first_only=5)
        _, _, ten = checked(reading, table, extra, first_only=10)
        _, _, every = checked(reading, table, extra)
        for (_, r), a, m, b in zip(frame.iterrows(), five, ten, every):
            if b is not None and b.n_seeds > 5:
                stable = "—" if b.n_seeds < 15 else ("yes" if m.outside == b.outside else "**unstable**")
                lines.append(f"| {reading}, {table} | {label(r)} | {b.n_seeds} | {yes(a)} | {yes(m)} | {yes(b)} "
                             f"| {stable} |")
    return lines


def reproduced(extra: list[dict]) -> str:
    """DESIGN.md section 5: the f14-s59 runs retrained, against screen/seeds.csv."""
    import csv

    screen = {(r["run"]): float(r["accuracy_pct"]) for r in csv.DictReader(SEEDS_CSV.read_text().splitlines())
              if r["combination"] == "f14" and int(r["seed"]) >= 5}
    from interp.training.trainer import TrainConfig

    pairs = [(r["acc"], screen[n]) for r in extra
             if r["reading"] == "f14" and (n := TrainConfig(**r["config"]).name()) in screen]
    same = sum(f"{a:.2f}" == f"{b:.2f}" for a, b in pairs)
    return f"{same} of {len(pairs)} retrained runs of `f14-s59` end at the accuracy seeds.csv records, to the printed digit"


def cost(extra: list[dict]) -> str:
    if not extra:
        return "no extra seed trained yet"
    cpu = sum(r["cpu"] or 0 for r in extra)
    return (f"{len(extra)} extra runs: {cpu / 60:.1f} CPU-minutes as the store records them "
            f"({cpu / len(extra):.1f} s per run), on 2 cores shared with other jobs (load in run.log)")


#: the groups of cells outside (check.md, "The cells outside, in groups"), tested in this order
GROUPS = {
    "C": "the paper below us: its mean below our median, its max not above ours by more than 1 point",
    "A": "the paper above chance where every seed of ours sits at it",
    "B": "the paper above us where some of our seeds leave chance",
}


def group_of(r, c) -> str:
    """A cell outside: C, A or B (``GROUPS``), from the paper against our medians and our seeds."""
    dm, da = r["paper_max"] - c.predictive.median_max, r["paper_avg"] - c.predictive.median_avg
    if da < 0 and dm <= 1.0:
        return "C"
    return "A" if c.at_chance == c.n_seeds else "B"


def groups(extra: list[dict]) -> list[str]:
    """Each reading's cells outside, both tables, in the three groups."""
    found = {}
    for reading, table in FOLDERS:
        _, frame, checks = checked(reading, table, extra)
        for (_, r), c in zip(frame.iterrows(), checks):
            if c is not None and c.outside:
                found.setdefault((reading, group_of(r, c)), []).append(f"{table[:5].title()} {table[5:]} {label(r)}")
    lines = ["| group | reading | cells | which |", "|---|---|--:|---|"]
    for g, text in GROUPS.items():
        for reading in ("attention-only", "f14"):
            cells = found.get((reading, g), [])
            lines.append(f"| {g}: {text} | {reading} | {len(cells)} | {'; '.join(cells) or '—'} |")
    return lines


def fisher_floor() -> str:
    """The smallest Fisher p two 5-seed cells can give (5 of 5 against 0 of 5), and the Holm
    family size past which it can no longer be rejected at 0.05."""
    from interp.sweeps import paper_check as pc

    p = pc.fisher_p(5, 5, (0, 0))
    return (f"5 of 5 against 0 of 5 gives p = {p:.4f}, which Holm cannot reject in a family of "
            f"{int(0.05 // p) + 1} cells or more")


def main() -> int:
    from interp.sweeps import report_check

    extra = extra_rows()
    lines = ["# The paper's tables, cell by cell (issue 53)", "",
             "Written by `.venv/bin/python experiments/paper-check/check.py` from the committed 5-seed "
             "reports and `store-rows.sqlite`; the test is DESIGN.md's (`interp.sweeps.paper_check`).", "",
             f"Extra seeds: {cost(extra)}.", "", f"Reproduction (DESIGN.md section 5): {reproduced(extra)}.", "",
             f"Fisher's power with 5 seeds a side: {fisher_floor()}.", "",
             "## Headlines", ""]
    sections = []
    for reading, table in FOLDERS:
        sweep, frame, found = checked(reading, table, extra)
        lines.append(f"- {headline(reading, table, frame, found)}")
        body = report_check.check_lines(sweep, frame, [label(r) for _, r in frame.iterrows()])
        sections += [f"## {reading}, {table}", "", *body[2:]]
    lines += ["", "## f14: where it was chosen and where it was not", "", *selection(extra), "",
              "## The cells outside, in groups", "", *groups(extra), "",
              "## Five, ten and all seeds (stability, DESIGN.md section 2)", "", *stability(extra), "", *sections]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
