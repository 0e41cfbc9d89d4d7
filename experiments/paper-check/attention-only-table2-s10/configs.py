"""Issue 53's extra seeds, stage 'attention-only-table2-s10' (declared in experiments/paper-check/stages.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import stages  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = stages.configs("attention-only-table2-s10")
LAYOUT = TableLayout(**stages.layout("attention-only-table2-s10"))
