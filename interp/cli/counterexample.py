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
    parser.add_argument("--n", type=int, default=None, help="table size of the random model (default 8)")
    parser.add_argument("--d-token", type=int, default=None, help="width of the random model (default 16)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random model (default 0)")
    parser.add_argument("--attention", nargs="+", default=["leftmost", "rightmost", "average"],
                        help="hard attention modes to analyse (default all three); 'softmax' runs the "
                             "separability argument on attention-only models")
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    if bool(args.checkpoint) == bool(args.random):
        raise ValueError("give a checkpoint path or --random (exactly one)")
    given = [f"--{k.replace('_', '-')} {v}" for k, v in (("n", args.n), ("d_token", args.d_token),
                                                         ("seed", args.seed)) if v is not None]
    if given and not args.random:
        raise ValueError(f"{given[0]} shapes the --random model; a checkpoint ({args.checkpoint}) "
                         "has its own: drop it")
    if args.random:
        from interp.core import models

        n, d_token, seed = (8 if args.n is None else args.n, 16 if args.d_token is None else args.d_token,
                            0 if args.seed is None else args.seed)
        tasks.check_n(n)
        model = models.build_model(5, n, d_token, seed=seed)
        source = f"random case-5 model n={n} d_token={d_token} seed={seed}"
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
