"""Counterexamples on *trained* one-layer attention-only case-5 models near the 75% bound.

    .venv/bin/interp sweep experiments/table2 --where n=2 --where n_layers=1 --where d_token=16
    .venv/bin/python experiments/counterexamples/near_bound.py

Random models are at chance, where finding a wrong input is trivial. Here the models are as good
as one head can be: Table 2's one-layer n = 2 seeds (trained by the paper's protocol, read from
``experiments/table2/results/store.sqlite``) and one-head models fitted by Adam to every input at
n = 3 and 4 (f a permutation; as in ``tests/theory/test_counterexample.py``). For each model:
its exact accuracy over every input and its XOR families (``check_bound``: at most 75%, no
family all right), the separability finder's input re-run through the model's own forward and
the plain-Python evaluator, and at n = 4 Theorem 3.6's finder under the three hard modes.
Writes ``near_bound.json``.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from interp.core import attention, models, tasks
from interp.theory.counterexample import (
    ATTENTION_ONLY_BOUND,
    check_bound,
    find_counterexample,
    find_counterexample_attention_only,
)
from interp.theory.studies import Study, polite
from interp.training import checkpoints, runs
from interp.sweeps import store

study = Study(Path(__file__).resolve().parent)
STORE = Path("experiments/table2/results/store.sqlite")


def fitted(n: int, seed: int, steps: int):
    """A one-head model fitted to every input of size n (Adam, lr 0.02, init "pytorch")."""
    model = models.build_model(5, n, 16, seed=seed)
    torch.manual_seed(seed)
    runs._pytorch_init(model)
    tokens, answers = tasks.enumerate_inputs(5, n, "permutation")
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.02)
    for _ in range(steps):
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def wrong(model, c, mode=None) -> bool:
    m = model if mode is None else attention.set_attention(copy.deepcopy(model), mode)
    with torch.no_grad():
        pred = int(m(torch.tensor([c.tokens]))[0, -1].argmax())
    return pred == c.predicted != c.expected == tasks.evaluate(5, model.cfg.d_vocab_out, c.tokens)


def row(model, n: int, source: str) -> dict:
    check = check_bound(model)
    c = find_counterexample_attention_only(model)
    out = dict(source=source, n=n, accuracy=round(check.accuracy, 4), inputs=check.inputs,
               families=check.families, families_all_right=check.families_all_right,
               separable=dict(tokens=c.tokens, expected=c.expected, predicted=c.predicted,
                              verified=wrong(model, c)))
    if n >= 4:
        out["hard"] = {}
        for mode in ("leftmost", "rightmost", "average"):
            h = find_counterexample(model, mode)
            out["hard"][mode] = dict(step=h.step, tokens=h.tokens, verified=wrong(model, h, mode))
    return out


def main():
    polite()
    t0 = time.perf_counter()
    rows = []
    df = store.read(STORE) if STORE.is_file() else None
    if df is not None:
        df = df[(df.status == "ok") & (df.n == 2) & (df.n_layers == 1) & (df.d_mlp == 0)]
        for _, r in df.sort_values(["d_token", "seed"]).iterrows():
            rows.append(row(checkpoints.load(r.checkpoint), 2,
                            f"table2 n=2 d_token={int(r.d_token)} seed {int(r.seed)} "
                            f"(trained accuracy {r.accuracy:.4f})"))
    for n, steps in ((3, 600), (4, 300)):
        for seed in range(3):
            rows.append(row(fitted(n, seed, steps), n, f"fitted to every input, seed {seed}"))
    summary = dict(models=len(rows), bound=ATTENTION_ONLY_BOUND,
                   max_accuracy={n: max(r["accuracy"] for r in rows if r["n"] == n)
                                 for n in sorted({r["n"] for r in rows})},
                   all_at_or_below_bound=all(r["accuracy"] <= ATTENTION_ONLY_BOUND for r in rows),
                   families_all_right=sum(r["families_all_right"] for r in rows),
                   verified=sum(r["separable"]["verified"] for r in rows)
                   + sum(h["verified"] for r in rows for h in r.get("hard", {}).values()),
                   searches=len(rows) + sum(len(r.get("hard", {})) for r in rows),
                   seconds=round(time.perf_counter() - t0, 1))
    study.save("near_bound.json", dict(summary=summary, rows=rows))
    print(summary)


if __name__ == "__main__":
    main()
