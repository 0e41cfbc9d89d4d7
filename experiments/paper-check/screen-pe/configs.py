"""Issue 53's screen of case 1's width convention (``../SCREEN-pe.md``): Table 1's case-1 row with
learned positional embeddings under ``pe_combine="concat"`` (d_model = 2 d_token), seeds 0-9.

Everything else is ``experiments/table1``'s protocol (attention-only, ``init="pytorch"``, n = 100,
one layer). ``run.sh`` trains it with the code SCREEN-pe.md pins; ``interp report`` on this folder
is the test the screen's rule reads (per-cell check, Holm over its 5 cells).
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

N = 100
D_TOKENS = [2, 4, 8, 16, 32]  # 2, 4, 8: screening; 16, 32: confirmation (SCREEN-pe.md)
SEEDS = range(10)

CONFIGS = [
    TrainConfig(case=1, n=N, d_token=d_token, pos_embed="learned", seed=seed, init="pytorch", pe_combine="concat")
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = TableLayout(
    rows=("case", "pos_embed"),
    column="d_token",
    paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
    title="Screen: case 1, learned PE, pe_combine = concat (d_model = 2 d_token), n = 100, one layer "
          "(max/avg over 10 seeds)",
)
