"""How long the paper's two tables (attention-only) take on this machine, from their stores.

    .venv/bin/interp sweep experiments/table1 --workers 2 --store experiments/bench/tables-cpu/table1/results/store.sqlite
    .venv/bin/interp sweep experiments/table2 --workers 2 --store experiments/bench/tables-cpu/table2/results/store.sqlite
    .venv/bin/python experiments/bench/tables_cpu.py        # -> experiments/bench/tables-cpu/timing.md

Reads each store's sweeps log (wall time, load at start and end, cores) and its runs (process
CPU seconds, steps) and writes where the time went. Run the sweeps with nothing else on the
machine: the numbers are only as clean as the load column says.
"""

from __future__ import annotations

import json
from pathlib import Path

from interp.training import store

HERE = Path(__file__).resolve().parent / "tables-cpu"
TARGET_MIN = 30.0  # issue 16: Table 1 + Table 2 (attention-only) on this 2-core machine


def bucket(row) -> str:
    if row["case"] != 5:
        return f"Table 1, d_token {row['d_token']}"
    width = "d_token 100-200" if row["d_token"] >= 100 else "d_token 16-32"
    return f"Table 2, {row['n_layers']} layer{'s' * (row['n_layers'] > 1)}, {width}"


def main() -> str:
    lines = ["# The paper's tables on this machine: where the time goes", "",
             "Written by `experiments/bench/tables_cpu.py` from the stores of the two sweeps "
             "(commands in its docstring).", "",
             "| table | runs | wall (min) | process CPU (min, all runs) | CPU / wall | cores | load at start / end (1 min) | device |",
             "|---|--:|--:|--:|--:|--:|---|---|"]
    total_wall, parts = 0.0, []
    for table in ("table1", "table2"):
        path = HERE / table / "results" / "store.sqlite"
        log = store.read_sweeps(path)
        done = log[log["outcome"] == "done"].iloc[-1]
        env = json.loads(done["environment"])
        runs = store.read(path)
        wall, cpu = float(done["wall_seconds"]), float(runs["cpu_seconds"].sum())
        total_wall += wall
        lines.append(f"| {table} | {len(runs)} | {wall / 60:.1f} | {cpu / 60:.1f} | {cpu / wall:.2f} | "
                     f"{env['cpus']} | {env['load_average'][0]:.2f} / {env['load_average_end'][0]:.2f} | "
                     f"{env['device']} |")
        runs = runs.sort_values(["n_layers", "d_token"], kind="stable")
        runs["bucket"] = [bucket(r) for _, r in runs.iterrows()]
        parts.append(runs.groupby("bucket", sort=False).agg(runs=("name", "size"), cpu=("cpu_seconds", "sum"),
                                                steps=("steps", "mean"),
                                                to_max=("steps", lambda s: int((s >= 10_000).sum()))))
    lines += ["", f"Both tables: {total_wall / 60:.1f} min wall against the {TARGET_MIN:.0f}-minute target "
              f"({'met' if total_wall / 60 <= TARGET_MIN else f'missed by {total_wall / 60 - TARGET_MIN:.1f} min'}).",
              "", "Where the CPU time goes (runs that reach 10,000 steps never met the stop loss):", "",
              "| group | runs | CPU (min) | share | mean steps | runs at 10,000 steps |", "|---|--:|--:|--:|--:|--:|"]
    grand = sum(float(p["cpu"].sum()) for p in parts)
    for p in parts:
        for name, r in p.iterrows():
            lines.append(f"| {name} | {int(r['runs'])} | {r['cpu'] / 60:.1f} | {100 * r['cpu'] / grand:.0f}% | "
                         f"{r['steps']:.0f} | {int(r['to_max'])} |")
    text = "\n".join(lines) + "\n"
    (HERE / "timing.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
