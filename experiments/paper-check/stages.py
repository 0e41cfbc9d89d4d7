"""Issue 53's extra seeds, declared as data before any of them ran (DESIGN.md, sections 2-3).

Which cells get extra seeds is computed from our own committed 5-seed results only (no paper
number enters): an *informative* cell (DESIGN.md, section 1) whose 5 seeds span more than
``SPREAD`` points (max - min, ours) and whose process CPU seconds per run, as its committed report
prints it, is at most ``CPU_CAP``. Sources: ``f14``'s tables
``experiments/readings/screen/f14/table{1,2}/report.md``; attention-only's
``experiments/bench/tables-cpu/table{1,2}/report.md``.

    .venv/bin/python experiments/paper-check/stages.py          # the declared cells, by rule
    .venv/bin/python experiments/paper-check/stages.py --check  # exit 1 if the rule no longer gives them

The sweep folders (``<reading>-<table>-s<first seed>/configs.py``) import ``CELLS`` from here and
train seeds ``first .. first + 4`` of each declared cell; ``run.sh`` trains them in ``ORDER``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXP = HERE.parent
SPREAD = 10.0  # points between our best and worst seed: the cell is bimodal or uncertain
CPU_CAP = 30.0  # process CPU s per run (committed report): what fits one core by 03:30 UTC
SOURCES = {
    ("f14", "table1"): EXP / "readings" / "screen" / "f14" / "table1" / "report.md",
    ("f14", "table2"): EXP / "readings" / "screen" / "f14" / "table2" / "report.md",
    ("attention-only", "table1"): EXP / "bench" / "tables-cpu" / "table1" / "report.md",
    ("attention-only", "table2"): EXP / "bench" / "tables-cpu" / "table2" / "report.md",
}
#: the order run.sh trains the folders in: the chosen reading first, seeds 5-9 before 10-14
ORDER = ("f14-table1-s5", "f14-table2-s5", "attention-only-table1-s5", "attention-only-table2-s5",
         "f14-table1-s10", "f14-table2-s10", "attention-only-table1-s10", "attention-only-table2-s10")

#: (reading, table) -> cells, as (case, n, n_layers, pos_embed, d_token); written from ``rule()``
#: on the committed reports before any extra seed ran (``--check`` recomputes it)
CELLS = {
    ("f14", "table1"): [
        (1, 100, 1, "learned", 8), (1, 100, 1, "learned", 16), (2, 100, 1, "none", 4),
        (2, 100, 1, "none", 8), (2, 100, 1, "none", 16), (2, 100, 1, "none", 32),
        (3, 100, 1, "none", 4), (3, 100, 1, "none", 8), (3, 100, 1, "none", 16),
        (3, 100, 1, "none", 32), (4, 100, 1, "learned", 8), (4, 100, 1, "learned", 16),
        (4, 100, 1, "learned", 32)],
    ("f14", "table2"): [
        (5, 2, 1, "learned", 16), (5, 2, 1, "learned", 32), (5, 2, 1, "learned", 100),
        (5, 2, 2, "learned", 200), (5, 5, 1, "learned", 16), (5, 5, 1, "learned", 32),
        (5, 5, 2, "learned", 16), (5, 10, 2, "learned", 16), (5, 10, 2, "learned", 100)],
    ("attention-only", "table1"): [
        (1, 100, 1, "learned", 8), (1, 100, 1, "learned", 16), (1, 100, 1, "learned", 32),
        (2, 100, 1, "none", 4), (2, 100, 1, "none", 8), (2, 100, 1, "none", 16),
        (2, 100, 1, "none", 32), (3, 100, 1, "none", 4), (3, 100, 1, "none", 8),
        (3, 100, 1, "none", 16), (3, 100, 1, "none", 32), (4, 100, 1, "learned", 8),
        (4, 100, 1, "learned", 32)],
    ("attention-only", "table2"): [
        (5, 2, 1, "learned", 32), (5, 2, 1, "learned", 200), (5, 5, 1, "learned", 100),
        (5, 5, 2, "learned", 32), (5, 5, 2, "learned", 100), (5, 10, 2, "learned", 16),
        (5, 10, 2, "learned", 32)],
}


def non_informative(case: int, pos_embed: str) -> bool:
    """DESIGN.md section 1's rule, from the setting alone: cases 1 and 4 without positional
    embeddings (the final position sees the multiset of the other tokens, which is the same for
    every input when f is a permutation, so any such model is at chance, 1/n, in expectation)."""
    return case in (1, 4) and pos_embed == "none"


def _report_cells(path: Path) -> list[tuple[tuple, list[float], float]]:
    """A report's per-cell lines: (cell, per-seed accuracies %, process CPU s per run)."""
    sys.path.insert(0, str(EXP / "readings"))
    from claims import md_tables

    out = []
    for table in md_tables(path):
        for r in table:
            if "per-seed accuracy (seed: %)" not in r:
                continue
            accs = [float(p.split(": ")[1]) for p in r["per-seed accuracy (seed: %)"].split(", ")]
            cpu = float(r["s/run wall / CPU"].split(" / ")[1])
            if "case" in r:
                cell = (int(r["case"]), 100, 1, r["pos_embed"], int(r["d_token"]))
            else:
                cell = (5, int(r["n"]), int(r["n_layers"]), "learned", int(r["d_token"]))
            out.append((cell, accs, cpu))
    return out


def rule() -> dict[tuple, list[tuple]]:
    """The declared cells, recomputed from the committed reports."""
    return {key: [cell for cell, accs, cpu in _report_cells(path)
                  if not non_informative(cell[0], cell[3]) and max(accs) - min(accs) > SPREAD
                  and cpu <= CPU_CAP]
            for key, path in SOURCES.items()}


def folder(name: str) -> tuple[str, str, range]:
    """A stage folder's name -> (reading, table, seeds)."""
    if name not in ORDER:
        raise ValueError(f"stage {name!r}; accepted: one of {list(ORDER)}")
    head, first = name.rsplit("-s", 1)
    reading, table = head.rsplit("-", 1)
    return reading, table, range(int(first), int(first) + 5)


def configs(name: str) -> list:
    """The TrainConfigs of one stage folder: its reading's runs of the declared cells, its seeds.
    f14: ``experiments/readings/screen/design.py``'s; attention-only: ``experiments/table{1,2}``'s."""
    reading, table, seeds = folder(name)
    cells = CELLS[(reading, table)]
    if reading == "f14":
        sys.path.insert(0, str(EXP / "readings" / "screen"))
        import design

        return design.configs("f14", cells=cells, seeds=seeds)
    from interp.training.trainer import TrainConfig

    return [TrainConfig(case=case, n=n, d_token=d, n_layers=layers, pos_embed=pe, seed=s, init="pytorch")
            for case, n, layers, pe, d in cells for s in seeds]


def layout(name: str) -> dict:
    """A stage folder's TableLayout arguments: the paper's table layout (``experiments/table{1,2}``)."""
    reading, table, seeds = folder(name)
    title = f"{reading}, {table}: extra seeds {seeds.start}-{seeds.stop - 1} (issue 53)"
    if table == "table1":
        return dict(rows=("case", "pos_embed"), column="d_token",
                    paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}, title=title)
    return dict(rows=("n", "n_layers"), column="d_token",
                paper={"n": "n", "n_layers": "layers", "d_token": "d_token"}, title=title)


def main(argv: list[str]) -> int:
    found = rule()
    for key, cells in found.items():
        print(f"{key[0]} {key[1]}: {len(cells)} cells: {cells}")
    if "--check" in argv and found != CELLS:
        print("the rule no longer gives stages.CELLS", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
