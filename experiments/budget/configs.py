"""Is the step budget why the largest gaps remain? The paper's protocol run 4x longer.

The paper trains every model on "10000 batches of 256 samples" (Section 4). In three cells every
reading of its architecture stays on the chance plateau for all 10,000 steps in most or all
seeds, where the paper has ~100% (experiments/readings/scores.md): Table 1 cases 1 and 4 with
learned PE at d_token 8, and Table 2's two-layer n = 20 at d_token 32. Here the same runs
(attention-only, the tables' init="pytorch", TrainConfig's protocol otherwise) go on to
40,000 steps. A seed's first 10,000 steps are the same computation as in the 10,000-step
tables (same seed, data and init; ``budget.py`` compares the loss curves). If seeds leave the
plateau after step 10,000, the gap is (at least partly) a step budget: our models learn slower
than the paper's; if they stay, it is not.

    .venv/bin/interp sweep experiments/budget
    .venv/bin/interp report experiments/budget
    .venv/bin/python experiments/budget/budget.py      # when each seed left the plateau
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

MAX_STEPS = 40_000  # 4x the paper's 10,000 batches
INIT = "pytorch"  # as experiments/table1 and table2 (a test checks these are their runs)
CELLS = [(1, 100, 1, "learned", 8), (4, 100, 1, "learned", 8), (5, 20, 2, "learned", 32)]

CONFIGS = [TrainConfig(case=case, n=n, d_token=d, n_layers=layers, pos_embed=pe, seed=seed,
                       init=INIT, max_steps=MAX_STEPS)
           for case, n, layers, pe, d in CELLS for seed in range(5)]
LAYOUT = TableLayout(
    rows=("case", "n", "n_layers", "pos_embed"),
    column="d_token",
    paper={"case": "case", "n": "n", "n_layers": "layers", "pos_embed": "pe", "d_token": "d_token"},
    title="The paper's protocol run to 40,000 steps (max/avg over 5 seeds)",
)
