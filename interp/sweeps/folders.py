"""A sweep folder as data: ``configs.py`` declares ``CONFIGS`` and a :class:`Layout`; loaded
(:func:`interp.sweeps.loader.load`), it is a :class:`Sweep`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

CONFIGS_FILE = "configs.py"
PAPER_FILE = "paper.csv"


@dataclass(frozen=True)
class Layout:
    """How a sweep's runs form a table.

    rows:   TrainConfig fields whose values pick a table row, in display order; rows appear in
            the order their first config appears in ``CONFIGS``.
    column: the TrainConfig field whose values pick a column group (e.g. ``"d_token"``).
    paper:  TrainConfig field -> ``paper.csv`` column, for every row field and the column
            field, to find the paper's max/avg for a cell. Other ``paper.csv`` columns
            (besides ``max`` and ``avg``) are shown as extra row labels (e.g. Table 1's Keys).
    title:  the report's heading.
    """

    rows: tuple[str, ...]
    column: str
    paper: dict = field(default_factory=dict)
    title: str = ""

    def __post_init__(self):
        if isinstance(self.rows, str) or not all(isinstance(r, str) for r in self.rows):
            raise ValueError(f"Layout.rows={self.rows!r}; accepted: a tuple of config field names")
        object.__setattr__(self, "rows", tuple(self.rows))
        if not isinstance(self.column, str):
            raise ValueError(f"Layout.column={self.column!r}; accepted: one config field name")
        unknown = set(self.paper) - set(self.rows) - {self.column}
        if unknown:
            raise ValueError(
                f"Layout.paper names {sorted(unknown)}, which are not row or column fields "
                f"({list(self.rows) + [self.column]})"
            )


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep folder."""

    name: str
    root: Path
    configs: tuple  # of TrainConfig
    layout: Layout

    @property
    def paper_csv(self) -> Path | None:
        p = self.root / PAPER_FILE
        return p if p.is_file() else None

    @property
    def default_store(self) -> Path:
        return self.root / "results" / "store.sqlite"


def group_key(config):
    """Configs with equal keys differ only in their seed and train as one ensemble."""
    return dataclasses.replace(config, seed=0)
