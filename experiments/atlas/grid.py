"""Issue 29's atlas grids as data, and their cost (PREDICTIONS.md: the predictions and why).

The core grid fits about 3 hours on 2 cores; the full grid contains it (same configs, same run
names), so one store holds both and the full sweep trains only what the core left out. Each
grid is two sweep folders, one per architecture, sharing ``results/store.sqlite`` here:

    .venv/bin/python experiments/atlas/grid.py                       # cells, runs and cost per block
    .venv/bin/interp sweep experiments/atlas/core/attention-only --store experiments/atlas/results/store.sqlite
    .venv/bin/interp sweep experiments/atlas/core/mlp-4x --store experiments/atlas/results/store.sqlite
"""

from __future__ import annotations

from pathlib import Path

from interp.inspect.studies.atlas_predictions import MLP_READING

HERE = Path(__file__).resolve().parent
GRIDS = ("core", "full")
ARCHS = ("attention-only", "mlp-4x")  # mlp-4x: the chosen reading (f14 since issue 28's gate: MLP_READING)
MLP_RATIO = 4  # d_mlp = 4 d_model after every attention layer (one layer: the final position)
#: where the chosen reading puts its MLP in two-layer models, by atlas_predictions.MLP_READING
#: (None: mlp-4x, after every attention layer; f14: after the last only, the screen's last-4d)
PLACEMENT = {None: "every", "f14": "last"}
INIT = "pytorch"  # as experiments/table1 and table2
SEEDS = range(5)
#: the positional embedding each case is learnable with (Table 1's learnable rows; Table 2)
PE = {1: "learned", 2: "none", 3: "none", 4: "learned", 5: "learned"}
PERM, ANY = "permutation", "any"

NS = (3, 5, 10, 20, 50)
DS = (2, 4, 8, 16, 32)
NS_FULL = (3, 5, 10, 20, 50, 100)
DS_FULL = (2, 4, 8, 16, 32, 64)


def _block(cases, ns, ds, layers, arch, functions):
    return [(c, n, d, layers, arch, f) for c in cases for n in ns for d in ds for f in functions]


#: block name -> cells (case, n, d_token, n_layers, arch, function)
CORE = {
    "cases 1-4, one layer, attention-only, permutation": _block((1, 2, 3, 4), NS, DS, 1, "attention-only", (PERM,)),
    # case 2 without PE is case 3's learning problem (PREDICTIONS.md, P8): not repeated under "any"
    "cases 1, 3, 4, one layer, attention-only, any": _block((1, 3, 4), NS, DS, 1, "attention-only", (ANY,)),
    "case 5, two layers, attention-only, both": _block((5,), NS[:4], DS, 2, "attention-only", (PERM, ANY)),
    "case 5, one layer, attention-only, permutation": _block((5,), NS[:4], DS[1:], 1, "attention-only", (PERM,)),
    "case 5, one layer, mlp-4x, permutation": _block((5,), NS[:4], DS[1:], 1, "mlp-4x", (PERM,)),
    "cases 1-4, one layer, mlp-4x, permutation": _block((1, 2, 3, 4), (10, 50), DS[1:], 1, "mlp-4x", (PERM,)),
    # added on review before the first atlas run (PREDICTIONS.md, "Amended"): P2 and P6(b) need
    # successes that d_token <= 32 gives too rarely at n >= 10 (committed tables)
    "case 5, two layers, attention-only, permutation, d_token 64 (P2)": _block((5,), (5, 10, 20), (64,), 2,
                                                                               "attention-only", (PERM,)),
    "case 5, one layer, mlp-4x, permutation, d_token 64 (P6)": _block((5,), (5, 10, 20), (64,), 1, "mlp-4x", (PERM,)),
}
FULL = {
    "cases 1-5, one layer": [c for a in ARCHS for c in _block((1, 2, 3, 4, 5), NS_FULL, DS_FULL, 1, a, (PERM, ANY))],
    "cases 4-5, two layers": [c for a in ARCHS for c in _block((4, 5), NS, DS, 2, a, (PERM, ANY))],
    "case 5, two layers, attention-only, permutation, d_token 64 (P2)":
        CORE["case 5, two layers, attention-only, permutation, d_token 64 (P2)"],
}


