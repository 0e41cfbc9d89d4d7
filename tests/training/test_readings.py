"""experiments/readings: the declared readings load as sweeps and carry the paper's numbers."""

import csv
import pathlib

from interp.training import sweeps

ROOT = pathlib.Path(__file__).resolve().parents[2] / "experiments"


def test_every_reading_is_a_sweep_of_the_declared_cells():
    widths = {}
    for name in ("attention-only", "mlp-1x", "mlp-4x", "torch-encoder"):
        sweep = sweeps.load(ROOT / "readings" / name)
        cells = {(c.case, c.n, c.n_layers, c.pos_embed, c.d_token) for c in sweep.configs}
        assert len(cells) == 14 and len(sweep.configs) == 70
        assert all(c.init == "pytorch" for c in sweep.configs)
        widths[name] = {(c.case, c.d_token): c.d_mlp for c in sweep.configs}
    assert set(widths["attention-only"].values()) == {0}
    assert set(widths["torch-encoder"].values()) == {2048}
    assert widths["mlp-4x"][(3, 8)] == 4 * 16 and widths["mlp-1x"][(5, 32)] == 32  # d_model = 2 d_token in case 3


def test_paper_numbers_are_the_tables_own():
    t1 = {(r["case"], r["pe"], r["d_token"]): (r["max"], r["avg"])
          for r in csv.DictReader((ROOT / "table1" / "paper.csv").read_text().splitlines())}
    t2 = {(r["n"], r["layers"], r["d_token"]): (r["max"], r["avg"])
          for r in csv.DictReader((ROOT / "table2" / "paper.csv").read_text().splitlines())}
    rows = list(csv.DictReader((ROOT / "readings" / "mlp-4x" / "paper.csv").read_text().splitlines()))
    assert len(rows) == 14
    for r in rows:
        want = t1[(r["case"], r["pe"], r["d_token"])] if r["case"] != "5" else t2[(r["n"], r["layers"], r["d_token"])]
        assert (r["max"], r["avg"]) == want
