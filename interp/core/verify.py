"""``interp verify``: check every construction against the reference evaluator.

The reference is :func:`interp.core.tasks.answers`, a table lookup on the tokens that knows nothing
of models (and is itself tested against the plain-Python :func:`interp.core.tasks.evaluate`).
Predictions come from :func:`interp.core.forward.final_logits`, which reproduces
``model(tokens)[:, -1]`` from the final query alone (tested against TransformerLens's forward).

Plans. ``exhaustive`` checks every input (all functions [n] -> [n], all key orders, all targets)
for small n; ``random`` samples inputs; ``covering`` is the precision check: for every target
key t, three functions (a random permutation, t -> t+1, t -> n-1-t) so that every attention
comparison (the target's key against every other key) and every output value is exercised.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from interp.core import forward, tasks
from interp.core.limits import with_construction

PLANS = ("exhaustive", "random", "covering")
EXHAUSTIVE_LIMIT = 5_000_000


@dataclass(frozen=True)
class VerifyRow:
    case: int
    layers: int
    n: int
    dtype: str
    attention: str
    function: str
    plan: str
    inputs: int
    correct: int
    seconds: float

    @property
    def accuracy(self) -> float:
        return self.correct / self.inputs

    def to_dict(self) -> dict:
        return {**asdict(self), "accuracy": self.accuracy}


def _covering_functions(n: int, generator: torch.Generator | None):
    t = torch.arange(n)
    return [torch.randperm(n, generator=generator), (t + 1) % n, n - 1 - t]


def _covering_block(case, n, f, targets, generator):
    task = tasks.get(case)
    keys = task.sample_keys(n, len(targets), generator=generator)
    return task.layout(n, keys, f[keys], targets)


def covering_inputs(case: int, n: int, generator: torch.Generator | None = None):
    """Every target key t in [n] under three functions (random permutation, t+1, n-1-t)."""
    return torch.cat([
        _covering_block(case, n, f, torch.arange(n), generator)
        for f in _covering_functions(n, generator)
    ])


def _batches(case, n, plan, function, count, generator, chunk):
    """The plan's inputs, ``chunk`` at a time (memory stays bounded at large n)."""
    if plan == "exhaustive":
        yield from tasks.enumerate_inputs(case, n, function)[0].split(chunk)
    elif plan == "covering":
        for f in _covering_functions(n, generator):
            for targets in torch.arange(n).split(chunk):
                yield _covering_block(case, n, f, targets, generator)
    else:
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            yield tasks.sample(case, n, size, generator=generator, function=function)[0]


def _chunk(case: int, n: int, layers: int) -> int:
    """Inputs per forward chunk: keep the biggest activation near 64 MB."""
    L = tasks.seq_len(case, n)
    per_input = L * L if layers > 1 else L * 8
    return max(1, min(8192, (16 * 2**20) // per_input))


def verify(
    case: int,
    n: int,
    *,
    plan: str = "random",
    inputs: int = 10_000,
    function: str = "permutation",
    dtype: torch.dtype = torch.float32,
    attention: str = "leftmost",
    seed: int = 0,
    check_precision: bool = True,
    tie_rtol: float | None = None,
    tie_atol: float | None = None,
    progress=None,
) -> VerifyRow:
    """Run the construction for (case, n) on a plan of inputs and count correct answers.

    ``tie_rtol``/``tie_atol``: the hard modes' tie tolerance (``None``: the dtype's default)."""
    from interp.core.constructions import build, default_layers

    if plan not in PLANS:
        raise ValueError(f"plan={plan!r}; accepted: one of {PLANS}")
    tasks.check_function(function)
    if plan == "random" and (not isinstance(inputs, int) or inputs < 1):
        raise ValueError(f"inputs={inputs!r}; accepted: an integer >= 1")
    model = build(case, n, attention=attention, dtype=dtype, check_precision=check_precision,
                  tie_rtol=tie_rtol, tie_atol=tie_atol)
    g = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    correct = checked = 0
    chunk = _chunk(case, n, default_layers(case))
    shared: dict = {}  # case 5's token-independent first layer, computed once for every batch
    with torch.inference_mode():
        for tokens in _batches(case, n, plan, function, inputs, g, chunk):
            pred = forward.predictions(model, tokens, cache=shared)
            correct += int((pred == tasks.answers(case, n, tokens)).sum())
            checked += tokens.shape[0]
            if progress is not None:
                progress(tokens.shape[0])
    return VerifyRow(
        case=case,
        layers=default_layers(case),
        n=n,
        dtype=str(dtype).removeprefix("torch."),
        attention=attention,
        function=function,
        plan=plan,
        inputs=checked,
        correct=correct,
        seconds=round(time.perf_counter() - start, 3),
    )


def default_plan(quick: bool = False) -> list[dict]:
    """Every construction: exhaustive for n <= 4, random inputs at n = 100 and 1000 (a
    presentation without one is left out: :func:`interp.core.limits.with_construction`)."""
    plan = []
    for case in with_construction()[0]:
        for n in (2, 3, 4) if not quick else (3,):
            plan.append(dict(case=case, n=n, plan="exhaustive", function="any"))
        for n in (100, 1000) if not quick else (100,):
            two_layers = tasks.get(case).paper.layers > 1  # every query position in layer 0
            count = 1_000 if quick else (200 if (two_layers and n == 1000) else 10_000)
            for function in ("permutation", "any"):
                plan.append(dict(case=case, n=n, plan="random", inputs=count, function=function))
    return plan
