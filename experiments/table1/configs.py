"""Table 1 of the paper: cases 1-4 at n = 100, one layer, 5 seeds per cell.

Rows (in the paper's order): case 1 learned PE, case 1 no PE, case 2 no PE, case 3 no PE,
case 4 learned PE, case 4 no PE. Columns: d_token 2, 4, 8, 16, 32. Everything else is the
paper's protocol (TrainConfig's defaults). Run with ``interp sweep experiments/table1``,
render with ``interp report experiments/table1``.
"""

from interp.sweeps import Layout
from interp.training import TrainConfig

N = 100
ROWS = [(1, "learned"), (1, "none"), (2, "none"), (3, "none"), (4, "learned"), (4, "none")]
D_TOKENS = [2, 4, 8, 16, 32]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=case, n=N, d_token=d_token, pos_embed=pos_embed, seed=seed)
    for case, pos_embed in ROWS
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = Layout(
    rows=("case", "pos_embed"),
    column="d_token",
    paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
    title="Table 1: accuracy (%) for cases 1-4, n = 100, one layer (max/avg over 5 seeds)",
)
