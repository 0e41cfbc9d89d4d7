"""The screen's decisions as DESIGN.md declares them, as pure functions of numbers.

Each takes per-cell seeds or the score dicts of :func:`score_cells` and returns what the design
decides; nothing here reads the store or seeds.csv (``score.py`` does, and renders), so tests feed
hand-made numbers. In order of the design:

* block M (section 3 and its log): which combination stands for each MLP level
  (:func:`block_m_rows`), its differences from ``last-4d`` at defaults (:func:`differences`) and
  the best level (:func:`block_m_best`), which picks ``c2``'s MLP (:func:`c2_plan`);
* the choice (section 6.1-6.3): what it still waits for (:func:`waiting_for`), the close call
  (:func:`close_call`) and its resolution by the seeds 5-9 replicates (:func:`resolve`), together
  :func:`choice`;
* the confirmation on the 48 held-out cells (section 6.4-6.5, :func:`gate`) and the target counts
  (section 6.6, :func:`targets`).

A cell's vocabulary is ``design.SCREENING``'s: (case, n, n_layers, pos_embed, d_token); ``paper``
maps a cell to the paper's (max, avg) in percent (``design.paper_numbers``).
"""

from __future__ import annotations

import math
import statistics

import design

WITHIN = 5  # points: a comparison at most this far from the paper's number counts in W
CLOSE = 2  # the top two within this many comparisons of W: a close call (section 6.3)
#: mlp-4x's held-out score as declared (section 6.4): its full tables' 72 of 124 less its 12 of 28
DECLARED_MLP4X = dict(within=60, comparisons=96, mean_abs_diff=12.04)
#: Table -> (maxima within 5 points wanted, cells) (section 6.6, issue 28)
TARGET = {"table1": (27, 30), "table2": (24, 32)}
#: block M's levels c2 may take on the 2 cores (every-2048 needs the GPU or a cluster)
C2_LEVELS = ("none", "last-2048", "every-4d")
#: the combinations that are mlp-4x itself (the committed reading and its rerun here)
MLP4X = ("every-4d", "a-every-4d")
#: block M's committed anchors: no replicate (seeds 5-9) or held-out run of theirs is trained in
#: this store (every-2048's two-layer cells need the GPU or a cluster; DESIGN.md sections 1, 6.3)
COMMITTED = ("none", "every-4d", "every-2048")


def score_cells(seeds: dict, paper: dict, cells: list) -> dict:
    """W (maxima + means), D and each cell's (max, mean) over the ``cells`` with all 5 seeds;
    a cell with fewer is counted in ``missing`` and left out of W and D."""
    got, wmax, wmean, diffs, missing = {}, 0, 0, [], 0
    for cell in cells:
        accs = seeds.get(cell, [])
        if len(accs) < len(design.SEEDS):
            missing += 1
            continue
        mx, avg = max(accs), statistics.fmean(accs)
        dmax, davg = abs(mx - paper[cell][0]), abs(avg - paper[cell][1])
        wmax, wmean = wmax + (dmax <= WITHIN), wmean + (davg <= WITHIN)
        diffs += [dmax, davg]
        got[cell] = (mx, avg)
    return dict(within=wmax + wmean, wmax=wmax, wmean=wmean, missing=missing, cells=got,
                mean_abs_diff=statistics.fmean(diffs) if diffs else math.nan, comparisons=len(diffs))


def complete(scores: dict, name: str) -> bool:
    return name in scores and scores[name]["missing"] == 0


def shortness(scores: dict, name: str, of: int = len(design.SCREENING), what: str = "") -> str:
    """``name (k of 14 cells missing)``, or ``name (not run)`` without a seed; ``what`` follows
    the name ("'s held-out cells")."""
    if name not in scores:
        return f"{name}{what} (not run)"
    return f"{name}{what} ({scores[name]['missing']} of {of} cells missing)"


# -- block M ---------------------------------------------------------------------------------


def block_m_rows(drifted: bool) -> list[dict]:
    """Block M's rows: MLP level, the combination scored for it, whether it may be used to choose,
    and where it comes from. After the drift check trips (DESIGN.md section 3, log) ``none`` and
    ``every-4d`` are the reruns ``a-none`` and ``a-every-4d``; the committed ones are shown, not
    used; ``every-2048`` stays the committed torch-encoder seeds (another machine), marked so, and
    is used once complete (its 2 GPU cells in), as section 3 declares."""
    committed = "committed; not comparable (drift)" if drifted else "committed"
    rows = [dict(level="none", name="a-none", usable=True, source="retrained here")] if drifted else []
    rows += [dict(level="none", name="none", usable=not drifted, source=committed + ", attention-only"),
             dict(level="last-4d", name="f01", usable=True, source="f01"),
             dict(level="last-2048", name="m-last-2048", usable=True, source="m-last-2048")]
    if drifted:
        rows.append(dict(level="every-4d", name="a-every-4d", usable=True, source="retrained here"))
    rows += [dict(level="every-4d", name="every-4d", usable=not drifted, source=committed + ", mlp-4x"),
             # DESIGN.md section 3: after drift "every-2048 stays committed and is marked so" (its
             # two-layer cells cannot be retrained here): a candidate, marked, once complete
             dict(level="every-2048", name="every-2048", usable=True,
                  source="committed" + (" on another machine (kept, as declared)" if drifted else "")
                  + ", torch-encoder")]
    return rows


