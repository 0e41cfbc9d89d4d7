"""Every count the analysis README quotes, computed from the per-seed CSVs in this folder.

    .venv/bin/python experiments/analysis/findings.py

For each report (``<name>.csv``, written by ``interp analyze-sweep``) and each group in it: the
seeds by outcome (success >= 99%, failed near chance, partial), the successful seeds by
mechanism (``interp.inspect.mechanism.labels.mechanism``), and how many successful seeds pass the circuit
circle test (``interp.inspect.tools.geometry``) in QK and in OV; then the totals. Writes ``findings.md``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
MECHANISMS = ("construction", "inverted", "mirror", "none")
COLUMNS = ("seeds", "success", "partial", "failed", *MECHANISMS, "QK circle", "OV circle",
           "circle n/a", "QK circle, any seed")


def counts(d: pd.DataFrame) -> dict:
    ok = d[d.outcome == "success"]
    out = {"seeds": len(d), **{o: int((d.outcome == o).sum()) for o in ("success", "partial", "failed")}}
    out.update({m: int((ok.mechanism == m).sum()) for m in MECHANISMS})
    for col, name in (("qk_circle", "QK circle"), ("ov_circle", "OV circle")):
        known = ok[col].dropna() if col in ok else pd.Series([], dtype=object)
        out[name] = int(known.astype(str).str.lower().eq("true").sum())
    out["circle n/a"] = int(ok["qk_circle"].isna().sum()) if "qk_circle" in ok else len(ok)
    out["QK circle, any seed"] = int(d["qk_circle"].astype(str).str.lower().eq("true").sum())
    return out


def main() -> None:
    rows = []
    for csv in sorted(HERE.glob("*.csv")):
        if csv.stem.startswith(("geometry", "table2-mlp-seeds")):
            continue
        d = pd.read_csv(csv)
        if "mechanism" not in d or "group" not in d:
            continue
        for group, g in d.groupby("group", sort=False):
            rows.append({"report": csv.stem, "group": group, **counts(g)})
    table = pd.DataFrame(rows)
    total = {"report": "**all**", "group": "", **{c: int(table[c].sum()) for c in COLUMNS}}
    table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    head = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    body = "\n".join("| " + " | ".join(str(v) for v in r) + " |" for r in table.values)
    (HERE / "findings.md").write_text(
        "# Counts behind the analysis README\n\nWritten by `experiments/analysis/findings.py` from "
        "the per-seed CSVs here. Mechanism and circle columns count successful seeds only (the last "
        "column: every seed of the group); `circle n/a`: successful seeds at n < 4, where the "
        "circle test does not apply.\n\n"
        + head + body + "\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
