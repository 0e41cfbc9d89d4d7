"""Issue 28's screen of the paper's unstated architecture choices, declared as data (DESIGN.md).

Committed before any screening run. The factors (each a TrainConfig field, default level = today's
code), the two-block fraction of the eight two-level factors, the MLP block, the screening and
held-out cells, and the rule that picks one combination. Fields the architecture spec does not
have yet are named in ``TO_BE_ADDED``; nothing is written until TrainConfig has every field.

    .venv/bin/python experiments/readings/screen/design.py          # the design and its alias chains
    .venv/bin/python experiments/readings/screen/design.py --write  # the sweep folders f01..f16, m-last-2048
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLES = HERE.parents[1]  # experiments/
SEEDS = range(5)
CLOSE_CALL_SEEDS = range(5, 10)

#: letter -> (field, default level (-1), alternative level (+1), which cells it acts on)
FACTORS = {
    "A": ("attn_bias", True, False, "all"),
    "U": ("unembed_bias", True, False, "all"),
    "O": ("W_O", "free", "identity", "all"),
    "R": ("residual", "stream", "embed", "two-layer"),
    "I": ("init", "pytorch", "mha", "all"),
    "P": ("pos_init", "drawn", "zero", "learned-PE"),
    "S": ("embed_scale", "1", "sqrt_d_model", "all"),
    "K": ("key_order", "sequence", "batch", "permuted keys (cases 3, 5)"),
}
LETTERS = tuple(FACTORS)
#: fields this design needed that interp.TrainConfig did not have when it was declared; all
#: three exist now (P's default level, proposed as "normal", is named "drawn": the init family's draw)
TO_BE_ADDED = ()
NEEDS = ("d_mlp", "mlp", *(f for f, *_ in FACTORS.values()))

#: MLP level -> (d_mlp: a multiple of d_model (int) or a fixed width (str), placement)
MLP_LEVELS = {
    "none": (0, "every"),
    "every-4d": (4, "every"),
    "every-2048": ("2048", "every"),
    "last-4d": (4, "last"),
    "last-2048": ("2048", "last"),
}
FRACTION_MLP = "last-4d"

#: the 14 screening cells: experiments/readings/readings.py's CELLS (case, n, n_layers, pe, d_token)
SCREENING = [
    (1, 100, 1, "learned", 8), (4, 100, 1, "learned", 8), (3, 100, 1, "none", 8),
    (4, 100, 1, "learned", 16), (1, 100, 1, "learned", 16), (3, 100, 1, "none", 32),
    (5, 2, 1, "learned", 16), (5, 5, 1, "learned", 32), (5, 10, 1, "learned", 32),
    (5, 10, 2, "learned", 16), (5, 20, 2, "learned", 32), (5, 5, 2, "learned", 200),
    (5, 2, 2, "learned", 32), (5, 10, 2, "learned", 32),
]


def _paper(table: str) -> list[dict]:
    return list(csv.DictReader((TABLES / table / "paper.csv").read_text().splitlines()))


def table_cells(table: str) -> list[tuple]:
    """Every cell of the paper's Table 1 or 2, from experiments/<table>/paper.csv."""
    if table == "table1":
        return [(int(r["case"]), 100, 1, r["pe"], int(r["d_token"])) for r in _paper(table)]
    if table == "table2":
        return [(5, int(r["n"]), int(r["layers"]), "learned", int(r["d_token"])) for r in _paper(table)]
    raise ValueError(f"table={table!r}; accepted: 'table1' or 'table2'")


def held_out() -> list[tuple]:
    """The other 48 cells of both tables."""
    return [c for t in ("table1", "table2") for c in table_cells(t) if c not in SCREENING]


