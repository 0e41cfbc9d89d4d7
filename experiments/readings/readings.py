"""Issue 16's readings of the paper's architecture, and the diagnostic cells they are scored on.

Declared before any of them ran (this file's first commit). Each reading is one global choice of
MLP width; nothing else changes (case, n, d_token, layers, learned/no PE, 5 seeds, the paper's
protocol: TrainConfig's defaults; init="pytorch" as in experiments/table1 and table2). Run

    .venv/bin/python experiments/readings/readings.py        # (re)writes the sweep folders
    .venv/bin/interp sweep experiments/readings/<name>       # each reading: 14 cells x 5 seeds
    .venv/bin/interp report experiments/readings/<name>      # within-5 counts beside the paper

and pick the reading with the most of the 28 comparisons (14 cells, max and avg) within 5
points of the paper (``interp report``'s count); ties go to the smaller mean |ours - paper|.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from interp.sweeps import driver as sweeps
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

HERE = Path(__file__).resolve().parent
INIT = "pytorch"
SEEDS = range(5)

#: reading -> (d_mlp as a multiple of d_model, or a fixed width), and the sentence it rests on
READINGS = {
    "attention-only": (0, "Section 4: one head, residuals, no LayerNorm; Section 2 counts "
                          "attention layers only (today's tables)"),
    "mlp-1x": (1, "Discussion of Theorem 3.5: its upper bound 'requires MLPs that are "
                  "considerably larger than those in these experiments': the experiments had "
                  "small MLPs; d_mlp = d_model is the smallest usual one"),
    "mlp-4x": (4, "An MLP after every attention layer at the usual transformer ratio "
                  "d_mlp = 4 d_model"),
    "torch-encoder": ("2048", "Section 4: 'encoder-only transformers'; in code that most often "
                              "means nn.TransformerEncoderLayer, whose dim_feedforward is 2048 "
                              "(ReLU; its LayerNorm and dropout are left out, as the paper says)"),
}

#: the diagnostic cells: the worst gaps of experiments/table1 and table2's reports plus cells
#: that agree today. (case, n, n_layers, pos_embed, d_token, why)
CELLS = [
    (1, 100, 1, "learned", 8, "T1 gap: max 15.1 vs 99.9"),
    (4, 100, 1, "learned", 8, "T1 gap: max 15.9 vs 99.9"),
    (3, 100, 1, "none", 8, "T1 gap: mean 77.6 vs 24.8"),
    (4, 100, 1, "learned", 16, "T1 gap: mean 95.9 vs 46.2"),
    (1, 100, 1, "learned", 16, "T1 agrees"),
    (3, 100, 1, "none", 32, "T1 agrees (max)"),
    (5, 2, 1, "learned", 16, "T2 one layer at the 75% bound vs 100"),
    (5, 5, 1, "learned", 32, "T2 gap: max 33.2 vs 99.8"),
    (5, 10, 1, "learned", 32, "T2 gap: max 10.3 vs 99.8"),
    (5, 10, 2, "learned", 16, "T2 gap: mean 44.0 vs 81.9"),
    (5, 20, 2, "learned", 32, "T2 gap: max 5.1 vs 100"),
    (5, 5, 2, "learned", 200, "T2 gap: max 23.0 vs 99.99"),
    (5, 2, 2, "learned", 32, "T2 agrees"),
    (5, 10, 2, "learned", 32, "T2 agrees (max)"),
]

LAYOUT = TableLayout(
    rows=("case", "n", "n_layers", "pos_embed"),
    column="d_token",
    paper={"case": "case", "n": "n", "n_layers": "layers", "pos_embed": "pe", "d_token": "d_token"},
    title="Diagnostic cells under one reading (max/avg over 5 seeds)",
)


def d_mlp(reading: str, case: int, d_token: int) -> int:
    """The reading's MLP width for a cell (d_model = 2 d_token in cases 2-3)."""
    if reading not in READINGS:
        raise ValueError(f"reading={reading!r}; accepted: one of {list(READINGS)}")
    width = READINGS[reading][0]
    if isinstance(width, str):
        return int(width)
    return width * (2 * d_token if case in (2, 3) else d_token)


def configs(reading: str) -> list[TrainConfig]:
    return [TrainConfig(case=case, n=n, d_token=d, n_layers=layers, pos_embed=pe, seed=seed,
                        init=INIT, d_mlp=d_mlp(reading, case, d))
            for case, n, layers, pe, d, _ in CELLS for seed in SEEDS]


