"""The precision limits have one source, ``interp/core/precision_limits.json``: the table that
docs/constructions.md shows is that file's, row for row (issue 45's remainder)."""

import json
from pathlib import Path

from interp.core import limits

ROOT = Path(__file__).resolve().parents[2]


def test_docs_quote_the_json_row_for_row():
    rows = json.loads((ROOT / "interp" / "core" / "precision_limits.json").read_text())
    table = limits.limits_table()
    assert len(table.splitlines()) == 2 + len(rows)
    for r in rows:  # read back from the JSON here, not from the table's own function
        assert f"| {r['case']} | {r['layers']} | {r['dtype']} | {r['exact_up_to']} |" in table
    assert table in (ROOT / "docs" / "constructions.md").read_text()
    assert len({(r["case"], r["dtype"]) for r in rows}) == len(rows)  # no construction twice
