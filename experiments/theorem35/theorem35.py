"""Item 4: Theorem 3.5's explicit one-layer softmax transformer (attention + a 5n-unit ReLU MLP).

    .venv/bin/python experiments/theorem35/theorem35.py

Exhaustive check (every function [n] -> [n], every key order, every target) for n <= 5, random
inputs (4096 arbitrary functions and 4096 permutations) up to n = 256, in float64 and
float32; parameter counts against n. Writes theorem35.json, theorem35.png.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from interp.theory import softmax_construction as S
from interp.theory.studies import Study, polite, style_axes

study = Study(Path(__file__).resolve().parent)

EXHAUSTIVE = [2, 3, 4, 5]
RANDOM = [2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]


def main():
    polite()
    rows = study.load_rows("theorem35.json")
    done = {(r["n"], r["dtype"]) for r in rows}
    for n in sorted(set(EXHAUSTIVE + RANDOM)):
        for dtype in ("float64", "float32"):
            if (n, dtype) in done:
                continue
            t = time.perf_counter()
            model = S.build(n, dtype=getattr(torch, dtype))
            row = dict(n=n, dtype=dtype, **S.parameter_counts(model))
            if n in EXHAUSTIVE:
                row["exhaustive_any"] = S.accuracy(model, inputs="exhaustive", function="any")
            for function in ("any", "permutation"):
                row[f"random_{function}"] = S.accuracy(model, count=4096, function=function, seed=n)
            row["seconds"] = round(time.perf_counter() - t, 1)
            rows.append(row)
            acc = {k: v["accuracy"] for k, v in row.items() if isinstance(v, dict)}
            print(n, dtype, acc, row["total"], row["nonzero"], row["mlp"], f"{row['seconds']}s", flush=True)
            study.save("theorem35.json", dict(rows=rows))
    plot(rows)


def plot(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f64 = [r for r in rows if r["dtype"] == "float64"]
    ns = [r["n"] for r in f64]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
    ax = axes[0]
    for key, label in [("total", "all parameters (dense)"), ("mlp", "MLP (dense)"),
                       ("nonzero", "non-zero parameters"), ("mlp_nonzero", "MLP non-zero (20 n)")]:
        ax.plot(ns, [r[key] for r in f64], "o-", ms=3, label=label)
    ax.plot(ns, [44 * n * n for n in ns], "k:", label="44 n^2")
    ax.set_title("Theorem 3.5, explicit: d = 2n+2, d_mlp = 5n")
    style_axes(ax, "n", "parameters")
    ax = axes[1]
    for dtype in ("float64", "float32"):
        rs = [r for r in rows if r["dtype"] == dtype]
        ax.plot([r["n"] for r in rs], [r["random_any"]["accuracy"] for r in rs], "o-", ms=3, label=f"{dtype}, arbitrary f")
    style_axes(ax, "n", "accuracy on 4096 random inputs", logy=False)
    study.save_figure(fig, "theorem35.png")


if __name__ == "__main__":
    main()