def paper_rows() -> list[dict]:
    """The paper's max/avg of every diagnostic cell, from experiments/table1 and table2's paper.csv."""
    t1 = {(int(r["case"]), r["pe"], int(r["d_token"])): r
          for r in csv.DictReader((HERE.parent / "table1" / "paper.csv").read_text().splitlines())}
    t2 = {(int(r["n"]), int(r["layers"]), int(r["d_token"])): r
          for r in csv.DictReader((HERE.parent / "table2" / "paper.csv").read_text().splitlines())}
    rows = []
    for case, n, layers, pe, d, _ in CELLS:
        src = t1[(case, pe, d)] if case != 5 else t2[(n, layers, d)]
        rows.append(dict(case=case, n=n, layers=layers, pe=pe, d_token=d, max=src["max"], avg=src["avg"]))
    return rows


TABLES = ("table1", "table2")


def _table(table: str):
    """experiments/<table> loaded as a sweep (its configs and layout), by interp's own loader."""
    if table not in TABLES:
        raise ValueError(f"table={table!r}; accepted: one of {TABLES}")
    return sweeps.load(HERE.parent / table)


def table_configs(reading: str, table: str) -> list[TrainConfig]:
    """A whole table of the paper under one reading: experiments/<table>'s configs with the
    reading's MLP width and nothing else changed."""
    return [dataclasses.replace(c, d_mlp=d_mlp(reading, c.case, c.d_token)) for c in _table(table).configs]


def table_layout(table: str) -> TableLayout:
    return _table(table).layout


CONFIGS_PY = '''"""Reading {name!r} of experiments/readings/readings.py (written by it; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import readings  # noqa: E402

CONFIGS = readings.configs({name!r})
LAYOUT = readings.LAYOUT
'''


TABLE_PY = '''"""{title} of the paper under reading {name!r} (written by experiments/readings/readings.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import readings  # noqa: E402

CONFIGS = readings.table_configs({name!r}, {table!r})
LAYOUT = readings.table_layout({table!r})
'''


def write_folders() -> list[Path]:
    """The diagnostic sweep of every reading (``<reading>/``) and, for every reading but
    attention-only (whose full tables are experiments/table1 and table2), the full tables
    under it (``<reading>/table1``, ``<reading>/table2``, the tables' own paper.csv)."""
    out = []
    for name in READINGS:
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        (folder / "configs.py").write_text(CONFIGS_PY.format(name=name))
        with open(folder / "paper.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["case", "n", "layers", "pe", "d_token", "max", "avg"])
            w.writeheader()
            w.writerows(paper_rows())
        out.append(folder)
        if name == "attention-only":
            continue
        for table in TABLES:
            sub = folder / table
            sub.mkdir(exist_ok=True)
            title = f"Table {table[-1]}"
            (sub / "configs.py").write_text(TABLE_PY.format(title=title, name=name, table=table))
            (sub / "paper.csv").write_text((HERE.parent / table / "paper.csv").read_text())
            out.append(sub)
    return out


def cost() -> str:
    """FLOPs each reading needs at most (every run to max_steps; the fast engine's count, which
    runs the last layer at the final position only: experiments/bench/flops.py), as Markdown."""
    import sys

    sys.path.insert(0, str(HERE.parent / "bench"))
    import flops

    lines = ["| reading | " + " | ".join(f"{c[0]},{c[1]},{c[2]}L,{c[4]}" for c in CELLS)
             + " | total PFLOP |", "|---|" + "--:|" * (len(CELLS) + 1)]
    for name in READINGS:
        per = [flops.model_flops(c)["final_step"] * c.max_steps * len(SEEDS) / 1e15
               for c in configs(name)[:: len(SEEDS)]]
        lines.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in per) + f" | {sum(per):.2f} |")
    return ("Upper bound on the FLOPs of each cell (PFLOP = 1e15; 5 seeds x max_steps, forward + "
            "backward; columns: case, n, layers, d_token), from `readings.py`:\n\n"
            + "\n".join(lines) + "\n")


if __name__ == "__main__":
    for folder in write_folders():
        print(folder.relative_to(HERE.parent.parent))
    (HERE / "cost.md").write_text(cost())
    print(cost())
