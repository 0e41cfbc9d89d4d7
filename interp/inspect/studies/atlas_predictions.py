"""The atlas's pre-registered predictions P1-P9 (``experiments/atlas/PREDICTIONS.md``), computed.

Each prediction is one function of the atlas table (:func:`interp.inspect.studies.atlas.build_atlas`: one
row per seed with ``case``, ``n``, ``d_token``, ``n_layers``, ``architecture``, ``function``,
``seed``, ``accuracy``, ``outcome``, ``label`` and the measures) that quotes its definition and
returns a dict: ``name``, ``claim``, ``verdict`` (one of :data:`VERDICTS`), ``numbers`` (the
counts and fractions the verdict rests on) and ``offending`` (the seeds, cells or rows that
refute it, listed whatever the verdict); :func:`predictions` adds ``reading`` (how each reads
its declaration: :func:`reading`).

Readings shared by every prediction, the most literal ones:

* "A prediction is untested (not confirmed) when its population is smaller than stated": a
  population below its stated size gives ``untested`` even when an offending seed is already in
  it (the seed is still listed under ``offending``). A prediction that states no size is
  untested only when its population is empty.
* A grouping names the fields it groups by; the fields it does not name are pooled (e.g. P8's
  cells are (n, d_token, architecture): the layers are pooled, which changes nothing on either
  grid, where cases 2-3 run at one layer only). Two readings keep one depth apart, stated in
  their own words: P4's d_min and P9's rows (the full grid's two-layer case 4 is another model).
* A size stated in successful seeds ("untested below 30 successful seeds") counts the measured
  ones: a successful seed without its checkpoint is ``unmeasured`` and carries no label, so it
  can neither confirm nor refute; how many were left out is in the numbers.
* A run whose training failed has no accuracy and the outcome ``failed``: it counts as a seed
  run without a success (P8's "of 5", P9's widths run); P5, which compares accuracies, leaves
  it out.
* Fractions are compared exactly (:class:`fractions.Fraction`), so 1 of 20 is ">= 5%".
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from interp.inspect.mechanism.levels import routes

VERDICTS = ("confirmed", "refuted", "untested")
#: the reading that replaced mlp-4x (a name of :data:`interp.inspect.studies.atlas.NAMED`), set when issue
#: 28's gate decides so (``experiments/readings/screen/scores.md``, "Decision"; a test holds the two
#: together), before the atlas's MLP runs start; None: mlp-4x stays (PREDICTIONS.md, "Architectures")
MLP_READING: str | None = "f14"
#: PREDICTIONS.md's architectures: attention-only, and the chosen reading's one-layer MLP models
#: (d_mlp = 4 d_model), as :func:`interp.inspect.studies.atlas.architecture` names them
ATTN, MLP = "attention-only", "mlp-4x" + ("" if MLP_READING is None else f"[{MLP_READING}]")
PERM, ANY = "permutation", "any"


# ----------------------------------------------------------------------------- helpers


def number(v) -> float:
    """A measure as a float; NaN for None, text or a missing value (a CSV's empty cell)."""
    if isinstance(v, bool):
        return float(v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def has_value(v) -> bool:
    """Whether a boolean measure holds a result (True/False, also as CSV text), not None/NaN."""
    if isinstance(v, str):
        return v.strip().lower() in ("true", "false", "1", "0", "1.0", "0.0")
    return not math.isnan(number(v))


def flag(v) -> bool:
    """A boolean measure (``qk_circle``) as True/False, whether it came from :func:`measure`
    (True, False, None) or back from a CSV ("True", "False", NaN)."""
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "1.0")
    x = number(v)
    return not math.isnan(x) and x != 0


def seed_text(r) -> str:
    """One seed, in words: its cell and seed number."""
    layers = int(r["n_layers"])
    return (f"case {int(r['case'])}, n={int(r['n'])}, d_token={int(r['d_token'])}, {layers} "
            f"layer{'s' if layers > 1 else ''}, {r['architecture']}, {r['function']}, seed {int(r['seed'])}")


def successes(df):
    return df[df["outcome"] == "success"]


def labelled(pop):
    """The seeds of ``pop`` that were measured (a successful seed without its checkpoint is
    labelled ``unmeasured``: it cannot count for or against a mechanism), and how many were not."""
    measured = pop[pop["label"] != "unmeasured"]
    return measured, len(pop) - len(measured)


def _where(df, **fields):
    """Rows of ``df`` whose fields equal the given values (a tuple: any of its values)."""
    import numpy as np

    keep = np.ones(len(df), dtype=bool)
    for k, v in fields.items():
        keep &= df[k].isin(v if isinstance(v, tuple) else (v,)).to_numpy()
    return df[keep]


def _share(k: int, total: int) -> float:
    return round(k / total, 4) if total else math.nan


def result(name: str, claim: str, verdict: str, numbers: dict, offending=()) -> dict:
    assert verdict in VERDICTS, verdict
    return dict(name=name, claim=claim, verdict=verdict, numbers=numbers, offending=list(offending))


def _plain(text: str) -> str:
    """Docstring text as one line of markdown: whitespace folded, reST roles and double
    backticks made single code spans."""
    return re.sub(r":\w+:`", "`", " ".join(text.split()).replace("``", "`"))


def reading(prediction) -> str:
    """How ``prediction`` (one of :data:`PREDICTIONS`) reads its declaration: its docstring
    after the quoted declaration (the paragraphs that follow it), as one line of markdown."""
    doc = (prediction.__doc__ or "").strip().split("\n\n")
    return _plain(" ".join(doc[1:]))


def shared_readings() -> list[str]:
    """The readings shared by every prediction (this module's docstring), one line each."""
    text = __doc__.split("the most literal ones:", 1)[1]
    return [_plain(item) for item in text.split("\n* ") if item.strip()]


# ----------------------------------------------------------------------------- P1-P9


def p1(df) -> dict:
    """P1. "Under ``function="any"`` training no successful seed, of any case, n, width or
    architecture, is labelled ``inverted``. Refuted by >= 1 such seed. Untested below 30
    successful ``any`` seeds."

    Population: successful seeds with ``function == "any"``, measured (:func:`labelled`)."""
    pop, unmeasured = labelled(successes(_where(df, function=ANY)))
    bad = pop[pop["label"] == "inverted"]
    verdict = "untested" if len(pop) < 30 else "refuted" if len(bad) else "confirmed"
    return result("P1", "the inverted mechanism needs f to be a permutation", verdict,
                  {"measured successful any seeds": len(pop), "needed": 30, "inverted": len(bad),
                   "unmeasured (left out)": unmeasured},
                  [seed_text(r) for _, r in bad.iterrows()])


def p2(df) -> dict:
    """P2. "Among successful two-layer case-5 attention-only ``permutation`` seeds (all d_token
    pooled), let s(n) = the fraction labelled ``mirror``, over the n with >= 5 successful seeds.
    Predicted: s never drops by more than 0.10 from one such n to the next larger, and
    s(largest) - s(smallest) >= 0.30. Refuted otherwise; untested with fewer than 3 such n."

    "The next larger" is the next larger n among those with >= 5 successful seeds."""
    pop, unmeasured = labelled(successes(_where(df, case=5, n_layers=2, architecture=ATTN, function=PERM)))
    s = {}
    for n, sub in pop.groupby("n"):
        if len(sub) >= 5:
            s[int(n)] = Fraction(int((sub["label"] == "mirror").sum()), len(sub))
    ns = sorted(s)
    numbers = {"s(n)": {n: round(float(s[n]), 4) for n in ns},
               "measured successful seeds per n": {int(n): len(sub) for n, sub in pop.groupby("n")},
               "n with >= 5 successes": len(ns), "needed": 3, "unmeasured (left out)": unmeasured}
    drops = [(a, b, s[a] - s[b]) for a, b in zip(ns, ns[1:])]
    bad = [f"n={a} -> n={b}: s drops by {float(d):.3f}" for a, b, d in drops if d > Fraction(1, 10)]
    if len(ns) >= 2:
        rise = s[ns[-1]] - s[ns[0]]
        numbers["s(largest) - s(smallest)"] = round(float(rise), 4)
        if rise < Fraction(3, 10):
            bad.append(f"s(n={ns[-1]}) - s(n={ns[0]}) = {float(rise):.3f} < 0.30")
    verdict = "untested" if len(ns) < 3 else "refuted" if bad else "confirmed"
    return result("P2", "the mirror's share grows with n", verdict, numbers, bad)


def p3(df) -> dict:
    """P3. "In every slice 'one n >= 5' and every slice 'one d_token' (cases, architectures and
    functions pooled) with >= 40 successful seeds, fewer than 5% of the successful seeds pass the
    circle test in QK or OV; likewise over all successful seeds, MLP models included. Refuted by
    any such slice at >= 5%."

    Readings: "likewise" carries the >= 40 floor to the slice of all successful seeds; a seed
    passes when ``qk_circle`` or ``ov_circle`` is True (the geometry test's verdict, which an
    inverted circle, scores peaking opposite each target's key, does not pass). A seed without a circle test (n < 4,
    where the Definitions say the test does not apply, or unmeasured) is in no slice: counting it
    as not passing would dilute the share. Untested when no slice reaches 40 tested seeds."""
    pop = successes(df)
    qk, ov = (pop.get(c, [None] * len(pop)) for c in ("qk_circle", "ov_circle"))
    tested = [has_value(q) or has_value(o) for q, o in zip(qk, ov)]
    circle = [flag(q) or flag(o) for q, o in zip(qk, ov)]
    untested_seeds = len(pop) - sum(tested)
    pop = pop.assign(_circle=circle, _tested=tested)
    pop = pop[pop["_tested"].astype(bool)]  # a mask even when empty (a list [] would pick columns)
    slices = [(f"n={int(n)}", sub) for n, sub in pop.groupby("n") if n >= 5]
    slices += [(f"d_token={int(d)}", sub) for d, sub in pop.groupby("d_token")]
    slices.append(("all successful seeds", pop))
    numbers, bad = {}, []
    for name, sub in slices:
        if len(sub) < 40:
            continue
        k = int(sub["_circle"].sum())
        numbers[name] = f"{k}/{len(sub)} ({_share(k, len(sub)):.1%})"
        if Fraction(k, len(sub)) >= Fraction(5, 100):
            bad.append(f"{name}: {k} of {len(sub)} pass: "
                       + "; ".join(seed_text(r) for _, r in sub[sub["_circle"]].iterrows()))
    numbers = {"slices with >= 40 tested successful seeds": len(numbers), **numbers,
               "successful seeds without a circle test (left out)": untested_seeds}
    verdict = ("untested" if not numbers["slices with >= 40 tested successful seeds"] else
               "refuted" if bad else "confirmed")
    return result("P3", "circles stay rare", verdict, numbers, bad)


def d_min(df, case: int, n: int) -> int:
    """"d_min(case, n): the smallest d_token of the grid with at least one successful seed
    (attention-only, ``function="permutation"``); 64 when none succeeds." One layer: P4's
    grounds are one-layer widths (Table 1; the core grid runs cases 1-4 at one layer only), and
    the full grid's two-layer case 4 would otherwise lower d_min(4, n) with another model. A
    (case, n) never run counts as none succeeding (64). (Reading fixed before any atlas run.)"""
    ok = successes(_where(df, case=case, n=n, n_layers=1, architecture=ATTN, function=PERM))
    return int(ok["d_token"].min()) if len(ok) else 64


def p4(df) -> dict:
    """P4. "With g(case) = log2 d_min(case, 50) - log2 d_min(case, 5): predicted
    (g(2) + g(3)) / 2 < (g(1) + g(4)) / 2. Refuted if >=. Untested if fewer than 3 of the 8 d_min
    values are <= 32."

    Readings (:func:`d_min`): one layer only, since P4's grounds are one-layer widths and the
    full grid's two-layer case 4 is another model; a (case, n) never run, or run without a
    success, counts as 64 (on the full grid, which runs d_token 64, "64" also covers a first
    success at 64). Fixed before any atlas run."""
    d = {(c, n): d_min(df, c, n) for c in (1, 2, 3, 4) for n in (5, 50)}
    g = {c: math.log2(d[c, 50]) - math.log2(d[c, 5]) for c in (1, 2, 3, 4)}
    left, right = (g[2] + g[3]) / 2, (g[1] + g[4]) / 2
    known = sum(v <= 32 for v in d.values())
    runs = {f"case {c}, n={n}": len(_where(df, case=c, n=n, n_layers=1, architecture=ATTN, function=PERM))
            for c, n in d}
    numbers = {"d_min": {f"case {c}, n={n}": v for (c, n), v in d.items()},
               "g": {f"case {c}": round(v, 4) for c, v in g.items()},
               "(g(2)+g(3))/2": round(left, 4), "(g(1)+g(4))/2": round(right, 4),
               "d_min <= 32": known, "needed": 3, "runs behind each d_min": runs}
    verdict = "untested" if known < 3 else "confirmed" if left < right else "refuted"
    bad = ([f"(g(2)+g(3))/2 = {left:.3f} >= (g(1)+g(4))/2 = {right:.3f}"]
           if known >= 3 and left >= right else [])
    return result("P4", "cases 2-3 need width more slowly than cases 1 and 4", verdict, numbers, bad)


def p5(df) -> dict:
    """P5. "No one-layer attention-only case-5 seed passes 76%. At every n and d_token of the
    grid (``permutation``). Refuted by one seed above 76%."

    Population: every one-layer attention-only case-5 ``permutation`` seed, whatever its
    outcome; "above 76%" is accuracy > 0.76. No size stated: untested only when empty. A run
    whose training failed has no accuracy and is left out (counted in the numbers)."""
    pop = _where(df, case=5, n_layers=1, architecture=ATTN, function=PERM)
    no_accuracy = int(pop["accuracy"].astype(float).isna().sum())
    pop = pop[pop["accuracy"].astype(float).notna()]
    acc = pop["accuracy"].astype(float)
    bad = pop[acc > 0.76]
    verdict = "untested" if not len(pop) else "refuted" if len(bad) else "confirmed"
    return result("P5", "no one-layer attention-only case-5 seed passes 76%", verdict,
                  {"seeds": len(pop), "max accuracy": round(float(acc.max()), 4) if len(pop) else math.nan,
                   "above 0.76": len(bad), "without an accuracy (left out)": no_accuracy},
                  [f"{seed_text(r)}: accuracy {float(r['accuracy']):.4f}" for _, r in bad.iterrows()])


def _combine(*verdicts: str) -> str:
    if "refuted" in verdicts:
        return "refuted"
    return "confirmed" if all(v == "confirmed" for v in verdicts) else "untested"


def p6(df) -> dict:
    """P6. "(a) No one-layer ``mlp-4x`` case-5 seed succeeds at d_token < 2n + 2 (Theorem 3.5's
    embedding dimension). Refuted by one such success. (b) Every successful one-layer ``mlp-4x``
    case-5 seed at n >= 5 has final-position attention entropy >= 0.5 (1 = uniform) and
    MLP-ablation accuracy <= chance + 10 points. Refuted by one seed outside either; untested
    below 3 successful seeds."

    Readings: functions pooled (none named); chance = 1/n, so (b) asks ``acc_mean_mlp`` <= 1/n +
    0.10; the entropy is ``attn_entropy`` where the table has it, else ``entropy`` (the last
    layer's final query, normalised: the same number for one layer). (a) is untested when no
    such seed was run; (b) is untested when a seed lacks either measure (not measured is not
    outside). P6 is refuted if (a) or (b) is, confirmed if both are, else untested."""
    pop = _where(df, case=5, n_layers=1, architecture=MLP)
    narrow = pop[pop["d_token"] < 2 * pop["n"] + 2]
    bad_a = successes(narrow)
    verdict_a = "untested" if not len(narrow) else "refuted" if len(bad_a) else "confirmed"
    wide = successes(pop[pop["n"] >= 5])
    bad_b, missing = [], 0
    for _, r in wide.iterrows():
        ent = number(r.get("attn_entropy"))
        ent = number(r.get("entropy")) if math.isnan(ent) else ent
        ablated = number(r.get("acc_mean_mlp"))
        if ent < 0.5 or ablated > 1 / int(r["n"]) + 0.10:
            bad_b.append(f"{seed_text(r)}: entropy {ent:.3f}, MLP mean-ablated accuracy {ablated:.3f}")
        elif math.isnan(ent) or math.isnan(ablated):
            missing += 1
    verdict_b = ("untested" if len(wide) < 3 else "refuted" if bad_b else
                 "untested" if missing else "confirmed")
    numbers = {"(a) verdict": verdict_a, "(a) seeds at d_token < 2n+2": len(narrow),
               "(a) successes there": len(bad_a), "(b) verdict": verdict_b,
               "(b) successful seeds at n >= 5": len(wide), "(b) needed": 3,
               "(b) outside": len(bad_b), "(b) without a measure": missing}
    offending = [f"(a) {seed_text(r)}" for _, r in bad_a.iterrows()] + [f"(b) {t}" for t in bad_b]
    return result("P6", "one-layer case 5 needs Theorem 3.5's width, and its successes spread attention",
                  _combine(verdict_a, verdict_b), numbers, offending)


def p7(df) -> dict:
    """P7. "Among successful one-layer ``mlp-4x`` seeds of cases 1-4, >= 80% are labelled
    ``construction`` or ``inverted``, and >= 80% keep >= 90% accuracy with the MLP mean-ablated.
    Refuted if either share is below 80%; untested below 10 successful seeds."

    Readings: functions pooled (none named); "keep >= 90%" is ``acc_mean_mlp`` >= 0.90. The
    second share is untested (not refuted) while a seed lacks ``acc_mean_mlp``, unless the
    seeds that have it already put the share below 80% whatever the others hold. Its label
    ``construction`` measured the routing: read as routing ``lookup`` (:func:`levels.routes`)."""
    pop, unmeasured = labelled(successes(_where(df, case=(1, 2, 3, 4), n_layers=1, architecture=MLP)))
    named = routes(pop).isin(("lookup", "inverted"))
    ablated = [number(v) for v in pop.get("acc_mean_mlp", [None] * len(pop))]
    keep = sum(a >= 0.90 for a in ablated)
    missing = sum(math.isnan(a) for a in ablated)
    total = len(pop)
    label_low = total and Fraction(int(named.sum()), total) < Fraction(4, 5)
    keep_low = total and Fraction(keep + missing, total) < Fraction(4, 5)  # even if all missing keep
    keep_ok = total and not missing and Fraction(keep, total) >= Fraction(4, 5)
    numbers = {"measured successful seeds": total, "needed": 10,
               "construction or inverted": f"{int(named.sum())} ({_share(int(named.sum()), total)})",
               "keep >= 0.90 with the MLP mean-ablated": f"{keep} ({_share(keep, total)})",
               "without acc_mean_mlp": missing, "unmeasured (left out)": unmeasured}
    bad = [f"{seed_text(r)}: label {r['label']}" for (_, r), ok in zip(pop.iterrows(), named) if not ok]
    bad += [f"{seed_text(r)}: MLP mean-ablated accuracy {a:.3f}" for (_, r), a in zip(pop.iterrows(), ablated)
            if a < 0.90]
    verdict = ("untested" if total < 10 else "refuted" if label_low or keep_low else
               "confirmed" if keep_ok else "untested")
    return result("P7", "in cases 1-4 the attention does the lookup, MLP or not", verdict, numbers, bad)


def p8(df) -> dict:
    """P8. "For every (n, d_token, architecture) where both are run (``permutation``), the
    numbers of successful seeds (of 5) differ by at most 1 in >= 90% of cells. Refuted below
    90%."

    Readings: cells keyed by (n, d_token, architecture), layers pooled; the counts are compared
    whatever the number of seeds stored; no size stated: untested only with no such cell."""
    pop = _where(df, case=(2, 3), function=PERM)
    cells, bad = 0, []
    for (n, d, arch), sub in pop.groupby(["n", "d_token", "architecture"]):
        two, three = sub[sub["case"] == 2], sub[sub["case"] == 3]
        if not len(two) or not len(three):
            continue
        cells += 1
        k2, k3 = len(successes(two)), len(successes(three))
        if abs(k2 - k3) > 1:
            bad.append(f"n={int(n)}, d_token={int(d)}, {arch}: case 2 {k2}/{len(two)}, "
                       f"case 3 {k3}/{len(three)}")
    within = cells - len(bad)
    verdict = ("untested" if not cells else
               "confirmed" if Fraction(within, cells) >= Fraction(9, 10) else "refuted")
    return result("P8", "cases 2 and 3 are one learning problem", verdict,
                  {"cells run in both": cells, "within 1": within, "share": _share(within, cells)}, bad)


def p9(df) -> dict:
    """P9. "For every (case 1-4, n, architecture, function) row with a successful seed, the
    d_token with a successful seed form an upward-closed set of the grid's widths. Refuted if
    more than 10% of such rows break it."

    Readings: "the grid's widths" of a row are the d_token run in that row (mlp-4x rows run
    4-32, the core's rows stop at 32); a row is also one depth (the full grid's two-layer case 4
    is another model, so its widths are not merged with one layer's; the core grid has one
    layer only: the same rows either way); untested with no such row. (Fixed before any run.)"""
    pop = _where(df, case=(1, 2, 3, 4))
    rows, bad = 0, []
    for (case, n, _, arch, function), sub in pop.groupby(["case", "n", "n_layers", "architecture", "function"]):
        won = sorted({int(d) for d in successes(sub)["d_token"]})
        if not won:
            continue
        rows += 1
        above = [int(d) for d in sorted(sub["d_token"].unique()) if d >= won[0]]
        if above != won:
            bad.append(f"case {int(case)}, n={int(n)}, {arch}, {function}: successes at d_token "
                       f"{won}, run at {above} from {won[0]} up")
    verdict = ("untested" if not rows else
               "refuted" if Fraction(len(bad), rows) > Fraction(1, 10) else "confirmed")
    return result("P9", "up to d_token 64, width does not hurt cases 1-4", verdict,
                  {"rows with a success": rows, "not upward-closed": len(bad),
                   "share broken": _share(len(bad), rows)}, bad)


PREDICTIONS = (p1, p2, p3, p4, p5, p6, p7, p8, p9)


def predictions(df) -> list[dict]:
    """Every prediction of ``PREDICTIONS.md`` on the atlas table ``df``, P1 to P9, each with
    its ``reading`` (:func:`reading`)."""
    return [{**p(df), "reading": reading(p)} for p in PREDICTIONS]
