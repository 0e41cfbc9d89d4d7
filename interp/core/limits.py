"""How far each construction may be trusted: the measured n limits, checked before any work;
and how big a model may be built or trained on this machine (weights, one training step).

Kept apart from :mod:`interp.core.constructions` (which loads TransformerLens) so that a refusal,
e.g. ``interp verify --case 5 --n 100000``, answers before any heavy import or allocation.
"""

from __future__ import annotations

import json
import os
import warnings
from importlib import resources

import torch

from interp.core import tasks

DTYPES = (torch.float32, torch.float64)

#: Largest n (on the grid of ``experiments/precision/measure.py``) up to which a construction
#: was measured exact, per (case, n_layers, dtype): the last exact grid n before the first
#: failure, or the grid's top where none failed. ``build`` refuses n beyond it. Filled from
#: ``interp/core/precision_limits.json`` (written by that script).
EXACT_UP_TO: dict[tuple[int, int, torch.dtype], int] = {}


def with_construction(cases=None) -> tuple[list[int], list[str]]:
    """The cases among ``cases`` (default: every registered one) whose task has the paper's
    construction (:attr:`interp.core.tasks.Task.paper`), and one line per case skipped: what
    ``interp verify``, ``precision`` and ``run`` (and the precision measurement) go through."""
    kept, skipped = [], []
    for case in tasks.CASES if cases is None else cases:
        task = tasks.get(case)
        if task.paper is None:
            skipped.append(f"case {case} ({task.name}): no construction, skipped")
        else:
            kept.append(case)
    return kept, skipped


def construction(case: int) -> "tasks.Paper":
    """The task's :class:`interp.core.tasks.Paper`; a ValueError naming the cases that have one."""
    paper = tasks.get(case).paper
    if paper is None:
        raise ValueError(f"case {case} ({tasks.get(case).name}) has no construction; accepted: "
                         f"one of {tuple(with_construction()[0])}")
    return paper


def default_layers(case: int) -> int:
    """Layers of the paper's construction for ``case`` (:attr:`interp.core.tasks.Task.paper`)."""
    return construction(case).layers


def check_buildable(
    case: int, n: int, dtype: torch.dtype = torch.float32, *, layers: int | None = None,
    check_precision: bool = True,
) -> None:
    """Raise a ValueError, before any work, when ``build(case, n, dtype=dtype)`` would refuse:
    a bad case, n, dtype or layer count, n beyond the measured limit (with ``check_precision``),
    or weights larger than half of this machine's memory."""
    paper = construction(case)
    tasks.check_n(n)
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}; accepted: one of {DTYPES}")
    layers = paper.layers if layers is None else layers
    if layers != paper.layers:
        why = f" {paper.note}." if paper.note else ""
        raise ValueError(
            f"layers={layers} for case {case}; accepted: {paper.layers} (the paper's construction, "
            f"Theorem {paper.theorem}).{why}"
        )
    limit = EXACT_UP_TO.get((case, layers, dtype))
    if check_precision and limit is not None and n > limit:
        other = [str(d).removeprefix("torch.") + f" (n <= {EXACT_UP_TO[(case, layers, d)]})"
                 for d in DTYPES if d != dtype and (case, layers, d) in EXACT_UP_TO]
        raise ValueError(
            f"n={n} is beyond the largest n measured exact for case {case} in "
            f"{str(dtype).removeprefix('torch.')}: accepted n <= {limit} "
            f"(interp/core/precision_limits.json, docs/constructions.md); other dtypes: {', '.join(other) or 'none'}; "
            "check_precision=False builds it anyway"
        )
    need = weight_bytes(case, n, dtype)
    have = memory_bytes()
    if have and need > have // 2:
        raise ValueError(
            f"case {case} at n={n} needs {need / 2**30:.1f} GiB of weights in "
            f"{str(dtype).removeprefix('torch.')}; accepted: at most half of this machine's "
            f"{have / 2**30:.1f} GiB"
        )


