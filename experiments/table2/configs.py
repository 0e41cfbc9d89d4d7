"""Table 2 of the paper: case 5 (consecutive positions, permuted keys), learned PE, 5 seeds.

Rows: n in 2, 5, 10, 20, each with 1 and 2 layers. Columns: d_token 16, 32, 100, 200.
Everything else is the paper's protocol (TrainConfig's defaults), init="pytorch". Run with
``interp sweep experiments/table2``, render with ``interp report experiments/table2``.
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

# The paper does not say how its models were initialised. "pytorch" (nn.Embedding N(0, 1),
# nn.Linear U(+-1/sqrt(fan_in))) is what a plain PyTorch model gets; TransformerLens's "gpt2"
# (N(0, 0.8/sqrt(d_model)), small scores) left case 4 with learned PE at d_token 32 at chance
# in every seed and case 2 at d_token 8 far below the paper (partial-init-gpt2.md: 25 + 10 runs).
INIT = "pytorch"

NS = [2, 5, 10, 20]
LAYERS = [1, 2]
D_TOKENS = [16, 32, 100, 200]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=5, n=n, d_token=d_token, n_layers=layers, pos_embed="learned", seed=seed, init=INIT)
    for n in NS
    for layers in LAYERS
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = TableLayout(
    rows=("n", "n_layers"),
    column="d_token",
    paper={"n": "n", "n_layers": "layers", "d_token": "d_token"},
    title="Table 2: accuracy (%) for case 5, learned PE (max/avg over 5 seeds)",
)
