"""Table 1 of the paper under reading 'torch-encoder' (written by experiments/readings/readings.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import readings  # noqa: E402

CONFIGS = readings.table_configs('torch-encoder', 'table1')
LAYOUT = readings.table_layout('table1')
