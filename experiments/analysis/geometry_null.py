"""Null distribution and positive controls of the circuit circle test (`interp.inspect.tools.geometry`).

The thresholds of `interp.inspect.tools.geometry` (TOP2_MIN, RCV_MAX, SPACING_MAX, FIT_MIN) were read
off this script's output; it checks that each still sits where it should and writes
`geometry-null.md` and `geometry-null.json` beside itself.

* **Null, random models**: `interp.training.runs.init_model` of the TrainConfig grid, cases 1-5
  (case 5 with two layers; cases 2-3 without PE, the others with learned PE, as in the paper's
  tables), n in {10, 20, 100}, d_token in {4, 8, 16, 32}, init "pytorch" and "gpt2", 3 seeds.
* **Null, shuffled**: each construction's QK and OV matrix with its rows and columns permuted
  apart (the circle intact, the match off the diagonal), and with one coordinate of its key
  side permuted (S = L R^T with R's second column shuffled: the keys off the circle).
* **Positive controls**: every construction (cases 1-5, n in {10, 20, 100}) through
  `geometry.disguise` (keys relabelled at random, an extra embedding direction that W_K carries
  and no query reads, a random basis and scale of residual stream and head) and Gaussian noise
  of 0, 0.3% or 1% of each weight's rms, 3 seeds. Case 5's noise goes on its last layer and W_U
  only: layer 0 copies the key into the value position through an exact tie between positions
  2k and 2k + 1, which any noise in layer 0 or the embeddings breaks (the leftmost rule then
  copies the value itself, accuracy falls to ~0.3 at n = 10: no longer the construction).

Each QK matrix is `circuits.qk_matrix` on 512 sampled inputs; the old order-free test
(`probes.circle_test` of the mean key vectors, passing at top-2 variance >= 0.9 and radius cv <=
0.15 as in `labels._circle_verdict`) is recorded beside it.

    .venv/bin/python experiments/analysis/geometry_null.py   # about 2 minutes on one core
"""

import json
import math
import pathlib
import sys
import time

import numpy as np
import torch

from interp.core import constructions
from interp.inspect.tools import circuits, geometry, probes
from interp.training.runs import TrainConfig, init_model

HERE = pathlib.Path(__file__).resolve().parent
NS, D_TOKENS, INITS, SEEDS = (10, 20, 100), (4, 8, 16, 32), ("pytorch", "gpt2"), range(3)
NOISES = (0.0, 0.003, 0.01)
SHUFFLES = 10
BATCH = 512
MEASURES = ("top2", "rcv", "spacing", "fit", "balance", "bias")
#: the verdict's criteria: (measure, threshold constant, "min" if larger passes else "max")
CRITERIA = (("top2", "TOP2_MIN", "min"), ("rcv", "RCV_MAX", "max"),
            ("spacing", "SPACING_MAX", "max"), ("fit", "FIT_MIN", "min"))


def row(circle: geometry.CircuitCircle, **info) -> dict:
    out = dict(info, circuit=circle.name, circle=circle.circle, inverted=circle.inverted_circle)
    s = circle.summary()
    out.update({k: round(float(s[k]), 5) for k in MEASURES})
    return out


def measure_model(model, **info) -> list[dict]:
    """QK and OV circle tests of one model, the old key-vector circle test beside QK."""
    kq = circuits.key_query_vectors(model, batch_size=BATCH)  # the case and n are the model's
    old = probes.circle_test(kq.keys)
    old_pass = bool(old.top2_var >= 0.9 and old.radius_cv <= 0.15)
    qk = geometry.score_circle(circuits.qk_from_vectors(kq).matrix, name="QK")
    return [row(qk, **info, old_top2=round(old.top2_var, 5), old_rcv=round(old.radius_cv, 5),
                old_pass=old_pass),
            row(geometry.ov_circle(model), **info)]


def random_models() -> list[dict]:
    rows = []
    for case in (1, 2, 3, 4, 5):
        for n in NS:
            for d in D_TOKENS:
                for init in INITS:
                    for seed in SEEDS:
                        cfg = TrainConfig(case=case, n=n, d_token=d, n_layers=2 if case == 5 else 1,
                                          pos_embed="none" if case in (2, 3) else "learned",
                                          init=init, seed=seed)
                        rows += measure_model(init_model(cfg), kind="random", case=case,
                                              n=n, d_token=d, init=init, seed=seed)
        print(f"random models: case {case} done", file=sys.stderr, flush=True)
    return rows


