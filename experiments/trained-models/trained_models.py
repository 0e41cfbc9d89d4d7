"""Items 5 and 3 on trained models: train small one-layer case-5 models (the paper's protocol,
shortened), report h, d, measured precision, c-size and error beside Theorems 3.4 and 3.7, and
run Theorem 3.6's counterexample finder on each (under the three hard attention modes, n >= 4)
and, on the attention-only ones, the separability finder (softmax as trained: any n >= 2).

    .venv/bin/python experiments/trained-models/trained_models.py     # resumes from trained_models.json

The wide models (d_token 16-32, n 2-8) are where one layer could learn something; the narrow
ones (d_token 1-2, n 16-64) are where 3 h d p < n log2 n, so that Theorem 3.7's bound is not
vacuous; two wide ones have a ReLU MLP. Writes trained_models.json and trained_models.png.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import torch

from interp.core import attention, tasks
from interp.theory import lower_bounds as LB
from interp.theory.counterexample import (
    find_counterexample,
    find_counterexample_attention_only,
)
from interp.theory.studies import Study, polite, style_axes
from interp.training.trainer import TrainConfig, train

study = Study(Path(__file__).resolve().parent)

# (n, d_token, seed, max_steps, d_mlp). The last two have a ReLU MLP (d_mlp > 0), which
# Theorem 3.5 says can make one layer exact; the others are attention-only.
CONFIGS = [
    (2, 16, 0, 3000, 0), (3, 16, 0, 5000, 0), (4, 16, 0, 10000, 0), (5, 32, 0, 10000, 0), (8, 32, 0, 5000, 0),
    (16, 1, 0, 2000, 0), (16, 2, 0, 2000, 0), (32, 1, 0, 2000, 0), (32, 2, 0, 2000, 0), (64, 2, 0, 2000, 0),
    (4, 16, 0, 10000, 64), (8, 32, 0, 10000, 128),
]


def key(r: dict) -> tuple:
    return r["n"], r["d"], r["seed"], r["max_steps"], r.get("d_mlp", 0)


def counterexamples(model, n):
    out = {}
    if model.cfg.attn_only:  # the model as trained (softmax), any n >= 2; an MLP can decode (Theorem 3.5)
        c = find_counterexample_attention_only(model)
        with torch.no_grad():
            pred = int(model(torch.tensor([c.tokens]))[0, -1].argmax())
        out["softmax"] = dict(step=c.step, family=c.family, tokens=c.tokens, predicted=c.predicted, expected=c.expected,
                              verified=pred == c.predicted != c.expected == tasks.evaluate(5, n, c.tokens))
    if n < 4:
        return out
    for mode in ("leftmost", "rightmost", "average"):
        c = find_counterexample(model, mode)
        m = copy.deepcopy(model)
        attention.set_attention(m, mode)
        with torch.no_grad():
            pred = int(m(torch.tensor([c.tokens]))[0, -1].argmax())
        out[mode] = dict(step=c.step, family=c.family, tokens=c.tokens, predicted=c.predicted, expected=c.expected,
                         verified=pred == c.predicted != c.expected == tasks.evaluate(5, n, c.tokens))
    return out


def main():
    polite()
    rows = [r for r in study.load_rows("trained_models.json") if key(r) in CONFIGS]  # drops configs no longer listed
    done = {key(r) for r in rows}
    for n, d, seed, steps, d_mlp in CONFIGS:
        if (n, d, seed, steps, d_mlp) in done:
            continue
        t = time.perf_counter()
        run = train(TrainConfig(case=5, n=n, d_token=d, seed=seed, max_steps=steps, eval_batches=16, d_mlp=d_mlp))
        row = dict(seed=seed, max_steps=steps, d_mlp=d_mlp, steps=run.steps, train_accuracy=run.accuracy,
                   **LB.report(run.model, count=8192, n_random=256))
        row["counterexamples"] = counterexamples(run.model, n)
        row["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        print({k: v for k, v in row.items() if k != "counterexamples"}, flush=True)
        study.save("trained_models.json", dict(rows=rows))
    plot(rows)


def plot(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for kind, marker in (("fixed", "o"), ("float", "s")):
        xs = [r[f"c_size_{kind}"] / (r["n"] * math.log2(r["n"])) for r in rows if r.get(f"c_size_{kind}")]
        ys = [r["error_theorem37"] for r in rows if r.get(f"c_size_{kind}")]
        ax.scatter(xs, ys, marker=marker, label=f"trained models, p {kind}")
    x = [0.01 + i * (1 / 3 - 0.01) / 99 for i in range(100)]
    ax.plot(x, [(1 - 3 * v) / 3 for v in x], "k--", label="Thm 3.7: R/(3 n log n), R = n log n - 3hdp")
    ax.axvline(1 / 3, color="gray", lw=0.8)
    style_axes(ax, "h d p / (n log2 n)", "error, f random, target key 0", logy=False)
    study.save_figure(fig, "trained_models.png")


if __name__ == "__main__":
    main()
