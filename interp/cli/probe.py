"""``interp probe``: every measure of :mod:`interp.inspect.analysis` for one model, as a table or JSON.

The model is a checkpoint folder (``model.safetensors`` + ``config.json``; its case and n come
from the stored TrainConfig, or from ``--case``/``--n``) or the paper's construction
(``--construction CASE --n N``). The table lists the attention summary per layer, the cos/sin
probes of the embedding tables and of ``--hook`` (default: the last layer's ``hook_resid_post``
at the final position, labelled f(i*)), and the circuit, circle and patching measures.
"""

from __future__ import annotations

import json


def add_model_arguments(p) -> None:
    """The model arguments shared by ``interp probe`` and ``interp viz``."""
    p.add_argument("checkpoint", nargs="?", help="a checkpoint folder (model.safetensors + config.json)")
    p.add_argument("--construction", type=int, metavar="CASE", help="the paper's construction for CASE (1-5)")
    p.add_argument("--n", type=int, help="table size (with --construction; overrides a checkpoint's)")
    p.add_argument("--case", type=int, help="the case of a checkpoint without a stored TrainConfig")
    p.add_argument("--attention", default="leftmost",
                   help="attention mode of a construction (leftmost, rightmost, average, softmax)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled inputs")
    p.add_argument("--batch-size", type=int, default=1024, help="sampled inputs")


def add_arguments(p) -> None:
    add_model_arguments(p)
    p.add_argument("--hook", default=None, help="residual hook to probe (default: last resid_post)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


def model_from_args(args):
    """(model, case, n, label) from ``checkpoint`` or ``--construction``; ValueError if neither."""
    from interp.core import constructions, tasks
    from interp.training import checkpoints

    if (args.checkpoint is None) == (args.construction is None):
        raise ValueError("give exactly one of a checkpoint path or --construction CASE --n N")
    if args.construction is not None:
        if args.n is None:
            raise ValueError("--construction needs --n N (the table size)")
        case, n = tasks.check_case(args.construction), tasks.check_n(args.n)
        model = constructions.build(case, n, attention=args.attention)
        return model, case, n, f"construction case {case}, n = {n} ({args.attention})"
    meta = checkpoints.read_meta(args.checkpoint)
    train_config = meta.get("train_config") or {}
    case = args.case if args.case is not None else train_config.get("case")
    n = args.n if args.n is not None else train_config.get("n")
    if case is None or n is None:
        raise ValueError(f"{args.checkpoint} stores no TrainConfig; pass --case and --n")
    model = checkpoints.load(args.checkpoint)
    label = f"checkpoint case {case}, n = {n}"
    if train_config:
        label += (f", d_token {train_config.get('d_token')}, {train_config.get('n_layers')} "
                  f"layer(s), PE {train_config.get('pos_embed')}, seed {train_config.get('seed')}")
    return model, tasks.check_case(case), tasks.check_n(n), label


def collect(model, case: int, n: int, *, hook: str | None, batch_size: int, seed: int) -> dict:
    """Everything ``interp probe`` prints, as plain JSON-able data."""
    from interp.inspect import analysis, hooks, labels, probes

    tokens = hooks.sample_inputs(case, n, max(batch_size, n), seed=seed)
    hook = hook or f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    probe_rows = [p.summary() for p in probes.probe_model(model, case, n, seed=seed)]
    probe_rows.append(probes.probe_resid(model, case, n, hook, tokens, seed=seed).summary())
    measures = analysis.measure(model, case, n, batch_size=batch_size, seed=seed)
    return dict(
        mechanism=labels.mechanism(measures),
        verdict=labels.verdict(measures),
        attention=hooks.attention_report(model, case, n, tokens).summary().to_dict("records"),
        probes=probe_rows,
        measures=measures,
    )


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def format_tables(label: str, data: dict) -> str:
    import pandas as pd

    from interp.inspect import labels

    out = [label, "", f"mechanism: {data['mechanism']}", f"verdict: {data['verdict']}", "",
           "attention (construction's position):",
           pd.DataFrame(data["attention"]).to_string(index=False, float_format=_fmt), "",
           "cos/sin probes (held-out R^2, best N and m):",
           pd.DataFrame(data["probes"]).to_string(index=False, float_format=_fmt), "", "measures:"]
    width = max(len(k) for k in data["measures"])
    vw = max(len(_fmt(v)) for v in data["measures"].values())
    out += [f"  {k:<{width}}  {_fmt(v):<{vw}}  {labels.describe(k)}"
            for k, v in data["measures"].items()]
    return "\n".join(out + ["", "(ideal values of the paper's construction in parentheses; "
                             "--json prints the raw numbers)"])


def run(args) -> int:
    model, case, n, label = model_from_args(args)
    data = collect(model, case, n, hook=args.hook, batch_size=args.batch_size, seed=args.seed)
    if args.json:
        print(json.dumps(dict(model=label, case=case, n=n, **data), indent=1, default=float))
    else:
        print(format_tables(label, data))
    return 0
