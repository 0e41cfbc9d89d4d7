"""The geometry label's calibration: which thresholds name simplex, orthoplex, circle and codebook,
and at which n (issue 51, item 1).

Declared before its first run in ``PREDICTIONS-geometry.md`` (frame, measures, families, draws,
grids, rule, predictions). Every point set (``figure_controls.draw``) is disguised
(``figure_controls.disguise``) and measured (``figures.table_measures``). Writes
``geometry_rows.csv`` (one row per point set) and ``geometry.md`` (the chosen thresholds, the
feasible sizes per threshold pair, the final label's rates per label and n with their bounds,
the predictions).

    .venv/bin/python experiments/calibration/geometry_check.py            # measure and report
    .venv/bin/python experiments/calibration/geometry_check.py --report   # report from the CSV
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import zlib
from pathlib import Path

import torch
from scipy.stats import beta

from interp.inspect.mechanism import figure_controls as fc
from interp.inspect.mechanism import figures

HERE = Path(__file__).resolve().parent
ROWS = HERE / "geometry_rows.csv"
NS = figures.CALIBRATED_NS
FPR_MAX, TPR_MIN = 0.01, 0.95
NORM = DEV = (0.02, 0.05, 0.1, 0.15, 0.2)
#: the codebook's grid (amendment A1 of PREDICTIONS-geometry.md)
PR, COS, NORM_MIN, SD_MIN = (2.5, 3, 3.5, 4, 4.5, 5, 6), (0.9, 0.95, 0.98), (0, 0.04, 0.06, 0.08), (0, 0.08, 0.1, 0.12, 0.15)
#: the draws' seed block: A1 is chosen and certified on fresh draws, each seed moved by 10^9
SEED_BLOCK = 10**9
#: each searched figure's two thresholds (the circle's are fixed by circle_check.py)
KEYS = {"simplex": ("simplex_norm_max", "simplex_dev_max"),
        "orthoplex": ("orthoplex_norm_max", "orthoplex_dev_max"),
        "codebook": ("codebook_pr_min", "codebook_cos_max", "codebook_norm_min", "codebook_sd_min")}
GRIDS = {"simplex": [(a, b) for a in NORM for b in DEV], "orthoplex": [(a, b) for a in NORM for b in DEV],
         "codebook": [(p, c, a, d) for p in PR for c in COS for a in NORM_MIN for d in SD_MIN]}
MEASURES = ("norm_cv", "cos_sd", "simplex_dev", "orthoplex_dev", "cos_max", "pr", "top2", "rcv", "gap", "collapse")


def seed_of(family: str, n: int, d: int) -> int:
    return SEED_BLOCK + 1_000_003 * n + 10_007 * (zlib.crc32(family.encode()) % 1000) + d


def measure() -> list[dict]:
    rows = []
    for n in NS:
        for family in fc.families_at(n):
            for d in range(fc.DRAWS[family]):
                seed = seed_of(family, n, d)
                means, per = fc.disguise(fc.draw(family, n, seed), seed=seed + 1)
                m = figures.table_measures(means, per)
                rows.append(dict(n=n, family=family, figure=fc.FAMILIES[family][0] or "", draw=d,
                                 **{k: float(f"{m[k]:.6g}") for k in MEASURES}))  # 6 digits: the CSV is the record
    with ROWS.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def read() -> list[dict]:
    with ROWS.open() as fh:
        return [dict(r, n=int(r["n"]), draw=int(r["draw"]), **{k: float(r[k]) for k in MEASURES})
                for r in csv.DictReader(fh)]


def upper(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen k times in n."""
    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k))


