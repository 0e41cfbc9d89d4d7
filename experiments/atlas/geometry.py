"""The core atlas re-read for the code's geometry (issue 51, item 3; PREDICTIONS-geometry.md).

    .venv/bin/python experiments/atlas/geometry.py --write-folders   # the sweep folders below
    bash experiments/atlas/geometry.sh                               # retrain, then measure

The checkpoints of the core atlas are not kept. The runs are deterministic on one kind of CPU
(a seed trained alone or stacked with others gives the same bits, ``interp.training.trainer``),
so ``geometry.sh`` trains again only the successful lookups of ``core-atlas-2level/atlas.csv``
(:func:`retrain_configs`; sweep folders ``geometry/<part>/``, into
``geometry/results/store.sqlite``), then ``interp atlas --das --geometry`` measures them into
``core-atlas-geometry/`` with the committed rows as its cache (the code measures are reused
where the retrained accuracy matches; the geometry and the learned dimension are new).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "core-atlas-2level" / "atlas.csv"
#: the retraining's parts: (folder name, the grid's architecture)
PARTS = (("attention-only", "attention-only"), ("mlp-4x", "mlp-4x"))
LOOKUPS = ("lookup", "mirror")  # interp.inspect.studies.atlas_das.LOOKUPS


def lookups(atlas_csv=SOURCE) -> pd.DataFrame:
    """The successful lookups of the committed two-level atlas: the rows item 3 measures."""
    df = pd.read_csv(atlas_csv, dtype={"name": str})
    return df[(df.outcome == "success") & df.routing.isin(LOOKUPS)]


def retrain_configs(part: str) -> list:
    """The TrainConfigs of one part (:data:`PARTS`): the core grid's runs that are successful lookups."""
    import sys

    sys.path.insert(0, str(HERE))
    import grid

    by = dict(PARTS)
    if part not in by:
        raise ValueError(f"part={part!r}; accepted: one of {list(by)}")
    names = set(lookups()["name"])
    return [c for c in grid.configs("core", by[part]) if c.name() in names]


CONFIGS_PY = '''"""Issue 51's retraining, part {part} (written by experiments/atlas/geometry.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import geometry  # noqa: E402
import grid  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = geometry.retrain_configs({part!r})
LAYOUT = TableLayout(**grid.layout_args("core", {arch!r}))
'''


def write_folders() -> list[Path]:
    out = []
    for part, arch in PARTS:
        folder = HERE / "geometry" / part
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "configs.py").write_text(CONFIGS_PY.format(part=part, arch=arch))
        out.append(folder)
    return out


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write-folders"]:
        for folder in write_folders():
            print(folder.relative_to(HERE.parents[1]), len(retrain_configs(folder.name)), "runs")
        raise SystemExit(0)
    raise SystemExit("usage: geometry.py --write-folders")
