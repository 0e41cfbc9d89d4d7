"""The demo sweep of ``interp run``: the paper's phenomena at n = 10, in a few minutes.

Three presentations, 5 seeds each, the paper's protocol (Adam 1e-3, batches of 256, up to
10,000 steps, stop at loss < 0.01, 100 test batches):

* case 3, no positional embedding (same position, permuted keys), d_token 8 and 16: learns —
  the key travels with its value, so positions are not needed — and at d_token 8 not for every
  seed: the bimodal behaviour of the paper's Appendix (some seeds at 100%, others far below);
* case 1, no positional embedding (no keys), d_token 16: cannot learn — without positions the
  values form the same set [n] for every f, so accuracy stays at chance (1/n = 10%). One width
  is enough to show it, and these runs never stop early (10,000 steps each);
* case 1, learned positional embedding, d_token 8 and 16: learns, bimodal at d_token 8.

The paper has no numbers at n = 10 for cases 1-3, so the report shows ours alone.
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

N = 10
CELLS = [  # (case, pos_embed, d_token)
    (3, "none", 8), (3, "none", 16),
    (1, "none", 16),
    (1, "learned", 8), (1, "learned", 16),
]
SEEDS = range(5)

CONFIGS = [
    TrainConfig(case=case, n=N, d_token=d_token, pos_embed=pos_embed, seed=seed)
    for case, pos_embed, d_token in CELLS
    for seed in SEEDS
]

LAYOUT = TableLayout(
    rows=("case", "pos_embed"),
    column="d_token",
    title="Demo: cases 1 and 3 at n = 10, one layer (max/avg over 5 seeds)",
)
