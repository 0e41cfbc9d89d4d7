"""Issue 46's timeline study: T1-T4 of PREDICTIONS.md decided from the measured timelines.

    .venv/bin/interp sweep experiments/timelines/study                       # train (resumable)
    .venv/bin/interp timeline experiments/timelines/study --out experiments/timelines/findings
    .venv/bin/python experiments/timelines/study.py                           # -> findings/report.md

Reads ``findings/timeline.csv`` (``interp timeline``: every run's snapshots measured and labelled),
applies PREDICTIONS.md's definitions (:func:`interp.inspect.studies.timelines.formation`; the early
snapshot is the one nearest 10% of the run's last step) and its rule, and writes ``report.md``
(one table per prediction) and ``typical.png`` (qk_diag against the fraction of training, per
outcome, discovery cells).
"""

from __future__ import annotations

import math
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "findings"
NAMED = ("lookup", "mirror", "inverted")


def cell_sets() -> dict:
    cells = runpy.run_path(str(HERE / "study" / "configs.py"))["CELLS"]
    return {(c, n, d, layers): s for s, c, n, d, layers in cells}


def per_run(tl) -> pd.DataFrame:
    from interp.inspect.studies.timelines import formation

    sets = cell_sets()
    out = []
    for run, rows in tl.groupby("run"):
        rows = rows.sort_values("step")
        f = formation(rows)
        last = int(rows.step.max())
        early = rows.iloc[int((rows.step - 0.1 * last).abs().argmin())]
        final = rows.iloc[-1]
        exit_ = f["plateau_exit"]
        after = rows[rows.step >= exit_].step.min() if exit_ is not None and not pd.isna(exit_) else None
        key = (int(final.case), int(final.n), int(final.d_token), int(final.n_layers))
        out.append(dict(run=run, set=sets.get(key, "?"), cell=key, seed=int(final.seed), outcome=f["outcome"],
                        routing_forms=f["routing_forms"], code_settles=f["code_settles"],
                        plateau_exit=exit_, first_after_exit=after, last_step=last,
                        final_routing=final.routing, final_qk=final.qk_diag,
                        early_qk=float(early.qk_diag), early_loss=float(early.loss)))
    return pd.DataFrame(out)


def _auc(y, score) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score)) if 0 < y.sum() < len(y) else math.nan


def auc_ci(d, seed: int = 0, draws: int = 2000):
    """AUC of early qk_diag and of -early loss for success, their 95% bootstrap intervals over
    seeds, and the median of the paired difference."""
    y = (d.outcome == "success").to_numpy().astype(int)
    qk, loss = d.early_qk.to_numpy(), -d.early_loss.to_numpy()
    rng = np.random.default_rng(seed)
    a, b, diff = [], [], []
    for _ in range(draws):
        i = rng.integers(0, len(d), len(d))
        x, y_ = _auc(y[i], qk[i]), _auc(y[i], loss[i])
        if not (math.isnan(x) or math.isnan(y_)):
            a.append(x), b.append(y_), diff.append(x - y_)
    ci = lambda v: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) if v else (math.nan, math.nan)
    return _auc(y, qk), ci(a), _auc(y, loss), ci(b), float(np.median(diff)) if diff else math.nan


