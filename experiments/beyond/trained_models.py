"""Items 5 and 3 on trained models: train small one-layer case-5 models (the paper's protocol,
shortened), report h, d, measured precision, c-size and error beside Theorems 3.4 and 3.7, and
run Theorem 3.6's counterexample finder on each (under the three hard attention modes).

    .venv/bin/python experiments/beyond/trained_models.py     # resumes from trained_models.json

The wide models (d_token 16-32, n 4-8) are where one layer can learn something; the narrow
ones (d_token 1-2, n 16-64) are where 3 h d p < n log2 n, so that Theorem 3.7's bound is not
vacuous. Writes trained_models.json and trained_models.png.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import HERE, load_rows, polite, save  # noqa: E402

from interp import attention, tasks  # noqa: E402
from interp import lower_bounds as LB  # noqa: E402
from interp.counterexample import find_counterexample  # noqa: E402
from interp.training import TrainConfig, train  # noqa: E402

CONFIGS = [  # (n, d_token, seed, max_steps)
    (2, 16, 0, 3000), (3, 16, 0, 5000), (4, 16, 0, 10000), (5, 32, 0, 10000), (8, 32, 0, 5000),
    (16, 1, 0, 2000), (16, 2, 0, 2000), (32, 1, 0, 2000), (32, 2, 0, 2000), (64, 2, 0, 2000),
]


def counterexamples(model, n):
    out = {}
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
    rows = load_rows("trained_models.json")
    done = {(r["n"], r["d"], r["seed"], r["max_steps"]) for r in rows}
    for n, d, seed, steps in CONFIGS:
        if (n, d, seed, steps) in done:
            continue
        t = time.perf_counter()
        run = train(TrainConfig(case=5, n=n, d_token=d, seed=seed, max_steps=steps, eval_batches=16))
        row = dict(seed=seed, max_steps=steps, steps=run.steps, train_accuracy=run.accuracy,
                   **LB.report(run.model, count=8192, n_random=256))
        row["counterexamples"] = counterexamples(run.model, n) if n >= 4 else "n < 4: Theorem 3.6 does not apply"
        row["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        print({k: v for k, v in row.items() if k != "counterexamples"}, flush=True)
        save("trained_models.json", dict(rows=rows))
    plot(rows)


def plot(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for kind, marker in (("fixed", "o"), ("float", "s")):
        xs = [r[f"c_size_{kind}"] / (r["n"] * __import__("math").log2(r["n"])) for r in rows if r.get(f"c_size_{kind}")]
        ys = [r["error_theorem37"] for r in rows if r.get(f"c_size_{kind}")]
        ax.scatter(xs, ys, marker=marker, label=f"trained models, p {kind}")
    import numpy as np

    x = np.linspace(0.01, 1 / 3, 100)
    ax.plot(x, (1 - 3 * x) / 3, "k--", label="Thm 3.7: R/(3 n log n), R = n log n - 3hdp")
    ax.axvline(1 / 3, color="gray", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("h d p / (n log2 n)")
    ax.set_ylabel("error, f random, target key 0")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "trained_models.png", dpi=120)


if __name__ == "__main__":
    main()
