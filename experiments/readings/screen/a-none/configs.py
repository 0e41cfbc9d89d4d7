"""Combination 'a-none' of experiments/readings/screen/design.py (written by it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs('a-none')
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Screening cells under combination a-none (max/avg over 5 seeds)")
