"""Close call (DESIGN.md section 6.3): combination 'c1' on 3 screening cells with seeds 5-9
(written by experiments/readings/screen/design.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import design  # noqa: E402
from interp.sweeps import TableLayout  # noqa: E402

CELLS = [(4, 100, 1, 'learned', 16), (1, 100, 1, 'learned', 16), (5, 2, 1, 'learned', 16)]
CONFIGS = design.configs('c1', cells=CELLS, seeds=design.CLOSE_CALL_SEEDS)
LAYOUT = TableLayout(**design.LAYOUT_ARGS, title="Close call: c1 on 3 cells, seeds 5-9 (max/avg over 5 seeds)")
