"""Retrained seeds against the committed reports: do the same configs give the same seeds?

    .venv/bin/python experiments/analysis/retrained.py

The analysis cells were retrained from scratch (``interp sweep experiments/table1|table2 --where
...``, stores under ``experiments/tableN/results/``) in a later session than the one whose
per-seed accuracies ``experiments/tableN/report.md`` lists (its "Per cell" table). For every
retrained run this prints both accuracies and whether the seed's outcome (success >= 99%, failed
near chance, partial: ``interp.inspect.studies.analysis.classify``) is the same. Writes ``retrained.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

from interp.inspect.studies.analysis import classify
from interp.sweeps import store

HERE = Path(__file__).parent
ROOT = HERE.parent
TABLES = {"table1": ("case", "pos_embed", "d_token"), "table2": ("n", "n_layers", "d_token")}


def reported(table: str, folder: Path | None = None) -> dict:
    """(row fields..., seed) -> accuracy in % from the report's per-cell lines (the report in
    ``folder``, default experiments/<table>)."""
    out = {}
    for line in ((folder or ROOT / table) / "report.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 5 or not re.fullmatch(r"(\d+: [\d.]+(, )?)+", cells[4] if table == "table2" else cells[5]):
            continue
        key = tuple(cells[:3]) if table == "table2" else (cells[0], cells[1], cells[3])
        seeds = cells[4] if table == "table2" else cells[5]
        for part in seeds.split(", "):
            s, acc = part.split(": ")
            out[(*key, s)] = float(acc)
    return out


def main() -> None:
    lines = ["| table | cell | seed | reported % | retrained % | same outcome |", "|---|---|---|--:|--:|---|"]
    same = total = 0
    for table, fields in TABLES.items():
        path = ROOT / table / "results" / "store.sqlite"
        if not path.is_file():
            continue
        rep = reported(table)
        df = store.read(path)
        for _, r in df[df.status == "ok"].sort_values([*fields, "seed"]).iterrows():
            key = (*(str(r[f]) for f in fields), str(int(r.seed)))
            if key not in rep:
                continue
            old, new = rep[key] / 100, float(r.accuracy)
            ok = classify(old, int(r.n)) == classify(new, int(r.n))
            same, total = same + ok, total + 1
            lines.append(f"| {table} | {', '.join(f'{f} {v}' for f, v in zip(fields, key))} | "
                         f"{key[-1]} | {100 * old:.2f} | {100 * new:.2f} | {'yes' if ok else '**no**'} |")
    text = (f"# Retrained seeds vs the committed reports\n\nWritten by "
            f"`experiments/analysis/retrained.py`. {same} of {total} retrained seeds keep their "
            "outcome (success / partial / failed).\n\n" + "\n".join(lines) + "\n")
    (HERE / "retrained.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
