"""A sweep folder as data: ``configs.py`` declares ``CONFIGS`` and a :class:`TableLayout`;
loaded (:func:`interp.sweeps.loader.load`), it is a :class:`Sweep`.

``Layout``, this class's name until issue 45, still imports for one release with a
DeprecationWarning (:class:`interp.core.layouts.Layout` is a task's token layout)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path

CONFIGS_FILE = "configs.py"
PAPER_FILE = "paper.csv"


@dataclass(frozen=True)
class TableLayout:
    """How a sweep's runs form a table (a report's rows and columns).

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
            raise ValueError(f"TableLayout.rows={self.rows!r}; accepted: a tuple of config field names")
        object.__setattr__(self, "rows", tuple(self.rows))
        if not isinstance(self.column, str):
            raise ValueError(f"TableLayout.column={self.column!r}; accepted: one config field name")
        unknown = set(self.paper) - set(self.rows) - {self.column}
        if unknown:
            raise ValueError(
                f"TableLayout.paper names {sorted(unknown)}, which are not row or column fields "
                f"({list(self.rows) + [self.column]})"
            )


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep folder."""

    name: str
    root: Path
    configs: tuple  # of TrainConfig
    layout: TableLayout

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


def old_layout_name(stacklevel: int = 3) -> type:
    """:class:`TableLayout` under its old name ``Layout``, with a DeprecationWarning (one
    release; ``stacklevel`` points it at the importing line)."""
    warnings.warn("interp.sweeps.Layout is now interp.sweeps.TableLayout (Layout alone names a "
                  "task's token layout, interp.core.layouts.Layout); import TableLayout",
                  DeprecationWarning, stacklevel=stacklevel)
    return TableLayout


def old_name_getattr(module: str):
    """A module ``__getattr__`` that gives ``Layout`` with the warning (for the modules that
    configs.py files imported it from)."""

    def __getattr__(name: str):
        if name == "Layout":
            return old_layout_name()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


__getattr__ = old_name_getattr(__name__)
