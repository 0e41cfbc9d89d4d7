"""``interp probe``: every measure of :mod:`interp.inspect.studies.analysis` for one model, as a table or JSON.

The model is a checkpoint folder (``model.safetensors`` + ``config.json``; its case and n come
with it, ``--case``/``--n`` are checked against them, and give the case of an old checkpoint
that stores none) or the paper's construction (``--construction CASE --n N``; a ``--case``
other than CASE is refused). The table lists the attention summary per layer, the cos/sin
probes of the embedding tables and of ``--hook`` (default: the last layer's ``hook_resid_post``
at the final position, labelled f(i*)), and the circuit, circle and patching measures.
``--das`` adds the codes' dimensions found by a learned rotation (:mod:`interp.inspect.mechanism.das`;
the measures' ``value_dim``/``query_dim`` are the principal-axes upper bound), softmax models only.
The ``geometry`` label names the figure the value code draws in the stream (simplex, orthoplex,
circle, codebook, unnamed or untestable; ``key_geometry``: the target key's), with its measures
under ``geometry_measures`` (:mod:`interp.inspect.mechanism.figures`; the principal-axes and,
with ``--das``, learned dimensions beside them).
"""

from __future__ import annotations

import json


def add_model_arguments(p) -> None:
    """The model arguments shared by ``interp probe`` and ``interp viz``."""
    p.add_argument("checkpoint", nargs="?", help="a checkpoint folder (model.safetensors + config.json)")
    p.add_argument("--construction", type=int, metavar="CASE", help="the paper's construction for CASE (1-5)")
    p.add_argument("--n", type=int, help="table size (with --construction; checked against a checkpoint's)")
    p.add_argument("--case", type=int,
                   help="checked against the model's case; gives the case of an old checkpoint that stores none")
    p.add_argument("--attention", default=None,
                   help="attention mode of a construction: leftmost (default), rightmost, average, "
                        "softmax; refused with a checkpoint")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampled inputs")
    p.add_argument("--batch-size", type=int, default=1024, help="sampled inputs")


def add_arguments(p) -> None:
    add_model_arguments(p)
    p.add_argument("--hook", default=None, help="residual hook to probe (default: last resid_post)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--das", action="store_true",
                   help="also the codes' dimensions by a learned rotation (DAS; softmax models)")


def load_checked(path):
    """The model at checkpoint ``path``; a sweep's run folder (``<store folder>/checkpoints/<run>``
    beside ``store.sqlite``) is first checked against its store row (issues 43, 55:
    :func:`interp.sweeps.store.checked_model`, its files, config.json, shape and re-measured
    accuracy), so a swapped, replaced or forged checkpoint is refused by name instead of
    measured as that run."""
    from interp.sweeps import store
    from interp.training import checkpoints

    inside = store.store_of_folder(path)
    return checkpoints.load(path) if inside is None else store.checked_model(*inside)


def model_from_args(args):
    """(model, label) from ``checkpoint`` or ``--construction``; the model carries its task
    (``--case``/``--n`` checked against it). ValueError if neither or both is given."""
    from interp.core import constructions, tasks, tokens
    from interp.training import checkpoints

    if (args.checkpoint is None) == (args.construction is None):
        raise ValueError("give exactly one of a checkpoint path or --construction CASE --n N")
    if args.construction is not None:
        if args.n is None:
            raise ValueError("--construction needs --n N (the table size)")
        case, n = tasks.check_case(args.construction), tasks.check_n(args.n)
        if args.case is not None and tasks.check_case(args.case) != case:
            raise ValueError(f"--case {args.case} but --construction {case}: the construction is "
                             f"of case {case} ({tasks.get(case).name}); drop --case or make them agree")
        attention = args.attention or "leftmost"
        model = constructions.build(case, n, attention=attention)
        return model, f"construction case {case}, n = {n} ({attention})"
    if args.attention is not None:  # a trained model's attention is its own
        raise ValueError(f"--attention {args.attention} picks a construction's attention mode; "
                         f"with a checkpoint ({args.checkpoint}) it would be ignored: drop it")
    model = load_checked(args.checkpoint)
    if model.task is None:  # an old checkpoint that stores neither its case nor a TrainConfig
        if args.case is None:
            raise ValueError(f"{args.checkpoint} stores no case (nor a TrainConfig); pass --case")
        tokens.attach_task(model, tasks.check_case(args.case))
    try:
        task, n = tasks.of(model, case=args.case, n=args.n)
    except ValueError as e:
        raise ValueError(f"{args.checkpoint}: {e} (from --case/--n)") from None
    label = f"checkpoint case {task.case}, n = {n}"
    train_config = checkpoints.read_meta(args.checkpoint).get("train_config") or {}
    if train_config:
        label += (f", d_token {train_config.get('d_token')}, {train_config.get('n_layers')} "
                  f"layer(s), PE {train_config.get('pos_embed')}, seed {train_config.get('seed')}")
    return model, label