def block(number: int) -> list[dict]:
    """The 8 rows of block 1 (a 2^(7-4) of resolution III in A, U, S with O = -AS, P = -AU,
    I = -SU, R = ASU; K at its default, so the all-default row is its first) or block 2 (its
    mirror image, every sign reversed, K at the alternative)."""
    if number not in (1, 2):
        raise ValueError(f"block={number!r}; accepted: 1 or 2")
    rows = []
    for a, u, s in itertools.product((-1, 1), repeat=3):
        row = dict(A=a, U=u, O=-a * s, R=a * s * u, I=-s * u, P=-a * u, S=s, K=-1)
        rows.append({k: v if number == 1 else -v for k, v in row.items()})
    return rows


def combinations() -> dict[str, tuple[dict, str]]:
    """Name -> (factor levels, MLP level) of every combination this design trains itself."""
    rows = block(1) + block(2)
    out = {f"f{i + 1:02d}": (row, FRACTION_MLP) for i, row in enumerate(rows)}
    out["m-last-2048"] = ({k: -1 for k in LETTERS}, "last-2048")
    return out


def alias_chains() -> tuple[dict, list]:
    """Block 1's main effects with the two-factor interactions aliased to them (sign, pair), and
    the union's seven chains of aliased two-factor interactions; asserts the union is of
    resolution IV (no main effect correlated with any two-factor interaction)."""
    one, both = block(1), block(1) + block(2)
    col = {k: [r[k] for r in both] for k in LETTERS}
    dot = lambda x, y: sum(p * q for p, q in zip(x, y))  # noqa: E731
    pairs = list(itertools.combinations(LETTERS, 2))
    inter = {p + q: [x * y for x, y in zip(col[p], col[q])] for p, q in pairs}
    for k in LETTERS:
        assert dot(col[k], col[k]) == 16 and all(dot(col[k], col[j]) == 0 for j in LETTERS if j != k)
        assert all(dot(col[k], v) == 0 for v in inter.values()), k
    first = {k: [r[k] for r in one] for k in LETTERS if k != "K"}
    block1 = {k: [("+" if dot(first[k], [x * y for x, y in zip(first[p], first[q])]) > 0 else "-") + p + q
                  for p, q in itertools.combinations(first, 2)
                  if abs(dot(first[k], [x * y for x, y in zip(first[p], first[q])])) == 8]
              for k in first}
    chains: dict[tuple, list] = {}
    for name, v in inter.items():
        chains.setdefault(tuple(x * v[0] for x in v), []).append(name)  # sign-free
    return block1, list(chains.values())


def _acts(letter: str, cell: tuple) -> bool:
    case, _, layers, pe, _ = cell
    return {"R": layers == 2, "P": pe == "learned", "K": case in (3, 5)}.get(letter, True)


def _d_mlp(level: str, case: int, d_token: int) -> int:
    width = MLP_LEVELS[level][0]
    return int(width) if isinstance(width, str) else width * (2 * d_token if case in (2, 3) else d_token)


def cell_fields(levels: dict, mlp_level: str, cell: tuple) -> dict:
    """TrainConfig keyword arguments of one cell under a combination. A factor that cannot act
    in the cell (residual in one layer, PE init without PE, key order without permuted keys,
    MLP placement in one layer) is written at its default, so identical models share a name."""
    if mlp_level not in MLP_LEVELS:
        raise ValueError(f"mlp_level={mlp_level!r}; accepted: one of {list(MLP_LEVELS)}")
    if set(levels) != set(LETTERS) or any(v not in (-1, 1) for v in levels.values()):
        raise ValueError(f"levels={levels!r}; accepted: every factor of {LETTERS} at -1 or +1")
    case, n, layers, pe, d = cell
    out = dict(case=case, n=n, d_token=d, n_layers=layers, pos_embed=pe)
    for k, (field, default, alt, _) in FACTORS.items():
        out[field] = alt if levels[k] == 1 and _acts(k, cell) else default
    d_mlp = _d_mlp(mlp_level, case, d)
    out.update(d_mlp=d_mlp, mlp=MLP_LEVELS[mlp_level][1] if d_mlp and layers == 2 else "every")
    return out


