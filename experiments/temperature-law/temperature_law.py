"""Item 2: least softmax inverse temperature beta of every construction, against n.

    .venv/bin/python experiments/temperature-law/temperature_law.py            # resumes from temperature_law.json
    .venv/bin/python experiments/temperature-law/temperature_law.py --max-n 64
    .venv/bin/python experiments/temperature-law/temperature_law.py --plot-only

Cases 1-4 (one layer) up to n = 10^4 on three families (random inputs; every non-target value
perpendicular to the answer; every non-target value opposite it), with the sufficient bound
and the crude closed form; case 5's two-layer construction ("paper": never exact, checked up
to beta = 1e12) and its tie-broken variant up to n = 1024 (its first layer's softmax pattern is
dense: pos^2 per input). Writes temperature_law.json, temperature_law.csv, temperature_law.png.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path

from interp.theory import temperature as T
from interp.theory.studies import Study, style_axes

study = Study(Path(__file__).resolve().parent)

NS = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096, 10000]
FAMILIES = ("random", "perpendicular", "opposite")
JOBS = [(c, "paper", NS, 1e15) for c in (1, 2, 3, 4)] + [
    (5, "tiebroken", [n for n in NS if n <= 1024], 1e15),
    (5, "paper", [2, 3, 4, 8, 16], 1e12),
]


def compute(max_n: int) -> list[dict]:
    rows = study.load_rows("temperature_law.json")
    done = {(r["case"], r["variant"], r["family"], r["n"]) for r in rows}
    for case, variant, ns, beta_max in JOBS:
        for family in FAMILIES:
            for n in ns:
                if n > max_n or (case, variant, family, n) in done:
                    continue
                t = time.perf_counter()
                small = case == 5
                row = T.measure(case, n, family, variant=variant, rel=0.002, beta_max=beta_max,
                                targets=64 if small else 256, n_random=64 if small else 256)
                rows.append(row)
                print(f"case {case} {variant} {family} n={n}: beta={row['beta']} {time.perf_counter() - t:.1f}s", flush=True)
                study.save("temperature_law.json", dict(rows=rows, fits=T.fit_power(rows)))
    return rows


def write_csv(rows):
    keys = ["case", "variant", "family", "n", "beta", "below", "beta_sufficient", "beta_crude", "beta_adversarial", "inputs", "seconds"]
    with open(study.folder / "temperature_law.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(rows, key=lambda r: (r["case"], r["variant"], r["family"], r["n"])):
            w.writerow(r)


def plot(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, case in zip(axes, (1, 3, 4)):
        for family, style in zip(FAMILIES, ("o-", "s-", "^-")):
            pts = sorted((r["n"], r["beta"]) for r in rows  # n < 4: degenerate (see README)
                         if (r["case"], r["variant"], r["family"]) == (case, "paper", family) and r["beta"] and r["n"] >= 4)
            if pts:
                ax.plot(*zip(*pts), style, ms=3, label=f"measured, {family}")
        ns = sorted({r["n"] for r in rows if r["case"] == case and r["variant"] == "paper" and r["n"] >= 4})
        if ns:
            ax.plot(ns, [T.beta_sufficient(case, n) for n in ns], "k--", label="sufficient (score gaps, margin sin(pi/N))")
            ax.plot(ns, [T.beta_crude(case, n) for n in ns], "k:", label="crude: ln((L-1)C/sin(pi/N)) / g")
        ax.set_title(f"case {case}" + (" (case 2 identical)" if case == 3 else ""))
        style_axes(ax, "n", "least exact inverse temperature beta")
    study.save_figure(fig, "temperature_law.png")

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for family, style in zip(FAMILIES, ("o-", "s-", "^-")):
        pts = sorted((r["n"], r["beta"]) for r in rows
                     if (r["case"], r["variant"], r["family"]) == (5, "tiebroken", family) and r["beta"])
        if pts:
            ax.plot(*zip(*pts), style, ms=3, label=f"case 5 tie-broken, {family}")
    ns = sorted({r["n"] for r in rows if r["case"] == 5 and r["variant"] == "tiebroken"})
    if ns:
        ax.plot(ns, [0.1 * n * n * math.log(n) if n > 1 else 0.1 for n in ns], "k:", label="0.1 n^2 ln n (guide)")
    style_axes(ax, "n", "least exact beta (both layers)")
    study.save_figure(fig, "temperature_case5.png")


def outputs(rows, fits):
    write_csv(rows)
    plot(rows)
    for k, f in fits.items():
        print(f"{k}: beta ~ n^{f['exponent']:.2f}")


def main():
    study.run_law("temperature_law.json", compute, T.fit_power, outputs)


if __name__ == "__main__":
    main()