def lower(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson lower bound of a rate seen k times in n."""
    return 0.0 if k <= 0 else float(beta.ppf(0.05, k, n - k + 1))


def base_thresholds() -> dict:
    """The circle's fixed thresholds; the searched ones start unset, nothing testable."""
    from interp.inspect.mechanism.calibration import THRESHOLDS

    T = {k: THRESHOLDS[k] for k in ("top2_min", "rcv_max", "gap_min")}
    T.update({k: math.nan for keys in KEYS.values() for k in keys})
    T["geometry_testable"] = {f: [] for f in figures.FIGURES}
    return T


_AT: dict = {}


def rates(rows, n: int, figure: str, T: dict) -> dict:
    """The label's rates for ``figure`` at ``n`` under ``T``."""
    key = (id(rows), len(rows), n)
    if key not in _AT:  # the rows at n, grouped once per list (the grid asks thousands of times)
        _AT[key] = [r for r in rows if r["n"] == n]
    at = _AT[key]
    pos = [r for r in at if r["figure"] == figure]
    neg = [r for r in at if r["figure"] != figure]
    tp = sum(figures.label(r, T) == figure for r in pos)
    fp = sum(figures.label(r, T) == figure for r in neg)
    return dict(pos=len(pos), tp=tp, neg=len(neg), fp=fp,
                tpr=tp / len(pos) if pos else math.nan, tpr_lower=lower(tp, len(pos)) if pos else 0.0,
                fpr=fp / len(neg), fpr_upper=upper(fp, len(neg)))


def feasible(r: dict) -> bool:
    return r["pos"] > 0 and r["fpr_upper"] <= FPR_MAX and r["tpr_lower"] >= TPR_MIN


def choose(rows) -> dict:
    """The declared rule: the figures in order, each given the ones before; per figure the pair
    feasible at the most sizes, ties by the higher smallest TPR there, then the loosest pair."""
    T = base_thresholds()
    for figure in figures.FIGURES:
        trial = {**T, "geometry_testable": {**T["geometry_testable"], figure: list(NS)}}

        def score(pair):
            if figure != "circle":
                trial.update(zip(KEYS[figure], pair))
            got = {n: rates(rows, n, figure, trial) for n in NS}
            ok = [n for n in NS if feasible(got[n])]
            loose = () if pair is None else tuple(pair) if figure != "codebook" else (-pair[0], pair[1], -pair[2], -pair[3])
            return (len(ok), min((got[n]["tpr"] for n in ok), default=0.0), *loose), ok

        if figure == "circle":
            best, ok = None, score(None)[1]
        else:
            best = max(GRIDS[figure], key=lambda p: score(p)[0])
            ok = score(best)[1]
            T.update(zip(KEYS[figure], best))
        T["geometry_testable"][figure] = ok
    return T


def feasible_sizes(rows, T: dict, figure: str, pair) -> list[int]:
    trial = {**T, **dict(zip(KEYS[figure], pair)),
             "geometry_testable": {**T["geometry_testable"], figure: list(NS)}}
    return [n for n in NS if feasible(rates(rows, n, figure, trial))]


def report(rows) -> dict:
    T = choose(rows)
    counts = {n: sum(r["n"] == n for r in rows) for n in NS}
    lines = ["# The geometry label's calibration (issue 51, item 1)", "",
             "Written by `.venv/bin/python experiments/calibration/geometry_check.py` (add `--report` to "
             "rewrite this file from `geometry_rows.csv` without measuring again); frame, measures, "
             "families, draws, grids and rule declared first in `PREDICTIONS-geometry.md`. Point sets "
             "per n: " + ", ".join(f"{n}: {c}" for n, c in counts.items()) + ". A label is testable at n "
             "when the one-sided 95% Clopper-Pearson upper bound on P(label | not that figure) is <= 1% "
             "and the lower bound on P(label | that figure) is >= 95%.", "",
             "## Chosen", "", "| threshold | value |", "|---|--:|"]
    lines += [f"| {k} | {T[k]} |" for keys in KEYS.values() for k in keys]
    lines += [f"| {k} (circle.md, fixed) | {T[k]} |" for k in ("top2_min", "rcv_max", "gap_min")]
    lines += ["", "| label | testable at n |", "|---|---|"]
    lines += [f"| {f} | {', '.join(map(str, T['geometry_testable'][f])) or 'none'} |" for f in figures.FIGURES]
    for figure, keys in KEYS.items():
        if len(keys) != 2:
            lines += ["", f"## {figure}: how many of its {len(GRIDS[figure])} threshold sets are feasible at each n", "",
                      "| n | feasible sets |", "|--:|--:|"]
            ok = [feasible_sizes(rows, T, figure, q) for q in GRIDS[figure]]
            lines += [f"| {n} | {sum(n in o for o in ok)} |" for n in NS]
            continue
        ka, kb = keys
        a_vals, b_vals = sorted({p[0] for p in GRIDS[figure]}), sorted({p[1] for p in GRIDS[figure]})
        lines += ["", f"## {figure}: sizes where each pair is feasible ({ka} x {kb})", "",
                  f"| {ka} \\ {kb} | " + " | ".join(map(str, b_vals)) + " |", "|---|" + "---|" * len(b_vals)]
        for a in a_vals:
            cells = [",".join(map(str, feasible_sizes(rows, T, figure, (a, b)))) or "-" for b in b_vals]
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += rate_table(rows, T) + why_untestable(rows, T) + family_table(rows, T)
    lines += ["", "## The first run (the declared rule, before amendment A1)", "",
              "Commit 48e9743 (other seeds; the codebook tested by pr and cos_max alone): simplex testable "
              "at 5, 10, 20, 50, orthoplex at 10, 20, 50, circle at 10, 20, codebook at none (perturbed "
              "simplices and orthoplexes and anisotropic clouds passed it; G4 refuted there)."]
    verdicts = predictions(T)
    lines += ["", "## Predictions", "", "| prediction | verdict |", "|---|---|"]
    lines += [f"| {k}: {text} | {'confirmed' if ok else 'refuted'} |" for k, (text, ok) in verdicts.items()]
    (HERE / "geometry.md").write_text("\n".join(lines) + "\n")
    return T


def rate_table(rows, T) -> list[str]:
    lines = ["", "## The label's rates at the chosen thresholds", "",
             "TPR: share of the figure's positives labelled with it (lower: one-sided 95% bound); FPR: "
             "share of every other point set at n labelled with it (upper: one-sided 95% bound). Where "
             "a figure is untestable the label never says it (TPR 0 by construction); the last two "
             "columns give its rates taken as testable there (the figures before it as chosen), which "
             "say why.", "",
             "| n | label | positives | TPR | TPR lower | negatives | false positives | FPR upper | testable | "
             "as testable: TPR lower | as testable: FPR upper |",
             "|--:|---|--:|--:|--:|--:|--:|--:|---|--:|--:|"]
    for n in NS:
        for f in figures.FIGURES:
            r = rates(rows, n, f, T)
            if r["pos"] == 0:
                lines.append(f"| {n} | {f} | 0 | - | - | {r['neg']} | {r['fp']} | {r['fpr_upper']:.4f} | "
                             "no figure at odd n | - | - |")
                continue
            t = rates(rows, n, f, {**T, "geometry_testable": {**T["geometry_testable"], f: list(NS)}})
            lines.append(f"| {n} | {f} | {r['pos']} | {r['tpr']:.3f} | {r['tpr_lower']:.3f} | {r['neg']} | "
                         f"{r['fp']} | {r['fpr_upper']:.4f} | {'yes' if n in T['geometry_testable'][f] else 'untestable'} | "
                         f"{t['tpr_lower']:.3f} | {t['fpr_upper']:.4f} |")
    return lines


def why_untestable(rows, T) -> list[str]:
    """Per untestable (figure, n) with positives: which bound fails, and the families it fires on."""
    lines = ["", "## Why a label is untestable", "",
             "Taken as testable (the figures before it as chosen): the bound that fails, and the "
             "negative families the label would be given to most often.", "",
             "| n | label | TPR lower | FPR upper | false positives by family |", "|--:|---|--:|--:|---|"]
    for n in NS:
        for f in figures.FIGURES:
            if n in T["geometry_testable"][f] or not any(r["n"] == n and r["figure"] == f for r in rows):
                continue
            trial = {**T, "geometry_testable": {**T["geometry_testable"], f: list(NS)}}
            t = rates(rows, n, f, trial)
            fams = {}
            for r in rows:
                if r["n"] == n and r["figure"] != f and figures.label(r, trial) == f:
                    fams[r["family"]] = fams.get(r["family"], 0) + 1
            top = ", ".join(f"{k} {v}" for k, v in sorted(fams.items(), key=lambda kv: -kv[1])) or "none"
            lines.append(f"| {n} | {f} | {t['tpr_lower']:.3f} | {t['fpr_upper']:.4f} | {top} |")
    return lines


def family_table(rows, T) -> list[str]:
    words = figures.LABELS
    lines = ["", "## What each family is labelled (counts)", "",
             "| n | family | " + " | ".join(words) + " |", "|--:|---|" + "--:|" * len(words)]
    for n in NS:
        for family in fc.families_at(n):
            got = [figures.label(r, T) for r in rows if r["n"] == n and r["family"] == family]
            lines.append(f"| {n} | {family} | " + " | ".join(str(got.count(w)) for w in words) + " |")
    return lines


def predictions(T) -> dict:
    t = T["geometry_testable"]
    return {"G1": ("simplex testable at n = 5, 10, 20, 50 and not at 3", t["simplex"] == [5, 10, 20, 50]),
            "G2": ("orthoplex testable at n = 10, 20, 50", t["orthoplex"] == [10, 20, 50]),
            "G3": ("circle feasible at n = 10, 20, 50 and not at 3, 5", t["circle"] == [10, 20, 50]),
            "G4": ("codebook testable at n = 20 and 50, not at n <= 10 (here under A1's detector; under the "
                   "declared one it was refuted, first run)", t["codebook"] == [20, 50]),
            "G5": ("at n = 3 and 5 every code that is not a simplex reads untestable",
                   all(n not in t[f] for n in (3, 5) for f in ("circle", "codebook"))),
            "A1": ("(amendment) codebook testable at n = 20 and 50, not at n <= 10", t["codebook"] == [20, 50]),
            "A2": ("(amendment) simplex, orthoplex, circle keep the first run's sizes",
                   (t["simplex"], t["orthoplex"], t["circle"]) == ([5, 10, 20, 50], [10, 20, 50], [10, 20]))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", action="store_true", help="only write geometry.md from geometry_rows.csv")
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # small matrices: one thread is ~30x cheaper on shared cores
    t0, c0 = time.time(), time.process_time()
    rows = read() if args.report else measure()
    T = report(rows)
    print({k: T[k] for keys in KEYS.values() for k in keys}, T["geometry_testable"],
          f"{len(rows)} point sets; {time.time() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