def shuffled() -> list[dict]:
    rows = []
    g = torch.Generator().manual_seed(0)
    for case in (1, 2, 3, 4, 5):
        for n in NS:
            model = constructions.build(case, n, dtype=torch.float64)
            mats = {"QK": circuits.qk_matrix(model, batch_size=BATCH).matrix.double(),
                    "OV": circuits.ov_matrix(model).matrix.double()}
            for name, S in mats.items():
                U, s, Vh = torch.linalg.svd(S)
                L, R = U[:, :2] * s[:2], Vh[:2].T.clone()
                for seed in range(SHUFFLES):
                    p, q = torch.randperm(n, generator=g), torch.randperm(n, generator=g)
                    rows.append(row(geometry.score_circle(S[p][:, q], name=name), kind="permuted",
                                    case=case, n=n, seed=seed))
                    R2 = R.clone()
                    R2[:, 1] = R[q, 1]
                    rows.append(row(geometry.score_circle(L @ R2.T, name=name),
                                    kind="coordinate", case=case, n=n, seed=seed))
    return rows


def noisy_last_layer(model, noise: float, seed: int):
    """Gaussian noise of ``noise`` times each tensor's rms on the last layer's weights and W_U."""
    g = torch.Generator().manual_seed(10_000 + seed)
    attn = model.blocks[-1].attn
    with torch.no_grad():
        for p in (attn.W_Q, attn.W_K, attn.W_V, attn.W_O, model.unembed.W_U):
            rms = float(p.double().pow(2).mean().sqrt())
            p.add_(noise * rms * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
    return model


def controls() -> list[dict]:
    rows = []
    for case in (1, 2, 3, 4, 5):
        for n in NS:
            base = constructions.build(case, n, dtype=torch.float64)
            for noise in NOISES:
                for seed in SEEDS:
                    if case == 5:
                        model = noisy_last_layer(geometry.disguise(base, seed=seed), noise, seed)
                    else:
                        model = geometry.disguise(base, seed=seed, noise=noise)
                    rows += measure_model(model, kind="control", case=case, n=n,
                                          noise=noise, seed=seed)
        print(f"controls: case {case} done", file=sys.stderr, flush=True)
    return rows


def percentiles(values) -> dict:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    q = np.percentile(v, [0, 1, 50, 99, 100]) if len(v) else [math.nan] * 5
    return dict(zip(("min", "p1", "p50", "p99", "max"), (round(float(x), 4) for x in q)))


NULLS = ("random", "permuted", "coordinate")


def tail(values, side: str) -> float:
    """A null's tail toward passing: its 99th percentile (side "min") or 1st ("max")."""
    p = percentiles(values)
    return p["p99"] if side == "min" else p["p1"]


def worst(values, side: str) -> float:
    """The positive controls' worst value: their minimum (side "min") or maximum ("max")."""
    p = percentiles(values)
    return p["min"] if side == "min" else p["max"]


def fails(value: float, threshold: float, side: str) -> bool:
    return value < threshold if side == "min" else value > threshold


def threshold_table(rows: list[dict]) -> list[dict]:
    """Per criterion: the threshold, each null's tail, the controls' worst value, and which
    nulls the criterion alone rejects (threshold beyond the tail)."""
    out = []
    for measure, const, side in CRITERIA:
        thr = getattr(geometry, const)
        tails = {k: tail([r[measure] for r in rows if r["kind"] == k], side) for k in NULLS}
        c_worst = worst([r[measure] for r in rows if r["kind"] == "control"], side)
        out.append({"measure": measure, "constant": const, "threshold": thr, "side": side,
                    "null_tails": tails, "control_worst": c_worst,
                    "controls_pass": not fails(c_worst, thr, side),
                    "rejects": [k for k, v in tails.items() if fails(v, thr, side)]})
    return out


def rate(rows, key="circle") -> str:
    return f"{sum(bool(r[key]) for r in rows)}/{len(rows)}" if rows else "-"


def distribution_lines(groups: dict) -> list[str]:
    lines = ["| measure | group | circuit | min | p1 | p50 | p99 | max |", "|---|---|---|---|---|---|---|---|"]
    for measure in MEASURES:
        for gname, rows in groups.items():
            for circuit in ("QK", "OV"):
                p = percentiles([r[measure] for r in rows if r["circuit"] == circuit])
                lines.append(f"| {measure} | {gname} | {circuit} | " + " | ".join(f"{v:.3f}" for v in p.values()) + " |")
    return lines


def control_lines(ctrl: list[dict]) -> list[str]:
    lines = ["| case | n | noise | circuit | circle | min top2 | max rcv | max spacing | min fit | old test passes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for case in (1, 2, 3, 4, 5):
        for n in NS:
            for noise in NOISES:
                for circuit in ("QK", "OV"):
                    rs = [r for r in ctrl if (r["case"], r["n"], r["noise"], r["circuit"]) == (case, n, noise, circuit)]
                    old = rate(rs, "old_pass") if circuit == "QK" else ""
                    lines.append(
                        f"| {case} | {n} | {noise:g} | {circuit} | {rate(rs)} | {min(r['top2'] for r in rs):.4f} | "
                        f"{max(r['rcv'] for r in rs):.4f} | {max(r['spacing'] for r in rs):.3f} | "
                        f"{min(r['fit'] for r in rs):.4f} | {old} |")
    return lines


def report(rows: list[dict], seconds: float) -> tuple[str, list[dict]]:
    ctrl = [r for r in rows if r["kind"] == "control"]
    table = threshold_table(rows)
    lines = [
        "# Circuit circle test: null distribution and positive controls", "",
        ("Written by `experiments/analysis/geometry_null.py` "
         f"({seconds:.0f} s on one core); the test is `interp.inspect.tools.geometry.score_circle` on "
         "`circuits.qk_matrix` and `circuits.ov_matrix`. See the script's docstring for the groups."), "",
        "## Verdicts", "",
        "| group | circuit | `circle` | old key-vector circle test |", "|---|---|---|---|"]
    for kind in ("random", "permuted", "coordinate", "control"):
        for circuit in ("QK", "OV"):
            rs = [r for r in rows if r["kind"] == kind and r["circuit"] == circuit]
            old = rate(rs, "old_pass") if circuit == "QK" and kind in ("random", "control") else ""
            lines.append(f"| {kind} | {circuit} | {rate(rs)} | {old} |")
    lines += ["", "## Thresholds", "",
              ("A null's tail: its 99th percentile for a criterion that passes above the "
              "threshold, its 1st percentile for one that passes below. Control worst: the "
              "positive controls' minimum or maximum. Every threshold holds every control; "
              "\"rejects\" names the nulls whose tail it lies beyond, i.e. that it rejects alone "
              "(99% of them at least). Each null is built to break one thing: `random` models "
              "are neither circle nor matcher, `permuted` keeps both circles perfect but moves "
              "the match off the diagonal (only `fit` can see it), `coordinate` takes the keys "
              "off the circle while the targets stay on it. The verdict needs all four and c > 0."),
              "",
              ("| criterion | constant | threshold | random tail | permuted tail | coordinate tail "
               "| control worst | controls pass | rejects alone |"), "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        sign = ">=" if t["side"] == "min" else "<="
        tails = " | ".join(f"{t['null_tails'][k]:.3f}" for k in NULLS)
        lines.append(f"| {t['measure']} {sign} | `{t['constant']}` | {t['threshold']} | {tails} | "
                     f"{t['control_worst']:.3f} | {t['controls_pass']} | {', '.join(t['rejects']) or '-'} |")
    lines += ["", "## Distributions", ""] + distribution_lines(
        {"random": [r for r in rows if r["kind"] == "random"],
         "shuffled": [r for r in rows if r["kind"] in ("permuted", "coordinate")], "control": ctrl})
    lines += ["", "## Controls per construction", "",
              ("3 disguises per row (relabelled keys, an ignored extra direction, random basis and "
              "scale, noise as given). The old test is `probes.circle_test` of the mean key "
              "vectors (top-2 variance >= 0.9 and radius cv <= 0.15): the ignored direction "
              "hides the circle from it in cases 1-4. In case 5 that direction reaches the "
              "last layer's keys only through the value token and the position of the slot "
              "(layer 0 copies the key token's circle, not the extra coordinate), which the "
              "mean over inputs per key averages away, so the old test still sees the circle."), ""] + control_lines(ctrl)
    return "\n".join(lines) + "\n", table


def main() -> None:
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows = random_models() + shuffled() + controls()
    seconds = time.perf_counter() - start
    text, table = report(rows, seconds)
    (HERE / "geometry-null.md").write_text(text)
    thresholds = {c: getattr(geometry, c) for _, c, _ in CRITERIA}
    columns = sorted({k for r in rows for k in r})
    head = json.dumps({"thresholds": thresholds, "criteria": table, "seconds": round(seconds, 1),
                       "columns": columns}, indent=1)
    body = ",\n".join(json.dumps([r.get(c) for c in columns]) for r in rows)
    (HERE / "geometry-null.json").write_text(head[:-2] + ',\n "rows": [\n' + body + "\n ]\n}\n")
    bad = [t["measure"] for t in table if not t["controls_pass"]]
    missed = [r for r in rows if r["kind"] != "control" and r["circle"]]
    print(f"wrote geometry-null.md and .json; controls failing a criterion: {bad or 'none'}; "
          f"null models passing: {len(missed)}", file=sys.stderr)


if __name__ == "__main__":
    main()
