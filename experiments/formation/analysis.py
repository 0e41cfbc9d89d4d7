"""The formation study's hypotheses (a)-(d) decided (DESIGN.md sections 3-4, pins and A1).

    .venv/bin/python experiments/formation/analysis.py            # -> report.md (the sets measured so far)
    .venv/bin/python experiments/formation/analysis.py --check    # exit 1 if report.md is stale

Reads each set's ``timeline.csv`` (``run.sh``: ``interp timeline`` of its sweep) and
``store-rows.sqlite`` (each run's loss curve and final accuracy). A set not yet measured is
named and skipped; the held-out result is the finding, the discovery result what chose.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from interp.sweeps.paper_check import wilson
from interp.training.files import write_or_check

HERE = Path(__file__).resolve().parent
SETS = ("discovery", "held-out")
VERSION = "measure3-progress1"
SUCCESS, COMPLETE, NO_ROUTING, EARLY = 0.99, 0.9, 0.5, 200
#: DESIGN.md's names -> the timeline's columns (section 6's pins)
MEASURES = {"mass": "match_mass", "margin": "match_pos", "readout": "readout_acc",
            "value_iia": "value_iia_code", "key_iia": "query_iia_code", "qk_diag": "qk_diag"}
MIN_SEEDS, BOOT = 10, 2000
#: causal.py's results, and the parameters each arm moves (its ``params`` column names the set)
CAUSAL = HERE / "causal.csv"
CAUSAL_PARAMS = {"qk": ("W_Q", "W_K", "b_Q", "b_K"), "ov": ("W_V", "W_O", "b_V", "b_O")}


def share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.2f} ({lo:.2f}-{hi:.2f})" if n else "0/0"


def verdict(k: int, n: int, bar: float = 0.5) -> str:
    if n < MIN_SEEDS:
        return f"untested ({n} seeds)"
    lo, hi = wilson(k, n)
    return "confirmed" if lo > bar else "refuted" if hi < bar else "undecided"


def load(name: str) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(timeline rows, runs) of a measured set, or None where it is not measured yet."""
    tl_path, rows_path = HERE / name / "timeline.csv", HERE / name / "store-rows.sqlite"
    if not (tl_path.exists() and rows_path.exists()):
        return None
    from interp.inspect.studies.timelines import read_timeline

    tl = read_timeline(tl_path)  # every row's seal and the code's measures version, checked
    bad = sorted(set(tl.measures_version) - {VERSION})
    if bad:
        raise ValueError(f"{tl_path}: measures_version {bad}; accepted: {VERSION} (DESIGN.md section 6)")
    with sqlite3.connect(rows_path) as con:
        runs = pd.read_sql("select name, config, accuracy, steps, curve, cpu_seconds from runs where status = 'ok'", con)
    return tl, runs


def first_below(curve, level: float):
    return next((s for s, loss in curve if loss < level), None)


def completion(rows: pd.DataFrame, column: str):
    """The first snapshot step from which ``column`` stays >= COMPLETE to the end (None: never)."""
    ok = (rows[column] >= COMPLETE).to_numpy()
    if not ok[-1]:
        return None
    i = len(ok) - 1
    while i > 0 and ok[i - 1]:
        i -= 1
    return int(rows.step.iloc[i])


def per_run(tl: pd.DataFrame, runs: pd.DataFrame, name: str) -> pd.DataFrame:
    out = []
    for r in runs.itertuples():
        c = json.loads(r.config)
        curve = json.loads(r.curve)
        rows = tl[tl.run == r.name].sort_values("step")
        if rows.empty:
            continue
        n = c["n"]
        t_exit = first_below(curve, 0.9 * math.log(n))
        early = rows[rows.step <= EARLY].iloc[-1] if int(rows.step.max()) >= EARLY else rows.iloc[-1]
        loss_early = min(curve, key=lambda p: (abs(p[0] - EARLY), p[0]))[1]
        at_exit = rows[rows.step <= t_exit].iloc[-1] if t_exit is not None else None
        d = dict(set=name, run=r.name, cell=(c["case"], n, c["d_token"]), seed=c["seed"],
                 success=r.accuracy >= SUCCESS, accuracy=r.accuracy, steps=r.steps, cpu=r.cpu_seconds, t_exit=t_exit,
                 t_drop=first_below(curve, 0.5 * math.log(n)), early_loss=loss_early,
                 early_step=int(early.step))
        for short, col in MEASURES.items():
            d[f"early_{short}"] = float(early[col])
            d[f"final_{short}"] = float(rows[col].iloc[-1])
            d[f"start_{short}"] = float(rows[col].iloc[0])
            d[f"exit_{short}"] = float(at_exit[col]) if at_exit is not None else math.nan
            d[f"done_{short}"] = completion(rows, col)
        out.append(d)
    return pd.DataFrame(out)