def cells(grid: str, arch: str) -> list[tuple]:
    """The grid's cells of one architecture, each once, in declaration order."""
    if grid not in GRIDS:
        raise ValueError(f"grid={grid!r}; accepted: one of {GRIDS}")
    if arch not in ARCHS:
        raise ValueError(f"arch={arch!r}; accepted: one of {ARCHS}")
    blocks = CORE if grid == "core" else FULL
    out = [c for block in blocks.values() for c in block if c[4] == arch]
    return list(dict.fromkeys(out))


def configs(grid: str, arch: str, reading: str | None = MLP_READING) -> list:
    """The grid's runs of one architecture. ``mlp-4x`` is the chosen reading's MLP model:
    d_mlp = 4 d_model, placed and with the fields of ``reading`` (``interp.inspect.studies.atlas.NAMED``,
    as far as they act in the cell), mlp-4x itself when None (PREDICTIONS.md, "Architectures")."""
    from interp import TrainConfig
    from interp.inspect.studies.atlas import NAMED, acting

    if reading not in PLACEMENT:
        raise ValueError(f"reading={reading!r}; accepted: one of {list(PLACEMENT)}")
    out = []
    for case, n, d, layers, a, function in cells(grid, arch):
        d_model = 2 * d if case in (2, 3) else d
        mlp = dict(d_mlp=MLP_RATIO * d_model, mlp=PLACEMENT[reading] if layers == 2 else "every",
                   **acting(NAMED.get(reading, {}), case, layers, PE[case])) if a == "mlp-4x" else {}
        out += [TrainConfig(case=case, n=n, d_token=d, n_layers=layers, pos_embed=PE[case],
                            function=function, init=INIT, seed=s, **mlp) for s in SEEDS]
    return out


def layout_args(grid: str, arch: str) -> dict:
    return dict(rows=("case", "n", "n_layers", "pos_embed", "function"), column="d_token",
                title=f"Atlas, {grid} grid, {arch}: accuracy (%) (max/avg over 5 seeds)")


# Cost model, CPU ms per seed-step (5 seeds trained together, one core), fitted to committed
# timings: one layer 0.7 + 4e-4 l d_model (experiments/bench/tables-cpu/table{1,2}/report.md:
# 0.73-0.99 ms at n <= 20, 1.2-1.7 ms at n = 100); an MLP at the final position 0.65 ms +
# 3072 d_model d_mlp FLOP at 55 GFLOP/s (mlp-4x's one-layer cells over attention-only); two
# layers 1.0 + 0.14 l + 2e-4 l d_model (2.6-3.0 ms at n = 10, 6.7-7.0 at n = 20); layer 0's MLP
# at every position 3.5 ms + 3072 l d_model d_mlp FLOP at 20 GFLOP/s (mlp-4x two layers, 9.7-33.5
# ms, experiments/readings/mlp-4x/table2/report.md). l = sequence length. H100: host-bound 1.9 ms
# (one layer) and 3.5 ms (two) per seed-step, experiments/bench/results-cuda*.md.
def cpu_ms(case: int, n: int, d: int, layers: int, arch: str) -> float:
    length = n + 1 if case in (1, 2, 3) else 2 * n + 1
    dm = 2 * d if case in (2, 3) else d
    mlp = arch == "mlp-4x"
    last = 0.65 + 3072 * dm * MLP_RATIO * dm / 55e6 if mlp else 0  # an MLP at the final position
    if layers == 1:
        return 0.7 + 4e-4 * length * dm + last
    if PLACEMENT[MLP_READING] == "last":  # two layers, the MLP after the last only
        return 1.0 + 0.14 * length + 2e-4 * length * dm + last
    return (1.0 + 0.14 * length + 2e-4 * length * dm
            + (3.5 + 3072 * length * dm * MLP_RATIO * dm / 20e6 if mlp else 0))


def hours_on_2_cores(cpu_min: float) -> float:
    """Wall hours for ``cpu_min`` CPU-minutes with two sweep workers on 2 cores, taken as 1.97
    cores busy (the estimate this file has used since the grid was declared)."""
    return cpu_min / 1.97 / 60


