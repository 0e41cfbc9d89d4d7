"""Issue 28's screen, scored as DESIGN.md declares it (sections 5-7): writes scores.md.

    .venv/bin/python experiments/readings/screen/score.py            # scores.md and seeds.csv
    .venv/bin/python experiments/readings/screen/score.py --check    # exit 1 if scores.md is stale
    .venv/bin/python experiments/readings/screen/score.py --plateau f01   # plateau-f01.md (needs the store)
    .venv/bin/python experiments/readings/screen/score.py --compose      # c1, c2 (both blocks complete)
    .venv/bin/python experiments/readings/screen/score.py --close-call   # <name>-s59 for the top two
    .venv/bin/python experiments/readings/screen/score.py --tables       # <choice>/table1, table2 (and mlp-4x's)
    .venv/bin/python experiments/readings/screen/score.py --incomplete f15 f16   # which still have runs to train

Per combination and screening cell: max and mean accuracy over its finished seeds against the
paper's max and avg; **W** = comparisons within 5 points (split into maxima and means), **D** =
mean |ours - paper| over them; ranked by ``design.rank`` (W, then D, then fewer factors off their
defaults). A cell with fewer than 5 finished seeds is left out of W and D and counted as
missing, so a combination is complete at 28 comparisons. Then:

* the **drift check**: ``f01``'s 9 one-layer cells are the same runs (same names) as mlp-4x's;
  every seed is compared with ``experiments/readings/seeds.csv`` (more than 0.5 points apart on
  any seed: the anchors are not comparable);
* the **main effects** over complete blocks (:func:`main_effects`): for each factor (and, with
  both blocks, each of the 7 interaction chains) the mean W (and D, and each cell's max and mean)
  over its ``+`` rows minus its ``-`` rows; active when |effect| exceeds Lenth's margin of error,
  t(0.975, m/3) x PSE over the m contrasts (both blocks: 15, t = 2.571 as declared; block 1
  alone: 7, resolution III, each main effect aliased as ``design.alias_chains`` prints);
* then what ``decide`` decides from these numbers: block M's levels and their differences from
  ``last-4d`` at defaults, the composed levels (``--compose`` writes ``c1``, ``c2``), the choice
  with its close call (``--close-call`` writes the seeds 5-9 folders; the replicates are scored
  when in the store), the confirmation on the 48 held-out cells (the chosen combination's and the
  retrained mlp-4x's, ``design.write_tables``) and the target counts.

Anchors of block M (DESIGN.md section 3), read from committed files: ``none`` = attention-only
(experiments/bench/tables-cpu reports), ``every-4d`` = mlp-4x and ``every-2048`` = torch-encoder
(experiments/readings/seeds.csv). Stores are local, so every seed of a combination found in the
store (screening cells with seeds 0-4 and 5-9, held-out cells with seeds 0-4) is also written to
``seeds.csv`` here (committed); a run in both keeps the committed numbers, and scores.md says how
many runs were trained twice and which differ (a fresh checkout has no store, so a sweep there
trains again what seeds.csv already holds).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "analysis"))
import decide  # noqa: E402
import design  # noqa: E402


def _readings_score():
    """experiments/readings/score.py (its name is this file's, so loaded by path)."""
    import importlib.util

    if "readings_score" not in sys.modules:
        spec = importlib.util.spec_from_file_location("readings_score", HERE.parent / "score.py")
        sys.modules["readings_score"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["readings_score"]

STORE = HERE / "results" / "store.sqlite"
SEEDS_CSV = HERE / "seeds.csv"
#: ``finished_at``: when the store that trained the run finished it (which training gave the
#: number; empty in rows committed before the column existed)
FIELDS = ["combination", "case", "n", "n_layers", "pos_embed", "d_token", "seed", "accuracy_pct", "steps", "run",
          "finished_at"]
ANCHORS = {"none": "attention-only", "every-4d": "mlp-4x", "every-2048": "torch-encoder"}
DRIFT_POINTS = 0.5


def _cell(r) -> tuple:
    return (int(r["case"]), int(r["n"]), int(r["n_layers"]), r["pos_embed"], int(r["d_token"]))


def stored_rows() -> dict[str, dict]:
    """Run name -> seed row (no combination: a run can belong to several) of every run some
    combination of the study declares, found finished in the store (as `interp report` counts it,
    DESIGN.md section 5: a failed run with its final accuracy), with the store's ``finished_at``:
    which training gave the number."""
    if not STORE.is_file():
        return {}
    from interp.sweeps import store

    df = store.read(STORE)
    done = {} if df.empty else {r["name"]: r for _, r in df[df.accuracy.notna()].iterrows()}
    out = {}
    for name in names():
        for c in _all_configs(name):
            if (r := done.get(c.name())) is not None:
                out[c.name()] = dict(case=c.case, n=c.n, n_layers=c.n_layers, pos_embed=c.pos_embed,
                                     d_token=c.d_token, seed=c.seed, accuracy_pct=repr(100 * float(r.accuracy)),
                                     steps=int(r.steps), run=c.name(), finished_at=str(r.finished_at))
    return out


def _same_training(committed: dict, stored: dict) -> bool:
    """Whether a committed row is the stored run's training: the same ``finished_at``; a row
    committed before seeds.csv had that column, when its numbers are the stored ones exactly."""
    if committed.get("finished_at"):
        return committed["finished_at"] == stored["finished_at"]
    return committed["accuracy_pct"] == stored["accuracy_pct"] and int(committed["steps"]) == int(stored["steps"])


def screened_rows() -> list[dict]:
    """Every seed of every combination (``names()``), by run name: the row committed in seeds.csv
    for that combination, else one committed for the same run under another combination (a
    composed copy of a candidate, or f01's one-layer runs, which are mlp-4x's), else the store's.
    A run committed and stored keeps its committed numbers: the choice is made on what was
    committed first, and a store is local (a fresh checkout starts without one), so a run can be
    trained twice; :func:`trained_twice` compares the second training, which is never scored."""
    saved, by_run = {}, {}
    for r in _read_csv(SEEDS_CSV):
        saved[(r["combination"], r["run"])] = r
        by_run.setdefault(r["run"], r)
    stored = stored_rows()
    rows = []
    for name in names():
        for c in _all_configs(name):
            run = c.name()
            r = saved.get((name, run)) or by_run.get(run) or stored.get(run)
            if r is None:
                continue
            row = {**r, "combination": name}
            if run in stored and not row.get("finished_at") and _same_training(row, stored[run]):
                row["finished_at"] = stored[run]["finished_at"]  # committed before the column existed
            rows.append(row)
    order, cells = names(), design.SCREENING + design.held_out()
    return sorted(rows, key=lambda r: (order.index(r["combination"]), int(r["seed"]) not in design.SEEDS,
                                       cells.index(_cell(r)), int(r["seed"])))


def trained_twice() -> list[str]:
    """Runs committed in seeds.csv from one training and found in this store from another (a
    fresh checkout retrains what it sweeps; told apart by ``finished_at``): how many, how many
    give the same accuracy to 0.01 points, and every one more than :data:`DRIFT_POINTS` apart (a
    different CPU can round differently; the committed number is the one scored)."""
    committed = {}
    for r in _read_csv(SEEDS_CSV):
        committed.setdefault(r["run"], r)
    both = [(run, float(committed[run]["accuracy_pct"]), float(r["accuracy_pct"]))
            for run, r in stored_rows().items() if run in committed and not _same_training(committed[run], r)]
    if not both:
        return ["No committed run was trained again into this store."]
    same = sum(abs(a - b) < 0.005 for _, a, b in both)
    far = [f"- {run}: {a:.2f} committed, {b:.2f} here" for run, a, b in both if abs(a - b) > DRIFT_POINTS]
    return [f"{len(both)} committed run{'s' if len(both) != 1 else ''} trained again into this store: {same} "
            f"with the same accuracy to 0.01 points, {len(far)} more than {DRIFT_POINTS} points apart "
            "(the committed numbers are the ones scored).", *far]


def _all_configs(name: str) -> list:
    """A combination's runs that this study scores: screening cells (seeds 0-4, and 5-9 for a
    close call) and held-out cells (seeds 0-4, the confirmation)."""
    return (design.configs(name) + design.configs(name, seeds=design.CLOSE_CALL_SEEDS)
            + design.configs(name, cells=design.held_out()))


def _runs(name: str) -> frozenset:
    """A combination's run names on the screening cells, seeds 0-4 (what it is, as models)."""
    return frozenset(c.name() for c in design.configs(name))


def names() -> list[str]:
    """The fraction's combinations, then every folder written with levels.csv (the anchors'
    reruns ``a-none``, ``a-every-4d``; composed ``c1``, ``c2``), in name order."""
    written = sorted(p.parent.name for p in design.HERE.glob("*/levels.csv"))
    return list(design.combinations()) + [n for n in written if n not in design.combinations()]


def _read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines())) if path.is_file() else []


