"""Issue 51's retraining, part attention-only (written by experiments/atlas/geometry.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import geometry  # noqa: E402
import grid  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = geometry.retrain_configs('attention-only')
LAYOUT = TableLayout(**grid.layout_args("core", 'attention-only'))
