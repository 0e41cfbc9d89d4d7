"""Issue 28's screen, scored as DESIGN.md declares it (sections 5-7): writes scores.md.

    .venv/bin/python experiments/readings/screen/score.py            # scores.md and seeds.csv
    .venv/bin/python experiments/readings/screen/score.py --check    # exit 1 if scores.md is stale
    .venv/bin/python experiments/readings/screen/score.py --plateau f01   # plateau-f01.md (needs the store)

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
  alone: 7, resolution III, each main effect aliased as ``design.alias_chains`` prints).

Anchors of block M (DESIGN.md section 3), read from committed files: ``none`` = attention-only
(experiments/bench/tables-cpu reports), ``every-4d`` = mlp-4x and ``every-2048`` = torch-encoder
(experiments/readings/seeds.csv). Stores are local, so every screened seed is also written to
``seeds.csv`` here (committed); a run in both keeps the store's numbers.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "analysis"))
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
FIELDS = ["combination", "case", "n", "n_layers", "pos_embed", "d_token", "seed", "accuracy_pct", "steps", "run"]
ANCHORS = {"none": "attention-only", "every-4d": "mlp-4x", "every-2048": "torch-encoder"}
DRIFT_POINTS = 0.5


def _cell(r) -> tuple:
    return (int(r["case"]), int(r["n"]), int(r["n_layers"]), r["pos_embed"], int(r["d_token"]))


def screened_rows() -> list[dict]:
    """Every seed of every combination found in the store, else in seeds.csv (store wins)."""
    saved = {(r["combination"], r["run"]): r for r in _read_csv(SEEDS_CSV)}
    if STORE.is_file():
        from interp.sweeps import store

        df = store.read(STORE)
        done = {} if df.empty else {r["name"]: r for _, r in df[df.status == "ok"].iterrows()}
        for name in names():
            for c in design.configs(name):
                if (r := done.get(c.name())) is not None:
                    saved[(name, c.name())] = dict(
                        combination=name, case=c.case, n=c.n, n_layers=c.n_layers, pos_embed=c.pos_embed,
                        d_token=c.d_token, seed=c.seed, accuracy_pct=repr(100 * float(r.accuracy)),
                        steps=int(r.steps), run=c.name())
    order = names()
    return sorted(saved.values(), key=lambda r: (order.index(r["combination"]), design.SCREENING.index(_cell(r)),
                                                 int(r["seed"])))


def names() -> list[str]:
    """The fraction's combinations, then every folder written with levels.csv (the anchors'
    reruns ``a-none``, ``a-every-4d``; composed ``c1``, ``c2``), in name order."""
    written = sorted(p.parent.name for p in HERE.glob("*/levels.csv"))
    return list(design.combinations()) + [n for n in written if n not in design.combinations()]


def _read_csv(path: Path) -> list[dict]:
    return list(csv.DictReader(path.read_text().splitlines())) if path.is_file() else []


def write_seeds(rows: list[dict]) -> None:
    with open(SEEDS_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows({k: str(r[k]) for k in FIELDS} for r in rows)


def anchor_seeds() -> dict[str, dict]:
    """Block M's committed anchors: level -> {cell: [accuracy %]} on the screening cells."""
    readings_score = _readings_score()
    out = {"none": {c: v for c, v in readings_score.seeds_from_reports().items() if c in design.SCREENING}}
    for level in ("every-4d", "every-2048"):
        rows = [r for r in readings_score.csv_rows() if r["reading"] == ANCHORS[level]]
        out[level] = {c: [float(r["accuracy_pct"]) for r in rows if _cell(r) == c] for c in design.SCREENING}
    return out


def by_cell(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["combination"], {c: [] for c in design.SCREENING})[_cell(r)].append(float(r["accuracy_pct"]))
    return out


def paper() -> dict[tuple, tuple[float, float]]:
    rows = list(csv.DictReader((HERE / "f01" / "paper.csv").read_text().splitlines()))
    return {(int(r["case"]), int(r["n"]), int(r["layers"]), r["pe"], int(r["d_token"])): (float(r["max"]), float(r["avg"]))
            for r in rows}


def score(seeds: dict) -> dict:
    """W (maxima, means), D and per-cell numbers over the cells with all 5 seeds."""
    p, cells, wmax, wmean, diffs, missing = paper(), {}, 0, 0, [], 0
    for cell in design.SCREENING:
        accs = seeds.get(cell, [])
        if len(accs) < len(design.SEEDS):
            missing += 1
            continue
        mx, avg = max(accs), statistics.fmean(accs)
        dmax, davg = mx - p[cell][0], avg - p[cell][1]
        wmax += abs(dmax) <= 5
        wmean += abs(davg) <= 5
        diffs += [abs(dmax), abs(davg)]
        cells[cell] = (mx, avg)
    return dict(within=wmax + wmean, wmax=wmax, wmean=wmean, missing=missing, cells=cells,
                mean_abs_diff=statistics.fmean(diffs) if diffs else math.nan, comparisons=len(diffs))