def hyp_a(df) -> tuple[str, str]:
    s = df[df.success]
    span = s.final_mass - s.start_mass
    rise = (s.exit_mass - s.start_mass) / span.where(span != 0)
    ok = rise.notna()
    k = int((rise[ok] >= 0.5).sum())
    return verdict(k, int(ok.sum())), f"rise >= 0.5 by the plateau exit: {share(k, int(ok.sum()))} ({int((~ok).sum())} without a rise)"


def hyp_b(df, routing: str = "margin") -> tuple[str, str]:
    s = df[df.success & df.done_readout.notna() & df[f"done_{routing}"].notna()]
    before = int((s.done_readout < s[f"done_{routing}"]).sum())
    same = int((s.done_readout == s[f"done_{routing}"]).sum())
    after = len(s) - before - same
    return verdict(before, len(s)), (f"read-out before {routing}: {share(before, len(s))}; with {share(same, len(s))}; "
                                     f"after {share(after, len(s))}")


def hyp_c(df, routing: str = "margin") -> tuple[str, str]:
    f = df[~df.success]
    ro, rt = f.final_readout >= COMPLETE, f[f"final_{routing}"] < NO_ROUTING
    k = int((ro & rt).sum())
    quads = (f"read-out, no routing {share(k, len(f))}; read-out and routing {share(int((ro & ~rt).sum()), len(f))}; "
             f"neither {share(int((~ro & rt).sum()), len(f))}; routing, no read-out {share(int((~ro & ~rt).sum()), len(f))}")
    return verdict(k, len(f)), quads


