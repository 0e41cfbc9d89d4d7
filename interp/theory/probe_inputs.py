"""Inputs that exercise every comparison a construction makes (:class:`ProbeSet`).

Used by :mod:`interp.theory.precision` (least bits) and :mod:`interp.theory.temperature`
(least softmax beta): every target key t with f(t) = t + s mod n, so that every output value is
an answer, and keys ordered so that t's neighbours on the circle (t - 1, t + 1: the keys whose
scores are closest to t's) come before t, where a merged tie would win under leftmost
attention; plus random inputs (half permutations, half arbitrary functions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from torch import Tensor

from interp.core import tasks


@dataclass(frozen=True)
class ProbeSet:
    """Inputs that exercise every comparison a construction makes (see the module docstring).

    ``len(shifts) * targets`` structured inputs (target t, f(t) = t + s mod n; keys t - 1,
    t + 1 first and t last in the permuted cases) and ``n_random`` random inputs (half random
    permutations as in training, half arbitrary functions). The other values of f in the
    structured inputs are ``others``: "random" (uniform), or one adversarial value for all of
    them, at a fixed offset from the answer a on the circle: "perpendicular" (a + n/4),
    "opposite" (a + n/2), "neighbour" (a + 1). ``targets`` (default: all n) spreads that many
    target keys evenly over [n]. Iterating yields ``(tokens [b, pos], answers [b])`` chunks, the
    same ones every time.
    """

    case: int
    n: int
    shifts: tuple[int, ...] = (1,)
    n_random: int = 64
    seed: int = 0
    chunk: int = 256
    others: str = "random"
    targets: int | None = None

    OTHERS = ("random", "perpendicular", "opposite", "neighbour")

    def __post_init__(self):
        tasks.check_case(self.case), tasks.check_n(self.n)
        if self.others not in self.OTHERS:
            raise ValueError(f"others={self.others!r}; accepted: one of {self.OTHERS}")
        if self.targets is not None and not 1 <= self.targets:
            raise ValueError(f"targets={self.targets!r}; accepted: None (all) or an integer >= 1")
        if self.n_random < 0 or self.chunk < 1 or not self.shifts and not self.n_random:
            raise ValueError(f"shifts={self.shifts}, n_random={self.n_random}, chunk={self.chunk}: no inputs")

    @property
    def target_keys(self) -> Tensor:
        if self.targets is None or self.targets >= self.n:
            return torch.arange(self.n)
        return torch.linspace(0, self.n - 1, self.targets).round().long().unique()

    def __len__(self) -> int:
        return len(self.shifts) * len(self.target_keys) + self.n_random

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        n, m = self.n, len(self.shifts) * len(self.target_keys)
        for c, start in enumerate(range(0, m, self.chunk)):
            idx = torch.arange(start, min(m, start + self.chunk))
            yield self._structured(idx, torch.Generator().manual_seed(self.seed * 1_000_003 + c))
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + 999_983)
        for start in range(0, self.n_random, self.chunk):
            b = min(self.chunk, self.n_random - start)
            yield tasks.sample(self.case, n, b, generator=g, function="permutation" if start % 2 == 0 else "any")

    def _structured(self, idx: Tensor, g: torch.Generator) -> tuple[Tensor, Tensor]:
        n, b, keys_t = self.n, idx.shape[0], self.target_keys
        target = keys_t[idx % len(keys_t)]
        shift = torch.tensor(self.shifts)[idx // len(keys_t)]
        answer = (target + shift) % n
        if self.others == "random":
            f = torch.randint(0, n, (b, n), generator=g)
        else:
            off = {"perpendicular": max(1, round(n / 4)), "opposite": max(1, n // 2), "neighbour": 1}[self.others]
            f = ((answer + off) % n)[:, None].expand(b, n).clone()
        f[torch.arange(b), target] = answer
        if tasks.get(self.case).permuted:
            prio = torch.rand(b, n, generator=g)
            rows = torch.arange(b)
            prio[rows, (target - 1) % n] = -2.0
            prio[rows, (target + 1) % n] = -1.0
            prio[rows, target] = 2.0
            keys = prio.argsort(dim=1)
        else:
            keys = torch.arange(n).expand(b, n)
        values = f.gather(1, keys)
        return tasks.encode(self.case, keys, values, target), answer


def check_probes(model, probes) -> None:
    """A ValueError unless a :class:`ProbeSet` is of the model's case and n (its task,
    :func:`interp.core.tasks.of`); other iterables of (tokens, answers) pass."""
    if isinstance(probes, ProbeSet):
        tasks.of(model, case=probes.case, n=probes.n)
