"""The bimodal cell that notebook 03 reads: Table 2's case 5, n = 10, two layers, d_token 32.

The five seeds of that cell of ``experiments/table2/configs.py`` (learned positional embedding,
init="pytorch", the paper's protocol; the same run names). Its committed per-seed line in
``experiments/table2/report.md`` has seeds at >= 99% and a seed at chance (10%); ``python
experiments/notebooks/bimodal-cell/cells.py`` lists every bimodal cell of the committed results
and picks this one (its docstring says how). The store and checkpoints beside this file are
committed (the notebook prints their size), so the notebook trains nothing; they were written,
and are rewritten (delete ``store.sqlite`` and ``checkpoints/`` first), by

    MKL_CBWR=AUTO interp sweep experiments/notebooks/bimodal-cell --workers 1 --threads 1 --save-every 0 --store experiments/notebooks/bimodal-cell/store.sqlite
"""

from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig

CONFIGS = [
    TrainConfig(case=5, n=10, d_token=32, n_layers=2, pos_embed="learned", seed=seed, init="pytorch")
    for seed in range(5)
]

LAYOUT = TableLayout(
    rows=("n", "n_layers"),
    column="d_token",
    title="Table 2's case-5 cell n = 10, two layers, d_token 32 (max/avg over 5 seeds)",
)
