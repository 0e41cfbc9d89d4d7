"""The formation study's discovery set (DESIGN.md; written by experiments/formation/design.py --write-folders)."""

import importlib.util
from pathlib import Path

from interp.sweeps import TableLayout

# design.py by its path, under a name of its own (another folder has a design.py too)
_spec = importlib.util.spec_from_file_location("formation_design", Path(__file__).resolve().parents[1] / "design.py")
design = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(design)

CONFIGS = design.configs('discovery')
LAYOUT = TableLayout(rows=("case", "n"), column="d_token", title="Formation study, discovery set: accuracy (%)")
