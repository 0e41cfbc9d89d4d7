"""Issue 42's retraining, part attention-only-small (written by experiments/atlas/relabel.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grid  # noqa: E402
import relabel  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = relabel.retrain_configs('attention-only-small')
LAYOUT = TableLayout(**grid.layout_args("core", 'attention-only'))