def write_seeds(rows: list[dict]) -> None:
    with open(SEEDS_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows({k: str(r.get(k, "")) for k in FIELDS} for r in rows)


def anchor_seeds() -> dict[str, dict]:
    """Block M's committed anchors: level -> {cell: [accuracy %]} on the screening cells."""
    readings_score = _readings_score()
    out = {"none": {c: v for c, v in readings_score.seeds_from_reports().items() if c in design.SCREENING}}
    for level in ("every-4d", "every-2048"):
        rows = [r for r in readings_score.csv_rows() if r["reading"] == ANCHORS[level]]
        out[level] = {c: [float(r["accuracy_pct"]) for r in rows if _cell(r) == c] for c in design.SCREENING}
    return out


def by_cell(rows: list[dict], cells: list | None = None, seeds=design.SEEDS) -> dict[str, dict]:
    """Combination -> cell -> accuracies (%) of ``seeds`` on ``cells`` (default: the screening
    cells); a combination without such a row is left out."""
    cells = design.SCREENING if cells is None else cells
    out: dict[str, dict] = {}
    for r in rows:
        if _cell(r) in cells and int(r["seed"]) in seeds:
            out.setdefault(r["combination"], {c: [] for c in cells})[_cell(r)].append(float(r["accuracy_pct"]))
    return out


def paper() -> dict[tuple, tuple[float, float]]:
    rows = list(csv.DictReader((HERE / "f01" / "paper.csv").read_text().splitlines()))
    return {(int(r["case"]), int(r["n"]), int(r["layers"]), r["pe"], int(r["d_token"])): (float(r["max"]), float(r["avg"]))
            for r in rows}


def score(seeds: dict) -> dict:
    """W (maxima, means), D and per-cell numbers over the screening cells with all 5 seeds."""
    return decide.score_cells(seeds, paper(), design.SCREENING)


def changed(name: str) -> int:
    """Factors off their defaults (the MLP counts unless it is the incumbent every-4d)."""
    if name in ANCHORS:
        return int(name != "every-4d")
    levels, mlp = design._declared(name)
    return sum(v == 1 for v in levels.values()) + int(mlp != "every-4d")


def drift_rows(rows: list[dict]) -> list[dict]:
    """The drift check's seeds (section 3): ``f01``'s 9 one-layer screening cells, seeds 0-4 (not
    a close call's seeds 5-9, not the held-out cells)."""
    return [r for r in rows if r["combination"] == "f01" and int(r["n_layers"]) == 1
            and _cell(r) in design.SCREENING and int(r["seed"]) in design.SEEDS]


def mlp4x_seeds() -> dict[str, float]:
    """mlp-4x's committed seeds (experiments/readings/seeds.csv): run name -> accuracy %."""
    return {r["run"]: float(r["accuracy_pct"]) for r in _readings_score().csv_rows() if r["reading"] == "mlp-4x"}


def drift(rows: list[dict]) -> list[str]:
    """f01's one-layer seeds against mlp-4x's committed seeds of the same runs."""
    anchor = mlp4x_seeds()
    lines = []
    for r in drift_rows(rows):
        if r["run"] not in anchor:  # not the check's business: the 45 runs are mlp-4x's by name
            continue
        if abs(float(r["accuracy_pct"]) - anchor[r["run"]]) > DRIFT_POINTS:
            lines.append(f"{r['run']} {_cell(r)} seed {r['seed']}: {float(r['accuracy_pct']):.2f} here, "
                         f"{anchor[r['run']]:.2f} in seeds.csv")
    return lines


def lenth(effects: list[float]) -> tuple[float, float]:
    """Lenth's pseudo standard error and margin of error, t(0.975, m/3) x PSE."""
    from scipy import stats

    abs_e = [abs(e) for e in effects]
    s0 = 1.5 * statistics.median(abs_e)
    pse = 1.5 * statistics.median([e for e in abs_e if e < 2.5 * s0] or abs_e)
    return pse, float(stats.t.ppf(0.975, len(effects) / 3)) * pse


BLOCK_1 = [f"f{i:02d}" for i in range(1, 9)]
BLOCK_2 = [f"f{i:02d}" for i in range(9, 17)]


def _contrasts(scores: dict) -> tuple[list, str, dict] | str:
    """The rows of the complete blocks, their label and the contrast columns (factors with both
    levels among the rows; with both blocks, one column per interaction chain: the product of
    its first pair); a sentence instead while no block is complete."""
    combos = design.combinations()
    one, both = BLOCK_1, BLOCK_1 + BLOCK_2
    complete = {n for n in both if scores.get(n, {}).get("missing") == 0}
    if set(both) <= complete:
        rows, label = both, "both blocks (resolution IV)"
    elif set(one) <= complete:
        rows, label = one, "block 1 alone (resolution III)"
    else:
        return (f"No main effects yet: they are computed over complete blocks; block 1 has "
                f"{len(complete & set(one))} of 8 combinations complete, block 2 {len(complete - set(one))} of 8.")
    levels = {n: combos[n][0] for n in rows}
    columns = {k: [levels[n][k] for n in rows] for k in design.LETTERS if len({levels[n][k] for n in rows}) == 2}
    if rows == both:
        for chain in design.alias_chains()[1]:
            a, b = chain[0]
            columns[" = ".join(chain)] = [levels[n][a] * levels[n][b] for n in rows]
    return rows, label, columns


def _effects(scores: dict, rows: list, columns: dict, value) -> dict:
    """Each column's mean of ``value(score)`` over its ``+`` rows minus over its ``-`` rows."""
    ys = [value(scores[n]) for n in rows]
    return {c: statistics.fmean(y for y, x in zip(ys, col) if x == 1)
            - statistics.fmean(y for y, x in zip(ys, col) if x == -1) for c, col in columns.items()}


def w_effects(scores: dict) -> dict:
    """The 8 factors' main effects on W over both blocks: ``design.composed``'s input (section 3,
    'Composed'). Raises ValueError naming the incomplete combinations before both blocks are in."""
    short = [decide.shortness(scores, n) for n in BLOCK_1 + BLOCK_2 if not decide.complete(scores, n)]
    if short:
        raise ValueError("the composed levels need both blocks complete (DESIGN.md section 3, 'Composed'); "
                         "missing: " + ", ".join(short))
    rows, _, columns = _contrasts(scores)
    return _effects(scores, rows, {k: columns[k] for k in design.LETTERS}, lambda s: s["within"])


def main_effects(scores: dict) -> list[str]:
    """The factors' effects on W, D and each cell's max/mean (DESIGN.md section 7), over complete
    blocks only: block 1 alone (8 rows, resolution III, 7 contrasts: its main effects, each
    aliased as printed) or both blocks (16 rows, resolution IV, 15 contrasts: 8 main effects and
    the 7 chains of aliased two-factor interactions). Active: |effect| > Lenth's margin,
    t(0.975, m/3) x PSE over the m contrasts (m = 15: t(0.975, 5) = 2.571, as declared; block 1
    alone, where DESIGN.md declares no margin: m = 7 by the same formula)."""
    found = _contrasts(scores)
    if isinstance(found, str):
        return [found]
    rows, label, columns = found

    def effects(value) -> dict:
        return _effects(scores, rows, columns, value)

    def marked(eff: dict) -> dict:
        pse, me = lenth(list(eff.values()))  # PSE 0 (most contrasts exactly 0): no margin, no star
        return {c: f"{e:+.2f}{' *' if pse > 0 and abs(e) > me else ''}" for c, e in eff.items()}

    w, d = effects(lambda s: s["within"]), effects(lambda s: s["mean_abs_diff"])
    (pse_w, me_w), (pse_d, me_d) = lenth(list(w.values())), lenth(list(d.values()))
    out = [f"Over {label}: {', '.join(rows)}; effect = mean over `+` rows minus mean over `-` rows. "
           f"Lenth over {len(columns)} contrasts, t(0.975, {len(columns)}/3)"
           + (" (block 1's margin is not declared in DESIGN.md; the same formula)" if rows == BLOCK_1 else "")
           + f": W PSE {pse_w:.2f}, margin "
           f"{me_w:.2f}; D PSE {pse_d:.2f}, margin {me_d:.2f}. `*`: active, |effect| > the margin of its own "
           "row of effects: W's, D's, and each cell's max and each cell's mean over the same contrasts "
           "(none where the PSE is 0).", ""]
    if rows == BLOCK_1:
        aliases, _ = design.alias_chains()
        out += ["Block 1 alone: each main effect is aliased with two-factor interactions: "
                + "; ".join(f"{k} = {k} {' '.join(v)}" for k, v in aliases.items()) + ".", ""]
    mw, md = marked(w), marked(d)
    out += ["| contrast | field: - / + | effect on W | effect on D |", "|---|---|--:|--:|"]
    for c in columns:
        f, lo, hi, _ = design.FACTORS[c] if c in design.FACTORS else ("interaction chain", "", "", "")
        out.append(f"| {c} | {f'`{f}`: {lo} / {hi}' if c in design.FACTORS else f} | {mw[c]} | {md[c]} |")
    out += ["", "Per cell, in points (effect on the cell's max / mean accuracy):", "",
            "| cell (case, n, layers, PE, d_token) | " + " | ".join(columns) + " |",
            "|---|" + "--:|" * len(columns)]
    for cell in design.SCREENING:
        mx, mean = marked(effects(lambda s: s["cells"][cell][0])), marked(effects(lambda s: s["cells"][cell][1]))
        out.append(f"| {cell} | " + " | ".join(f"{mx[c]} / {mean[c]}" for c in columns) + " |")
    return out


def assess(rows: list[dict], anchors: dict) -> dict:
    """Every number and decision the score renders, from the screened ``rows`` and block M's
    committed ``anchors`` (``anchor_seeds()``): scores, drift, block M, the choice, the gate."""
    bad = drift(rows)
    drifted, numbers, held_out = bool(bad), design.paper_numbers(), design.held_out()
    screened = {**anchors, **by_cell(rows)}
    scores = {name: score(s) for name, s in screened.items()}
    # after drift the committed anchors are not comparable (DESIGN.md section 3): listed, not ranked
    stale = {"none", "every-4d"} if drifted else set()  # every-2048 "stays committed and is marked so"
    same = decide.same_models({n: _runs(n) for n in names() if n in scores})
    table = [dict(name=n, within=s["within"] if not s["missing"] and n not in stale | set(same) else -1,
                  mean_abs_diff=s["mean_abs_diff"], changed=changed(n)) for n, s in scores.items()]
    best, m_waiting = decide.block_m_best(scores, drifted)
    c2 = decide.c2_plan(best, m_waiting)
    second = {n: decide.score_cells(v, numbers, design.SCREENING)["cells"]
              for n, v in by_cell(rows, seeds=design.CLOSE_CALL_SEEDS).items()}
    ranked = [t for t in design.rank(table) if t["within"] >= 0]
    choice = decide.choice(ranked, scores, second, numbers, decide.waiting_for(scores, drifted, c2))
    held_seeds = by_cell(rows, held_out)
    held = {n: decide.score_cells(v, numbers, held_out) for n, v in held_seeds.items()}
    gate = decide.gate(choice["chosen"], held, "a-every-4d" if drifted else None)
    full = {**screened.get(gate["final"], {}), **held_seeds.get(gate["final"], {})}
    return dict(rows=rows, bad=bad, anchor_runs=set(mlp4x_seeds()), drifted=drifted, scores=scores, stale=stale,
                same=same, table=table, best=best,
                m_waiting=m_waiting, c2=c2, second=second, choice=choice, held=held, gate=gate,
                targets=decide.targets(full, numbers) if gate["final"] else None)


def _w(s: dict | None) -> str:
    return "-" if s is None else f"{s['within']} ({s['wmax']} + {s['wmean']}) of {s['comparisons']}"


def _signed(x, fmt: str = "+d") -> str:
    return "-" if x is None else format(x, fmt)


def block_m_lines(state: dict) -> list[str]:
    """Section 7's 'MLP levels: block M's differences at defaults' and block M's best level."""
    scores, ref = state["scores"], state["scores"].get("f01")
    rows = [r for r in decide.block_m_rows(state["drifted"]) if r["name"] in scores or r["usable"]]
    out = ["Every factor at its default, the MLP level varied (one factor at a time); differences are "
           "from `last-4d` (`f01`), in W and D only between complete combinations, per cell where both have "
           "all 5 seeds." + (" The drift check tripped (section 3, log): `none` and `every-4d` are their "
                             "reruns here (`a-none`, `a-every-4d`); the committed ones are shown, not used, and "
                             "`every-2048` is only the committed torch-encoder seeds, from another machine." if
                             state["drifted"] else ""), "",
           "| MLP level | combination | source | W (max + mean) | D | complete | W - last-4d (max + mean) | "
           "D - last-4d |", "|---|---|---|--:|--:|---|--:|--:|"]
    diffs = {}
    for r in rows:
        s = scores.get(r["name"])
        done = "not run" if s is None else "yes" if not s["missing"] else f"no ({s['missing']} of 14 cells missing)"
        source = r["source"] + (", incomplete" if s is None or s["missing"] else "")
        d = decide.differences(s, ref) if s is not None and ref is not None and r["name"] != "f01" else None
        if d is not None:
            diffs[f"{r['level']}: {r['name']}" + ("" if r["usable"] else " (not comparable)")] = d
        dw = ("(reference)" if r["name"] == "f01" else "-" if d is None or d["within"] is None
              else f"{d['within']:+d} ({d['wmax']:+d} + {d['wmean']:+d})")
        out.append(f"| {r['level']} | {r['name']} | {source} | {_w(s)} | "
                   f"{'-' if s is None else format(s['mean_abs_diff'], '.2f')} | {done} | {dw} | "
                   f"{'-' if d is None else _signed(d['mean_abs_diff'], '+.2f')} |")
    out += ["", "Per cell, in points (max / mean minus `last-4d`'s):", "",
            "| cell (case, n, layers, PE, d_token) | " + " | ".join(diffs) + " |", "|---|" + "--:|" * len(diffs)]
    for cell in design.SCREENING:
        out.append(f"| {cell} | " + " | ".join(f"{d['cells'][cell][0]:+.2f} / {d['cells'][cell][1]:+.2f}"
                                             if cell in d["cells"] else "-" for d in diffs.values()) + " |")
    best = (f"**{state['best']}** (`design.rank` over the usable levels, all complete)" if state["best"] else
            "waiting for: " + ", ".join(state["m_waiting"]))
    return out + ["", f"Block M's best level: {best}."]


def composed_lines(state: dict) -> list[str]:
    try:
        effects = w_effects(state["scores"])
    except ValueError as e:
        return [f"Not yet: {e}. `score.py --compose` writes `c1` and `c2` once they are."]
    levels = design.composed(effects)
    kind, what = state["c2"]
    return ["Levels by `design.composed` over the main effects on W (a tie keeps the default): "
            + ", ".join(f"{k} {'+' if levels[k] == 1 else '-'} ({effects[k]:+.2f})" for k in design.LETTERS) + ".",
            "`c1`: these under last-4d; `c2`: " + (f"these under {what}." if kind == "write" else what + "."),
            "Written by `score.py --compose`."]


def choice_lines(state: dict) -> list[str]:
    ch, scores = state["choice"], state["scores"]
    out = [f"Leader by the declared order over the complete, comparable candidates: {ch['leader'] or 'none yet'}."]
    if ch["call"] is not None:
        (a, b), cells = ch["call"]["names"], ch["call"]["cells"]
        differing = ", ".join(map(str, cells)) or "none (nothing to rerun; the seeds 0-4 order stands)"
        out += ["", f"Close call (section 6.3): {a} (W {scores[a]['within']}, D {scores[a]['mean_abs_diff']:.2f}) and "
                f"{b} (W {scores[b]['within']}, D {scores[b]['mean_abs_diff']:.2f}) are within {decide.CLOSE} in W. "
                f"Cells where their within-5 verdicts differ: {differing}."]
        res = ch["resolved"]
        if res is None:
            out.append(f"Waiting for seeds 5-9 of both on those cells (`score.py --close-call` writes "
                       f"`{a}{design.CLOSE_CALL_SUFFIX}`, `{b}{design.CLOSE_CALL_SUFFIX}`).")
        elif res.get("note"):
            out.append(f"No replicate: {res['note']}.")
        elif res["scores"]:
            out += ["", "| combination | W over both replicates | of | D |", "|---|--:|--:|--:|"]
            out += [f"| {n} | {res['scores'][n]['within']} | {res['scores'][n]['comparisons']} | "
                    f"{res['scores'][n]['mean_abs_diff']:.2f} |" for n in res["order"]]
            out += ["", f"Re-ranked by W, then D, over those cells: {' before '.join(res['order'])}."]
    out += ["", f"**Chosen: {ch['chosen']}.**" if ch["chosen"] else
            "Chosen: waiting for: " + ", ".join(ch["waiting"] or ["the close call's replicates"]) + "."]
    return out


def gate_lines(state: dict) -> list[str]:
    g, n = state["gate"], len(design.held_out())
    ref = g["reference"]
    out = [("The drift check tripped, so the chosen combination is compared with mlp-4x's held-out cells "
            f"retrained in this store (`{ref}`, `design.write_tables`); the declared {decide.DECLARED_MLP4X['within']} "
            f"of 96 (D {decide.DECLARED_MLP4X['mean_abs_diff']:.2f}), from the committed reports, is printed "
            "beside it and not used." if state["drifted"] else
            "The chosen combination is compared with mlp-4x's declared held-out score.")
           + " It replaces mlp-4x iff its W is greater, or equal with a smaller D.", "",
           f"| combination | W (max + mean) of {2 * n} | D | cells missing |", "|---|--:|--:|--:|"]
    call, held = state["choice"]["call"], state["held"]
    shown = [] if g["chosen"] in (None, ref) else [(g["chosen"], "chosen")]
    shown += [] if ref == "every-4d" else [(ref, "mlp-4x retrained here")]
    shown += [(n, "runner-up: reported, never used to switch") for n in (call or {}).get("names", ())
              if g["chosen"] and n != g["chosen"] and n in held]
    for name, note in shown:
        s = held.get(name)
        out.append(f"| {name} ({note}) | {_w(s)} | {'-' if s is None else format(s['mean_abs_diff'], '.2f')} | "
                   f"{'not run' if s is None else s['missing']} |")
    d = decide.DECLARED_MLP4X
    out.append(f"| mlp-4x, declared (committed reports) | {d['within']} of {d['comparisons']} | "
               f"{d['mean_abs_diff']:.2f} | 0 |")
    text = {"waiting": "waiting for: " + ", ".join(g["waiting"]),
            "mlp-4x itself": f"the choice is mlp-4x itself ({g['chosen']}): nothing to confirm",
            "replace": f"{g['chosen']} replaces mlp-4x", "keep": f"{g['chosen']} does not beat {ref}: mlp-4x stays"}
    out += ["", f"Decision: {text[g['decision']]}."]
    if state["targets"]:
        out += ["", f"Target (section 6.6, issue 28) under the final choice, {g['final']}, over both full "
                "tables (screening + held-out; maxima within 5 points; reported, never used to choose):", "",
                "| table | maxima within 5 | cells with 5 seeds | target | shortfall |", "|---|--:|--:|--:|--:|"]
        out += [f"| {t} | {v['within']} of {v['cells']} | {v['with_results']} | {v['target']} of {v['cells']} | "
                f"{v['shortfall']} |" for t, v in state["targets"].items()]
    return out


def render(state: dict | None = None) -> str:
    state = assess(screened_rows(), anchor_seeds()) if state is None else state
    scores, stale, bad = state["scores"], state["stale"], state["bad"]
    lines = ["# The screen scored on its 14 screening cells", "",
             "Written by `.venv/bin/python experiments/readings/screen/score.py` (DESIGN.md sections 5-7) "
             "from the study's store and its committed `seeds.csv`; anchors from committed files "
             "(`none`: experiments/bench/tables-cpu reports; `every-4d`, `every-2048`: "
             "experiments/readings/seeds.csv; `a-none`, `a-every-4d`: the same anchors retrained in this "
             "store). Ranked by the declared order; a combination with cells missing (or a committed "
             "anchor after drift) is listed last, unranked, with the cells it has.", "",
             "| rank | combination | levels A U O R I P S K | MLP | W (max + mean) of 28 | D | cells missing |",
             "|--:|---|---|---|--:|--:|--:|"]
    for i, t in enumerate(design.rank(state["table"]), 1):
        s, name = scores[t["name"]], t["name"]
        if name in ANCHORS:
            levels, mlp = "- " * 7 + "-", name + (" (committed; not comparable: drift)" if name in stale else
                                                  " (committed)")
        else:
            lv, mlp = design._declared(name)
            levels = " ".join("+" if lv[k] == 1 else "-" for k in design.LETTERS)
            if name in state.get("same", {}):
                mlp += f" (the same models as {state['same'][name]}: ranked as it)"
        lines.append(f"| {i if t['within'] >= 0 else '-'} | {name} | {levels} | {mlp} | "
                     f"{_w(s)} | {s['mean_abs_diff']:.2f} | {s['missing']} |")
    found = drift_rows(state["rows"])
    same = sum(r["run"] in state["anchor_runs"] for r in found)
    lines += ["", "## Drift check", "",
              f"f01's one-layer seeds found: {len(found)} of 45, {same} of them mlp-4x's runs by name in "
              f"seeds.csv; differing from seeds.csv by more than "
              f"{DRIFT_POINTS} points: {len(bad)}." + ("" if not bad else " The anchors are not comparable "
                                                       "(DESIGN.md section 3): rerun them before choosing."),
              *[f"- {b}" for b in bad], "", "## MLP levels: block M's differences at defaults", "",
              *block_m_lines(state), "", "## Main effects", "", *main_effects(scores), "",
              "## Composed combinations", "", *composed_lines(state), "", "## Choice (section 6.1-6.3)", "",
              *choice_lines(state), "", "## Confirmation on the 48 held-out cells (section 6.4-6.6)", "",
              *gate_lines(state), "", "## Runs trained twice", "", *trained_twice(), ""]
    return "\n".join(lines)


def compose(scores: dict, c2: tuple[str, str]) -> list[str]:
    """``--compose``: writes ``c1`` (the composed levels under last-4d) and, where block M's best
    level calls for it, ``c2`` (``decide.c2_plan``); refuses, naming what is missing, before both
    blocks are complete, and refuses to rewrite a folder declared with other levels."""
    try:
        levels = design.composed(w_effects(scores))
    except ValueError as e:
        raise SystemExit(f"score.py --compose: {e}") from None
    out = []
    for name, (kind, what) in (("c1", ("write", design.FRACTION_MLP)), ("c2", c2)):
        if kind != "write":
            out.append(f"{name}: not written: {what}")
            continue
        path = design.HERE / name / "levels.csv"
        if path.is_file() and design._declared(name) != (levels, what):
            raise SystemExit(f"score.py --compose: {path.parent.name}/levels.csv declares "
                             f"{design._declared(name)}, not {(levels, what)}; nothing written")
        design.write_folder(name, levels, what)
        copy = decide.same_models({n: _runs(n) for n in names()}).get(name)
        out.append(f"{name}: {' '.join('+' if levels[k] == 1 else '-' for k in design.LETTERS)} under {what}"
                   + (f" (the same models as {copy}: nothing new to train; ranked as {copy})" if copy else ""))
    return out


def close_call_folders(choice: dict) -> list[str]:
    """``--close-call``: writes ``<name>-s59`` for both of the top two (their differing cells,
    seeds 5-9) once every candidate is in; refuses otherwise, saying why."""
    if choice["waiting"]:
        raise SystemExit("score.py --close-call: the top two are not known yet; waiting for: "
                         + ", ".join(choice["waiting"]))
    call = choice["call"]
    if call is None:
        raise SystemExit(f"score.py --close-call: no close call (the top two differ by more than {decide.CLOSE} in W)")
    if not call["cells"]:
        return ["close call: no cell's verdicts differ, nothing to rerun; the seeds 0-4 order stands"]
    committed = [n for n in call["names"] if n in ANCHORS]
    if committed:
        return [f"close call: {', '.join(committed)} is a committed anchor, not a combination of this store; "
                "nothing written, the seeds 0-4 order stands (DESIGN.md 6.3)"]
    return [str(design.write_close_call(n, call["cells"]).relative_to(design.HERE)) for n in call["names"]]


def table_folders(state: dict) -> list[str]:
    """``--tables``: writes both full tables' sweep folders (``design.write_tables``) of the
    chosen combination, of the mlp-4x the gate compares it with (after the drift check tripped:
    ``a-every-4d``, retrained here; a committed anchor has no folder to write) and, after a close
    call, of the runner-up (section 6.4: "run on held-out only after a close call; its score is
    reported, never used to switch"), in that order, once the choice is made; refuses otherwise,
    saying what it waits for. A sweep of them trains the 48 held-out cells, and the screening cells
    again where this store lacks them (a fresh checkout's: scored from seeds.csv, compared in
    scores.md's "Runs trained twice")."""
    ch = state["choice"]
    if not ch["chosen"]:
        raise SystemExit("score.py --tables: no choice yet; waiting for: "
                         + ", ".join(ch["waiting"] or ["the close call's replicates"]))
    runner_up = [n for n in (ch["call"] or {}).get("names", ()) if n != ch["chosen"]]  # 6.4: reported only
    names = [n for n in dict.fromkeys((ch["chosen"], state["gate"]["reference"], *runner_up)) if n not in ANCHORS]
    return [str(f.relative_to(design.HERE)) for n in names for f in design.write_tables(n)]


def plateau(name: str) -> str:
    """Issue 28 item 4 (DESIGN.md section 7): for ``name``'s cells more than 5 points short of
    the paper's max, the first logged step at which each seed's training loss falls below
    0.9 ln n (``experiments/budget/budget.py``'s rule), against the paper's 10,000. The cells
    are both full tables (the screening cells, then the held-out ones: "the final choice's
    cells"), those with all 5 seeds in the store. Needs the store (the curves are not in
    seeds.csv)."""
    sys.path.insert(0, str(HERE.parents[1] / "budget"))
    from budget import PLATEAU, left_plateau

    from interp.sweeps import store

    if name not in design.combinations() and not (HERE / name / "levels.csv").is_file():
        raise SystemExit(f"combination {name!r}: not one of {list(design.combinations())} or a written folder")
    if not STORE.is_file():
        raise SystemExit(f"no store at {STORE.relative_to(HERE.parents[2])}: run the combination first")
    df = store.read(STORE)
    runs = {r["name"]: r for _, r in df[df.status == "ok"].iterrows()} if not df.empty else {}
    p = design.paper_numbers()
    lines = [f"# When {name}'s short seeds leave the chance plateau", "",
             f"Written by `.venv/bin/python experiments/readings/screen/score.py --plateau {name}`: for each "
             "cell of both tables (screening, then held-out; those with all 5 seeds in the store) whose max is "
             "more than 5 points below the paper's, each seed's first logged "
             f"step with training loss < {PLATEAU} ln n (never: the run ended on the plateau), of at most "
             "10,000 steps (the paper's budget).", "",
             "| cell (case, n, layers, PE, d_token) | paper max | ours max | seed: accuracy %, step left |",
             "|---|--:|--:|---|"]
    by_cell: dict[tuple, list] = {}
    cells = design.SCREENING + design.held_out()
    for c in design.configs(name, cells=cells):
        if (r := runs.get(c.name())) is not None:
            by_cell.setdefault((c.case, c.n, c.n_layers, c.pos_embed, c.d_token), []).append((c, r))
    for cell in cells:
        got = by_cell.get(cell, [])
        if len(got) < len(design.SEEDS):
            continue
        mx = max(100 * float(r.accuracy) for _, r in got)
        if p[cell][0] - mx <= 5:
            continue
        seeds = "; ".join(f"{c.seed}: {100 * float(r.accuracy):.2f}, "
                          f"{left_plateau(r.curve or [], c.n) or 'never'}" for c, r in got)
        lines.append(f"| {cell} | {p[cell][0]:.2f} | {mx:.2f} | {seeds} |")
    return "\n".join(lines) + "\n"


def incomplete(folders: list[str]) -> list[str]:
    """``--incomplete``: of these sweep folders (relative to this directory), those with a run not
    recorded yet, in seeds.csv or in the store, by run name: what is left to train. A fresh
    checkout has no store, so this is what keeps it from training again what is committed."""
    from interp.sweeps.configs_file import read_configs

    bad = [f for f in folders if not (HERE / f / "configs.py").is_file()]
    if bad:
        raise SystemExit(f"score.py --incomplete: {', '.join(map(repr, bad))}: accepted: folders of "
                         f"{HERE.relative_to(HERE.parents[2])} with a configs.py")
    recorded = {r["run"] for r in _read_csv(SEEDS_CSV)} | set(stored_rows())
    return [f for f in folders
            if any(c.name() not in recorded for c in read_configs(HERE / f / "configs.py", 10**6)[0])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description="Score issue 28's screen (DESIGN.md sections 5-7); "
                                 "with no option, writes scores.md and seeds.csv.")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 if scores.md is stale; writes nothing")
    what.add_argument("--plateau", metavar="NAME", help="write plateau-NAME.md (needs the store)")
    what.add_argument("--compose", action="store_true", help="write c1 and c2 (both blocks complete)")
    what.add_argument("--close-call", action="store_true", help="write <name>-s59 for the top two")
    what.add_argument("--tables", action="store_true",
                      help="write both full tables' folders of the choice and of the mlp-4x it is compared with")
    what.add_argument("--incomplete", nargs="+", metavar="FOLDER",
                      help="print those of these folders with runs not recorded yet (in seeds.csv or the store)")
    args = ap.parse_args(argv)
    if args.incomplete is not None:
        print("\n".join(incomplete(args.incomplete)))
        return 0
    if args.plateau is not None:
        text = plateau(args.plateau)
        (HERE / f"plateau-{args.plateau}.md").write_text(text)
        print(text)
        return 0
    if args.compose or args.close_call or args.tables:
        state = assess(screened_rows(), anchor_seeds())
        out = (compose(state["scores"], state["c2"]) if args.compose else
               close_call_folders(state["choice"]) if args.close_call else table_folders(state))
        print("\n".join(out))
        return 0
    text = render()
    if args.check:
        same = (HERE / "scores.md").is_file() and (HERE / "scores.md").read_text() == text
        print("scores.md is up to date" if same else "scores.md is stale: rerun score.py")
        return 0 if same else 1
    write_seeds(screened_rows())
    (HERE / "scores.md").write_text(text)
    print(text)
    return 0

if __name__ == "__main__":
    sys.exit(main())
