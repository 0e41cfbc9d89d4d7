"""Table 2 of the paper: case 5 (consecutive positions, permuted keys), learned PE, 5 seeds.

Rows: n in 2, 5, 10, 20, each with 1 and 2 layers. Columns: d_token 16, 32, 100, 200.
Everything else is the paper's protocol (TrainConfig's defaults). Run with
``interp sweep experiments/table2``, render with ``interp report experiments/table2``.
"""

from interp.sweeps import Layout
from interp.training import TrainConfig

NS = [2, 5, 10, 20]
LAYERS = [1, 2]
D_TOKENS = [16, 32, 100, 200]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=5, n=n, d_token=d_token, n_layers=layers, pos_embed="learned", seed=seed)
    for n in NS
    for layers in LAYERS
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = Layout(
    rows=("n", "n_layers"),
    column="d_token",
    paper={"n": "n", "n_layers": "layers", "d_token": "d_token"},
    title="Table 2: accuracy (%) for case 5, learned PE (max/avg over 5 seeds)",
)
