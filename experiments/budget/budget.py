"""When each seed of the step-budget probe left the chance plateau (``configs.py`` says why).

    .venv/bin/python experiments/budget/budget.py      # writes experiments/budget/budget.md

Per seed: test accuracy after the paper's 10,000 steps (the same run in the full tables as
today's code trains them, experiments/bench/tables-cpu, whose store is local) and after up to
40,000 here; the first logged step whose training loss is below PLATEAU x ln(n) (chance is
ln n); and whether the logged losses of the first 10,000 steps equal the 10,000-step run's bit
for bit (same seed, data and init: they should, on the same machine and MKL mode).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEN_K = 10_000
PLATEAU = 0.9  # "left the plateau": training loss below 0.9 ln n (chance is ln n)
KEYS = ["case", "n", "n_layers", "pos_embed", "d_token", "seed"]


def _read(path: Path):
    from interp.sweeps import store

    if not path.is_file():
        return None
    df = store.read(path)
    return df[df.status == "ok"] if not df.empty else df


def left_plateau(curve: list, n: int) -> int | None:
    """The first logged step whose loss is below PLATEAU x ln(n), or None."""
    return next((int(s) for s, loss in curve if loss < PLATEAU * math.log(n)), None)


def short_runs(cells) -> dict:
    """The 10,000-step runs of these cells from the tables-cpu stores: key -> row."""
    out = {}
    for table in ("table1", "table2"):
        df = _read(HERE.parent / "bench" / "tables-cpu" / table / "results" / "store.sqlite")
        if df is None or df.empty:
            continue
        for _, r in df.iterrows():
            key = tuple(r[k] for k in KEYS)
            if key[:5] in cells and int(r["max_steps"]) == TEN_K:
                out[key] = r
    return out


def main() -> str:
    sys.path.insert(0, str(HERE))
    import configs

    df = _read(HERE / "results" / "store.sqlite")
    if df is None or df.empty:
        raise SystemExit("experiments/budget has no finished runs; run `interp sweep experiments/budget` first")
    short = short_runs(set(configs.CELLS))
    lines = ["| case | n | layers | PE | d_token | seed | acc. at 10,000 (%) | acc. here (%) | steps here "
             "| left the plateau at step | first 10,000 steps' losses equal |",
             "|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|---|"]
    per_cell = {}
    for _, r in df.sort_values(KEYS).iterrows():
        key = tuple(r[k] for k in KEYS)
        s = short.get(key)
        left = left_plateau(r["curve"], int(r["n"]))
        if s is None:
            acc10, same = "-", "no 10,000-step run here"
        else:
            acc10 = f"{100 * float(s['accuracy']):.2f}"
            a = [(int(t), v) for t, v in r["curve"] if t <= TEN_K]
            b = [(int(t), v) for t, v in s["curve"] if t <= TEN_K]
            same = "yes" if a == b else f"no ({sum(x != y for x, y in zip(a, b))} of {len(b)} differ)"
        lines.append(f"| {r['case']} | {r['n']} | {r['n_layers']} | {r['pos_embed']} | {r['d_token']} | "
                     f"{r['seed']} | {acc10} | {100 * float(r['accuracy']):.2f} | {int(r['steps'])} | "
                     f"{left if left is not None else 'never'} | {same} |")
        c = per_cell.setdefault(key[:5], [0, 0, 0])
        c[0] += 1
        c[1] += left is not None and left <= TEN_K
        c[2] += left is not None
    summary = ["| cell (case, n, layers, PE, d_token) | seeds | left by step 10,000 | left by the end |",
               "|---|--:|--:|--:|"]
    summary += [f"| {k} | {a} | {b} | {c} |" for k, (a, b, c) in per_cell.items()]
    text = ("# The step-budget probe: the paper's protocol, 40,000 steps\n\n"
            "Written by `experiments/budget/budget.py` from `experiments/budget`'s store "
            f"(`configs.py` says why). 'Left the plateau': a logged training loss below {PLATEAU} ln n "
            "(chance is ln n; losses are logged every 50 steps).\n\n"
            + "\n".join(summary) + "\n\n" + "\n".join(lines) + "\n")
    (HERE / "budget.md").write_text(text)
    print(text)
    return text


if __name__ == "__main__":
    main()
