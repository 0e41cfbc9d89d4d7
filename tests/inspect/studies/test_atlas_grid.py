"""The atlas's grids (experiments/atlas/grid.py) against what PREDICTIONS.md and the atlas README
quote: every count and cost there is the script's output, not typed; the sweep folders are the
ones grid.py writes; the core grid is part of the full grid, run by run."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ATLAS = Path(__file__).resolve().parents[3] / "experiments" / "atlas"


@pytest.fixture(scope="module")
def grid():
    sys.path.insert(0, str(ATLAS))
    try:
        import grid
    finally:
        sys.path.remove(str(ATLAS))
    return grid


def test_predictions_quote_the_cost_table_and_the_known_runs(grid):
    text = (ATLAS / "PREDICTIONS.md").read_text()
    assert grid.summary() in text
    first = grid.known_summary().splitlines()[0]
    runs, cells = re.match(r"(\d+) core runs in (\d+) cells", first).groups()
    assert f"{runs} core runs in {cells} cells" in " ".join(text.split())
    core = [c for a in grid.ARCHS for c in grid.cells("core", a)]
    cpu = grid.cost(core)[0]
    assert f"The core grid is now {len(core)} cells, {5 * len(core):,} runs,\n   {cpu:.0f} CPU-minutes" in text


def test_the_readme_quotes_the_grids_costs(grid):
    text = " ".join((ATLAS / "README.md").read_text().split())
    for name, places in (("core", 1), ("full", 0)):
        every = [c for a in grid.ARCHS for c in grid.cells(name, a)]
        cpu = grid.cost(every)[0]
        hours = f"~{grid.hours_on_2_cores(cpu):.{places}f} h"
        assert f"{name} grid{' is' if name == 'core' else ''} {5 * len(every):,} runs, {cpu:,.0f} CPU-minutes at most ({hours} on 2 cores)" in text
    assert f"{grid.cost([c for a in grid.ARCHS for c in grid.cells('full', a)])[2]:.1f} GPU-hours" in text


def test_sweep_folders_are_what_grid_writes_and_the_core_is_in_the_full_grid(grid):
    for g in grid.GRIDS:
        for a in grid.ARCHS:
            assert (ATLAS / g / a / "configs.py").read_text() == grid.CONFIGS_PY.format(grid=g, arch=a)
    for a in grid.ARCHS:
        full = {c.name() for c in grid.configs("full", a)}
        assert {c.name() for c in grid.configs("core", a)} <= full


def _screen_design():
    import importlib.util

    screen = ATLAS.parent / "readings" / "screen"
    sys.path.insert(0, str(screen))
    try:
        spec = importlib.util.spec_from_file_location("screen_design_for_atlas", screen / "design.py")
        design = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(design)
    finally:
        sys.path.remove(str(screen))
    return design


@pytest.mark.parametrize("reading, combination", [(None, "a-every-4d"), ("f14", "f14")])
def test_the_atlas_mlp_4x_is_the_screens_reading_field_for_field(grid, reading, combination):
    """PREDICTIONS.md: the atlas's mlp-4x is the chosen reading. Today that is mlp-4x, which the
    screen (issue 28) names a-every-4d (every factor at its default, d_mlp 4 d_model after every
    layer); if the screen's gate replaces it, it is the screen's choice f14. Under either, the
    grid's fields equal the screen's own design.cell_fields on every MLP cell (so a switch is a
    change of one declared name, not a second coding of the reading), the protocol fields stay at
    TrainConfig's defaults, and atlas.architecture names every one-layer run as the predictions'
    MLP architecture would be named under that reading."""
    import dataclasses

    from interp.inspect.studies import atlas

    design = _screen_design()
    levels, mlp_level = design._declared(combination)
    ours = grid.configs("full", "mlp-4x", reading=reading)
    assert {c.n_layers for c in ours} == {1, 2}
    for c in ours:
        fields = design.cell_fields(levels, mlp_level, (c.case, c.n, c.n_layers, c.pos_embed, c.d_token))
        assert {k: getattr(c, k) for k in fields} == fields, c.name()
        off = {f.name for f in dataclasses.fields(c)} - set(fields) - {"seed", "function"}
        assert all(getattr(c, k) == f.default for f in dataclasses.fields(c) if f.name in off
                   for k in [f.name]), c.name()  # the protocol fields at TrainConfig's defaults
        name = atlas.architecture(c.case, c.d_token, c.d_mlp, c.mlp, c.n_layers, pos_embed=c.pos_embed,
                                  **{k: getattr(c, k) for k in atlas.READING})
        base = "mlp-4x" + ("-last" if c.n_layers == 2 and c.mlp == "last" else "")
        assert name == base + ("" if reading is None else f"[{reading}]"), c.name()


def test_named_readings_are_the_screens_combinations(grid):
    """atlas.NAMED's f14 is the screen's f14, every factor off its default (design.FACTORS), and
    grid.PLACEMENT puts its MLP where the screen's MLP level does."""
    from interp.inspect.studies import atlas

    design = _screen_design()
    assert set(grid.PLACEMENT) == {None, *atlas.NAMED}
    for name, fields in atlas.NAMED.items():
        levels, mlp_level = design._declared(name)
        off = {field: alt for k, (field, _, alt, _) in design.FACTORS.items() if levels[k] == 1}
        assert fields == off, name
        assert grid.PLACEMENT[name] == design.MLP_LEVELS[mlp_level][1], name


