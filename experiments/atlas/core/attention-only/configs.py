"""The atlas's core grid, attention-only (written by experiments/atlas/grid.py; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grid  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = grid.configs('core', 'attention-only')
LAYOUT = TableLayout(**grid.layout_args('core', 'attention-only'))
