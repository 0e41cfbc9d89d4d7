"""table1 of the paper under combination 'c1' (written by experiments/readings/screen/design.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CONFIGS = design.configs('c1', cells=design.table_cells('table1'))
LAYOUT = TableLayout(**design.TABLE_LAYOUT_ARGS['table1'], title="table1 under combination c1")
