"""Issue 46's timeline study: the cells and seeds of ../PREDICTIONS.md (committed before this file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "atlas"))
import grid  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402
from interp.training.trainer import TrainConfig  # noqa: E402

#: (set, case, n, d_token, layers): PREDICTIONS.md's table
CELLS = [("discovery", 1, 5, 8, 1), ("discovery", 2, 10, 4, 1), ("discovery", 3, 10, 4, 1),
         ("discovery", 4, 5, 8, 1), ("discovery", 5, 5, 16, 2),
         ("held out", 1, 10, 8, 1), ("held out", 4, 10, 16, 1), ("held out", 5, 5, 32, 2)]
SEEDS = range(20)
CONFIGS = [TrainConfig(case=c, n=n, d_token=d, n_layers=layers, pos_embed=grid.PE[c], function="permutation",
                       init=grid.INIT, seed=s) for _, c, n, d, layers in CELLS for s in SEEDS]
LAYOUT = TableLayout(rows=("case", "n", "n_layers"), column="d_token",
                     title="Timeline study: accuracy (%) (max/avg over 20 seeds)")
