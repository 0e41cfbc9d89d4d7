"""``interp viz``: write a model's attention HTML (self-contained) and PNG figures to ``--out``.

Model arguments as ``interp probe``. Writes ``attention.html`` (circuitsvis, renders offline; the
target, answers and attended positions of ``--inputs`` sampled inputs, default 3),
``circles.png`` (embedding tables on their circles, the paper's Figure 1 style),
``circuits.png`` (QK and OV heatmaps) and ``spectra.png`` (Fourier power of the tables).
"""

from __future__ import annotations

import json

from interp.cli.probe import add_model_arguments, model_from_args


def add_arguments(p) -> None:
    add_model_arguments(p)
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--inputs", type=int, default=3,
                   help="sampled inputs shown in attention.html, each stated in words (default 3)")
    p.add_argument("--json", action="store_true", help="print the written paths as JSON")


def run(args) -> int:
    from interp.core import tasks
    from interp.inspect.tools import hooks, viz

    viz.check_inputs(args.inputs)  # before any work
    model, label = model_from_args(args)
    task, n = tasks.of(model)
    tokens = hooks.sample_inputs(task.case, n, args.inputs, seed=args.seed)
    paths = viz.write_all(model, args.out, title=label, tokens=tokens, inputs=args.inputs)
    if args.json:
        print(json.dumps({k: str(v) for k, v in paths.items()}, indent=1))
    else:
        print(label)
        for name, path in paths.items():
            print(f"  {name:<10} {path}")
    return 0
