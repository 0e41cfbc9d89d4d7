"""The atlas demo of ``interp run``: a phase diagram small enough to train, map and show in
the atlas step (``interp run --steps atlas``) within a couple of minutes on 2 cores.

Two panels of the atlas (``experiments/atlas/grid.py``), each n in {3, 5} down and d_token in
{4, 8} across, 3 seeds per cell, one layer, attention-only, the grid's positional embedding and
initialisation:

* case 1 (values in sequence order, learned positions): its construction (Theorem 3.1) needs
  d_token >= 4, so every cell is in reach, but d_token 4 learns slowly;
* case 3 (same position, permuted keys, no positional embedding): the key travels with its
  value (d_model = 2 d_token), the quickest of the five to learn.

Training stops at the paper's loss (0.01) or after ``MAX_STEPS`` steps, short of the paper's
10,000, so some seeds end partial: the demo shows the atlas page, not the atlas's findings
(``experiments/atlas/PREDICTIONS.md``). ``interp run`` trains it into ``results/atlas/``, builds its
atlas (``interp atlas``) and writes its explorer page with the atlas view.
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

PANELS = [(1, "learned"), (3, "none")]  # (case, pos_embed), as grid.PE
NS, DS, SEEDS = (3, 5), (4, 8), range(3)
MAX_STEPS = 1500

CONFIGS = [
    TrainConfig(case=case, n=n, d_token=d, pos_embed=pe, init="pytorch", seed=s,
                max_steps=MAX_STEPS, eval_batches=20)
    for case, pe in PANELS for n in NS for d in DS for s in SEEDS
]

LAYOUT = TableLayout(rows=("case", "n"), column="d_token",
                title="Atlas demo: cases 1 and 3 at n = 3, 5 (max/avg over 3 seeds)")
