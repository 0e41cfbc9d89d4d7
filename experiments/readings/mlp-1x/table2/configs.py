"""Table 2 of the paper under reading 'mlp-1x' (written by experiments/readings/readings.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import readings  # noqa: E402

CONFIGS = readings.table_configs('mlp-1x', 'table2')
LAYOUT = readings.table_layout('table2')