def changed(name: str) -> int:
    """Factors off their defaults (the MLP counts unless it is the incumbent every-4d)."""
    if name in ANCHORS:
        return int(name != "every-4d")
    levels, mlp = design._declared(name)
    return sum(v == 1 for v in levels.values()) + int(mlp != "every-4d")


def drift(rows: list[dict]) -> list[str]:
    """f01's one-layer seeds against mlp-4x's committed seeds of the same runs."""
    readings_score = _readings_score()
    anchor = {r["run"]: float(r["accuracy_pct"]) for r in readings_score.csv_rows() if r["reading"] == "mlp-4x"}
    lines = []
    for r in rows:
        if r["combination"] == "f01" and int(r["n_layers"]) == 1:
            if r["run"] not in anchor:
                lines.append(f"{r['run']} {_cell(r)} seed {r['seed']}: not in seeds.csv (not the same run)")
            elif abs(float(r["accuracy_pct"]) - anchor[r["run"]]) > DRIFT_POINTS:
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


def main_effects(scores: dict) -> list[str]:
    """The factors' effects on W, D and each cell's max/mean (DESIGN.md section 7), over complete
    blocks only: block 1 alone (8 rows, resolution III, 7 contrasts: its main effects, each
    aliased as printed) or both blocks (16 rows, resolution IV, 15 contrasts: 8 main effects and
    the 7 chains of aliased two-factor interactions). Active: |effect| > Lenth's margin,
    t(0.975, m/3) x PSE over the m contrasts (m = 15: t(0.975, 5) = 2.571, as declared; block 1
    alone, where DESIGN.md declares no margin: m = 7 by the same formula)."""
    combos = design.combinations()
    one = [f"f{i:02d}" for i in range(1, 9)]
    both = one + [f"f{i:02d}" for i in range(9, 17)]
    complete = {n for n in both if scores.get(n, {}).get("missing") == 0}
    if set(both) <= complete:
        rows, label = both, "both blocks (resolution IV)"
    elif set(one) <= complete:
        rows, label = one, "block 1 alone (resolution III)"
    else:
        return [f"No main effects yet: they are computed over complete blocks; block 1 has "
                f"{len(complete & set(one))} of 8 combinations complete, block 2 {len(complete - set(one))} of 8."]
    levels = {n: combos[n][0] for n in rows}
    columns = {k: [levels[n][k] for n in rows] for k in design.LETTERS if len({levels[n][k] for n in rows}) == 2}
    if rows == both:
        for chain in design.alias_chains()[1]:  # one column per chain: the product of its first pair
            a, b = chain[0]
            columns[" = ".join(chain)] = [levels[n][a] * levels[n][b] for n in rows]

    def effects(value) -> dict:
        ys = [value(scores[n]) for n in rows]
        return {c: statistics.fmean(y for y, x in zip(ys, col) if x == 1)
                - statistics.fmean(y for y, x in zip(ys, col) if x == -1) for c, col in columns.items()}

    def marked(eff: dict) -> dict:
        _, me = lenth(list(eff.values()))
        return {c: f"{e:+.2f}{' *' if abs(e) > me else ''}" for c, e in eff.items()}

    w, d = effects(lambda s: s["within"]), effects(lambda s: s["mean_abs_diff"])
    (pse_w, me_w), (pse_d, me_d) = lenth(list(w.values())), lenth(list(d.values()))
    out = [f"Over {label}: {', '.join(rows)}; effect = mean over `+` rows minus mean over `-` rows. "
           f"Lenth over {len(columns)} contrasts, t(0.975, {len(columns)}/3): W PSE {pse_w:.2f}, margin "
           f"{me_w:.2f}; D PSE {pse_d:.2f}, margin {me_d:.2f}. `*`: active (per cell: that column's own margin).", ""]
    if rows == one:
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


