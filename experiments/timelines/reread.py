"""The first timeline study's T1-T4 read as what they measured (issue 52, item 5).

    .venv/bin/python experiments/timelines/reread.py            # -> findings/reread.md
    .venv/bin/python experiments/timelines/reread.py --check    # exit 1 if reread.md is stale

Recomputes, from the committed ``findings/timeline.csv`` and ``runs.csv`` (no model loaded),
what each of T1-T4's instruments could see: when the routing label switches on against when
the accuracy does, when the code label settles against the routing, how often the code
"settles" at step 0 because it reads ``unread`` from the start, and how far the T4 "early"
snapshot (10% of each run's own last step) sits apart between outcomes. Exploratory: none of
this was declared before the study ran. The timelines predate the measures' versions
(``measures_version`` is absent): the labels are as that code gave them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
FINDINGS = HERE / "findings"
OUT = FINDINGS / "reread.md"
ACC = 0.9


def stable_from(rows: pd.DataFrame, ok) -> int | None:
    """The first step from which ``ok`` (a boolean per snapshot) holds to the end."""
    flags = list(ok)
    if not flags or not flags[-1]:
        return None
    i = len(flags) - 1
    while i > 0 and flags[i - 1]:
        i -= 1
    return int(rows.step.iloc[i])


def per_success(tl: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    out = []
    for r in runs[runs.outcome == "success"].itertuples():
        rows = tl[tl.run == r.run].sort_values("step")
        acc_from = stable_from(rows, rows.acc >= ACC)
        first_code = rows.code.iloc[0]
        out.append(dict(run=r.run, routing_forms=r.routing_forms, code_settles=r.code_settles,
                        acc_from=acc_from, last=int(rows.step.iloc[-1]),
                        unread_from_start=first_code == "unread" and (rows.code == "unread").all()))
    return pd.DataFrame(out)


def markdown(tl: pd.DataFrame, runs: pd.DataFrame) -> str:
    s = per_success(tl, runs)
    formed = s[s.routing_forms.notna()]
    same_acc = int((formed.routing_forms == formed.acc_from).sum())
    at_last = int((formed.routing_forms == formed["last"]).sum())
    both = s[s.routing_forms.notna()]
    tie = int((both.code_settles == both.routing_forms).sum())
    at0 = int(((both.code_settles == 0) & both.unread_from_start).sum())
    early = []
    for r in runs.itertuples():  # study.py's early snapshot: the one nearest 10% of the run's last step
        steps = tl[tl.run == r.run].step
        early.append(int(steps.iloc[int((steps - 0.1 * r.last_step).abs().argmin())]))
    med = runs.assign(early=early).groupby("outcome").early.median()
    lines = [
        "# The first timeline study re-read (issue 52, item 5)", "",
        "Written by `.venv/bin/python experiments/timelines/reread.py` from `timeline.csv` and "
        "`runs.csv` here. Exploratory: read after the study, as the reviewer of issue 52 did.", "",
        "| what T1-T4 measured | count |", "|---|---|",
        f"| T1, T2: successful seeds | {len(s)} |",
        f"| T1: seeds whose routing label forms at all | {len(formed)} of {len(s)} |",
        f"| T1: routing forms at the snapshot from which accuracy stays >= {ACC} | {same_acc} of {len(formed)} |",
        f"| T1: routing forms only at the final snapshot | {at_last} of {len(formed)} |",
        f"| T2: the code settles at the snapshot where the routing forms | {tie} of {len(both)} |",
        f"| T2: of those, the code \"settles\" at step 0 because it reads `unread` throughout | {at0} of {len(both)} |",
        "| T4: median \"early\" snapshot step (nearest 10% of the run's own last step), by outcome | "
        + ", ".join(f"{k} {v:g}" for k, v in med.items()) + " |", "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from interp.training.files import write_or_check

    from interp.inspect.studies.timelines import read_timeline

    text = markdown(read_timeline(FINDINGS / "timeline.csv"), pd.read_csv(FINDINGS / "runs.csv"))
    code, message = write_or_check(OUT, text, argv, "experiments/timelines/reread.py")
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