def missing_fields() -> list[str]:
    from interp import TrainConfig

    have = {f.name for f in dataclasses.fields(TrainConfig)}
    return [f for f in NEEDS if f not in have]


def configs(name: str, cells: list | None = None, seeds=SEEDS) -> list:
    """The runs of one combination (``combinations()`` or a composed one written by
    ``write_folder``) on the screening cells, or on ``cells``."""
    from interp import TrainConfig

    missing = missing_fields()
    if missing:
        raise ValueError(f"TrainConfig has no field {missing}; experiments/readings/screen needs "
                         f"{list(NEEDS)} (DESIGN.md, 'Factors')")
    levels, mlp_level = _declared(name)
    return [TrainConfig(**cell_fields(levels, mlp_level, c), seed=s)
            for c in (SCREENING if cells is None else cells) for s in seeds]


def _declared(name: str) -> tuple[dict, str]:
    known = combinations()
    if name in known:
        return known[name]
    path = HERE / name / "levels.csv"
    if not path.exists():
        raise ValueError(f"combination {name!r}: not one of {list(known)} and no {path}")
    row = next(csv.DictReader(path.read_text().splitlines()))
    return {k: int(row[k]) for k in LETTERS}, row["mlp"]


def composed(effects: dict) -> dict:
    """Each factor at the level whose rows had more comparisons within 5 points (effect > 0:
    the alternative); the default on a tie."""
    return {k: 1 if effects[k] > 0 else -1 for k in LETTERS}


def rank(scores: list[dict]) -> list[dict]:
    """The declared order: most comparisons within 5 points, then the smaller mean |diff|, then
    fewer factors off their defaults. Each score: name, within, mean_abs_diff, changed."""
    return sorted(scores, key=lambda s: (-s["within"], s["mean_abs_diff"], s["changed"]))


LAYOUT_ARGS = dict(rows=("case", "n", "n_layers", "pos_embed"), column="d_token",
                   paper={"case": "case", "n": "n", "n_layers": "layers", "pos_embed": "pe",
                          "d_token": "d_token"})

CONFIGS_PY = '''"""Combination {name!r} of experiments/readings/screen/design.py (written by it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs({name!r})
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Screening cells under combination {name} (max/avg over 5 seeds)")
'''


