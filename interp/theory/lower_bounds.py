"""Theorems 3.4 and 3.7 beside trained one-layer case-5 models.

For a one-layer transformer with h heads, embedding dimension d and p bits of precision
(the p-bit rational precision assumption), in case 5:

* Theorem 3.4: if it is always right, h d p >= n log2(n) / 3.
* Theorem 3.7 (n >= an unspecified constant C): with f a uniformly random function [n] -> [n],
  keys randomly permuted and target key 0, it errs with probability at least
  R / (3 n log2 n), R = n log2 n - 3 h d p (vacuous when R <= 0).

For a trained model we measure p with :mod:`interp.theory.precision` in ``reference`` mode: the least
p at which rounding every weight and activation leaves its prediction unchanged on the probe
inputs (every target key, answers covering [n], random inputs): the p-bit assumption read
literally, on those inputs. d is d_model (= d_token in case 5). The error is measured on fresh
random inputs, both in the training distribution (f a random permutation, target uniform) and
in Theorem 3.7's (f any function, target 0).
"""

from __future__ import annotations

import time

import torch

from interp.core import forward, tasks
from interp.core.bounds import theorem_3_4_bound, theorem_3_7_bound  # noqa: F401 - re-exported
from interp.theory import precision as P


def theorem_3_7_inputs(n: int, count: int, generator: torch.Generator):
    """Theorem 3.7's distribution: f uniform over all functions, keys permuted, target 0."""
    f = torch.randint(0, n, (count, n), generator=generator)
    keys = torch.rand(count, n, generator=generator).argsort(dim=1)
    tokens = tasks.encode(5, keys, f.gather(1, keys), torch.zeros(count, dtype=torch.long))
    return tokens, f[:, 0]


@tasks.reads_task
def error_rates(model, *, case: int | None = None, n: int | None = None, count: int = 8192,
                seed: int = 0) -> dict:
    """Error of a case-5 model as it runs (its own attention) on both input distributions."""
    task, n = tasks.of(model, case, n, only=5)
    g = torch.Generator().manual_seed(seed)
    out = {}
    with torch.no_grad():
        tokens, answers = task.sample(n, count, generator=g, function="permutation")
        out["error_permutation"] = float((forward.predictions(model, tokens) != answers).float().mean())
        tokens, answers = theorem_3_7_inputs(n, count, g)
        out["error_theorem37"] = float((forward.predictions(model, tokens) != answers).float().mean())
    return out


@tasks.reads_task
def report(model, *, case: int | None = None, n: int | None = None, kinds=("fixed", "float"),
           count: int = 8192, seed: int = 0, n_random: int = 256) -> dict:
    """h, d, measured p (per format), c-size, errors and both bounds for one case-5 model."""
    cfg = model.cfg
    _, n = tasks.of(model, case, n, only=5)
    if cfg.n_layers != 1:
        raise ValueError(f"n_layers={cfg.n_layers}: Theorems 3.4 and 3.7 are about one-layer "
                         "case-5 models; accepted: n_layers = 1")
    row = dict(n=n, h=cfg.n_heads, d=cfg.d_model, **error_rates(model, count=count, seed=seed))
    row["bound_3_4"] = theorem_3_4_bound(n)
    probes = P.ProbeSet(5, n, shifts=(0, 1), n_random=n_random, seed=seed)
    for kind in kinds:
        r = P.least_precision(model, probes, kind, reference=True)
        row[f"p_{kind}"] = r.bits
        if r.bits is not None:
            row[f"c_size_{kind}"] = cfg.n_heads * cfg.d_model * r.bits
            b = theorem_3_7_bound(n, cfg.n_heads, cfg.d_model, r.bits)
            row[f"R_{kind}"], row[f"bound_3_7_{kind}"] = b["R"], b["bound"]
    return row


def train_and_report(n: int, d_token: int, *, seed: int = 0, max_steps: int = 2000, **kw) -> dict:
    """Train a one-layer case-5 model (the paper's protocol, shortened) and report it."""
    from interp.training.trainer import TrainConfig, train

    t0 = time.perf_counter()
    run = train(TrainConfig(case=5, n=n, d_token=d_token, seed=seed, max_steps=max_steps, eval_batches=8))
    row = dict(source="trained", seed=seed, steps=run.steps, train_accuracy=run.accuracy, **report(run.model, **kw))
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row
