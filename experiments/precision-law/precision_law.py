"""Item 1: least precision p (fixed point and mantissa) of every construction, n = 2 .. 10^4.

    .venv/bin/python experiments/precision-law/precision_law.py            # resumes from precision_law.json
    .venv/bin/python experiments/precision-law/precision_law.py --max-n 256  # a quick partial run
    .venv/bin/python experiments/precision-law/precision_law.py --plot-only

Writes precision_law.json (rows + fits), precision_law.csv, precision_law.png, c_size.png.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

from interp.theory import precision as P
from interp.theory.studies import Study, style_axes

study = Study(Path(__file__).resolve().parent)

NS = [2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096, 10000]
NS_THM35 = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
JOBS = [(case, "paper") for case in (1, 2, 3, 4, 5)] + [(5, "theorem35")]


def compute(max_n: int) -> list[dict]:
    rows = study.load_rows("precision_law.json")
    done = {(r["case"], r["which"], r["kind"], r["n"]) for r in rows}
    for kind in P.KINDS:
        for case, which in JOBS:
            prev = None
            for n in NS_THM35 if which == "theorem35" else NS:
                if n > max_n:
                    break
                old = [r for r in rows if (r["case"], r["which"], r["kind"], r["n"]) == (case, which, kind, n)]
                if old:
                    prev = (n, old[0]["bits"])
                    continue
                hint = None
                if prev and prev[1]:
                    slope = 4 if which == "theorem35" else 2
                    hint = prev[1] + round(slope * math.log2(n / prev[0]))
                t = time.perf_counter()
                row = P.measure(case, n, kind, which=which, hint=hint)
                rows.append(row)
                prev = (n, row["bits"])
                print(f"case {case} {which} {kind} n={n}: p={row['bits']} (I={row['int_bits']}) "
                      f"{time.perf_counter() - t:.1f}s", flush=True)
                study.save("precision_law.json", dict(rows=rows, fits=P.fit_law(rows)))
    return rows


def write_csv(rows):
    keys = ["case", "which", "layers", "kind", "n", "bits", "int_bits", "h", "d", "c_size", "bound_3_4", "inputs", "seconds"]
    with open(study.folder / "precision_law.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(rows, key=lambda r: (r["kind"], r["which"], r["case"], r["n"])):
            w.writerow(r)


def plot(rows, fits):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, kind in zip(axes, P.KINDS):
        for case, which in JOBS:
            pts = sorted((r["n"], r["bits"]) for r in rows
                         if (r["case"], r["which"], r["kind"]) == (case, which, kind) and r["bits"])
            if not pts:
                continue
            label = f"case {case}" + (" (2 layers)" if case == 5 and which == "paper" else "")
            if which == "theorem35":
                label = "case 5, Thm 3.5 (1 layer + MLP)"
            f = fits.get(f"case{case}/{which}/{kind}")
            if f:
                label += f": {f['slope']:.2f} log2 n + {f['intercept']:.1f}"
            ax.plot([math.log2(n) for n, _ in pts], [p for _, p in pts], "o-", ms=3, label=label)
        ax.set_title(f"least exact precision, {kind} ({'1 sign + I + F bits' if kind == 'fixed' else 'mantissa bits'})")
        style_axes(ax, "log2 n", logx=False, logy=False)
    axes[0].set_ylabel("p (bits)")
    study.save_figure(fig, "precision_law.png")

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ns = sorted({r["n"] for r in rows if r["n"] >= 2})
    ax.plot(ns, [P.theorem_3_4_bound(n) for n in ns], "k--", label="Thm 3.4 bound n log2 n / 3 (1 layer)")
    for case, which, lab in [(5, "paper", "case 5, 2-layer construction (d=7)"),
                             (5, "theorem35", "case 5, Thm 3.5 (1 layer, d=2n+2)"),
                             (4, "paper", "case 4, 1 layer (d=4)")]:
        pts = sorted((r["n"], r["c_size"]) for r in rows
                     if (r["case"], r["which"], r["kind"]) == (case, which, "fixed") and r["c_size"])
        if pts:
            ax.plot(*zip(*pts), "o-", ms=3, label=f"{lab}: h d p")
    style_axes(ax, "n", "c-size h d p (fixed point)")
    study.save_figure(fig, "c_size.png")


def outputs(rows, fits):
    write_csv(rows)
    plot(rows, fits)
    for k, f in fits.items():
        print(f"{k}: p = {f['slope']:.2f} log2 n + {f['intercept']:.2f} (max residual {f['max_residual']:.2f})")


def main():
    study.run_law("precision_law.json", compute, P.fit_law, outputs)


if __name__ == "__main__":
    main()