def write_folder(name: str, levels: dict | None = None, mlp_level: str | None = None) -> Path:
    """``screen/<name>/`` (configs.py, paper.csv; levels.csv for a composed combination)."""
    missing = missing_fields()
    if missing:
        raise ValueError(f"TrainConfig has no field {missing}: add them before writing sweep folders")
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    if levels is not None:
        cell_fields(levels, mlp_level, SCREENING[0])  # validates before anything is written
        (folder / "levels.csv").write_text(",".join((*LETTERS, "mlp")) + "\n"
                                           + ",".join((*(str(levels[k]) for k in LETTERS), mlp_level)) + "\n")
    configs(name)  # every config must build
    paper = {("table1", r["case"], r["pe"], r["d_token"]): r for r in _paper("table1")}
    paper.update({("table2", r["n"], r["layers"], r["d_token"]): r for r in _paper("table2")})
    with open(folder / "paper.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["case", "n", "layers", "pe", "d_token", "max", "avg"])
        w.writeheader()
        for case, n, layers, pe, d in SCREENING:
            key = ("table1", str(case), pe, str(d)) if case != 5 else ("table2", str(n), str(layers), str(d))
            w.writerow(dict(case=case, n=n, layers=layers, pe=pe, d_token=d,
                            max=paper[key]["max"], avg=paper[key]["avg"]))
    (folder / "configs.py").write_text(CONFIGS_PY.format(name=name))
    return folder


TABLE_LAYOUT_ARGS = {
    "table1": dict(rows=("case", "pos_embed"), column="d_token",
                   paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"}),
    "table2": dict(rows=("n", "n_layers"), column="d_token",
                   paper={"n": "n", "n_layers": "layers", "d_token": "d_token"}),
}

TABLE_PY = '''"""{table} of the paper under combination {name!r} (written by experiments/readings/screen/design.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs({name!r}, cells=design.table_cells({table!r}))
LAYOUT = TableLayout(**design.TABLE_LAYOUT_ARGS[{table!r}], title="{table} under combination {name}")
'''


def write_tables(name: str) -> list[Path]:
    """``screen/<name>/table1`` and ``table2``: both full tables under a combination (its
    screening cells are the same runs, so a shared store trains only the 48 held-out cells)."""
    configs(name)
    out = []
    for table in ("table1", "table2"):
        folder = HERE / name / table
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "paper.csv").write_text((TABLES / table / "paper.csv").read_text())
        (folder / "configs.py").write_text(TABLE_PY.format(table=table, name=name))
        out.append(folder)
    return out


def paper_numbers() -> dict[tuple, tuple[float, float]]:
    """The paper's (max, avg) of every cell of both tables (experiments/table1, table2
    paper.csv), keyed as ``SCREENING``'s cells: screening and held-out cells are compared with
    the same numbers."""
    return {cell: (float(r["max"]), float(r["avg"]))
            for table in ("table1", "table2") for cell, r in zip(table_cells(table), _paper(table))}


CLOSE_CALL_SUFFIX = "-s59"

CLOSE_CALL_PY = '''"""Close call (DESIGN.md section 6.3): combination {name!r} on {k} screening cells with seeds 5-9
(written by experiments/readings/screen/design.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CELLS = {cells!r}
CONFIGS = design.configs({name!r}, cells=CELLS, seeds=design.CLOSE_CALL_SEEDS)
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Close call: {name} on {k} cells, seeds 5-9 (max/avg over 5 seeds)")
'''


def write_close_call(name: str, cells: list) -> Path:
    """``screen/<name>-s59/`` (configs.py, paper.csv): a close call's rerun of combination
    ``name`` on ``cells`` (screening cells) with ``CLOSE_CALL_SEEDS``. Its runs are
    ``configs(name, cells, CLOSE_CALL_SEEDS)``: other seeds, so other run names in a shared store."""
    bad = [c for c in cells if c not in SCREENING]
    if not cells or bad:
        raise ValueError(f"cells={bad or cells!r}; accepted: a non-empty list of SCREENING cells")
    configs(name, cells=cells, seeds=CLOSE_CALL_SEEDS)  # every config must build before anything is written
    folder = HERE / f"{name}{CLOSE_CALL_SUFFIX}"
    folder.mkdir(exist_ok=True)
    numbers = paper_numbers()
    with open(folder / "paper.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["case", "n", "layers", "pe", "d_token", "max", "avg"], lineterminator="\n")
        w.writeheader()
        for cell in cells:
            case, n, layers, pe, d = cell
            w.writerow(dict(case=case, n=n, layers=layers, pe=pe, d_token=d,
                            max=f"{numbers[cell][0]:.2f}", avg=f"{numbers[cell][1]:.2f}"))
    (folder / "configs.py").write_text(CLOSE_CALL_PY.format(name=name, cells=list(cells), k=len(cells)))
    return folder


def describe() -> str:
    one, chains = alias_chains()
    lines = ["combination | " + " ".join(LETTERS) + " | MLP"]
    for name, (levels, mlp) in combinations().items():
        lines.append(f"{name} | " + " ".join("+" if levels[k] == 1 else "-" for k in LETTERS) + f" | {mlp}")
    lines.append("block 1 alone (K at its default): " + "; ".join(f"{k} = {k} {' '.join(v)}" for k, v in one.items()))
    lines.append("both blocks: resolution IV; two-factor interaction chains: "
                 + "; ".join(" = ".join(c) for c in chains))
    lines.append(f"screening cells {len(SCREENING)}, held-out cells {len(held_out())}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
    if "--write" in sys.argv[1:]:
        for name in combinations():
            print(write_folder(name).relative_to(TABLES.parent))
