"""Calibrate the two-level labels (issue 42) on nulls and positive controls, apart from the atlas.

    .venv/bin/python experiments/calibration/calibrate.py            # measure (resumable), then report
    .venv/bin/python experiments/calibration/calibrate.py --trained STORE  # also the trained nulls
    .venv/bin/python experiments/calibration/calibrate.py --report   # the table from rows.jsonl only

``--trained``: the nulls of :func:`interp.inspect.mechanism.calibration.trained_nulls` from a store's
checkpoints (the committed rows were measured with the relabeling's store,
``experiments/atlas/relabel/results/store.sqlite``, which ``bash experiments/atlas/relabel.sh``
trains): its runs with their weights permuted, and its case-4 runs read as case 5.

Measuring: every model of :func:`interp.inspect.mechanism.calibration.calibration_models` at each n of the
atlas (3, 5, 10, 20, 50), through :func:`interp.inspect.mechanism.measure.measure` (the atlas's own
measures, code level included), one JSON row per model appended to ``rows.jsonl``; a rerun
measures only the models not there yet. Reporting recomputes every label from the stored
measures under the thresholds, so a threshold can be chosen here without measuring again:

* ``calibration.md``: per n and label, false-positive rate on the nulls (untrained and
  weight-shuffled models) and true-positive rate on its controls, at the chosen thresholds;
  then, per threshold the routing and circle tests use, the values at which FPR <= 1% and
  TPR >= 95% hold on every n, and the one chosen (the middle of that range, rounded);
* ``thresholds.json``: the chosen thresholds, which ``interp.inspect.mechanism.calibration.THRESHOLDS``
  must equal (a test checks).

The IIA threshold (0.9) is fixed before measuring, not chosen here: the code's dimension is
found by bisection at it, so other values would need the models measured again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = HERE / "rows.jsonl"
FPR_MAX, TPR_MIN = 0.01, 0.95


def measure_all(rows_path: Path = ROWS, trained=None) -> None:
    import torch

    from interp.inspect.mechanism import calibration
    from interp.inspect.studies import analysis
    from interp.training.machine import one_thread

    done = set()
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a killed run: measured again
                continue
            done.add((r["n"], r["name"]))
    start = time.time(), time.process_time()
    print(f"load at start {os.getloadavg()[0]:.2f}; {len(done)} rows already measured", flush=True)
    with one_thread(), rows_path.open("a") as out:
        for n in calibration.NS:
            models = calibration.calibration_models(n)
            if trained is not None:
                models = itertools.chain(models, calibration.trained_nulls(n, trained))
            for kind, name, model in models:
                if (n, name) in done:
                    continue
                torch.manual_seed(0)
                m = analysis.measure(model, seed=0)
                row = {"n": n, "kind": kind, "name": name, **{k: _plain(v) for k, v in m.items()}}
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"n {n:>2} {kind:<9} {name:<45} acc {m['acc']:.3f}", flush=True)
    print(f"measured in {time.time() - start[0]:.0f} s wall, {time.process_time() - start[1]:.0f} s CPU",
          flush=True)


def _plain(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    return v if isinstance(v, (int, float, str, bool, type(None))) else float(v)


def read_rows(rows_path: Path = ROWS) -> list[dict]:
    rows = []
    for line in rows_path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def rates(rows: list[dict], thresholds: dict) -> list[dict]:
    """Per n and label: FPR on nulls, TPR on the controls expected to get it."""
    from interp.inspect.mechanism import calibration, labels

    saved = dict(calibration.THRESHOLDS)
    calibration.THRESHOLDS.update(thresholds)
    try:
        lab = [dict(r, **labels.labels_of(r), kind=calibration.kind_of(r)) for r in rows]
    finally:
        calibration.THRESHOLDS.clear()
        calibration.THRESHOLDS.update(saved)
    tests = [("routing", "lookup", "circle+one-hot+plane+uneven"), ("routing", "inverted", "inverted"),
             ("routing", "mirror", "mirror"),
             ("code", "circle", "circle"), ("code", "uneven-circle", "uneven"),
             ("code", "low-dim", "plane"), ("code", "codebook", "one-hot"),
             ("mechanism", "construction", "circle")]
    out = []
    for n in sorted({r["n"] for r in lab}):
        at_n = [r for r in lab if r["n"] == n]
        for level, label, kinds in tests:
            pos = [r for r in at_n if r["kind"] in kinds.split("+")]
            # nulls: the untrained and shuffled models, and every control expected to get
            # another label at this level (a one-hot code called a circle is a false positive)
            nulls = [r for r in at_n if calibration.EXPECTED[r["kind"]] is None
                     or (r["kind"] not in kinds.split("+")
                         and calibration.EXPECTED[r["kind"]].get(level, label) != label)]
            fp = sum(r[level] == label for r in nulls)
            tp = sum(r[level] == label for r in pos)
            out.append(dict(n=n, level=level, label=label, nulls=len(nulls), fp=fp,
                            fpr=fp / len(nulls) if nulls else math.nan, controls=len(pos), tp=tp,
                            tpr=tp / len(pos) if pos else math.nan))
    return out


#: the thresholds chosen here, and the candidate values tried for each
CANDIDATES = {
    "qk_diag_min": [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0],
    "follow_min": [0.5, 0.6, 0.7, 0.8, 0.9, 0.95],
    "anti_min": [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0],
    "top2_min": [0.6, 0.7, 0.8, 0.9, 0.95, 0.99],
    "rcv_max": [0.03, 0.05, 0.075, 0.1, 0.15, 0.2],
}


#: the labels each threshold decides
DECIDES = {"qk_diag_min": [("routing", "lookup")], "follow_min": [("routing", "lookup")],
           "anti_min": [("routing", "inverted")],
           "top2_min": [("code", "circle"), ("mechanism", "construction")],
           "rcv_max": [("code", "circle"), ("mechanism", "construction")]}


#: labels that claim a circle: untestable below min_n_circle (circle_check.py, circle.md)
CIRCLE_LABELS = ("circle", "uneven-circle", "construction")


def feasible(rows, base: dict, name: str) -> list:
    """The candidate values of ``name`` (others at ``base``) meeting FPR <= 1% and TPR >= 95% for
    the labels it decides (:data:`DECIDES`), on every n where the test has power."""
    ok = []
    for value in CANDIDATES[name]:
        table = rates(rows, {**base, name: value})
        relevant = [t for t in table if (t["level"], t["label"]) in DECIDES[name]
                    and not (t["level"] in ("code", "mechanism") and t["n"] < base["min_n_code"])
                    and not (t["label"] in CIRCLE_LABELS and t["n"] < base["min_n_circle"])]
        if all((t["fpr"] <= FPR_MAX or math.isnan(t["fpr"])) and (t["tpr"] >= TPR_MIN or math.isnan(t["tpr"]))
               for t in relevant):
            ok.append(value)
    return ok


def _upper(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k)) if n else math.nan


def report(rows_path: Path = ROWS) -> dict:
    from interp.inspect.mechanism import calibration

    rows = read_rows(rows_path)
    chosen = dict(calibration.THRESHOLDS)
    lines = ["# Calibration of the two-level labels (issue 42)", "",
             "Written by `.venv/bin/python experiments/calibration/calibrate.py --report` from "
             "`rows.jsonl` (measured by the same script without `--report`, with `--trained "
             "experiments/atlas/relabel/results/store.sqlite`). Nulls: untrained models of the "
             "atlas's shapes, weight-shuffled controls, the relabeling's trained runs with their "
             "weights permuted (trained-shuffled) and its case-4 runs read as case 5 "
             "(other-presentation; those answering case 5 at acc >= 0.5 are counted apart as "
             "transfer, neither null nor control); controls: the paper's "
             "constructions hidden in d_token 16 and 32 by random orthonormal maps (circle), "
             "hand-built one-hot lookups (one-hot) and their inverted mechanism, widened; case 2-3 "
             "constructions with their values at random points of the plane (plane: a 2-D code that "
             "is not a circle) or at random angles on the circle (uneven), widened. The nulls of a "
             "label are the untrained and shuffled models plus every control expected to get "
             "another label at that level "
             "(`interp.inspect.mechanism.calibration.calibration_models`). Target: FPR <= 1% and TPR >= 95%.",
             "", f"{len(rows)} models measured: " + ", ".join(
                 f"{k} {sum(calibration.kind_of(r) == k for r in rows)}" for k in calibration.EXPECTED), "",
             "## Thresholds", "", "| threshold | values meeting the target at every n | chosen |",
             "|---|---|--:|"]
    for name in CANDIDATES:
        ok = feasible(rows, chosen, name)
        lines.append(f"| {name} | {', '.join(map(str, ok)) or 'none'} | {chosen[name]} |")
    lines += ["", "A threshold's target is checked on the labels it decides (routing lookup; "
              "routing inverted; code circle and mechanism construction). Chosen: the values fixed "
              "before the first calibration run (the old hand-set 0.95 and 0.9, the circle test's "
              "0.9), kept because each lies inside its feasible range; a value outside "
              "it would have been replaced by the middle of the range. `rcv_max` (0.05), `gap_min` "
              "(0.7) and `min_n_circle` (10) were chosen by `circle_check.py` on 900 near misses "
              "per n (`circle.md`, issue 51) and are only checked here; `iia_min` (0.9) and the "
              "smallest n for the code are fixed, not searched (module docstring). Not met: the "
              "2-D shapes apart (uneven-circle against low-dim) at n = 5 and 10, where 5 or 10 "
              "random points of a plane often lie near an ellipse and random angles near even "
              "steps; the atlas reports those codes with that caveat.", "",
              "## Rates at the chosen thresholds", "",
              "FPR upper: the one-sided 95% Clopper-Pearson bound on the false-positive rate (with "
              "0 false positives in N nulls, 1 - 0.05^(1/N)): what these null counts can promise.",
              "",
              "| n | level | label | nulls | false positives | FPR | FPR upper | controls | hits | TPR |",
              "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for t in rates(rows, chosen):
        note = (f" (untestable below n = {chosen['min_n_code']})" if t["level"] != "routing" and t["n"] < chosen["min_n_code"]
                else f" (untestable below n = {chosen['min_n_circle']})" if t["label"] in CIRCLE_LABELS
                and t["n"] < chosen["min_n_circle"] else "")
        lines.append(f"| {t['n']} | {t['level']} | {t['label']}{note} | {t['nulls']} | {t['fp']} | "
                     f"{t['fpr']:.3f} | {_upper(t['fp'], t['nulls']):.3f} | {t['controls']} | "
                     f"{t['tp']} | {t['tpr']:.3f} |")
    (HERE / "calibration.md").write_text("\n".join(lines) + "\n")
    (HERE / "thresholds.json").write_text(json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    print("\n".join(lines))
    return chosen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", action="store_true", help="only write the table from rows.jsonl")
    p.add_argument("--trained", metavar="STORE", default=None,
                   help="also measure the trained nulls of this store's checkpoints")
    args = p.parse_args(argv)
    if args.trained is not None:
        from interp.inspect.studies.analysis import find_store

        args.trained = find_store(args.trained)  # a bad path is refused before anything is measured
    if not args.report:
        measure_all(trained=args.trained)
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
