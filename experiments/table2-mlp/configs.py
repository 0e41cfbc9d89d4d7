"""Table 2's one-layer rows again, with a position-wise ReLU MLP after the attention layer.

Why: a one-layer *attention-only* softmax model cannot exceed 75% on case 5 even at n = 2
(``interp.theory.counterexample.find_counterexample_attention_only``: logit_1 - logit_0 has the sign
of A(k0) + B(v0) + C, which cannot be an XOR), yet the paper reports 100% at n = 2 with one
layer; its Section 2 counts only attention layers ("any number of MLP layers"), so its models
very likely had an MLP. Rows: n in 2, 5, 10, one layer; columns: d_token 16, 32, 100, 200;
5 seeds (60 runs). Everything else as ``experiments/table2`` (case 5, learned PE, the paper's
protocol, init="pytorch"). d_mlp = 4 d_model is our choice (the usual transformer ratio; the
paper does not give a width). Run with ``interp sweep experiments/table2-mlp``, render with
``interp report experiments/table2-mlp``.
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

INIT = "pytorch"  # as experiments/table2
MLP_RATIO = 4  # d_mlp = MLP_RATIO * d_model (d_model = d_token in case 5): our choice

NS = [2, 5, 10]
D_TOKENS = [16, 32, 100, 200]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=5, n=n, d_token=d_token, n_layers=1, pos_embed="learned", seed=seed,
                init=INIT, d_mlp=MLP_RATIO * d_token)
    for n in NS
    for d_token in D_TOKENS
    for seed in SEEDS
]

LAYOUT = TableLayout(
    rows=("n", "n_layers"),
    column="d_token",
    paper={"n": "n", "n_layers": "layers", "d_token": "d_token"},
    title="Table 2, one layer + MLP (d_mlp = 4 d_model): accuracy (%) for case 5, learned PE "
    "(max/avg over 5 seeds)",
)