def render() -> str:
    rows = screened_rows()
    bad = drift(rows)
    seeds = {**anchor_seeds(), **by_cell(rows)}
    scores = {name: score(s) for name, s in seeds.items()}
    # after drift the committed anchors are not comparable (DESIGN.md section 3): listed, not ranked
    stale = {"none", "every-4d"} if bad else set()
    table = [dict(name=n, within=s["within"] if not s["missing"] and n not in stale else -1,
                  mean_abs_diff=s["mean_abs_diff"], changed=changed(n)) for n, s in scores.items()]
    lines = ["# The screen scored on its 14 screening cells", "",
             "Written by `.venv/bin/python experiments/readings/screen/score.py` (DESIGN.md sections 5-7) "
             "from the study's store and its committed `seeds.csv`; anchors from committed files "
             "(`none`: experiments/bench/tables-cpu reports; `every-4d`, `every-2048`: "
             "experiments/readings/seeds.csv; `a-none`, `a-every-4d`: the same anchors retrained in this "
             "store). Ranked by the declared order; a combination with cells missing (or a committed "
             "anchor after drift) is listed last, unranked, with the cells it has.", "",
             "| rank | combination | levels A U O R I P S K | MLP | W (max + mean) of 28 | D | cells missing |",
             "|--:|---|---|---|--:|--:|--:|"]
    for i, t in enumerate(design.rank(table), 1):
        s, name = scores[t["name"]], t["name"]
        if name in ANCHORS:
            levels, mlp = "- " * 7 + "-", name + (" (committed; not comparable: drift)" if name in stale else
                                                  " (committed)")
        else:
            lv, mlp = design._declared(name)
            levels = " ".join("+" if lv[k] == 1 else "-" for k in design.LETTERS)
        lines.append(f"| {i if t['within'] >= 0 else '-'} | {name} | {levels} | {mlp} | "
                     f"{s['within']} ({s['wmax']} + {s['wmean']}) of {s['comparisons']} | {s['mean_abs_diff']:.2f} | "
                     f"{s['missing']} |")
    f01 = sum(1 for r in rows if r["combination"] == "f01" and int(r["n_layers"]) == 1)
    lines += ["", "## Drift check", "",
              f"f01's one-layer seeds found: {f01} of 45; differing from seeds.csv by more than "
              f"{DRIFT_POINTS} points: {len(bad)}." + ("" if not bad else " The anchors are not comparable "
                                                       "(DESIGN.md section 3): rerun them before choosing."),
              *[f"- {b}" for b in bad], "", "## Main effects", "", *main_effects(scores), ""]
    return "\n".join(lines)


def plateau(name: str) -> str:
    """Issue 28 item 4 (DESIGN.md section 7): for ``name``'s screening cells more than 5 points
    short of the paper's max, the first logged step at which each seed's training loss falls
    below 0.9 ln n (``experiments/budget/budget.py``'s rule), against the paper's 10,000.
    Needs the store (the curves are not in seeds.csv)."""
    sys.path.insert(0, str(HERE.parents[1] / "budget"))
    from budget import PLATEAU, left_plateau

    from interp.sweeps import store

    if name not in design.combinations() and not (HERE / name / "levels.csv").is_file():
        raise SystemExit(f"combination {name!r}: not one of {list(design.combinations())} or a written folder")
    if not STORE.is_file():
        raise SystemExit(f"no store at {STORE.relative_to(HERE.parents[2])}: run the combination first")
    df = store.read(STORE)
    runs = {r["name"]: r for _, r in df[df.status == "ok"].iterrows()} if not df.empty else {}
    p = paper()
    lines = [f"# When {name}'s short seeds leave the chance plateau", "",
             f"Written by `.venv/bin/python experiments/readings/screen/score.py --plateau {name}`: for each "
             "screening cell whose max is more than 5 points below the paper's, each seed's first logged "
             f"step with training loss < {PLATEAU} ln n (never: the run ended on the plateau), of at most "
             "10,000 steps (the paper's budget).", "",
             "| cell (case, n, layers, PE, d_token) | paper max | ours max | seed: accuracy %, step left |",
             "|---|--:|--:|---|"]
    by_cell: dict[tuple, list] = {}
    for c in design.configs(name):
        if (r := runs.get(c.name())) is not None:
            by_cell.setdefault((c.case, c.n, c.n_layers, c.pos_embed, c.d_token), []).append((c, r))
    for cell in design.SCREENING:
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--plateau" in argv:
        name = argv[argv.index("--plateau") + 1] if len(argv) > argv.index("--plateau") + 1 else ""
        text = plateau(name)
        (HERE / f"plateau-{name}.md").write_text(text)
        print(text)
        return 0
    text = render()
    if "--check" in argv:
        same = (HERE / "scores.md").is_file() and (HERE / "scores.md").read_text() == text
        print("scores.md is up to date" if same else "scores.md is stale: rerun score.py")
        return 0 if same else 1
    write_seeds(screened_rows())
    (HERE / "scores.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