def cost(cell_list) -> tuple[float, float, float]:
    """CPU-minutes (every run to 10,000 steps), the largest single group's CPU-minutes, and
    H100-hours (one process) for a list of cells."""
    per = [cpu_ms(*c[:5]) * 10_000 * len(SEEDS) / 60_000 for c in cell_list]
    gpu = sum((1.9 if c[3] == 1 else 3.5) * 10_000 * len(SEEDS) for c in cell_list) / 3.6e6
    return sum(per), max(per, default=0.0), gpu


def summary() -> str:
    lines = ["| grid | block | cells | runs | CPU-min (upper) | largest group (CPU-min) | H100-h |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for grid, blocks in (("core", CORE), ("full", FULL)):
        for name, block in blocks.items():
            cpu, big, gpu = cost(block)
            lines.append(f"| {grid} | {name} | {len(block)} | {len(block) * len(SEEDS)} | {cpu:.0f} "
                         f"| {big:.1f} | {gpu:.1f} |")
        every = [c for a in ARCHS for c in cells(grid, a)]
        cpu, big, gpu = cost(every)
        lines.append(f"| {grid} | **all** | {len(every)} | {len(every) * len(SEEDS)} | {cpu:.0f} "
                     f"(~{hours_on_2_cores(cpu):.1f} h on 2 cores) | {big:.1f} | {gpu:.1f} |")
    return "\n".join(lines)


CONFIGS_PY = '''"""The atlas's {grid} grid, {arch} (written by experiments/atlas/grid.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grid  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = grid.configs({grid!r}, {arch!r})
LAYOUT = TableLayout(**grid.layout_args({grid!r}, {arch!r}))
'''


def write_folders() -> list[Path]:
    out = []
    for g in GRIDS:
        for a in ARCHS:
            folder = HERE / g / a
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "configs.py").write_text(CONFIGS_PY.format(grid=g, arch=a))
            out.append(folder)
    return out


#: studies after the atlas (issue 46's timelines study trains seeds 0-4 of its cells again;
#: issue 52's formation study trains new seeds of its cells): not earlier publications
LATER = (HERE.parent / "timelines", HERE.parent / "formation")


def known_runs() -> dict[tuple, dict]:
    """The core grid's runs that another committed sweep folder of ``experiments/`` declares
    too (same config, so same run name): their outcomes were published before the atlas.
    Cell (case, n, d_token, layers, architecture, function) -> {"runs": names, "folders": ...}."""
    import importlib.util

    from interp.inspect.studies.atlas import READING, architecture

    core = {c.name(): c for a in ARCHS for c in configs("core", a)}
    out: dict[tuple, dict] = {}
    for i, path in enumerate(sorted(HERE.parent.rglob("configs.py"))):
        if HERE in path.parents or any(p in path.parents for p in LATER):  # the atlas's own, and studies after it
            continue
        spec = importlib.util.spec_from_file_location(f"_known_{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in {c.name() for c in getattr(module, "CONFIGS", [])} & set(core):
            c = core[name]
            arch = architecture(c.case, c.d_token, c.d_mlp, c.mlp, c.n_layers, pos_embed=c.pos_embed,
                                **{k: getattr(c, k) for k in READING})
            cell = (c.case, c.n, c.d_token, c.n_layers, arch, c.function)
            got = out.setdefault(cell, {"runs": set(), "folders": set()})
            got["runs"].add(name)
            got["folders"].add(str(path.parent.relative_to(HERE.parents[1])))
    return out


def known_summary() -> str:
    known = known_runs()
    lines = [f"{sum(len(k['runs']) for k in known.values())} core runs in {len(known)} cells were declared "
             "by committed sweep folders before the atlas (same config, same run name):", "",
             "| case | n | d_token | layers | architecture | function | runs | folders |",
             "|--:|--:|--:|--:|---|---|--:|---|"]
    lines += [f"| {' | '.join(map(str, cell))} | {len(k['runs'])} | {', '.join(sorted(k['folders']))} |"
              for cell, k in sorted(known.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv[1:]:
        for folder in write_folders():
            print(folder.relative_to(HERE.parents[1]))
    print(known_summary() if "--known" in sys.argv[1:] else summary())
