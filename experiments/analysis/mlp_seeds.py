"""Do one-layer case-5 models with an MLP (experiments/table2-mlp) work like Theorem 3.5?

Theorem 3.5's softmax construction spreads the final query's attention over every position
(weights (t_j + 1) / S that encode the tokens), so the attention output holds the whole input,
and its MLP does the lookup. For every finished seed of the table2-mlp store this measures, on
2048 sampled inputs (f a permutation, as in training):

* ``acc``: accuracy; ``acc_no_mlp``: with the MLP's output zeroed (``hook_mlp_out``: what the
  attention alone answers, which the separability bound caps at 75%); ``acc_mean_mlp``: with it
  replaced by its mean over the inputs (the MLP's input-dependent part removed);
* ``entropy``: the final query's attention entropy / log(seq_len) (1 = uniform);
  ``mass_value``, ``mass_key``: its weight on the matching slot's value position 2j + 1 and key
  position 2j (a lookup by attention would put it there);
* ``copy_k0``, ``copy_v0``, ``copy_target``: held-out accuracy of linear probes that read the
  key and value of slot 0 and the target from the final position's attention output
  (``hook_attn_out``; one-hot regression, argmax): 1 when the attention output carries the
  input, as in Theorem 3.5, chance 1/n when it does not. Each config's first row is the same
  model untrained (``init``): softmax weights that vary with the tokens already make the
  attention output carry the input there, so the copy probes separate little on their own.

Run from the repository root after training the cells (``interp sweep experiments/table2-mlp
--where n=2 --where d_token=32`` and ``--where n=5``); writes ``table2-mlp-seeds.md`` and
``.csv`` here.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

from interp.core import tasks
from interp.inspect.tools import probes
from interp.training import checkpoints, runs
from interp.sweeps import store

HERE = Path(__file__).parent
STORE = Path("experiments/table2-mlp/results/store.sqlite")


def _acc(logits, answers) -> float:
    return float((logits[:, -1].argmax(-1) == answers).float().mean())


def _probe(X, labels, n: int) -> float:
    pred = probes.heldout_predictions(X, np.eye(n)[labels]).argmax(1)
    return float((pred == labels).mean())


def measure_seed(model, n: int, *, batch: int = 2048, seed: int = 0) -> dict:
    tokens, answers = tasks.sample(5, n, batch, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda x: x in (
            "blocks.0.hook_mlp_out", "blocks.0.hook_attn_out", "blocks.0.attn.hook_pattern"))
        mean_mlp = cache["blocks.0.hook_mlp_out"].mean(0, keepdim=True)
        no_mlp = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda a, hook: a * 0)])
        mean = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_mlp_out",
                                                        lambda a, hook: mean_mlp.expand_as(a))])
    pattern = cache["blocks.0.attn.hook_pattern"][:, 0, -1].double()  # [batch, pos]
    j = (tokens[:, 0:2 * n:2] == tokens[:, -1:]).int().argmax(1)
    rows = torch.arange(batch)
    entropy = float(-(pattern * pattern.clamp_min(1e-30).log()).sum(1).mean() / math.log(2 * n + 1))
    X = cache["blocks.0.hook_attn_out"][:, -1].numpy()
    return dict(acc=_acc(logits, answers), acc_no_mlp=_acc(no_mlp, answers),
                acc_mean_mlp=_acc(mean, answers), entropy=entropy,
                mass_value=float(pattern[rows, 2 * j + 1].mean()),
                mass_key=float(pattern[rows, 2 * j].mean()),
                copy_k0=_probe(X, tokens[:, 0].numpy(), n), copy_v0=_probe(X, tokens[:, 1].numpy(), n),
                copy_target=_probe(X, tokens[:, -1].numpy(), n))


def _markdown(table) -> str:
    head = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    return head + "\n".join("| " + " | ".join(str(v) for v in row) + " |" for row in table.values)


def main(argv=None) -> int:
    import pandas as pd

    df = store.read(STORE)
    df = df[(df.status == "ok") & df.checkpoint.notna()].sort_values(["n", "d_token", "seed"])
    if df.empty:
        print(f"no finished runs in {STORE}; train them first (see the docstring)", file=sys.stderr)
        return 2
    rows, baselines = [], set()
    for _, r in df.iterrows():
        run = checkpoints.load_run(r.checkpoint)
        key = (int(r.n), int(r.d_token), int(r.d_mlp))
        if key not in baselines:  # the same config untrained: what the measures give by chance
            baselines.add(key)
            m = measure_seed(runs.init_model(run.config), int(r.n))
            rows.append(dict(n=key[0], d_token=key[1], d_mlp=key[2], seed=f"init {run.config.seed}",
                             trained_acc="-", **{k: round(v, 3) for k, v in m.items()}))
        m = measure_seed(run.model, int(r.n))
        rows.append(dict(n=key[0], d_token=key[1], d_mlp=key[2], seed=int(r.seed),
                         trained_acc=round(float(r.accuracy), 4), **{k: round(v, 3) for k, v in m.items()}))
    table = pd.DataFrame(rows)
    table.to_csv(HERE / "table2-mlp-seeds.csv", index=False)
    (HERE / "table2-mlp-seeds.md").write_text(
        "# One-layer case-5 seeds with an MLP: Theorem 3.5's mechanism?\n\n"
        f"Written by `experiments/analysis/mlp_seeds.py` from `{STORE}` (measures: the script's "
        "docstring). chance = 1/n.\n\n" + _markdown(table) + "\n")
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
