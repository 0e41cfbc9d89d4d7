"""The formation study's discovery set (DESIGN.md; written by experiments/formation/design.py --write-folders)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs('discovery')
LAYOUT = TableLayout(rows=("case", "n"), column="d_token", title="Formation study, discovery set: accuracy (%)")