def weight_bytes(case: int, n: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the construction's weights as TransformerLens allocates them (cases 2-3: the
    (n*n + n)-row W_E exists once before the pair tables replace it)."""
    task = tasks.get(case)
    rows = task.d_vocab(n) + task.seq_len(n) + n  # W_E, W_pos, W_U
    return rows * construction(case).d_model * torch.finfo(dtype).bits // 8


#: The largest value the paper's sweeps give each field that sets a training step's size
#: (d_mlp: 4 d_model, the widest MLP reading; seeds: the seeds of one group). The field furthest
#: beyond it is named as what makes a step too big; where none is beyond, the field whose
#: reduction to its smallest value (:data:`SMALLEST`) shrinks the step most.
PAPER_SCALE = {"n": 100, "d_token": 200, "n_layers": 2, "d_mlp": None, "batch_size": 256, "seeds": 5}
SMALLEST = {"n": 2, "d_token": 1, "n_layers": 1, "d_mlp": 0, "batch_size": 1, "seeds": 1}


def train_step_bytes(
    case: int, n: int, d_token: int, *, n_layers: int = 1, d_mlp: int = 0, batch_size: int = 256,
    seeds: int = 1, **spec,
) -> int:
    """An upper estimate of the memory of one training step, in bytes (float32).

    Per seed, with the shapes of the model's HookedTransformerConfig as its fields declare them
    (:func:`hooked_shape`; ``spec``: the other ModelSpec fields, default theirs): d_model, d_head,
    n_heads (h), n_ctx (pos), d_vocab, d_mlp, logits over n at every position:

    * parameters P = W_E [d_vocab, d_model] + W_pos [pos, d_model] + per layer W_Q, W_K, W_V,
      W_O [h, d_model, d_head] and their biases (+ W_in, W_out [d_model, d_mlp]) + W_U
      [d_model, n], held 4 times (weights, gradients, Adam's two moments);
    * activations A = per layer 2 [batch, pos, d_model] (residual, out), 4 [batch, pos, h,
      d_head] (q, k, v, z), 2 [batch, h, query_pos, key_pos] (scores, pattern), 2 [batch, pos,
      d_mlp] (pre, post), plus the embedding [batch, pos, d_model] and the logits [batch, pos,
      n], held twice (forward and backward).

    A group of seeds trains stacked, so the total is ``seeds`` times one seed's. The fast
    trainer needs less (it computes the final position only); this bounds both engines.
    """
    c = hooked_shape(case, n, d_token, n_layers=n_layers, d_mlp=d_mlp, **spec)
    d, h, dh, pos, vocab, L = c["d_model"], c["n_heads"], c["d_head"], c["n_ctx"], c["d_vocab"], c["n_layers"]
    mlp = 0 if c["attn_only"] else c["d_mlp"]
    layer = 4 * d * h * dh + 3 * h * dh + d + (2 * d * mlp + mlp + d if mlp else 0)
    params = vocab * d + pos * d + L * layer + d * n + n
    b = batch_size
    acts = L * (2 * b * pos * d + 4 * b * pos * h * dh + 2 * b * h * pos * pos + 2 * b * pos * mlp) + b * pos * (d + n)
    return 4 * (4 * params + 2 * acts) * seeds


def hooked_shape(case: int, n: int, d_token: int, **spec) -> dict:
    """The HookedTransformerConfig fields (as a dict) of a model with these ModelSpec fields,
    the others at their defaults, as each field declares them (:func:`interp.core.fields.hooked`);
    unvalidated, so a size the estimate caps need not be a valid spec."""
    import dataclasses
    from types import SimpleNamespace

    from interp.core import fields, models

    values = {f.name: f.default for f in dataclasses.fields(models.ModelSpec) if f.default is not dataclasses.MISSING}
    values.update(spec, case=case, n=n, d_token=d_token, d_model=tasks.get(case).d_model(d_token))
    return {**models._CONSTANT, **fields.hooked(SimpleNamespace(**values), models.ModelSpec)}


def check_trainable(config, seeds: int = 1) -> None:
    """Raise a ValueError, before any work, when one training step of ``config`` (anything
    with TrainConfig's fields) with ``seeds`` seeds stacked needs more than half of this
    machine's memory (the limit :func:`check_buildable` sets on weights), naming the field that
    makes the step big (:data:`PAPER_SCALE`)."""
    have = memory_bytes()
    sizes = {f: getattr(config, f) for f in ("n", "d_token", "n_layers", "d_mlp", "batch_size")}
    sizes["seeds"] = seeds
    from interp.core import fields, models

    spec = {f: getattr(config, f) for f in fields.infos(models.ModelSpec) if f not in (*sizes, "case")}
    need = train_step_bytes(config.case, **sizes, **spec)
    if not have or need <= have // 2:
        return
    d_model = tasks.get(config.case).d_model(config.d_token)

    def capped(at: dict) -> dict:
        return {f: train_step_bytes(config.case, **{**sizes, f: min(sizes[f], v)}, **spec) for f, v in at.items()}

    smaller = capped({**PAPER_SCALE, "d_mlp": 4 * d_model})
    if min(smaller.values()) == need:  # every field within the paper's scale: a small machine
        smaller = capped(SMALLEST)
    top = min(smaller, key=smaller.get)
    blame = (f"its {seeds} seeds, trained stacked, dominate" if top == "seeds"
             else f"{top}={sizes[top]} dominates")
    shape = " ".join(f"{f}={v}" for f, v in sizes.items() if f != "seeds")
    raise ValueError(
        f"one training step of case {config.case} {shape} x {seeds} seed(s) stacked needs "
        f"~{need / 2**30:,.1f} GiB in float32 ({blame}); this machine has {have / 2**30:.1f} GiB; "
        f"accepted: at most half of it ({have / 2**31:.1f} GiB): lower "
        f"{'the seeds per group' if top == 'seeds' else top}"
    )


def memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return None


#: the rows of ``precision_limits.json`` as measured (``experiments/precision/measure.py``)
LIMIT_ROWS: list[dict] = []


def limits_table(rows: list[dict] | None = None) -> str:
    """The measured limits as the markdown table ``docs/constructions.md`` quotes (a test holds
    the page to it): one row per construction and dtype of ``rows`` (default :data:`LIMIT_ROWS`,
    the JSON, the one source)."""
    lines = ["| case | layers | dtype | exact up to n | first failure on the grid | grid top | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in LIMIT_ROWS if rows is None else rows:
        bad = r["first_failure"] if r["first_failure"] is not None else "none"
        lines.append(f"| {r['case']} | {r['layers']} | {r['dtype']} | {r['exact_up_to']} | {bad} | "
                     f"{r['grid_top']} | {r['seconds']} |")
    return "\n".join(lines)


def _load_limits() -> None:
    try:
        text = resources.files("interp.core").joinpath("precision_limits.json").read_text()
    except FileNotFoundError:
        warnings.warn("interp/core/precision_limits.json is missing: build() cannot check precision")
        return
    LIMIT_ROWS[:] = json.loads(text)
    for row in LIMIT_ROWS:
        dtype = {"float32": torch.float32, "float64": torch.float64}[row["dtype"]]
        EXACT_UP_TO[(row["case"], row["layers"], dtype)] = row["exact_up_to"]


_load_limits()
