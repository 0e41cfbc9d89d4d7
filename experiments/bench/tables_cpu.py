"""How long the paper's two tables (attention-only) take on this machine, from their stores.

    .venv/bin/interp sweep experiments/table1 --workers 2 --store experiments/bench/tables-cpu/table1/results/store.sqlite
    .venv/bin/interp sweep experiments/table2 --workers 2 --store experiments/bench/tables-cpu/table2/results/store.sqlite
    .venv/bin/python experiments/bench/tables_cpu.py        # -> experiments/bench/tables-cpu/timing.md

Reads each store's sweeps log (wall time, load at start and end, cores) and its runs (process
CPU seconds, steps) and writes where the time went. Run the sweeps with nothing else on the
machine: the numbers are only as clean as the load column says.

Then the machine's limit: per config, the matmul FLOPs the fast engine executes in one seed-step
(``flops.step_flops``, counted by ``torch.utils.flop_counter`` in one step, not timed) times the
seed-steps the runs took, against the one-thread peak that ``flops.py`` measured at a quiet
moment (``flops.md``): the CPU time the matmuls alone would need at that peak, beside the CPU
time the runs used.
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
    total_wall, parts, frames = 0.0, [], []
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
        frames.append(runs)
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
    lines += limit_lines(frames)
    text = "\n".join(lines) + "\n"
    (HERE / "timing.md").write_text(text)
    print(text)
    return text


def limit_lines(frames) -> list[str]:
    """How far each group of runs is from the machine's matmul limit (module docstring)."""
    import sys

    import pandas as pd

    sys.path.insert(0, str(HERE.parent))
    import flops
    from interp.training.trainer import TrainConfig

    peak = flops.peak_from((HERE.parent / "flops.md").read_text())
    runs = pd.concat(frames, ignore_index=True)
    per_cell = {}  # a step's FLOPs do not depend on the seed: counted once per cell
    for i, r in runs.iterrows():
        cell = TrainConfig.from_dict(json.loads(r["config"])).replace(seed=0)
        if cell.name() not in per_cell:
            per_cell[cell.name()] = flops.step_flops(cell)
        runs.loc[i, "flop"] = per_cell[cell.name()] * r["steps"]
    lines = ["", f"How close to the machine's limit: matmul FLOPs the fast engine executed (counted per "
             f"seed-step, times the steps run) against the one-thread peak of `flops.md` "
             f"({peak / 1e9:.1f} GFLOP/s):", "",
             "| group | executed TFLOP | CPU (min) at the peak | CPU (min) used | share of peak |",
             "|---|--:|--:|--:|--:|"]
    groups = runs.groupby("bucket", sort=False).agg(flop=("flop", "sum"), cpu=("cpu_seconds", "sum"))
    for name, r in [*groups.iterrows(), ("both tables", groups.sum())]:
        at_peak = r["flop"] / peak
        lines.append(f"| {name} | {r['flop'] / 1e12:.1f} | {at_peak / 60:.1f} | {r['cpu'] / 60:.1f} | "
                     f"{100 * at_peak / r['cpu']:.0f}% |")
    return lines


if __name__ == "__main__":
    main()