def differences(s: dict, ref: dict) -> dict:
    """``s`` minus ``ref``: W (and its maxima, means) and D when both are complete (else None),
    and each cell's (max, mean) in points where both have the cell."""
    both = s["missing"] == 0 and ref["missing"] == 0
    out = {k: s[k] - ref[k] if both else None for k in ("within", "wmax", "wmean", "mean_abs_diff")}
    out["cells"] = {c: (s["cells"][c][0] - v[0], s["cells"][c][1] - v[1]) for c, v in ref["cells"].items()
                    if c in s["cells"]}
    return out


def block_m_best(scores: dict, drifted: bool) -> tuple[str | None, list[str]]:
    """Block M's best level by ``design.rank`` (M off its default unless ``every-4d``) over its
    usable rows, once all are complete; else (None, what is missing). ``every-2048`` joins only
    when usable and complete (its 2 GPU cells in); it is never waited for."""
    rows = [r for r in block_m_rows(drifted) if r["usable"]
            and (r["level"] != "every-2048" or complete(scores, r["name"]))]
    waiting = [shortness(scores, r["name"]) for r in rows if not complete(scores, r["name"])]
    if waiting:
        return None, waiting
    ranked = design.rank([dict(name=r["level"], within=scores[r["name"]]["within"],
                               mean_abs_diff=scores[r["name"]]["mean_abs_diff"],
                               changed=int(r["level"] != "every-4d")) for r in rows])
    return ranked[0]["name"], []


def c2_plan(best: str | None, waiting: list[str]) -> tuple[str, str]:
    """What ``c2`` is (section 3, 'Composed'): ("write", level) under block M's best level when it
    is none, last-2048 or every-4d; otherwise ("skip", why)."""
    if best is None:
        return "skip", "c2 waits for block M's best level: " + ", ".join(waiting)
    if best in C2_LEVELS:
        return "write", best
    if best == "every-2048":
        return "skip", ("block M's best level is every-2048: c2 needs the GPU or a cluster (DESIGN.md "
                        "section 1); nothing written")
    return "skip", f"block M's best level is {best}, c1's own MLP: c2 would be c1; nothing written"


# -- the choice ------------------------------------------------------------------------------


def waiting_for(scores: dict, drifted: bool, c2: tuple[str, str]) -> list[str]:
    """The candidates (section 6.1) not yet scored on all 14 screening cells: the fraction,
    ``m-last-2048``, block M's usable anchors, ``c1``, and ``c2`` where block M's best level
    calls for it."""
    names = list(design.combinations())
    names += [r["name"] for r in block_m_rows(drifted) if r["usable"] and r["name"] not in names
              and r["level"] != "every-2048"]
    names += ["c1"] + (["c2"] if c2[0] == "write" else [])
    return [f"{n} (not written: score.py --compose)" if n in ("c1", "c2") and n not in scores
            else shortness(scores, n) for n in names if not complete(scores, n)]


def same_models(runs: dict[str, frozenset]) -> dict[str, str]:
    """Candidates that train the same models as an earlier one (``runs``: name -> its run names
    on the screening cells, in ``score.names()`` order): name -> the earlier name. A composed
    combination can land on a candidate already run (``c1`` on ``f07`` when the main effects
    pick ``f07``'s levels; ``c2`` on ``a-none``): it is that candidate, not a second one, and is
    not ranked beside it (a close call between a candidate and its copy would rerun nothing and
    hide the real runner-up)."""
    first: dict[frozenset, str] = {}
    out = {}
    for name, r in runs.items():
        if r in first:
            out[name] = first[r]
        else:
            first[r] = name
    return out


def verdicts(cells: dict, paper: dict, cell: tuple) -> tuple[bool, bool]:
    """Whether a cell's (max, mean) is within 5 points of the paper's (max, avg)."""
    return tuple(abs(cells[cell][i] - paper[cell][i]) <= WITHIN for i in (0, 1))


def close_call(ranked: list[dict], scores: dict, paper: dict) -> dict | None:
    """Section 6.3: when the top two of ``ranked`` (``design.rank`` over complete, usable
    candidates) differ by at most 2 in W, the two and the screening cells where their within-5
    verdicts differ on max or mean; else None."""
    if len(ranked) < 2 or ranked[0]["within"] - ranked[1]["within"] > CLOSE:
        return None
    a, b = ranked[0]["name"], ranked[1]["name"]
    cells = [c for c in design.SCREENING
             if verdicts(scores[a]["cells"], paper, c) != verdicts(scores[b]["cells"], paper, c)]
    return dict(names=(a, b), cells=cells)