def within_auc(df, score: np.ndarray) -> float:
    """P(a success outscores a non-success of its own cell), ties 1/2, over all within-cell pairs."""
    wins = pairs = 0.0
    for _, g in df.assign(score=score).groupby("cell"):
        a, b = g[g.success].score.to_numpy(), g[~g.success].score.to_numpy()
        if len(a) and len(b):
            wins += (a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum()
            pairs += len(a) * len(b)
    return wins / pairs if pairs else math.nan


def scores(df) -> dict[str, np.ndarray]:
    out = {"loss": -df.early_loss.to_numpy()}  # a lower early loss predicts success
    out.update({m: df[f"early_{m}"].to_numpy() for m in MEASURES})
    return out


def choose(disc) -> tuple[str, dict[str, int], dict[str, float]]:
    """The discovery cells' choice: each measure's sign, then the highest within-cell AUC."""
    aucs, signs = {}, {}
    for m, s in scores(disc).items():
        a = within_auc(disc, s)
        signs[m] = -1 if m != "loss" and a < 0.5 else 1  # NaN (no within-cell pair): as measured
        aucs[m] = a if signs[m] == 1 else 1 - a
    return max(aucs, key=lambda m: (aucs[m], m != "loss")), signs, aucs


def hyp_d(held, chosen: str, signs: dict) -> tuple[str, str]:
    if chosen == "loss":
        return "refuted", "early loss beats every graded measure on the discovery cells"
    sc = scores(held)
    x, base = signs[chosen] * sc[chosen], sc["loss"]
    auc, auc0 = within_auc(held, x), within_auc(held, base)
    rng = np.random.default_rng(0)
    cells = [np.flatnonzero((held.cell == c).to_numpy()) for c in held.cell.unique()]
    diffs, own = [], []
    for _ in range(BOOT):
        idx = np.concatenate([rng.choice(ix, len(ix)) for ix in cells])
        sub = held.iloc[idx].reset_index(drop=True)
        a, b = within_auc(sub, x[idx]), within_auc(sub, base[idx])
        diffs.append(a - b), own.append(a)
    dlo, dhi = np.nanpercentile(diffs, [2.5, 97.5])
    alo, ahi = np.nanpercentile(own, [2.5, 97.5])
    v = "confirmed" if dlo > 0 and alo > 0.5 else "refuted" if dhi < 0 else "undecided"
    return v, (f"{chosen} at step {EARLY}: within-cell AUC {auc:.2f} ({alo:.2f}-{ahi:.2f}); early loss {auc0:.2f}; "
               f"difference {auc - auc0:+.2f} ({dlo:+.2f} to {dhi:+.2f})")


def set_table(df) -> list[str]:
    out = ["| cell (case, n, d_token) | seeds | successes | median steps, success / not |", "|---|--:|---|---|"]
    for cell, g in df.groupby("cell"):
        out.append(f"| {cell} | {len(g)} | {share(int(g.success.sum()), len(g))} | "
                   f"{g[g.success].steps.median():g} / {g[~g.success].steps.median():g} |")
    return out


def markdown(sets: dict) -> str:
    lines = ["# The formation study: results (issue 52, item 4)", "",
             "Written by `.venv/bin/python experiments/formation/analysis.py` from each set's "
             "`timeline.csv` and `store-rows.sqlite` (`bash experiments/formation/run.sh SET`) and `causal.csv`. Design, "
             "rules, pins and amendment A1: `DESIGN.md` (committed before the first run). Shares: Wilson "
             "95% intervals; a hypothesis with fewer than 10 seeds in its population is untested.", ""]
    missing = [s for s in SETS if s not in sets]
    if missing:
        lines += [f"Not measured yet: {', '.join(missing)}.", ""]
    chosen = signs = None
    if "discovery" in sets:
        chosen, signs, aucs = choose(sets["discovery"])
        lines += ["## (d)'s choice on the discovery cells", "",
                  "| predictor at step 200 | within-cell AUC (sign fixed here) |", "|---|--:|",
                  *[f"| {m}{' (reversed)' if signs[m] < 0 else ''} | {a:.3f} |" for m, a in aucs.items()], "",
                  f"Chosen: **{chosen}**.", ""]
    for name, df in sets.items():
        rows = [("(a)", *hyp_a(df)), ("(b)", *hyp_b(df)), ("(c)", *hyp_c(df))]
        if name == "held-out" and chosen is not None:
            rows.append(("(d)", *hyp_d(df, chosen, signs)))
        lines += [f"## {name} set: {len(df)} runs", "",
                  f"Training with snapshots: {df.cpu.sum() / 60:.1f} CPU-minutes as the store records them "
                  "(`log.txt` has the wall time and the load).", "", *set_table(df), "",
                  "| hypothesis | verdict | numbers |", "|---|---|---|",
                  *[f"| {h} | {v} | {w} |" for h, v, w in rows],
                  f"| (b), mass (sensitivity, A1) | {hyp_b(df, 'mass')[0]} | {hyp_b(df, 'mass')[1]} |",
                  f"| (c), mass (sensitivity, A1) | {hyp_c(df, 'mass')[0]} | {hyp_c(df, 'mass')[1]} |", ""]
    lines += ["## The causal test (DESIGN.md section 5, on the discovery cells)", "", causal_report(), ""]
    return "\n".join(lines)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p1 - p2 (Wilson bounds of each)."""
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1), wilson(k2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def causal_report() -> str:
    if not CAUSAL.exists():
        return "No causal run yet (`causal.py` trains the arms once the discovery set is measured)."
    df = pd.read_csv(CAUSAL)
    t, s = df[df.arm == "transplant"], df[df.arm == "sham"]
    k1, n1, k2, n2 = int(t.success.sum()), len(t), int(s.success.sum()), len(s)
    p = stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="greater").pvalue
    lo, hi = newcombe(k1, n1, k2, n2)
    d = k1 / n1 - k2 / n2
    v = "follows" if d >= 0.3 and p < 0.05 else "does not follow" if hi < 0.3 else "undecided"
    cells = df.cell.nunique()
    return ("| test | verdict | numbers |\n|---|---|---|\n"
            f"| causal: {CAUSAL_PARAMS[df.params.iloc[0]][0][2:]}{CAUSAL_PARAMS[df.params.iloc[0]][1][2:]} weights at initialisation | "
            f"the outcome {v} the predictor | transplant {share(k1, n1)}, sham {share(k2, n2)}; "
            f"difference {d:+.2f} (Newcombe 95% {lo:+.2f} to {hi:+.2f}); Fisher one-sided p = {p:.2g}; "
            f"{cells} cells |")


def main(argv: list[str]) -> int:
    sets = {}
    for name in SETS:
        got = load(name)
        if got is not None:
            sets[name] = per_run(*got, name)
    code, message = write_or_check(HERE / "report.md", markdown(sets), argv, "experiments/formation/analysis.py")
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
