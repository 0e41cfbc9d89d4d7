"""Issue 53's extra seeds, stage 'f14-table1-s5' (declared in experiments/paper-check/stages.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import stages  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = stages.configs("f14-table1-s5")
LAYOUT = TableLayout(**stages.layout("f14-table1-s5"))
