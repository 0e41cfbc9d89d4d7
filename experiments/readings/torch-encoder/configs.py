"""Reading 'torch-encoder' of experiments/readings/readings.py (written by it; edit that file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import readings  # noqa: E402

CONFIGS = readings.configs('torch-encoder')
LAYOUT = readings.LAYOUT