def test_the_atlas_reading_follows_the_screens_gate():
    """PREDICTIONS.md ("Architectures"): if issue 28 replaces the chosen reading before the atlas's
    MLP runs start, the atlas's mlp-4x is replaced by it. The screen's scores.md says what its
    gate decided (score.py writes it); atlas_predictions.MLP_READING must say the same: the
    replacing combination, or None while the gate waits or keeps mlp-4x. This fails on the day
    the gate decides until the switch is made (and PREDICTIONS.md's quoted costs regenerated)."""
    from interp.inspect.studies import atlas_predictions

    text = (ATLAS.parent / "readings" / "screen" / "scores.md").read_text()
    decision = re.search(r"^Decision: (.*)$", text, re.M)
    assert decision, "scores.md has no Decision line"
    replaced = re.match(r"(\S+) replaces mlp-4x", decision.group(1))
    assert atlas_predictions.MLP_READING == (replaced.group(1) if replaced else None), decision.group(0)


@pytest.mark.parametrize("args", [["-x"], ["-w"], ["-w", "0"], ["-w", "two"], ["--finish", "extra"]])
def test_run_core_refuses_bad_arguments_before_any_work(args):
    """run_core.sh (the core grid across sessions) stops with its usage, exit 2, before it
    touches a store or starts a sweep."""
    import subprocess

    r = subprocess.run(["bash", str(ATLAS / "run_core.sh"), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("usage: run_core.sh [-w WORKERS] | --finish"), r.stderr
    assert "==" not in r.stdout  # no step began


TINY_GRID = '''from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
CONFIGS = [TrainConfig(case=1, n=3, d_token=4, max_steps=15, eval_batches=2, seed=s{extra}) for s in range({seeds})]
LAYOUT = TableLayout(rows=("case", "n"), column="d_token", title="tiny")
'''


def test_run_core_trains_by_the_gate_and_a_fresh_store_starts_from_the_committed_rows(tmp_path):
    """run_core.sh end to end on a grid of three 15-step runs (ATLAS_DIR, SCREEN_SCORES point at
    copies): the attention-only folder always trains; the MLP folder only once the gate decided
    and the atlas's reading (atlas_predictions.MLP_READING) is what it decided;
    --finish measures into core-atlas/ and writes the rows without checkpoints; a store started
    again from those rows trains nothing twice."""
    import subprocess

    from interp.inspect.studies.atlas_predictions import MLP_READING
    from interp.sweeps.store import Store

    keep = "f14 does not beat a-every-4d: mlp-4x stays."
    decided = keep if MLP_READING is None else f"{MLP_READING} replaces mlp-4x."  # what matches the reading
    other = "f14 replaces mlp-4x." if MLP_READING is None else keep  # what does not
    for arch, extra, seeds in (("attention-only", "", 2), ("mlp-4x", ", d_mlp=16", 1)):
        (tmp_path / "core" / arch).mkdir(parents=True)
        (tmp_path / "core" / arch / "configs.py").write_text(TINY_GRID.format(extra=extra, seeds=seeds))
    scores = tmp_path / "scores.md"
    store = tmp_path / "results" / "store.sqlite"
    env = {**os.environ, "ATLAS_DIR": str(tmp_path), "SCREEN_SCORES": str(scores)}

    def run(*args, decision=None):
        scores.write_text("# scores\n\n" + (f"Decision: {decision}\n" if decision else ""))
        return subprocess.run(["bash", str(ATLAS / "run_core.sh"), *args], capture_output=True, text=True,
                              env=env, timeout=600, cwd=tmp_path)

    def stored() -> int:
        with Store(store) as s:
            return len(s.statuses())

    r = run(decision="waiting for: a-every-4d's held-out cells (24 of 48 cells missing).")
    assert r.returncode == 0, r.stderr
    assert "== core/attention-only" in r.stdout and "gate has not decided" in r.stdout, r.stdout
    assert stored() == 2
    r = run()  # no Decision line at all: the same
    assert r.returncode == 0 and "no Decision line" in r.stdout, r.stdout + r.stderr
    r = run(decision=other)
    assert r.returncode == 1 and f"atlas's reading is '{MLP_READING or 'mlp-4x'}'" in r.stderr, r.stdout + r.stderr
    assert stored() == 2  # no MLP run started
    r = run(decision=decided)
    assert r.returncode == 0 and "== core/mlp-4x" in r.stdout, r.stdout + r.stderr
    assert stored() == 3
    r = run("--finish")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "core-atlas" / "atlas.csv").is_file() and (tmp_path / "store-rows.sqlite").is_file()
    store.unlink()
    r = run(decision=decided)
    assert r.returncode == 0 and "store started from the committed rows" in r.stdout, r.stdout + r.stderr
    assert stored() == 3
    for arch in ("attention-only", "mlp-4x"):  # tqdm's bar over the runs left: none
        assert f"sweep {arch}: 0run " in r.stderr, r.stderr