def collect(model, *, hook: str | None, batch_size: int, seed: int) -> dict:
    """Everything ``interp probe`` prints for a model (its task read from it), as plain JSON-able data."""
    from interp.core import tasks
    from interp.inspect.mechanism import figures, labels
    from interp.inspect.studies import analysis
    from interp.inspect.tools import hooks, probes

    task, n = tasks.of(model)
    tokens = hooks.sample_inputs(task.case, n, max(batch_size, n), seed=seed)
    hook = hook or f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    probe_rows = [p.summary() for p in probes.probe_model(model, seed=seed)]
    probe_rows.append(probes.probe_resid(model, hook, tokens, seed=seed).summary())
    measures = analysis.measure(model, batch_size=batch_size, seed=seed)
    shape = figures.measure_model(model, batch_size=min(batch_size, 512), seed=seed, at=measures["at"])
    for variable in shape:
        shape[variable]["dim_axes"] = measures.get(f"{variable}_dim")
    return dict(
        **labels.labels_of(measures),
        geometry=shape["value"]["label"], key_geometry=shape["query"]["label"],
        geometry_measures=shape,
        verdict=labels.verdict(measures),
        attention=hooks.attention_report(model, tokens).summary().to_dict("records"),
        probes=probe_rows,
        measures=measures,
    )


def _fmt(v, key: str = "") -> str:
    from interp.inspect.mechanism import labels

    if isinstance(v, float) and (key == "r2" or key.startswith("r2_")):
        return labels.r2_text(v)  # at the floor: "<= -1 (floored)", not a plain -1
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def format_tables(label: str, data: dict) -> str:
    import pandas as pd

    from interp.inspect.mechanism import labels

    das = "".join(f"; {v} learned dimension {d['dim']} (axes {d['axes_dim']})"
                  for v, d in data.get("das", {}).items())
    out = [label, "", f"mechanism: {data['mechanism']}", f"routing: {data['routing']}",
           f"code: values {data['code']}, target key {data['key_code']}{das}",
           f"verdict: {data['verdict']}",
           f"geometry: values {data['geometry']}, target key {data['key_geometry']}",
           *geometry_lines(data["geometry_measures"]), "",
           "attention (construction's position):",
           pd.DataFrame(data["attention"]).to_string(index=False, float_format=_fmt), "",
           "cos/sin probes (held-out R^2, best N and m):",
           pd.DataFrame(data["probes"]).to_string(index=False, float_format=_fmt,
                                                  formatters={"r2": lambda v: _fmt(v, "r2")}),
           "", "measures:"]
    width = max(len(k) for k in data["measures"])
    vw = max(len(_fmt(v, k)) for k, v in data["measures"].items())
    out += [f"  {k:<{width}}  {_fmt(v, k):<{vw}}  {labels.describe(k)}"
            for k, v in data["measures"].items()]
    return "\n".join(out + ["", "(ideal values of the paper's construction in parentheses; "
                             "--json prints the raw numbers)"])


#: the geometry measures ``interp probe`` prints, in order (figures.table_measures and the read-out)
GEOMETRY_SHOWN = ("norm_cv", "cos_sd", "simplex_dev", "orthoplex_dev", "cos_max", "pr", "top2", "rcv",
                  "gap", "collapse", "dual", "margin", "dim_axes", "dim_learned")


def geometry_lines(shape: dict) -> list[str]:
    """One line per variable: its geometry measures (``figures``; centred by the global mean)."""
    out = []
    for variable, m in shape.items():
        shown = [f"{k} {_fmt(m[k])}" for k in GEOMETRY_SHOWN if m.get(k) is not None]
        out.append(f"  {variable}: " + (", ".join(shown) or m.get("note", "")))
    return out


def learned_dims(model, at: str, *, batch_size: int, seed: int) -> dict:
    """``{variable: {axes_dim, dim, iia}}``: :func:`interp.inspect.mechanism.das.learned_dim` of both codes."""
    from interp.inspect.mechanism import das

    out = {}
    for variable in ("value", "query"):
        got = das.learned_dim(model, variable, at=at, batch_size=batch_size, seed=seed)
        out[variable] = dict(axes_dim=got.axes_dim, dim=got.dim, iia=[list(x) for x in got.iia])
    return out


def run(args) -> int:
    from interp.core import attention

    model, label = model_from_args(args)
    hard = [m.mode for m in attention.modes(model) if m.mode != "softmax"]
    if args.das and hard:  # refused before anything is measured
        raise ValueError(f"--das with attention {hard}; accepted: softmax attention (a checkpoint "
                         "trained here, or --construction with --attention softmax)")
    data = collect(model, hook=args.hook, batch_size=args.batch_size, seed=args.seed)
    if args.das:
        data["das"] = learned_dims(model, data["measures"]["at"], batch_size=min(args.batch_size, 512),
                                   seed=args.seed)
        for variable, got in data["das"].items():
            data["geometry_measures"][variable]["dim_learned"] = got["dim"]
    if args.json:
        print(json.dumps(dict(model=label, case=model.task.case, n=model.cfg.d_vocab_out, **data),
                         indent=1, default=float))
    else:
        print(format_tables(label, data))
    return 0
