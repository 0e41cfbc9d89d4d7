"""Every count the guides quote about the tables, the readings, the step budget, the speed and the
mechanism atlas, recomputed from committed files.

    .venv/bin/python experiments/readings/claims.py           # one line per claim: key, text, pages
    .venv/bin/python experiments/readings/claims.py --check   # exit 1 naming each claim a page lacks

Each claim is a piece of text computed here from committed files (``interp report``'s
``report.md``, ``seeds.csv``, ``budget.md``, the analysis CSVs, the benchmark tables); the pages
named beside it quote that text verbatim (whitespace aside), with the claim's key next to it.
``--check`` fails when a committed file changes and a page still quotes the old numbers;
``tests/cli/test_doc_claims.py`` runs it and recomputes issue 28's counts (item 5) on its own.
Keys for that item: a = ``a``, ``a-<reading>``; b = ``t2``, ``t2-mlp-4x``, ``t2-gain``;
c = ``c``, ``c-<case>``; d = ``d``, ``d-committed``, ``d-mlp-4x``; e = ``e``, ``e-ov``, ``e-any``.

Sources: the attention-only tables as today's code trains them are
``experiments/bench/tables-cpu/`` (the committed ``experiments/table2/report.md`` is from earlier
code); ``mlp-4x``'s full tables (the chosen reading before issue 28's gate) are
``experiments/readings/mlp-4x/table{1,2}/report.md``, ``f14``'s (since) ``screen/f14/table{1,2}/report.md``;
the readings' diagnostic cells are ``seeds.csv`` (written by ``score.py``).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments"
TODAY = EXP / "bench" / "tables-cpu"  # the attention-only tables as today's code trains them
RETIME = EXP / "bench" / "tables-cpu-2"  # the same, retrained on another CPU (issue 27's re-timing)
RETIME_F14 = EXP / "bench" / "tables-f14"  # both tables under the chosen reading f14, re-timed
MLP4X = EXP / "readings" / "mlp-4x"
SCREEN = EXP / "readings" / "screen"  # issue 28's screen; its gate's choice replaced mlp-4x
GUIDE, READINGS_README, PERFORMANCE = "docs/paper-tables.md", "experiments/readings/README.md", "docs/performance.md"
LOOKING_INSIDE = "docs/looking-inside.md"
ATLAS, ATLAS_README = EXP / "atlas" / "core-atlas", "experiments/atlas/README.md"  # issue 29's core grid
BEYOND = "docs/beyond-the-paper.md"
BUDGET_README, ANALYSIS_README = "experiments/budget/README.md", "experiments/analysis/README.md"
SUCCESS = 99.0  # a seed "learns" at >= 99% (interp.inspect.studies.analysis's success threshold)
READINGS = {"attention-only": "0", "mlp-1x": "d_model", "mlp-4x": "4 d_model", "torch-encoder": "2048"}
ONE_LAYER_CELLS = (("2", "16"), ("5", "32"), ("10", "32"))  # Table 2's one-layer diagnostic cells (n, d_token)
ANALYSED = ("table1-case2-d4", "table1-case2-d8", "table1-case3-d4", "table1-case3-d8")


class Claim(NamedTuple):
    key: str
    text: str
    where: tuple[str, ...]  # repo-relative pages that quote ``text``


# --- reading committed files -----------------------------------------------------------------

def md_tables(path: Path) -> list[list[dict]]:
    """Every pipe table of a Markdown file, as rows keyed by its header."""
    return md_tables_of(path.read_text())


def md_tables_text(text: str) -> list[dict]:
    """Every row of every pipe table of a piece of Markdown, keyed by its table's header."""
    return [row for table in md_tables_of(text) for row in table]


def md_tables_of(text: str) -> list[list[dict]]:
    tables, header, rows = [], None, []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                rows.append(dict(zip(header, cells)))
        elif header is not None:
            tables.append(rows)
            header, rows = None, []
    return tables


def read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines()))


def per_seed(report: Path) -> dict[tuple, list[float]]:
    """A report's "Per cell" lines: (row fields..., d_token) as written -> per-seed accuracies (%)."""
    column, out = "per-seed accuracy (seed: %)", {}
    for table in md_tables(report):
        for row in table:
            if row.get(column, "—") == "—":
                continue
            fields = list(row)[:list(row).index(column) - 1]  # the fields before "runs"
            out[tuple(row[f] for f in fields)] = [float(p.split(": ")[1]) for p in row[column].split(", ")]
    return out


def within_5(report: Path) -> tuple[int, int, int]:
    """(maxima, means, cells) within 5 points of the paper: the report's own summary line."""
    m = re.search(r"(\d+) of (\d+) maxima and (\d+) of \d+ averages are within 5 points", report.read_text())
    return int(m[1]), int(m[3]), int(m[2])


def seeds_csv() -> dict[tuple, list[float]]:
    """seeds.csv: (reading, n, n_layers, d_token) of case 5 -> accuracies (%) in seed order."""
    out: dict[tuple, list[float]] = {}
    for r in sorted(read_csv(EXP / "readings" / "seeds.csv"), key=lambda r: int(r["seed"])):
        if r["case"] == "5":
            out.setdefault((r["reading"], r["n"], r["n_layers"], r["d_token"]), []).append(float(r["accuracy_pct"]))
    return out


