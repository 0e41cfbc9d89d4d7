"""report.md of the circle-init experiment from results.csv (PREDICTIONS.md's rule, K1-K3).

    .venv/bin/python experiments/circle-init/run.py --report
"""

from __future__ import annotations

from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent
ARMS = ("free", "circle-init", "circle-fixed")
MIN_RUNS = 5


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre, half = (p + z * z / (2 * n)), z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def share_verdict(k: int, n: int, bar: float) -> str:
    if n < MIN_RUNS:
        return f"untested ({n} runs)"
    lo, hi = wilson(k, n)
    return "confirmed" if lo > bar else "refuted" if hi < bar else "undecided"


def test_verdict(less: list[float], more: list[float]) -> tuple[str, float]:
    """Is ``less`` below ``more``? Mann-Whitney one-sided both ways (PREDICTIONS.md)."""
    if min(len(less), len(more)) < MIN_RUNS:
        return f"untested ({len(less)} and {len(more)} runs)", float("nan")
    p = stats.mannwhitneyu(less, more, alternative="less").pvalue
    q = stats.mannwhitneyu(less, more, alternative="greater").pvalue
    return ("confirmed" if p < 0.05 else "refuted" if q < 0.05 else "undecided"), float(p)


def _ok(r: dict) -> bool:
    return float(r["accuracy"]) >= 0.99


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if xs else float("nan")


def arm_table(rows: list[dict]) -> list[str]:
    out = ["| n | d_token | arm | runs | successes (95% CI) | codes of successes | median margin | median bits | median steps |",
           "|--:|--:|---|--:|---|---|--:|--:|--:|"]
    for (n, d) in sorted({(int(r["n"]), int(r["d_token"])) for r in rows}):
        for arm in ARMS:
            rs = [r for r in rows if (int(r["n"]), int(r["d_token"]), r["arm"]) == (n, d, arm)]
            ok = [r for r in rs if _ok(r)]
            lo, hi = wilson(len(ok), len(rs))
            codes = {}
            for r in ok:
                codes[r["code"]] = codes.get(r["code"], 0) + 1
            bits = [float(r["bits"]) for r in ok if r["bits"] not in ("", "None")]
            out.append(f"| {n} | {d} | {arm} | {len(rs)} | {len(ok)} ({lo:.2f}-{hi:.2f}) | "
                       f"{', '.join(f'{c} {k}' for c, k in sorted(codes.items())) or '-'} | "
                       f"{_median([float(r['margin']) for r in ok]):.2f} | {_median(bits):.0f} | "
                       f"{_median([int(r['steps']) for r in rs]):.0f} |")
    return out


def complete_seeds(rows: list[dict]) -> list[int]:
    """Seeds trained in every cell and arm (PREDICTIONS.md's amendment: only these are judged)."""
    cells = {(r["n"], r["d_token"]) for r in rows}
    have = {}
    for r in rows:
        have.setdefault(int(r["seed"]), set()).add((r["n"], r["d_token"], r["arm"]))
    return sorted(s for s, got in have.items() if len(got) == len(cells) * len(ARMS))


def main(rows: list[dict]) -> None:
    seeds = complete_seeds(rows)
    ok = [r for r in rows if _ok(r) and int(r["seed"]) in seeds]
    init = [r for r in ok if r["arm"] == "circle-init"]
    left = sum(r["code"] != "circle" for r in init)
    lo, hi = wilson(left, len(init))
    fixed = [r for r in ok if r["arm"] == "circle-fixed"]
    free = [r for r in ok if r["arm"] == "free"]
    k2, p2 = test_verdict([float(r["margin"]) for r in fixed], [float(r["margin"]) for r in free])
    bf = [float(r["bits"]) for r in fixed if r["bits"] not in ("", "None")]
    bfree = [float(r["bits"]) for r in free if r["bits"] not in ("", "None")]
    k3, p3 = test_verdict(bfree, bf)
    cpu = sum(float(r["cpu_seconds"]) for r in rows)
    lines = [
        "# Does a seed keep the circle? (issue 51, item 4)", "",
        "Written by `.venv/bin/python experiments/circle-init/run.py --report` from `results.csv`; design, "
        "measures and rule in [PREDICTIONS.md](PREDICTIONS.md), committed before the first run.", "",
        f"{len(rows)} runs, {cpu / 60:.1f} CPU-minutes (the cores were shared with other jobs: not a benchmark). "
        f"Judged (complete in every cell and arm): seeds {', '.join(map(str, seeds)) or 'none'}; "
        "the table below shows every run.", "",
        "## Predictions", "",
        "| prediction | measured | verdict |", "|---|---|---|",
        f"| K1: successful circle-init runs leave the circle (share > 0.5) | {left} of {len(init)} no longer "
        f"`circle` ({lo:.2f}-{hi:.2f}) | {share_verdict(left, len(init), 0.5)} |",
        f"| K2: circle-fixed successes have a lower normalised margin than free ones | medians "
        f"{_median([float(r['margin']) for r in fixed]):.2f} vs {_median([float(r['margin']) for r in free]):.2f}, "
        f"one-sided p = {p2:.4g} | {k2} |",
        f"| K3: circle-fixed successes need more bits than free ones | medians {_median(bf):.0f} vs "
        f"{_median(bfree):.0f}, one-sided p = {p3:.4g} | {k3} |", "",
        "## Per cell and arm", "", *arm_table(rows), "",
        "Codes: the calibrated value-code label (`interp.inspect.mechanism.levels.code`). Margin: mean "
        "(correct logit - best other) / std of the logits. Bits: least fixed-point precision at which "
        "the model's own answers survive (`interp.theory.precision.least_precision`, `reference=True`).",
    ]
    (HERE / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
