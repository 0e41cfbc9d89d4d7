"""Combination 'f06' of experiments/readings/screen/design.py (written by it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs('f06')
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Screening cells under combination f06 (max/avg over 5 seeds)")
