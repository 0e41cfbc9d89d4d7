"""Combination 'f11' of experiments/readings/screen/design.py (written by it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs('f11')
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Screening cells under combination f11 (max/avg over 5 seeds)")
