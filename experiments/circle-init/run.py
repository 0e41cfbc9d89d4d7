"""Issue 51 item 4: does a seed keep the circle? (PREDICTIONS.md: arms, cells, measures, rule.)

    .venv/bin/python experiments/circle-init/run.py            # train what results.csv lacks (resumable)
    .venv/bin/python experiments/circle-init/run.py --report   # report.md from results.csv

Each run appends one row to ``results.csv`` (written whole to a temporary file, then renamed,
so a stopped run leaves the file as it was); a rerun trains only the (cell, arm, seed) it lacks.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import time
from pathlib import Path

import torch

from interp.core import pairs, tasks
from interp.inspect.mechanism import levels, measure
from interp.theory import precision
from interp.training import runs, trainer

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.csv"
CELLS = ((10, 8), (10, 16))  # (n, d_token), case 3, one layer, no PE
ARMS = ("free", "circle-init", "circle-fixed")
SEEDS = range(6)
FIELDS = ("n", "d_token", "arm", "seed", "accuracy", "steps", "final_loss", "code", "routing", "margin",
          "bits", "value_top2", "value_rcv", "value_gap", "value_dim", "cpu_seconds", "wall_seconds")


def config(n: int, d_token: int, seed: int) -> runs.TrainConfig:
    return runs.TrainConfig(case=3, n=n, d_token=d_token, pos_embed="none", init="pytorch", seed=seed)


@torch.no_grad()
def set_circle(model, n: int, d_token: int, seed: int) -> None:
    """The value table as an evenly spaced circle in a random plane (PREDICTIONS.md)."""
    g = torch.Generator().manual_seed(10_000 + seed)
    q, _ = torch.linalg.qr(torch.randn(d_token, 2, generator=g, dtype=torch.float64))
    angles = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    circle = math.sqrt(d_token) * (torch.cos(angles)[:, None] * q[:, 0] + torch.sin(angles)[:, None] * q[:, 1])
    values = pairs.pair_tables(model)[1]
    values.copy_(circle.to(values.dtype))


def make_model(cfg: runs.TrainConfig, arm: str):
    model = runs.init_model(cfg)
    if arm != "free":
        set_circle(model, cfg.n, cfg.d_token, cfg.seed)
    if arm == "circle-fixed":
        pairs.pair_tables(model)[1].requires_grad_(False)
    return model


@torch.no_grad()
def test_batches(cfg: runs.TrainConfig, batches: int, size: int = 256) -> list:
    g = runs.generator(cfg.seed, "test")
    return [tasks.sample(3, cfg.n, size, generator=g, function=cfg.function) for _ in range(batches)]


@torch.no_grad()
def normalised_margin(model, probes) -> float:
    """Mean over inputs of (correct logit - best other) / std of the n logits."""
    out = []
    for tokens, answers in probes:
        z = trainer.final_logits_reference(model, tokens).double()
        right = z.gather(1, answers[:, None])[:, 0]
        other = z.scatter(1, answers[:, None], -math.inf).amax(1)
        out.append((right - other) / z.std(1))
    return float(torch.cat(out).mean())


def one(n: int, d_token: int, arm: str, seed: int) -> dict:
    cfg = config(n, d_token, seed)
    cpu, wall = time.process_time(), time.perf_counter()
    result = trainer.train_reference(cfg, make_model(cfg, arm))
    model = result.model
    if arm == "circle-fixed":  # frozen for training only; measuring needs no grads anyway
        pairs.pair_tables(model)[1].requires_grad_(True)
    row = measure.measure(model, case=3, n=n)
    labels = levels.labels_of(row)
    probes = test_batches(cfg, 8)
    bits = precision.least_precision(model, probes[:4], reference=True).bits
    return dict(n=n, d_token=d_token, arm=arm, seed=seed, accuracy=result.accuracy, steps=result.steps,
                final_loss=result.final_loss, code=labels["code"], routing=labels["routing"],
                margin=normalised_margin(model, probes), bits=bits,
                **{k: row.get(k) for k in ("value_top2", "value_rcv", "value_gap", "value_dim")},
                cpu_seconds=time.process_time() - cpu, wall_seconds=time.perf_counter() - wall)


def read() -> list[dict]:
    if not RESULTS.is_file():
        return []
    with RESULTS.open() as f:
        return list(csv.DictReader(f))


def write(rows: list[dict]) -> None:
    tmp = RESULTS.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, RESULTS)


def train_missing() -> None:
    torch.set_num_threads(1)
    rows = read()
    done = {(int(r["n"]), int(r["d_token"]), r["arm"], int(r["seed"])) for r in rows}
    print(f"start {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} load {os.getloadavg()}", flush=True)
    for seed in SEEDS:  # seeds outermost: a stopped run leaves every arm and cell with the same seeds
        for n, d in CELLS:
            for arm in ARMS:
                if (n, d, arm, seed) in done:
                    continue
                rows.append(one(n, d, arm, seed))
                write(rows)
                r = rows[-1]
                print(f"n={n} d_token={d} {arm} seed {seed}: acc {r['accuracy']:.4f} steps {r['steps']} "
                      f"code {r['code']} margin {r['margin']:.2f} bits {r['bits']} cpu {r['cpu_seconds']:.0f} s",
                      flush=True)


if __name__ == "__main__":
    if "--report" in sys.argv[1:]:
        sys.path.insert(0, str(HERE))
        from report import main as report_main  # experiments/circle-init/report.py
        report_main(read())
    else:
        train_missing()
