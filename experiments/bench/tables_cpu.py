"""How long the paper's two tables take on this machine, from their stores.

    .venv/bin/interp sweep experiments/table1 --workers 2 --store experiments/bench/tables-cpu/table1/results/store.sqlite
    .venv/bin/interp sweep experiments/table2 --workers 2 --store experiments/bench/tables-cpu/table2/results/store.sqlite
    .venv/bin/python experiments/bench/tables_cpu.py        # -> experiments/bench/tables-cpu/timing.md

A re-timing in another folder (``experiments/bench/retime.sh DIR`` runs both sweeps into fresh
stores there): ``tables_cpu.py --dir DIR`` reads DIR/table{1,2}/results/store.sqlite and writes
DIR/timing.md, the attention-only part only (the chosen reading's section reads its own store).
``retime.sh DIR WORKERS TABLES`` re-times the two table folders under TABLES instead (a screen
combination's, ``experiments/readings/screen/f14``), and ``--tables TABLES`` names them in
DIR/timing.md and judges them against issue 27's 120-minute target for the chosen reading.

Attention-only from the two stores above (each one uninterrupted sweep: wall time measured).
``mlp-4x`` (the chosen reading before issue 28's gate chose ``f14``) from its own store, ``experiments/readings/mlp-4x/results/``,
which holds the diagnostic cells and both full tables; those ran in several pieces (resumed from
progress files, some under other load), so for them the script sums the runs' process CPU
seconds, which a resumed run carries over, and gives CPU / cores as the wall time the best
packing of two busy workers would reach: an estimate, labelled as one, not a measured wall.

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

from interp.sweeps import store

HERE = Path(__file__).resolve().parent / "tables-cpu"
TARGET_MIN = 30.0  # issue 16: Table 1 + Table 2 (attention-only) on this 2-core machine
CHOSEN_TARGET_MIN = 120.0  # issue 27: both tables under the chosen reading, 2 cores (--tables)
READING, READING_TARGET_MIN = "mlp-4x", 45.0  # issue 16: both tables under the chosen reading
READING_STORE = HERE.parent.parent / "readings" / READING / "results" / "store.sqlite"


def bucket(row) -> str:
    if row["case"] != 5:
        return f"Table 1, d_token {row['d_token']}"
    width = "d_token 100-200" if row["d_token"] >= 100 else "d_token 16-32"
    return f"Table 2, {row['n_layers']} layer{'s' * (row['n_layers'] > 1)}, {width}"


def main(argv=None) -> str:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=HERE,
                        help="folder with table1/ and table2/ stores; timing.md is written there")
    parser.add_argument("--tables", default="experiments",
                        help="the folder whose table1/ and table2/ sweep folders the stores trained: "
                             f"experiments (attention-only, target {TARGET_MIN:.0f} min) or a chosen "
                             f"reading's (e.g. experiments/readings/screen/f14, target {CHOSEN_TARGET_MIN:.0f} min)")
    args = parser.parse_args(argv)
    here = args.dir.resolve()
    tables = args.tables.rstrip("/")
    root = HERE.parents[2]  # a relative TABLES is read from the repo root, as retime.sh passes it
    attention_only = (root / tables).resolve() == HERE.parents[1]  # experiments/, by any spelling
    target = TARGET_MIN if attention_only else CHOSEN_TARGET_MIN
    for table in ("table1", "table2"):
        if not (here / table / "results" / "store.sqlite").is_file():
            parser.error(f"--dir {here}: no {table}/results/store.sqlite there")
    lines = ["# The paper's tables on this machine: where the time goes"
             + ("" if attention_only else f" (`{tables}/table1`, `table2`)"), "",
             "Written by `experiments/bench/tables_cpu.py` from the stores of the two sweeps "
             "(commands in its docstring).", "",
             "| table | runs | wall (min) | process CPU (min, all runs) | CPU / wall | cores | load at start / end (1 min) | device |",
             "|---|--:|--:|--:|--:|--:|---|---|"]
    total_wall, parts, frames, machines = 0.0, [], [], []
    for table in ("table1", "table2"):
        path = here / table / "results" / "store.sqlite"
        log = store.read_sweeps(path)
        done = log[log["outcome"] == "done"].iloc[-1]
        env = json.loads(done["environment"])
        runs = store.read(path)
        wall, cpu = float(done["wall_seconds"]), float(runs["cpu_seconds"].sum())
        total_wall += wall
        lines.append(f"| {table} | {len(runs)} | {wall / 60:.1f} | {cpu / 60:.1f} | {cpu / wall:.2f} | "
                     f"{env['cpus']} | {env['load_average'][0]:.2f} / {env['load_average_end'][0]:.2f} | "
                     f"{env['device']} |")
        machines.append(f"{table}: {env.get('cpu_model', 'CPU not recorded')}, MKL branch "
                        f"{env.get('mkl_branch', 'not recorded')}, code {env.get('code') or 'not recorded'}")
        runs = runs.sort_values(["n_layers", "d_token"], kind="stable")
        runs["bucket"] = [bucket(r) for _, r in runs.iterrows()]
        frames.append(runs)
        parts.append(runs.groupby("bucket", sort=False).agg(runs=("name", "size"), cpu=("cpu_seconds", "sum"),
                                                steps=("steps", "mean"),
                                                to_max=("steps", lambda s: int((s >= 10_000).sum()))))
    lines += ["", "Machine and code of each sweep: " + "; ".join(machines) + "."]
    lines += ["", f"Both tables: {total_wall / 60:.1f} min wall against the {target:.0f}-minute target "
              f"({'met' if total_wall / 60 <= target else f'missed by {total_wall / 60 - target:.1f} min'}).",
              "", "Where the CPU time goes (runs that reach 10,000 steps never met the stop loss):", "",
              "| group | runs | CPU (min) | share | mean steps | runs at 10,000 steps |", "|---|--:|--:|--:|--:|--:|"]
    grand = sum(float(p["cpu"].sum()) for p in parts)
    for p in parts:
        for name, r in p.iterrows():
            lines.append(f"| {name} | {int(r['runs'])} | {r['cpu'] / 60:.1f} | {100 * r['cpu'] / grand:.0f}% | "
                         f"{r['steps']:.0f} | {int(r['to_max'])} |")
    lines += limit_lines(with_flops(frames))
    if here == HERE:
        lines += reading_lines()
    text = "\n".join(lines) + "\n"
    (here / "timing.md").write_text(text)
    print(text)
    return text


def reading_lines() -> list[str]:
    """Both tables under the chosen reading, from the CPU seconds of its runs (module docstring).

    A run trained on a GPU (the sweep that stored it logged device cuda) says nothing about the
    CPU: its CPU time is estimated from its executed FLOPs at the CPU-seconds-per-FLOP of the
    CPU-trained runs of its group, and the table says so."""
    import sys

    sys.path.insert(0, str(HERE.parent.parent / "readings"))
    import readings

    runs, log = store.read(READING_STORE), store.read_sweeps(READING_STORE)
    log = log[log["started_at"].notna()].sort_values("started_at")
    # the sweep that stored a run: the last one started before the run finished (one driver
    # writes a store at a time: the store's lock)
    starts = list(zip(log["started_at"], log["environment"]))
    runs["device"] = [json.loads([e for t, e in starts if t <= f][-1])["device"] for f in runs["finished_at"]]
    cores = 2
    frames, complete = [], True
    for table in readings.TABLES:
        names = {c.name() for c in readings.table_configs(READING, table)}
        part = runs[runs["name"].isin(names)].copy()
        complete &= len(part) == len(names)
        part["table"] = table
        part["bucket"] = [bucket(r) for _, r in part.iterrows()]
        frames.append(part.sort_values(["n_layers", "d_token"], kind="stable"))
    both = with_flops(frames)
    on_cpu = both["device"] == "cpu"
    rate = (both[on_cpu].groupby("bucket")["cpu_seconds"].sum() / both[on_cpu].groupby("bucket")["flop"].sum())
    both["cpu_est"] = both["cpu_seconds"].where(on_cpu, both["flop"] * both["bucket"].map(rate))
    gpu = both[~on_cpu]
    lines = ["", f"## Under `{READING}` (the chosen reading before issue 28's gate)", "",
             f"From `{READING_STORE.relative_to(HERE.parent.parent.parent)}`. These runs trained in pieces "
             "(resumed from progress files, some beside other jobs), so no single sweep's wall time "
             f"covers them; the wall column is CPU / {cores} cores, what two workers busy throughout "
             "would take (the attention-only sweeps above ran at CPU / wall 1.97).", ""]
    if len(gpu):
        cells = sorted({f"case {r['case']} n = {r['n']} {r['n_layers']} layers d_token {r['d_token']}"
                        for _, r in gpu.iterrows()})
        lines += [f"{len(gpu)} runs trained on a GPU ({'; '.join(cells)}); their CPU minutes are "
                  "estimated from their executed FLOPs at the CPU-seconds-per-FLOP of the CPU-trained "
                  f"runs of the same group (column 'of which estimated').", ""]
    lines += ["| table | runs stored / declared | process CPU (min, all runs) | of which estimated | "
              "wall at 2 busy cores (min, estimate) |", "|---|--:|--:|--:|--:|"]
    for table, part in both.groupby("table", sort=False):
        declared = len(readings.table_configs(READING, table))
        cpu, est = part["cpu_est"].sum(), part.loc[part["device"] != "cpu", "cpu_est"].sum()
        lines.append(f"| {table} | {len(part)} / {declared} | {cpu / 60:.1f} | {est / 60:.1f} | "
                     f"{cpu / cores / 60:.1f} |")
    unknown = both["cpu_est"].isna()  # a GPU run whose group has no CPU-trained run yet
    if unknown.any():
        lines += ["", f"{int(unknown.sum())} GPU-trained runs have no CPU-trained run in their group "
                  "to estimate from: not counted."]
    total = both["cpu_est"].sum() / 60
    wall = total / cores
    verdict = "met" if wall <= READING_TARGET_MIN else f"missed by {wall - READING_TARGET_MIN:.1f} min"
    lines += ["", f"Both tables: {total:.1f} CPU-minutes, so at best {wall:.1f} min wall on "
              f"{cores} cores against the {READING_TARGET_MIN:.0f}-minute target ({verdict}"
              f"{'' if complete else '; not every run is stored yet, so this is a lower bound'})."]
    return lines + limit_lines(both[on_cpu])


def with_flops(frames):
    """The runs of ``frames`` in one DataFrame with a ``flop`` column: the matmul FLOPs the fast
    engine executed (``flops.step_flops`` per seed-step, times the steps run)."""
    import sys

    import pandas as pd

    sys.path.insert(0, str(HERE.parent))
    import flops

    from interp.training.trainer import TrainConfig

    runs = pd.concat(frames, ignore_index=True)
    per_cell = {}  # a step's FLOPs do not depend on the seed: counted once per cell
    for i, r in runs.iterrows():
        cell = TrainConfig.from_dict(json.loads(r["config"])).replace(seed=0)
        if cell.name() not in per_cell:
            per_cell[cell.name()] = flops.step_flops(cell)
        runs.loc[i, "flop"] = per_cell[cell.name()] * r["steps"]
    return runs


def limit_lines(runs) -> list[str]:
    """How far each group of runs (with their ``flop``: :func:`with_flops`) is from the machine's
    matmul limit (module docstring)."""
    import sys

    sys.path.insert(0, str(HERE.parent))
    import flops

    peak = flops.peak_from((HERE.parent / "flops.md").read_text())
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
