"""How long the chosen reading's two tables took in given stores (one sweep each, any device).

    .venv/bin/python experiments/bench/tables_summary.py experiments/bench/gpu/tables --out experiments/bench/gpu/tables.md

Reads ``<folder>/table1/store.sqlite`` and ``<folder>/table2/store.sqlite`` (what
``experiments/bench/gpu.sh`` writes) and prints, per table: runs stored against the runs the
table declares under the chosen reading (the sweep folders ``TABLES/table1``, ``table2``: the
screen's choice ``f14``, which replaced ``mlp-4x``), the sweeps' wall time
(every invocation logged in the store, so a table run in pieces adds up), the runs' process
CPU time, the device, and the load at the start; then both tables against the 10-minute target
for one H100 (issue 27). A table whose runs are not all stored gives a lower bound, and says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from interp.sweeps import store

HERE = Path(__file__).resolve().parent
READING, TARGET_MIN = "f14", 10.0  # issue 28's gate: f14 replaces mlp-4x
TABLES = HERE.parent / "readings" / "screen" / READING  # its table1/, table2/ sweep folders


def table_row(path: Path, table: str, tables: Path = TABLES) -> tuple[str, float, bool]:
    """(Markdown row, wall seconds, every declared run stored) for one table's store, against
    the runs the sweep folder ``tables/table`` declares."""
    from interp.sweeps.configs_file import MAX_RUNS, read_configs

    declared = {c.name() for c in read_configs(tables / table / "configs.py", MAX_RUNS)[0]}
    if not path.exists():
        return f"| {table} | 0 / {len(declared)} | - | - | - | - |", 0.0, False
    runs, log = store.read(path), store.read_sweeps(path)
    stored = runs[runs["name"].isin(declared)]
    wall = float(log["wall_seconds"].fillna(0).sum())
    env = json.loads(log.iloc[0]["environment"]) if len(log) else {}
    device = env.get("gpu") or env.get("device", "?")
    load = env.get("load_average") or ["?"]
    outcomes = ", ".join(sorted(set(log["outcome"].fillna("killed"))))
    row = (f"| {table} | {len(stored)} / {len(declared)} | {wall / 60:.2f} | "
           f"{stored['cpu_seconds'].sum() / 60:.2f} | {device} | {load[0]} | {outcomes} |")
    return row, wall, len(stored) == len(declared)


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="holds table1/store.sqlite and table2/store.sqlite")
    parser.add_argument("--out", help="also write the Markdown here")
    parser.add_argument("--tables", type=Path, default=TABLES,
                        help="the folder whose table1/ and table2/ sweep folders the stores trained "
                             f"(default {TABLES.relative_to(HERE.parents[1])})")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    for table in ("table1", "table2"):
        if not (args.tables / table / "configs.py").is_file():
            parser.error(f"--tables {args.tables}: no {table}/configs.py there")
    shown = args.tables.resolve()
    shown = shown.relative_to(HERE.parents[1]) if shown.is_relative_to(HERE.parents[1]) else shown
    lines = [f"# Both tables under `{shown}`: time per table", "",
             f"From the stores in `{folder}` (`experiments/bench/tables_summary.py`).", "",
             "| table | runs stored / declared | sweep wall (min) | process CPU (min, all runs) | "
             "device | load at start (1 min) | sweep outcomes |", "|---|--:|--:|--:|---|--:|---|"]
    total, complete = 0.0, True
    for table in ("table1", "table2"):
        row, wall, done = table_row(folder / table / "store.sqlite", table, args.tables)
        lines.append(row)
        total += wall
        complete &= done
    if not complete:
        verdict = "not met: not every run is stored, so the time is a lower bound"
    else:
        verdict = "met" if total / 60 <= TARGET_MIN else f"missed by {total / 60 - TARGET_MIN:.1f} min"
    lines += ["", f"Both tables: {total / 60:.1f} min of sweep wall time against the "
              f"{TARGET_MIN:.0f}-minute target ({verdict})."]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
