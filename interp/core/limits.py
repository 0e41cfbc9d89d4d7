"""How far each construction may be trusted: the measured n limits, checked before any work.

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


def default_layers(case: int) -> int:
    return 2 if case == 5 else 1


def check_buildable(
    case: int, n: int, dtype: torch.dtype = torch.float32, *, layers: int | None = None,
    check_precision: bool = True,
) -> None:
    """Raise a ValueError, before any work, when ``build(case, n, dtype=dtype)`` would refuse:
    a bad case, n, dtype or layer count, n beyond the measured limit (with ``check_precision``),
    or weights larger than half of this machine's memory."""
    tasks.check_case(case)
    tasks.check_n(n)
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}; accepted: one of {DTYPES}")
    layers = default_layers(case) if layers is None else layers
    if case == 5 and layers == 1:
        raise ValueError(
            "case 5 with one hard-attention layer has no construction: Theorem 3.6 proves none "
            "exists for n >= 4 (leftmost, rightmost or average); use layers=2"
        )
    if layers != default_layers(case):
        raise ValueError(
            f"layers={layers} for case {case}; accepted: {default_layers(case)} (the paper's "
            "construction)"
        )
    limit = EXACT_UP_TO.get((case, layers, dtype))
    if check_precision and limit is not None and n > limit:
        other = [str(d).removeprefix("torch.") + f" (n <= {EXACT_UP_TO[(case, layers, d)]})"
                 for d in DTYPES if d != dtype and (case, layers, d) in EXACT_UP_TO]
        raise ValueError(
            f"n={n} is beyond the largest n measured exact for case {case} in "
            f"{str(dtype).removeprefix('torch.')}: accepted n <= {limit} "
            f"(experiments/precision/limits.md); other dtypes: {', '.join(other) or 'none'}; "
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
    d_model = 7 if case == 5 else 4
    rows = tasks.d_vocab(case, n) + tasks.seq_len(case, n) + n  # W_E, W_pos, W_U
    return rows * d_model * torch.finfo(dtype).bits // 8


def memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return None


def _load_limits() -> None:
    try:
        text = resources.files("interp.core").joinpath("precision_limits.json").read_text()
    except FileNotFoundError:
        warnings.warn("interp/core/precision_limits.json is missing: build() cannot check precision")
        return
    for row in json.loads(text):
        dtype = {"float32": torch.float32, "float64": torch.float64}[row["dtype"]]
        EXACT_UP_TO[(row["case"], row["layers"], dtype)] = row["exact_up_to"]


_load_limits()
