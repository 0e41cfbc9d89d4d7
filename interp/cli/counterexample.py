"""interp counterexample: Theorem 3.6's counterexample finder on a checkpoint or a random model."""

from __future__ import annotations

import json

from interp.core import tasks
from interp.theory.counterexample import (
    _with_mode,
    find_counterexample,
    find_counterexample_attention_only,
)


def add_arguments(parser) -> None:
    parser.add_argument("checkpoint", nargs="?", help="a checkpoint directory (interp.training.checkpoints)")
    parser.add_argument("--random", action="store_true", help="use a randomly initialised one-layer case-5 model")
    parser.add_argument("--n", type=int, default=8, help="table size of the random model")
    parser.add_argument("--d-token", type=int, default=16, help="width of the random model")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random model")
    parser.add_argument("--attention", nargs="+", default=["leftmost", "rightmost", "average"],
                        help="hard attention modes to analyse (default all three); 'softmax' runs the "
                             "separability argument on attention-only models")
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    if bool(args.checkpoint) == bool(args.random):
        raise ValueError("give a checkpoint path or --random (exactly one)")
    if args.random:
        from interp.core import models

        tasks.check_n(args.n)
        model = models.build_model(5, args.n, args.d_token, seed=args.seed)
        source = f"random case-5 model n={args.n} d_token={args.d_token} seed={args.seed}"
    else:
        from interp.training import checkpoints

        model = checkpoints.load(args.checkpoint)
        source = str(args.checkpoint)
    found = [find_counterexample_attention_only(_with_mode(model, "softmax")) if mode == "softmax"
             else find_counterexample(model, attention=mode) for mode in args.attention]
    if args.json:
        print(json.dumps(dict(model=source, counterexamples=[c.to_dict() for c in found]), indent=2))
        return 0
    print(f"model: {source}")
    print(f"{'attention':>10} {'step':>4} {'family':>14} {'predicted':>9} {'expected':>8}  tokens")
    for c in found:
        print(f"{c.attention:>10} {c.step:>4} {c.family:>14} {c.predicted:>9} {c.expected:>8}  {' '.join(map(str, c.tokens))}")
    for c in found:
        print(f"{c.attention}: {c.reason}")
    return 0
