"""Table 1 of the paper: cases 1-4 at n = 100, one layer, 5 seeds per cell.

Rows (in the paper's order): case 1 learned PE, case 1 no PE, case 2 no PE, case 3 no PE,
case 4 learned PE, case 4 no PE. Columns: d_token 2, 4, 8, 16, 32. Everything else is the
paper's protocol (TrainConfig's defaults), init="pytorch". Run with
``interp sweep experiments/table1``, render with ``interp report experiments/table1``.
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

# The paper does not say how its models were initialised. "pytorch" (nn.Embedding N(0, 1),
# nn.Linear U(+-1/sqrt(fan_in))) is what a plain PyTorch model gets; TransformerLens's "gpt2"
# (N(0, 0.8/sqrt(d_model)), small scores) left case 4 with learned PE at d_token 32 at chance
# in every seed and case 2 at d_token 8 far below the paper (partial-init-gpt2.md: 25 + 10 runs).
INIT = "pytorch"

N = 100
ROWS = [(1, "learned"), (1, "none"), (2, "none"), (3, "none"), (4, "learned"), (4, "none")]
D_TOKENS = [2, 4, 8, 16, 32]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=case, n=N, d_token=d_token, pos_embed=pos_embed, seed=seed, init=INIT)
    for case, pos_embed in ROWS
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = TableLayout(
    rows=("case", "pos_embed"),
    column="d_token",
    paper={"case": "case", "pos_embed": "pe", "d_token": "d_token"},
    title="Table 1: accuracy (%) for cases 1-4, n = 100, one layer (max/avg over 5 seeds)",
)
