"""Item 3: Theorem 3.6's counterexample finder on many random one-layer case-5 models.

    .venv/bin/python experiments/counterexamples/counterexamples.py

Every (seed, n, d_token, positional embedding) model is analysed under leftmost, rightmost and
average hard attention (Theorem 3.6) and as built, with softmax (the separability argument of
find_counterexample_attention_only); every returned input is re-checked with the model's
TransformerLens forward pass (hard attention through hooks) and the plain-Python evaluator. Also
Theorem 3.5's softmax model run with hard attention. (Trained models: trained_models.py runs
both finders on each model it trains.) Writes counterexamples.json.
"""

from __future__ import annotations

import collections
import copy
import time
from pathlib import Path

import torch

from interp.core import attention, models, tasks
from interp.theory import softmax_construction
from interp.theory.counterexample import (
    find_counterexample,
    find_counterexample_attention_only,
)
from interp.theory.studies import Study, polite

study = Study(Path(__file__).resolve().parent)

MODES = ("leftmost", "rightmost", "average")


def verified(model, c, mode) -> bool:
    m = copy.deepcopy(model)
    attention.set_attention(m, mode)
    with torch.no_grad():
        pred = int(m(torch.tensor([c.tokens]))[0, -1].argmax())
    return pred == c.predicted != c.expected == tasks.evaluate(5, model.cfg.d_vocab_out, c.tokens)


def main():
    polite()
    t0 = time.perf_counter()
    steps = collections.Counter()
    examples, failures, total = [], 0, 0
    for n in (4, 5, 8, 16, 32):
        for d in (2, 8, 32):
            for pos in ("learned", "none"):
                for seed in range(20):
                    model = models.build_model(5, n, d, pos_embed=pos, seed=seed)
                    c = find_counterexample_attention_only(model)  # softmax, as built
                    with torch.no_grad():
                        pred = int(model(torch.tensor([c.tokens]))[0, -1].argmax())
                    total += 1
                    failures += not (pred == c.predicted != c.expected == tasks.evaluate(5, n, c.tokens))
                    steps[f"softmax/{c.step}"] += 1
                    if seed == 0 and d == 8 and pos == "learned":
                        examples.append(dict(d_token=d, **c.to_dict()))
                    for mode in MODES:
                        c = find_counterexample(model, mode)
                        total += 1
                        ok = verified(model, c, mode)
                        failures += not ok
                        steps[f"{mode}/{c.step}"] += 1
                        if seed == 0 and d == 8 and pos == "learned":
                            examples.append(dict(d_token=d, **c.to_dict()))
    thm35 = []
    for n in (4, 6, 8, 16):
        model = softmax_construction.build(n)
        for mode in MODES:
            c = find_counterexample(model, mode)
            thm35.append(dict(verified=verified(model, c, mode), **c.to_dict()))
            steps[f"theorem35/{mode}/{c.step}"] += 1
    summary = dict(searches=total, verified=total - failures, steps=dict(sorted(steps.items())),
                   seconds=round(time.perf_counter() - t0, 1))
    study.save("counterexamples.json", dict(summary=summary, examples=examples, theorem35=thm35))
    print(summary)


if __name__ == "__main__":
    main()
