"""The width-convention screen judged by its rule (``../SCREEN-pe.md``): writes verdict.md.

    .venv/bin/python experiments/paper-check/screen-pe/judge.py          # verdict.md
    .venv/bin/python experiments/paper-check/screen-pe/judge.py --check  # exit 1 if verdict.md is stale

Reads the per-cell test of this folder's ``report.md`` (``interp report
experiments/paper-check/screen-pe``: Holm over its 5 cells) and applies prediction W1 and the
rule as SCREEN-pe.md states them: the verdict column, nothing else. Beside it (exploratory, read
after the verdict) the `add` arm's same cells from ``../check.md`` (attention-only, Table 1).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from interp.training.files import write_or_check

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _claims():
    """experiments/readings/claims.py (its Markdown table reader), loaded by path under its own name."""
    spec = importlib.util.spec_from_file_location("screen_pe_claims", ROOT / "experiments" / "readings" / "claims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


md_tables_of = _claims().md_tables_of

SCREENING, CONFIRMATION = (2, 4, 8), (16, 32)
OUT = HERE / "verdict.md"
COMMAND = ".venv/bin/python experiments/paper-check/screen-pe/judge.py"


def tested(text: str) -> dict[int, dict]:
    """d_token -> the row of the per-cell test table (the table with a ``verdict`` column)."""
    rows = [r for t in md_tables_of(text) for r in t if "verdict" in r and "d_token" in r["cell"]]
    return {int(r["cell"].rsplit("d_token ", 1)[1]): r for r in rows}


def add_arm() -> dict[int, dict]:
    """The `add` arm's case-1 learned-PE cells (check.md, attention-only, Table 1)."""
    section = (HERE.parent / "check.md").read_text().split("## attention-only, table1")[1].split("\n## ")[0]
    rows = [r for t in md_tables_of(section) for r in t if r.get("cell", "").startswith("case 1, learned PE")]
    return {int(r["cell"].rsplit("d_token ", 1)[1]): r for r in rows}


def verdict(rows: dict[int, dict]) -> tuple[str, str]:
    """(the W1 line, the rule's decision) from the verdict column."""
    inside = {d: rows[d]["verdict"] == "consistent" for d in (*SCREENING, *CONFIRMATION)}
    s = [d for d in SCREENING if inside[d]]
    c = [d for d in CONFIRMATION if inside[d]]
    holds_s, holds_c = len(s) >= 2, len(c) == len(CONFIRMATION)
    names = lambda ds: ", ".join(map(str, ds)) or "none"  # noqa: E731
    line = (f"under `concat` the paper is inside our seeds in {len(s)} of {len(SCREENING)} screening cells "
            f"(d_token {names(s)}) and {len(c)} of {len(CONFIRMATION)} confirmation cells (d_token {names(c)}); "
            f"W1 {'holds' if holds_s and holds_c else 'fails'}")
    if holds_s and holds_c:
        decision = "`concat` is named as the case-1 convention that explains the Table 1 disagreement"
    elif not holds_s:
        decision = "the width convention is ruled out as the explanation of the Table 1 disagreement"
    else:
        decision = "the convention explains some cells and breaks others: reported, not adopted"
    return line, decision


def render() -> str:
    rows = tested((HERE / "report.md").read_text())
    line, decision = verdict(rows)
    add = add_arm()
    out = ["# The width-convention screen: verdict", "",
           f"Written by `{COMMAND}` from `report.md` (the per-cell test, Holm over these 5 cells) by the",
           "rule of `../SCREEN-pe.md`.", "",
           "| W1 and the rule |", "|---|", f"| {line}: {decision} |", "",
           "Per cell, both arms (`add`: `../check.md`, attention-only, Table 1; read after the verdict,",
           "not part of the rule; its Holm family is Table 1's informative cells, not these 5):", "",
           "| d_token | role | `concat` N | `concat` at >= 99% | `concat` at chance | `concat` verdict | "
           "`add` N | `add` at >= 99% | `add` at chance | `add` verdict |", "|---" * 10 + "|"]
    for d in (*SCREENING, *CONFIRMATION):
        c, a = rows[d], add.get(d, {})
        role = "screening" if d in SCREENING else "confirmation"
        out.append(f"| {d} | {role} | {c['N']} | {c['ours at >= 99% (95% CI)']} | {c['ours at chance (95% CI)']} | "
                   f"{c['verdict']} | {a.get('N', '—')} | {a.get('ours at >= 99% (95% CI)', '—')} | "
                   f"{a.get('ours at chance (95% CI)', '—')} | {a.get('verdict', '—')} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    code, message = write_or_check(OUT, render(), argv, COMMAND)
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