def table2_paper_max() -> dict[tuple, str]:
    return {(r["n"], r["layers"], r["d_token"]): r["max"] for r in read_csv(EXP / "table2" / "paper.csv")}


def span(values, digits: int = 2) -> str:
    values = [float(v) for v in values]
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def listed(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def fraction(report: Path) -> str:
    mx, avg, cells = within_5(report)
    return f"{mx} of {cells} maxima and {avg} of {cells} means within 5 points"


def learned(report: Path) -> str:
    """Table 2, two layers, n = 20, d_token 100: how many seeds reach 99%."""
    accs = per_seed(report)[("20", "2", "100")]
    return f"{sum(a >= SUCCESS for a in accs)} of {len(accs)} seeds at 99% or more"


# --- the claims ------------------------------------------------------------------------------

def table_claims() -> list[Claim]:
    """Within-5-point counts (b) and the attention-only Table 2 rows of today's code (d)."""
    t2, paper = per_seed(TODAY / "table2" / "report.md"), table2_paper_max()
    one = lambda n: [a for k, accs in t2.items() if k[:2] == (n, "1") for a in accs]  # noqa: E731
    n2_maxima = [max(accs) for k, accs in t2.items() if k[:2] == ("2", "1")]
    two = {k: accs for k, accs in t2.items() if k[1] == "2"}
    middle = [k for k in two if k[0] in ("5", "10")]
    close = sum(abs(max(two[k]) - float(paper[k])) <= 5 for k in middle)
    n2_two = [a for k, accs in two.items() if k[0] == "2" for a in accs]
    mx, avg, _ = within_5(TODAY / "table2" / "report.md")
    mx4, avg4, _ = within_5(MLP4X / "table2" / "report.md")
    return [
        Claim("t1", fraction(TODAY / "table1" / "report.md"), (GUIDE,)),
        Claim("t2", fraction(TODAY / "table2" / "report.md"), (GUIDE, READINGS_README)),
        Claim("t2-committed", fraction(EXP / "table2" / "report.md"), ("experiments/table2/README.md",)),
        Claim("t1-mlp-4x", fraction(MLP4X / "table1" / "report.md"), (GUIDE, READINGS_README)),
        Claim("t2-mlp-4x", fraction(MLP4X / "table2" / "report.md"), (GUIDE, READINGS_README)),
        Claim("t2-gain", f"{mx4 - mx:+d} maxima and {avg4 - avg:+d} means within 5 points", (GUIDE,)),
        Claim("t2-one-layer", f"n = 2: cell maxima {span(n2_maxima)}%; n = 5: seeds {span(one('5'))}% "
              f"(chance 20%); n = 10 and 20: no seed above {max(one('10')):.2f}% and {max(one('20')):.2f}%",
              (GUIDE,)),
        Claim("t2-two-layers", f"n = 2: {sum(a == 100 for a in n2_two)} of {len(n2_two)} seeds at 100.00%; "
              f"n = 5 and 10: {close} of {len(middle)} maxima within 5 points; n = 20 at d_token 16 and 32: "
              f"maxima {max(two[('20', '2', '16')]):.2f}% and {max(two[('20', '2', '32')]):.2f}% against the "
              f"paper's {paper[('20', '2', '16')]}% and {paper[('20', '2', '32')]}%", (GUIDE,)),
        Claim("d", f"the paper's max {paper[('20', '2', '100')]}%, ours {learned(TODAY / 'table2' / 'report.md')} "
              f"({span(two[('20', '2', '100')])}%)", (GUIDE,)),
        Claim("d-committed", "`experiments/table2/report.md` (earlier code): "
              + learned(EXP / "table2" / "report.md"), (GUIDE, "experiments/table2/README.md")),
        Claim("d-mlp-4x", f"under `mlp-4x`: {learned(MLP4X / 'table2' / 'report.md')}", (GUIDE,)),
    ]


def check_claims() -> list[Claim]:
    """Issue 53's test of the paper's numbers, cell by cell (``experiments/paper-check/check.md``,
    written by its ``check.py``): each reading's and table's headline, and ``f14`` where it was
    chosen (the screen's 14 cells) and where it was not (the 48 others)."""
    path = EXP / "paper-check" / "check.md"
    text = path.read_text()
    out = []
    for reading, key in (("attention-only", "ao"), ("f14", "f14")):
        for table in ("table1", "table2"):
            line = _found(rf"(?m)^- ({re.escape(reading)}, {table}: .*)$", text, path)[1]
            out.append(Claim(f"check-{key}-{table[-1]}", line, (GUIDE,)))
    chosen = next(t for t in md_tables(path) if t and "f14's cells" in t[0])
    for r in chosen:
        name = "chosen" if r["f14's cells"].startswith("screening") else "held-out"
        cells = r["f14's cells"]
        out.append(Claim(f"check-f14-{name}", f"{cells}: {r['informative']} informative, the paper outside in "
                         f"{r['the paper outside (Holm within the family)']}", (GUIDE,)))
    for key, pattern in (("check-extra", r"Extra seeds: ([^\n]*)\."), ("check-repro", r"section 5\): ([^\n]*)\.")):
        out.append(Claim(key, _found(pattern, text, path)[1], (GUIDE, "experiments/paper-check/README.md")))
    grouped = next(t for t in md_tables(path) if t and "which" in t[0] and "group" in t[0])
    for name in dict.fromkeys(r["group"] for r in grouped):
        counts = {r["reading"]: r["cells"] for r in grouped if r["group"] == name}
        out.append(Claim(f"check-group-{name[0]}", f"| {name} | {counts['attention-only']} | {counts['f14']} |",
                         (GUIDE,)))
    out.append(Claim("check-fisher", _found(r"5 seeds a side: ([^\n]*)\.", text, path)[1], (GUIDE,)))
    return out + [_stability_claim(path)]


def _stability_claim(path: Path) -> Claim:
    """check.md's stability table: of the cells with 15 seeds, how many change their decision
    between their first 10 and all 15, and in which direction."""
    rows = next(t for t in md_tables(path) if t and "stable (10 against 15)" in t[0])
    full = [r for r in rows if r["N"] == "15"]
    moved = [r for r in full if r["stable (10 against 15)"] != "yes"]
    inward = sum(r["on 10"] == "yes" and r["on all"] == "no" for r in moved)
    return Claim("check-stability", f"| {len(moved)} of {len(full)} cells with 15 seeds change their decision between "
                 f"their first 10 and all 15; {inward} of those {len(moved)} move from outside to consistent |",
                 (GUIDE,))


def retrained_claim() -> Claim:
    """Table 2 retrained by the code that trained the extra seeds (``paper-check/retrained/table2``)
    against ``bench/tables-cpu/table2``, whose seeds 0-4 ``check.py`` pools with the extra seeds."""
    path = EXP / "paper-check" / "retrained" / "table2" / "report.md"
    ours, theirs = per_seed(path), per_seed(TODAY / "table2" / "report.md")
    pairs = [(a, b) for cell, accs in theirs.items() for a, b in zip(accs, ours[cell], strict=True)]
    moved = sum((a >= SUCCESS) != (b >= SUCCESS) for a, b in pairs)
    code = _found(r"code ([0-9a-f]{7})[0-9a-f]*,", path.read_text(), path)[1]
    return Claim("retrained-t2", f"{sum(a == b for a, b in pairs)} of {len(pairs)} seeds of Table 2 retrained by "
                 f"the code of {code} end at the accuracy `bench/tables-cpu/table2/report.md` prints, to the "
                 f"printed digit; {moved} cross 99% between the two", ("experiments/paper-check/README.md",))


def screen_pe_claim() -> Claim:
    """Issue 53 item 5's screen of case 1's width convention: its rule's verdict
    (``experiments/paper-check/screen-pe/verdict.md``, written by its ``judge.py``)."""
    path = EXP / "paper-check" / "screen-pe" / "verdict.md"
    row = next(t for t in md_tables(path) if t and "W1 and the rule" in t[0])[0]["W1 and the rule"]
    return Claim("screen-pe", row, (GUIDE, "experiments/paper-check/SCREEN-pe.md"))


def screen_claims() -> list[Claim]:
    """Issue 28's screen: its gate on the 48 held-out cells (``scores.md``, written by its
    ``score.py``) and both tables under its choice ``f14`` (``f14/table{1,2}/report.md``)."""
    gate = next(t for t in md_tables(SCREEN / "scores.md") if t and "W (max + mean) of 96" in t[0])
    rows = {r["combination"].split(" ")[0]: r for r in gate}
    decision = re.search(r"^Decision: (.*)$", (SCREEN / "scores.md").read_text(), re.M)[1]

    def w(name):
        return f"W {rows[name]['W (max + mean) of 96']}, D {rows[name]['D']}"

    target = next(t for t in md_tables(SCREEN / "scores.md") if t and "shortfall" in t[0])
    f14 = SCREEN / "f14"
    return [
        Claim("gate", f"{decision} On the 48 held-out cells, `f14` {w('f14')}; mlp-4x retrained "
              f"(`a-every-4d`) {w('a-every-4d')}", (GUIDE,)),
        Claim("t1-f14", fraction(f14 / "table1" / "report.md"), (GUIDE,)),
        Claim("t2-f14", fraction(f14 / "table2" / "report.md"), (GUIDE,)),
        Claim("d-f14", f"under `f14`: {learned(f14 / 'table2' / 'report.md')}", (GUIDE,)),
        Claim("target-f14", "; ".join(f"{r['table']}: {r['maxima within 5']} maxima within 5 points against "
                                      f"the target's {r['target']}, short by {r['shortfall']}" for r in target),
              (GUIDE,)),
    ]


def cpu_claims() -> list[Claim]:
    """(cpu) The attention-only tables retrained by the same code on another CPU
    (``tables-cpu-2``, Intel Xeon) against ``tables-cpu``: seeds equal to the printed digit,
    seeds more than 0.5 points apart, the within-5 counts and Table 2's n = 20 d_token 100 cell."""
    out = []
    for key, table in (("cpu-t1", "table1"), ("cpu-t2", "table2")):
        a, b = per_seed(TODAY / table / "report.md"), per_seed(RETIME / table / "report.md")
        pairs = [(x, y) for k in a for x, y in zip(a[k], b[k])]
        same, far = sum(x == y for x, y in pairs), sum(abs(x - y) > 0.5 for x, y in pairs)
        out.append(Claim(key, f"{table[:5].title()} {table[5:]}: {same} of {len(pairs)} seeds equal to the printed "
                              f"digit, {far} more than 0.5 points apart; {fraction(RETIME / table / 'report.md')}",
                         (GUIDE,)))
    accs = per_seed(RETIME / "table2" / "report.md")[("20", "2", "100")]
    out.append(Claim("cpu-d", f"n = 20, two layers, d_token 100: {learned(RETIME / 'table2' / 'report.md')} "
                              f"({listed(accs)})", (GUIDE,)))
    return out


def mlp_claims() -> list[Claim]:
    """(a) Table 2's one-layer diagnostic cells reading by reading, seed by seed; `mlp-4x`'s full table."""
    from_csv, today = seeds_csv(), per_seed(TODAY / "table2" / "report.md")
    out, above_90 = [], {}
    for reading, width in READINGS.items():
        cells = [today[(n, "1", d)] if reading == "attention-only" else from_csv[(reading, n, "1", d)]
                 for n, d in ONE_LAYER_CELLS]
        above_90[reading] = sum(a > 90 for a in cells[-1])  # n = 10
        out.append(Claim(f"a-{reading}", f"| `{reading}` | {width} | " + " | ".join(map(listed, cells)) + " |",
                         (GUIDE,)))
    counts = ", ".join(f"`{r}` {k} of 5" for r, k in above_90.items())
    out.append(Claim("a", f"n = 10, d_token 32, seeds above 90%: {counts}", (GUIDE,)))

    full, paper = per_seed(MLP4X / "table2" / "report.md"), table2_paper_max()
    over_80 = [f"n = {k[0]} d_token {k[2]}" for k, accs in full.items() if k[1] == "1" and max(accs) > 80]
    top = {n: max(a for k, accs in full.items() if k[:2] == (n, "1") for a in accs) for n in ("10", "20")}
    out.append(Claim("a-mlp-4x-full", f"one-layer cells with a seed above 80%: {', '.join(over_80)}; no seed "
                     f"above {top['10']:.2f}% at n = 10 or {top['20']:.2f}% at n = 20, at any d_token", (GUIDE,)))
    stuck = [k for k, accs in full.items() if int(k[0]) >= 5 and max(accs) < 200 / int(k[0])
             and float(paper[k]) - max(accs) > 5]
    cells = "; ".join(f"n = {n}, {layers} layer{'s' * (layers == '2')}, d_token {d}" for n, layers, d in stuck)
    out.append(Claim("gaps-mlp-4x", f"{len(stuck)} cells where every seed stays below twice chance and the "
                     f"paper's max is more than 5 points higher ({cells}; the paper's maxima there "
                     f"{span(paper[k] for k in stuck)}%)", (READINGS_README,)))
    return out


def budget_claims() -> list[Claim]:
    """(c) The step-budget probe, seed by seed (``budget.md``, written by ``budget.py``)."""
    table = next(t for t in md_tables(EXP / "budget" / "budget.md") if t and "seed" in t[0])
    paper = {(r["case"], r["n"], r["layers"]): r for r in read_csv(EXP / "budget" / "paper.csv")}
    out = []
    for cell in dict.fromkeys((r["case"], r["n"], r["layers"], r["d_token"]) for r in table):
        rows = [r for r in table if (r["case"], r["n"], r["layers"], r["d_token"]) == cell]
        case, n, layers, d = cell
        left = [int(r["left the plateau at step"]) for r in rows if r["left the plateau at step"] != "never"]
        stay = [float(r["acc. here (%)"]) for r in rows if r["left the plateau at step"] == "never"]
        at_40k = [float(r["acc. here (%)"]) for r in rows]
        at_10k = max(float(r["acc. at 10,000 (%)"]) for r in rows)
        p = paper[(case, n, layers)]
        steps = f", steps {min(left)}-{max(left)}" if left else ""
        name = f"case {case}, n = {n}, {layers} layer{'s' * (layers != '1')}, d_token {d}"
        out.append(Claim(f"c-{case}", f"| {name} | {p['max']} / {p['avg']} | {at_10k:.2f} | {listed(at_40k)} | "
                         f"{len(left)} of {len(rows)}{steps} |", (GUIDE, BUDGET_README)))
        if case == "1":
            out.append(Claim("c", f"max {max(at_40k):.2f}% at 40,000 steps, {len(stay)} of {len(rows)} seeds never "
                             f"left the plateau ({span(stay)}%)", (GUIDE, BUDGET_README)))
    return out


def analysis_claims() -> list[Claim]:
    """(e) Table 1 cases 2 and 3 at d_token 4 and 8: does ``qk_diag`` follow the accuracy?"""
    rows = [(name, r) for name in ANALYSED for r in read_csv(EXP / "analysis" / f"{name}.csv")]
    acc = lambda r: 100 * float(r["accuracy"])  # noqa: E731
    off = [(n, r) for n, r in rows if abs(acc(r) - 100 * float(r["qk_diag"])) > 5]
    partial = [(n, r) for n, r in rows if r["outcome"] == "partial"]
    no_copy = [(n, r) for n, r in partial if float(r["ov_diag"]) < 0.99]
    any_f = max(abs(acc(r) - 100 * float(r["acc_any"])) for _, r in rows)
    off_text = "; ".join(f"`{n}` seed {r['seed']} (accuracy {acc(r):.1f}% at `qk_diag` {float(r['qk_diag']):.2f})"
                         for n, r in off)
    copy_text = "; ".join(f"`{n}` seed {r['seed']} ({float(r['ov_diag']):.2f})" for n, r in no_copy)
    return [
        Claim("e", f"`qk_diag` is within 5 points of the accuracy in {len(rows) - len(off)} of {len(rows)} "
              f"seeds; not in {off_text}", (ANALYSIS_README, LOOKING_INSIDE)),
        Claim("e-ov", f"`ov_diag` is 0.99 or more in {len(partial) - len(no_copy)} of {len(partial)} partial "
              f"seeds; not in {copy_text}", (ANALYSIS_README,)),
        Claim("e-any", f"`acc_any` differs from the accuracy by at most {any_f:.1f} points in all {len(rows)} seeds",
              (ANALYSIS_README,)),
    ]


def scores_claim() -> Claim:
    """The readings' scores (``scores.md``, written by ``score.py``)."""
    top = md_tables(EXP / "readings" / "scores.md")[0]
    scores = ", ".join(f"`{r['reading']}` {r['within 5 points']} of {r['of comparisons']}" for r in top)
    return Claim("scores", scores, (GUIDE, READINGS_README))


def bench_claims() -> list[Claim]:
    """The trainer against the plain TransformerLens loop (``results.md``, one CPU thread) and on an
    H100 (``results-cuda.md``); the tables' times (``tables-cpu/timing.md``, and re-timed:
    ``tables-cpu-2/timing.md``); ``torch.compile`` weighed (``compile-cpu.md``)."""
    cpu = md_tables(EXP / "bench" / "results.md")[0]  # the wall-time table
    cuda = {r["config"]: r for r in md_tables(EXP / "bench" / "results-cuda.md")[0]}
    plain = [r for r in cpu if "MLP" not in r["config"]]
    mlp = [r for r in cpu if "MLP" in r["config"]]
    x5 = "ours x5 ms/seed-step"

    def ratio(rows, column):
        return span((r[column].rstrip("x") for r in rows), 1)

    def gpu(rows):
        return span(float(r[x5]) / float(cuda[r["config"]][x5]) for r in rows if r["config"] in cuda)

    peak = re.search(r"all configs\): ([\d.]+ GiB)", (EXP / "bench" / "results.md").read_text())[1]
    cell = next(r for r in cpu if "issue 27" in r["config"])
    timing = (TODAY / "timing.md").read_text()
    runs, both = tables_time(TODAY)
    chosen = re.search(r"Both tables: ([\d.]+) CPU-minutes, so at best ([\d.]+) min wall on 2 cores against the "
                       r"(\d+)-minute target \(missed by ([\d.]+) min\)", timing)
    t1, t2 = runs["table1"], runs["table2"]
    return [
        Claim("bench-cpu", f"5 seeds stacked, per seed-step: {ratio(plain, 'ratio x5')}x the plain loop without "
              f"MLPs and {ratio(mlp, 'ratio x5')}x with them; one seed alone {ratio(plain, 'ratio x1')}x and "
              f"{ratio(mlp, 'ratio x1')}x; peak memory {peak}", (PERFORMANCE,)),
        Claim("bench-mlp-cell", f"{cell['ratio x5']} ({cell[x5]} vs {cell['reference ms/step']} ms per seed-step)",
              (PERFORMANCE,)),
        Claim("bench-gpu", f"{span((r[x5] for r in cuda.values()), 1)} ms per seed-step with 5 seeds stacked: "
              f"{gpu(plain)}x one CPU core's time without MLPs, {gpu(mlp)}x with them",
              (PERFORMANCE, "experiments/bench/README.md")),
        Claim("tables-time", f"Table 1's {t1['runs']} runs took {t1['wall (min)']} min and Table 2's {t2['runs']} "
              f"runs {t2['wall (min)']} min, {both[1]} min together (target {both[2]} min, {both[3]})",
              (PERFORMANCE,)),
        Claim("tables-time-mlp-4x", f"{chosen[1]} CPU-minutes, at best {chosen[2]} min on 2 cores (issue 27's "
              f"target 120 min, missed by {float(chosen[2]) - 120:.1f} min; timing.md's own, issue 16's "
              f"{chosen[3]} min, by {chosen[4]} min)", (PERFORMANCE,)),
        *retime_claims(), compile_claim(), f14_profile_claim(), levers_claim(),
    ]


def f14_profile_claim() -> Claim:
    """The 10x budget at the screen's choice f14 (``profile_mlp.py --cell f14`` -> ``profile-f14.md``)."""
    q = {r["quantity"]: r["value"] for r in md_tables(EXP / "bench" / "profile-f14.md")[1]}
    ours = next(v for k, v in q.items() if k.startswith("fast engine"))
    fixed = next(v for k, v in q.items() if k.startswith("the same step at batch"))
    return Claim("bench-f14", f"{ours.split(' (ratio ')[1].rstrip(')')} ({ours.split(' ')[0]} vs "
                 f"{q['plain loop, ms per step']} ms per seed-step); {fixed.split(' ')[0]} ms of it does not "
                 f"shrink with the batch; 10x needs {q['10x needs, ms per seed-step']} ms", (PERFORMANCE,))


def _found(pattern: str, text: str, path: Path) -> re.Match:
    """``re.search`` that names the file and the pattern when a format changed."""
    m = re.search(pattern, text)
    if m is None:
        raise ValueError(f"{path}: no match for {pattern!r}; was the file's format changed?")
    return m


def levers_claim() -> Claim:
    """The bit-identical levers and the bits-fixed kernels at f14 (``step_levers.py`` -> ``step-levers.md``)."""
    path = EXP / "bench" / "step-levers.md"
    text = path.read_text()
    same = _found(r"at the end: \*\*(yes|NO)\*\*", text, path)[1]
    load = _found(r"Load average at the start \(1/5/15 min\): ([\d.]+) /", text, path)[1]
    levers, kernels = md_tables(path)
    full = next(r for r in levers if r["batch"] == "256")  # the cell's batch (f14's, the paper's)
    fixed = next(r for r in kernels if r["pass"] == "together")
    return Claim("bench-levers", f"equal bit for bit: {same}; at batch 256, {full['today, ms per seed-step']} "
                 f"vs {full['both levers']} ms per seed-step (median and range of the blocks; load {load} at "
                 f"the start), {full['saved (medians)'].split(' ')[1].strip('()')} saved; the passes whose "
                 f"kernels fix the bits take {fixed['ms per seed-step']} ms per seed-step alone",
                 (PERFORMANCE, "experiments/bench/README.md"))


def tables_time(folder: Path) -> tuple[dict, re.Match]:
    """A ``tables_cpu.py`` timing.md: its per-table rows and the both-tables line (wall, target, miss)."""
    text = (folder / "timing.md").read_text()
    both = re.search(r"Both tables: ([\d.]+) min wall against the (\d+)-minute target \((met|missed by [\d.]+ min)\)",
                     text)
    return {r["table"]: r for r in md_tables(folder / "timing.md")[0]}, both


def retime_claims() -> list[Claim]:
    """The attention-only tables re-timed on idle cores (``tables-cpu-2/timing.md``)."""
    runs, both = tables_time(RETIME)
    cpu = sum(float(r["process CPU (min, all runs)"]) for r in runs.values())
    t1, t2 = runs["table1"], runs["table2"]
    return [Claim("tables-retime", f"Table 1's {t1['runs']} runs took {t1['wall (min)']} min and Table 2's "
                  f"{t2['runs']} runs {t2['wall (min)']} min, {both[1]} min together ({cpu:.1f} CPU-minutes; "
                  f"target {both[2]} min, {both[3]})", (PERFORMANCE,)), retime_f14_claim()]


def retime_f14_claim() -> Claim:
    """Both tables under ``f14`` re-timed on idle cores (``tables-f14/timing.md``, ``retime.sh``)."""
    runs, both = tables_time(RETIME_F14)
    machine = re.search(r"table1: ([^,]+),", (RETIME_F14 / "timing.md").read_text())[1]
    cpu = sum(float(r["process CPU (min, all runs)"]) for r in runs.values())
    loads = " and ".join(r["load at start / end (1 min)"].split(" / ")[0] for r in runs.values())
    t1, t2 = runs["table1"], runs["table2"]
    pairs = [(a, b) for t in ("table1", "table2")
             for cell, ours in per_seed(RETIME_F14 / t / "report.md").items()
             for a, b in zip(ours, per_seed(SCREEN / "f14" / t / "report.md")[cell], strict=True)]
    return Claim("tables-retime-f14", f"on 2 idle cores of an {machine} (load at the starts {loads}): Table 1's "
                 f"{t1['runs']} runs took {t1['wall (min)']} min and Table 2's {t2['runs']} runs {t2['wall (min)']} "
                 f"min, {both[1]} min together ({cpu:.1f} CPU-minutes; target {both[2]} min, {both[3]}); "
                 f"{sum(a == b for a, b in pairs)} of {len(pairs)} seeds end at the accuracy the screen's own "
                 "report prints for them", (PERFORMANCE,))


def compile_claim() -> Claim:
    """``torch.compile`` weighed for the two-layer MLP cell (``compile-cpu.md``)."""
    text = (EXP / "bench" / "compile-cpu.md").read_text()
    rows = {r["engine"]: r for r in md_tables(EXP / "bench" / "compile-cpu.md")[0]}
    secs = re.search(r"([\d.]+) s wall for the first call", text)[1]
    return Claim("bench-compile", f"plain loop {rows['plain']['ms per seed-step, wall']}, fast engine "
                 f"{rows['fast']['ms per seed-step, wall']} ({rows['fast']['x plain (wall)']}), the same model "
                 f"written densely {rows['dense']['ms per seed-step, wall']} eager and "
                 f"{rows['dense, compiled']['ms per seed-step, wall']} compiled by Inductor "
                 f"({rows['dense, compiled']['x plain (wall)']}; {secs} s to compile) ms per seed-step",
                 (PERFORMANCE,))


def atlas_claims() -> list[Claim]:
    """The core atlas's counts (``interp atlas`` -> ``core-atlas/atlas.md``, and ``atlas.csv`` for
    the seeds run below a theorem's line): seeds and outcomes, the successful seeds' mechanisms
    overall and per case group, layers, architecture and function, the cells where the
    construction is or is not what training finds, the theorems' width lines, and P1-P9."""
    from interp.inspect.studies.atlas import SUMMARY_LABELS  # the summary table's label columns
    from interp.inspect.studies.atlas_figures import theory_line  # the lines atlas.md counts against

    path = ATLAS / "atlas.md"
    text = path.read_text()
    tables = md_tables(path)
    summary = next(t for t in tables if t and "panel" in t[0] and "cells" in t[0])
    lines = next(t for t in tables if t and "theorem" in t[0])
    preds = next(t for t in tables if t and "prediction" in t[0])
    labels = (*SUMMARY_LABELS, "other labels")
    out = [Claim("atlas-seeds", _found(r"\d+ seeds in \d+ cells: [^.]*\.", text, path)[0], (ATLAS_README,))]

    def mix(rows) -> str:
        ok = sum(int(r["seeds successful"].split(" of ")[0]) for r in rows)
        run = sum(int(r["seeds successful"].split(" of ")[1]) for r in rows)
        by = ", ".join(f"{sum(int(r[k]) for r in rows)} {k}" for k in labels if sum(int(r[k]) for r in rows))
        mostly = sum(int(r["cells mostly construction"]) for r in rows)
        never = sum(int(r["cells with successes, none construction"]) for r in rows)
        won = sum(int(r["cells with a success"]) for r in rows)
        cells = sum(int(r["cells"]) for r in rows)
        return (f"{ok} of {run} seeds successful ({by or 'no label'}); {won} of {cells} cells with a success: "
                f"{mostly} mostly construction, {never} whose successes include no construction")

    out.append(Claim("atlas-all", mix(summary), (ATLAS_README, BEYOND)))
    part = lambda r, i: r["panel"].split(", ")[i]  # noqa: E731 - case, layers, architecture, function
    for arch in sorted({part(r, 2) for r in summary}):
        for layers in sorted({part(r, 1) for r in summary}):
            for cases in (("case 1", "case 4"), ("case 2", "case 3"), ("case 5",)):
                for function in ("permutation", "any"):
                    rows = [r for r in summary if (part(r, 2), part(r, 1), part(r, 3)) == (arch, layers, function)
                            and part(r, 0) in cases]
                    if rows:  # named by the cases it holds (the grid runs `any` for cases 1, 3 and 4 only)
                        held = [c for c in cases if any(part(r, 0) == c for r in rows)]
                        key = f"atlas-{'+'.join(c.split()[1] for c in held)}-{layers.split()[0]}l-{arch}-{function}"
                        pages = (ATLAS_README, BEYOND) if key == "atlas-5-2l-attention-only-permutation" else (ATLAS_README,)
                        out.append(Claim(key, f"{' and '.join(held)}, {layers}, {arch}, {function}: {mix(rows)}", pages))
    below = sum(int(r["successful seeds below the line"]) for r in lines)
    above = sum(int(r["at or above"]) for r in lines)
    run_below = 0
    for r in read_csv(ATLAS / "atlas.csv"):
        line = theory_line(int(r["case"]), int(r["n_layers"]), r["architecture"])
        run_below += line is not None and int(r["d_token"]) < line[1](int(r["n"]))
    at = sorted({int(r["n"]) for r in lines if int(r["successful seeds below the line"])})
    out.append(Claim("atlas-lines", f"{below} of {below + above} successful seeds in a panel with a theorem's "
                     f"line lie below it, of {run_below} seeds run below a line"
                     + (f"; those below are at n = {', '.join(map(str, at))}" if at else ""), (ATLAS_README,)))
    out.append(Claim("atlas-bind", _found(r"Theorems 3\.4 and 3\.7 at h = 1[^\n]*", text, path)[0], (ATLAS_README,)))
    for r in preds:
        key = _found(r"\*\*(P\d+)\*\*", r["prediction"], path)[1]
        out.append(Claim(f"atlas-{key}", f"| {r['prediction']} | {r['verdict']} | {r['numbers']} |", (ATLAS_README,)))
    return out


def level_claims() -> list[Claim]:
    """Issue 42's two levels: the calibration table's routing and circle rates (n 5-50) and the
    relabeled core atlas's answers (``core-atlas/routing.md``, ``core-atlas-2level/two-level.md``),
    each quoted as a table row of the atlas README."""
    out = []
    routing = EXP / "atlas" / "core-atlas" / "routing.md"
    for r in next(t for t in md_tables(routing) if t and "prediction" in t[0]):
        out.append(Claim(f"levels-{r['prediction']}", f"| {r['prediction']} | {r['verdict']} | {r['numbers']} |",
                         (ATLAS_README,)))
    two = EXP / "atlas" / "core-atlas-2level" / "two-level.md"
    if two.is_file():
        text = two.read_text()
        out.append(Claim("levels-seeds", _found(r"Seeds: \d+; successful: \d+; routed like the construction "
                                                r"\(lookup\): \d+\.", text, two)[0], (ATLAS_README,)))
        out.append(Claim("levels-same", _found(r"Retrained runs whose accuracy equals the committed atlas's: "
                                               r"\d+ of \d+\.", text, two)[0], (ATLAS_README,)))
        groups = [t for t in md_tables(two) if t and "group" in t[0]]
        for key, table in zip(("routing", "code", "key-code"), groups):  # two-level.md's order
            row = next(r for r in table if r["group"] == "**all**")
            pages = (ATLAS_README, BEYOND) if key in ("routing", "code") else (ATLAS_README,)
            out.append(Claim(f"levels-{key}", "| " + " | ".join(row.values()) + " |", pages))
        for r in next(t for t in md_tables(two) if t and "prediction" in t[0]):
            out.append(Claim(f"levels-{r['prediction']}", f"| {r['prediction']} | {r['verdict']} | {r['numbers']} |",
                             (ATLAS_README,)))
    das = EXP / "calibration" / "das.md"
    if das.is_file():  # the learned-rotation check (PREDICTIONS-das.md): its rows, verbatim
        tables = md_tables(das)
        for r in next(t for t in tables if t and "prediction" in t[0]):
            out.append(Claim(f"levels-{r['prediction'].split()[0]}", "| " + " | ".join(r.values()) + " |",
                             (ATLAS_README,)))
        for r in next(t for t in tables if t and "n" in t[0] and "code" in t[0]):
            out.append(Claim(f"levels-das-{r['n']}-{r['code']}", "| " + " | ".join(r.values()) + " |",
                             (ATLAS_README,)))
    return out


def timeline_claims() -> list[Claim]:
    """Issue 46's study: each prediction's row of ``experiments/timelines/findings/report.md``,
    quoted by the study's README."""
    report = EXP / "timelines" / "findings" / "report.md"
    if not report.is_file():
        return []
    text = report.read_text()
    out = [Claim("timeline-seeds", _found(r"Seeds with a timeline: \d+\.", text, report)[0],
                 ("experiments/timelines/README.md",))]
    for r in next(t for t in md_tables(report) if t and "prediction" in t[0]):
        out.append(Claim(f"timeline-{r['prediction']}", f"| {r['prediction']} | {r['verdict']} | {r['numbers']} |",
                         ("experiments/timelines/README.md",)))
    return out


def circle_init_claims() -> list[Claim]:
    """Issue 51 item 4: each prediction's row of ``experiments/circle-init/report.md``, quoted by
    beyond-the-paper.md."""
    report = EXP / "circle-init" / "report.md"
    if not report.is_file():
        return []
    rows = next(t for t in md_tables(report) if t and "prediction" in t[0])
    return [Claim(f"circle-init-{r['prediction'].split(':')[0]}", "| " + " | ".join(r.values()) + " |", (BEYOND,))
            for r in rows]


def geometry_claims() -> list[Claim]:
    """Issue 51 item 3: the atlas geometry predictions' rows and each figure's certified rate
    (``experiments/atlas/core-atlas-geometry/geometry.md``, written by ``geometry_report.py``)."""
    report = EXP / "atlas" / "core-atlas-geometry" / "geometry.md"
    if not report.is_file():
        return []
    tables = md_tables(report)
    preds = next(t for t in tables if t and "prediction" in t[0])
    figs = next(t for t in tables if t and "figure" in t[0] and "its test passes" in t[0])
    row = lambda r: "| " + " | ".join(r.values()) + " |"
    return ([Claim(f"geometry-{r['prediction'].split()[-1]}", row(r), (ATLAS_README, BEYOND)) for r in preds]
            + [Claim(f"geometry-{r['figure']}", row(r), (ATLAS_README,)) for r in figs])


def reread_claims() -> list[Claim]:
    """Issue 52 item 5: what the first timeline study's T1-T4 measured (``findings/reread.md``,
    written by ``reread.py``), quoted by the timelines README."""
    report = EXP / "timelines" / "findings" / "reread.md"
    if not report.is_file():
        return []
    rows = next(t for t in md_tables(report) if t and "what T1-T4 measured" in t[0])
    return [Claim(f"reread-{i}", "| " + " | ".join(r.values()) + " |", ("experiments/timelines/README.md",))
            for i, r in enumerate(rows, 1)]


def formation_claims() -> list[Claim]:
    """Issue 52 item 4: the formation study's held-out rows (a)-(d) and its causal test
    (``experiments/formation/report.md``, written by ``analysis.py``)."""
    report = EXP / "formation" / "report.md"
    if not report.is_file():
        return []
    text = report.read_text()
    held = text.split("## held-out set")[1].split("\n## ")[0]
    rows = [r for r in md_tables_text(held) if r.get("hypothesis", "").startswith("(")]
    where = ("experiments/timelines/README.md", BEYOND)
    out = [Claim(f"formation-{r['hypothesis'][1]}", "| " + " | ".join(r.values()) + " |", where)
           for r in rows if "sensitivity" not in r["hypothesis"]]
    tail = text.split("## The causal test")[1]
    causal = [r for r in md_tables_text(tail) if r.get("test", "").startswith("causal")]
    return out + [Claim("formation-causal", "| " + " | ".join(r.values()) + " |", where) for r in causal]


def claims() -> list[Claim]:
    return (table_claims() + check_claims() + [screen_pe_claim(), retrained_claim()] + screen_claims() + cpu_claims() + mlp_claims() + budget_claims() + analysis_claims() + [scores_claim()]
            + bench_claims() + atlas_claims() + level_claims() + timeline_claims() + circle_init_claims()
            + geometry_claims() + formation_claims() + reread_claims())


def flat(text: str) -> str:
    return " ".join(text.split())


def _read(page: str) -> str:
    path = ROOT / page
    return path.read_text() if path.is_file() else ""


def missing(read=_read) -> list[str]:
    """Each (claim, page) where the page does not quote the claim's text as computed now."""
    return [f"{c.key}: {page} does not say {c.text!r}" for c in claims() for page in c.where
            if flat(c.text) not in flat(read(page))]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for c in claims():
        print(f"{c.key}\t{c.text}\t[{', '.join(c.where)}]")
    if "--check" in argv:
        gaps = missing()
        for gap in gaps:
            print(gap, file=sys.stderr)
        return 1 if gaps else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