def report(runs: pd.DataFrame) -> str:
    ok = runs[runs.outcome == "success"]
    formed = ok[ok.routing_forms.notna()]
    t1_pop = formed[formed.first_after_exit.notna()]
    t1 = (t1_pop.routing_forms <= t1_pop.first_after_exit).mean() if len(t1_pop) else math.nan
    t2 = (formed.code_settles > formed.routing_forms).mean() if len(formed) else math.nan
    bad = runs[runs.outcome == "failed"]
    t3 = ((bad.final_routing == "none") & (bad.final_qk < 0.5)).mean() if len(bad) else math.nan
    disc, held = runs[runs.set == "discovery"], runs[runs.set == "held out"]
    d_auc = auc_ci(disc)
    h_auc = auc_ci(held)

    def verdict(value, ok_, n):
        return "untested" if n < 10 or math.isnan(value) else ("confirmed" if ok_ else "refuted")

    rows = [
        ("T1", verdict(t1, t1 >= 0.6, len(t1_pop)), f"routing formed by the first snapshot after the plateau exit: "
         f"{int((t1_pop.routing_forms <= t1_pop.first_after_exit).sum())} of {len(t1_pop)} successful seeds ({t1:.1%})"),
        ("T2", verdict(t2, t2 >= 0.6, len(formed)), f"code settles after routing forms: "
         f"{int((formed.code_settles > formed.routing_forms).sum())} of {len(formed)} ({t2:.1%})"),
        ("T3", verdict(t3, t3 >= 0.8, len(bad)), f"failed seeds ending with routing none and qk_diag < 0.5: "
         f"{int(((bad.final_routing == 'none') & (bad.final_qk < 0.5)).sum())} of {len(bad)} ({t3:.1%})"),
        ("T4", verdict(h_auc[0], d_auc[0] >= 0.75 and h_auc[1][0] > 0.5 and h_auc[4] > 0, len(held)),
         f"early qk_diag AUC: discovery {d_auc[0]:.3f} ({d_auc[1][0]:.3f}-{d_auc[1][1]:.3f}), held out "
         f"{h_auc[0]:.3f} ({h_auc[1][0]:.3f}-{h_auc[1][1]:.3f}); early loss AUC: discovery {d_auc[2]:.3f}, "
         f"held out {h_auc[2]:.3f} ({h_auc[3][0]:.3f}-{h_auc[3][1]:.3f}); paired difference median, held out "
         f"{h_auc[4]:.3f}"),
    ]
    counts = runs.groupby(["set", "cell"]).outcome.value_counts().unstack(fill_value=0)
    lines = ["# Mechanism timelines: the study (issue 46)", "",
             "Written by `.venv/bin/python experiments/timelines/study.py` from `timeline.csv` "
             "(`interp timeline experiments/timelines/study`). Design, definitions and rule: "
             "`../PREDICTIONS.md`, committed before the first run.", "",
             f"Seeds with a timeline: {len(runs)}.", "", "## Seeds by cell and outcome", "",
             "| set | cell (case, n, d_token, layers) | " + " | ".join(counts.columns) + " |",
             "|---|---|" + "--:|" * len(counts.columns)]
    for (s, cell), r in counts.iterrows():
        lines.append(f"| {s} | {cell} | " + " | ".join(str(int(v)) for v in r) + " |")
    lines += ["", "## Predictions", "", "| prediction | verdict | numbers |", "|---|---|---|"]
    lines += [f"| {k} | {v} | {t} |" for k, v, t in rows]
    return "\n".join(lines) + "\n"


def figure(tl, runs, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interp.training.files import save_figure

    fig, ax = plt.subplots(figsize=(6, 3.5))
    colours = {"success": "#1f77b4", "partial": "#ff7f0e", "failed": "#d62728"}
    disc = set(runs[runs.set == "discovery"].run)
    for run, rows in tl[tl.run.isin(disc)].groupby("run"):
        rows = rows.sort_values("step")
        out = rows.outcome.iloc[-1]
        ax.plot(rows.step / max(rows.step.max(), 1), rows.qk_diag, color=colours.get(out, "grey"), alpha=0.3, lw=1)
    for k, c in colours.items():
        ax.plot([], [], color=c, label=k)
    ax.set(xlabel="fraction of the run's steps", ylabel="QK rows peaking on the diagonal (qk_diag)",
           title="Discovery cells: qk_diag through training, by outcome")
    ax.legend(frameon=False, fontsize=8)
    save_figure(fig, path, dpi=100, close=True)


def main() -> int:
    tl = pd.read_csv(RESULTS / "timeline.csv", dtype={"run": str})
    runs = per_run(tl)
    text = report(runs)
    (RESULTS / "report.md").write_text(text)
    runs.to_csv(RESULTS / "runs.csv", index=False)
    figure(tl, runs, RESULTS / "typical.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