def replicated(first: dict, second: dict, paper: dict, cells: list) -> dict | None:
    """W and D over ``cells`` from two replicates (seeds 0-4, seeds 5-9; each a cell -> (max,
    mean) dict), each compared with the paper separately: 4 comparisons per cell. None while
    either replicate lacks a cell."""
    if any(c not in first or c not in second for c in cells):
        return None
    diffs = [abs(rep[c][i] - paper[c][i]) for c in cells for rep in (first, second) for i in (0, 1)]
    return dict(within=sum(d <= WITHIN for d in diffs), comparisons=len(diffs),
                mean_abs_diff=statistics.fmean(diffs) if diffs else math.nan)


def resolve(call: dict, first: dict, second: dict, paper: dict) -> dict | None:
    """The close call re-ranked by W, then D, over its cells' comparisons from both replicates
    (``first``/``second``: name -> cell -> (max, mean)); a tie keeps the seeds 0-4 order. None
    while a replicate is missing a cell; with no differing cell the seeds 0-4 order stands, and
    so it does when one of the two is a committed anchor (section 6.3: its reruns go to the GPU;
    "where none is available, the seeds 0-4 order stands and the note says so")."""
    names = call["names"]
    if not call["cells"]:
        return dict(order=list(names), scores={})
    anchors = [n for n in names if n in COMMITTED]
    if anchors:
        return dict(order=list(names), scores={},
                    note=f"{', '.join(anchors)}: a committed anchor, whose seeds 5-9 are not trained here "
                         "(its two-layer cells need the GPU); the seeds 0-4 order stands (DESIGN.md 6.3)")
    got = {n: replicated(first[n], second.get(n, {}), paper, call["cells"]) for n in names}
    if any(v is None for v in got.values()):
        return None
    return dict(order=sorted(names, key=lambda n: (-got[n]["within"], got[n]["mean_abs_diff"])), scores=got)


def choice(ranked: list[dict], scores: dict, second: dict, paper: dict, waiting: list[str]) -> dict:
    """The chosen combination (None while a candidate or the close call's replicates are
    waited for), the provisional leader (after the close call when resolved), the close call and
    its resolution. ``second``: name -> cell -> (max, mean) of seeds 5-9."""
    out = dict(leader=ranked[0]["name"] if ranked else None, call=close_call(ranked, scores, paper),
               resolved=None, waiting=list(waiting) or ([] if ranked else ["a complete candidate"]),
               chosen=None)
    if out["call"] is not None:
        first = {n: scores[n]["cells"] for n in out["call"]["names"]}
        out["resolved"] = resolve(out["call"], first, second, paper)
        if out["resolved"] is not None:
            out["leader"] = out["resolved"]["order"][0]
    if not out["waiting"] and (out["call"] is None or out["resolved"] is not None):
        out["chosen"] = out["leader"]
    return out


# -- confirmation and target -----------------------------------------------------------------


def gate(chosen: str | None, held: dict, reference: str | None, waiting: list[str] = ()) -> dict:
    """Section 6.4-6.5 on the 48 held-out cells. ``held``: name -> ``score_cells`` over
    ``design.held_out()``; ``reference``: the retrained mlp-4x whose held-out score decides after
    the drift check tripped, or None for the declared 60 of 96 (D 12.04). The chosen combination
    replaces mlp-4x iff its W is greater, or equal with a smaller D. Returns decision ("waiting",
    "mlp-4x itself", "replace", "keep"), what is waited for, both scores and the final choice
    (``reference`` or "every-4d" when mlp-4x stays)."""
    mlp4x = reference or "every-4d"
    out = dict(decision="waiting", waiting=list(waiting), chosen=chosen, reference=mlp4x,
               chosen_score=held.get(chosen), reference_score=held.get(reference) if reference else DECLARED_MLP4X,
               final=None)
    if chosen is None:
        if not out["waiting"]:
            out["waiting"].append("the choice")
    elif chosen in MLP4X:
        out.update(decision="mlp-4x itself", final=mlp4x)
        return out
    for name in (chosen, reference):
        if name is not None and not complete(held, name):
            why = (" (a committed anchor: its held-out cells are not in this store and design.write_tables "
                   "cannot write them; every-2048's need the GPU)") if name in COMMITTED else ""
            out["waiting"].append(shortness(held, name, len(design.held_out()), "'s held-out cells") + why)
    if out["waiting"]:
        return out
    c, r = out["chosen_score"], out["reference_score"]
    replace = c["within"] > r["within"] or (c["within"] == r["within"] and c["mean_abs_diff"] < r["mean_abs_diff"])
    out.update(decision="replace" if replace else "keep", final=chosen if replace else mlp4x)
    return out


def targets(seeds: dict, paper: dict) -> dict:
    """Section 6.6: per table, the maxima within 5 points over its cells with all 5 seeds
    (``seeds``: cell -> accuracies, screening and held-out together), of the table's cells, and
    the shortfall to the target (27 of 30, 24 of 32)."""
    out = {}
    for table, (target, _) in TARGET.items():
        cells = design.table_cells(table)
        have = [c for c in cells if len(seeds.get(c, [])) >= len(design.SEEDS)]
        within = sum(abs(max(seeds[c]) - paper[c][0]) <= WITHIN for c in have)
        out[table] = dict(within=within, cells=len(cells), with_results=len(have), target=target,
                          shortfall=max(0, target - within))
    return out
