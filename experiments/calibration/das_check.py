"""Does the principal-axes dimension overstate trained codes? D1 and D2 of PREDICTIONS-das.md.

    .venv/bin/python experiments/calibration/das_check.py            # measure (resumable), then report
    .venv/bin/python experiments/calibration/das_check.py --report   # das.md from das_rows.jsonl only

Measures, one JSON row each in ``das_rows.jsonl`` (a rerun measures only what is not there):
first the calibration of the learned search (circle controls, one-hot nulls; PREDICTIONS-das.md,
"Calibration first"), then the sample of trained seeds (PREDICTIONS-das.md, "Sample"), retrained
checkpoints of the relabeling's store, each checked against its store row. Writes ``das.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ROWS = HERE / "das_rows.jsonl"
SAMPLE = HERE / "das_sample.json"
ATLAS = ROOT / "experiments/atlas/core-atlas-2level/atlas.csv"
STORE = ROOT / "experiments/atlas/relabel/results/store.sqlite"
PER_CELL, DRAW_SEED, NS, CODES = 8, 42, (5, 10, 20), ("low-dim", "codebook")


def controls():
    """(kind, name, model, at): PREDICTIONS-das.md's calibration models at n 5 and 10, and the
    same at n 20, the sample's third size (added after the first run: the detector is calibrated
    at every n it is used at; none of these choices decide anything about the sample)."""
    from interp.core import constructions
    from interp.inspect.mechanism import controls as c

    for n in (5, 10, 20):
        for case in (2, 3):
            base = constructions.build(case, n, attention="softmax", beta=100.0)
            yield "circle", f"case {case} construction n {n}, d_token 16", c.widen(base, 16, seed=case), "value"
        for case in c.ONE_HOT_CASES:
            base = c.one_hot_lookup(case, n)
            width = (base.cfg.d_model // (2 if case in (2, 3) else 1)) + 4
            yield "one-hot", f"case {case} one-hot n {n}, widened", c.widen(base, width, seed=case), "value"


def sample() -> list[dict]:
    """The atlas rows of PREDICTIONS-das.md's sample, drawn as it says from the atlas as it was
    when the predictions were committed; the draw is kept in ``das_sample.json`` (committed with
    them), so a later atlas (more runs measured) does not change it."""
    import pandas as pd

    keep = ("name", "case", "n", "d_token", "code", "at")
    if SAMPLE.exists():
        return json.loads(SAMPLE.read_text())
    df = pd.read_csv(ATLAS)
    df = df[(df["outcome"] == "success") & (df["routing"] == "lookup")]
    rng, rows = random.Random(DRAW_SEED), []
    for n in NS:
        for code in CODES:
            names = sorted(df[(df["n"] == n) & (df["code"] == code)]["name"])
            chosen = set(rng.sample(names, min(PER_CELL, len(names))))
            rows += [{k: r[k] for k in keep} for r in df[df["name"].isin(chosen)].to_dict("records")]
    SAMPLE.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


def trained(rows):
    from interp.sweeps import store
    from interp.training import checkpoints

    runs = store.read(STORE).set_index("name", drop=False)
    for r in rows:
        path = store.checked_checkpoint(STORE, runs.loc[r["name"]])
        yield r["code"], f"{r['name']} (n {r['n']}, case {r['case']}, d_token {r['d_token']})", \
            checkpoints.load(path), r["at"]


def measure_all() -> None:
    import itertools

    import torch

    from interp.inspect.mechanism import das
    from interp.training.machine import one_thread

    done = {r["name"] for r in read_rows()}  # a line cut by a killed run is measured again
    start = time.time(), time.process_time()
    print(f"load at start {os.getloadavg()[0]:.2f}; {len(done)} rows already measured", flush=True)
    with one_thread(), ROWS.open("a") as out:
        for kind, name, model, at in itertools.chain(controls(), trained(sample())):
            if name in done:
                continue
            torch.manual_seed(0)
            t = time.process_time()
            got = das.learned_dim(model, "value", at=at, max_k=3)
            row = dict(kind=kind, name=name, n=model.cfg.d_vocab_out, axes_dim=got.axes_dim,
                       dim=got.dim, iia=got.iia, cpu_s=round(time.process_time() - t, 2))
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row), flush=True)
    print(f"measured in {time.time() - start[0]:.0f} s wall, {time.process_time() - start[1]:.0f} s CPU",
          flush=True)


def _interval(k: int, n: int) -> str:
    from scipy.stats import beta

    lo = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
    return f"{lo:.2f}-{hi:.2f}"


def read_rows() -> list[dict]:
    """The measured rows; a line that does not parse (cut by a killed run) is left out."""
    rows = []
    for line in ROWS.read_text().splitlines() if ROWS.exists() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def report() -> None:
    rows = read_rows()
    lines = ["# Learned-rotation DAS against the principal-axes dimension (issue 42)", "",
             "Written by `.venv/bin/python experiments/calibration/das_check.py` (predictions and "
             "rule: `PREDICTIONS-das.md`, committed first). Per row: the principal-axes dimension "
             "(`codes.measure_code`), the learned search's dimension (`das.learned_dim`, k <= 3) "
             "and the held-out IIA of each k tried. CPU s: per model, on cores shared with other "
             "jobs (not a benchmark). The controls at n = 20 were added after the first run, to "
             "calibrate the search at every n the sample uses.", "",
             "| kind | n | seed or model | axes dim | learned dim | IIA by k | CPU s |", "|---|--:|---|--:|--:|---|--:|"]
    for r in rows:
        iia = ", ".join(f"{k}: {a:.2f}" for k, a in r["iia"]) or "-"
        lines.append(f"| {r['kind']} | {r['n']} | {r['name']} | {r['axes_dim']} | {r['dim']} | {iia} | {r['cpu_s']} |")
    lines += ["", "## Calibration", ""]
    circle = [r for r in rows if r["kind"] == "circle"]
    onehot = [r for r in rows if r["kind"] == "one-hot"]
    for n in sorted({r["n"] for r in circle + onehot}):
        c, o = [r for r in circle if r["n"] == n], [r for r in onehot if r["n"] == n]
        lines.append(f"- n = {n}: circle controls with learned dimension 2: {sum(r['dim'] == 2 for r in c)} "
                     f"of {len(c)}; one-hot nulls with a learned subspace of dimension <= 3: "
                     f"{sum(r['dim'] is not None and r['dim'] <= 3 for r in o)} of {len(o)}")
    lines += ["", "## Predictions", "", "| prediction | seeds | agree | share | 95% interval | verdict |",
              "|---|--:|--:|--:|---|---|"]
    for key, code, limit in (("D1", "low-dim", 2), ("D2", "codebook", 3)):
        seeds = [r for r in rows if r["kind"] == code]
        # a seed whose principal axes already reach IIA 0.9 at dimension <= limit has such a
        # subspace (DAS only tries k below the axes dimension): it disagrees (issue 51's recount)
        agree = sum(not (r["axes_dim"] is not None and r["axes_dim"] <= limit)
                    and not any(k <= limit and a >= 0.9 for k, a in r["iia"]) for r in seeds)
        share = agree / len(seeds) if seeds else float("nan")
        verdict = "untested" if not seeds else ("confirmed" if share >= 0.9 else "refuted")
        lines.append(f"| {key} ({code}: no learned subspace of dimension <= {limit}) | {len(seeds)} | "
                     f"{agree} | {share:.2f} | {_interval(agree, len(seeds)) if seeds else '-'} | {verdict} |")
    lines += ["", "## By n", "", "| n | code | seeds | with a learned subspace below the axes dimension |",
              "|--:|---|--:|--:|"]
    for n in NS:
        for code in CODES:
            seeds = [r for r in rows if r["kind"] == code and r["n"] == n]
            if seeds:
                below = sum(r["dim"] is not None and r["axes_dim"] is not None and r["dim"] < r["axes_dim"]
                            for r in seeds)
                lines.append(f"| {n} | {code} | {len(seeds)} | {below} |")
    (HERE / "das.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-4:]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--report", action="store_true", help="only write das.md from das_rows.jsonl")
    args = p.parse_args(argv)
    if not args.report:
        measure_all()
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
