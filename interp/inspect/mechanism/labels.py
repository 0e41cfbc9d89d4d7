"""Names for what a seed does: its labels, a one-line verdict, and a legend of measures.

The labels themselves (``routing``, ``code``, ``mechanism``: issue 42's two levels) live in
:mod:`interp.inspect.mechanism.levels` and are re-exported here.

One place for the words that :mod:`interp.inspect.studies.analysis` (reports), :mod:`interp.inspect.tools.viz`
(attention pages), :mod:`interp.inspect.studies.explore` (the sweep explorer) and ``interp probe`` print
about a model. :func:`mechanism` reads the flat dict of :func:`interp.inspect.mechanism.measure.measure`;
:func:`verdict` turns it into one sentence; :data:`LEGEND` explains every measure in a line;
:func:`answer` writes a sweep report's paragraphs about one group of seeds;
:func:`group_sort_key` / :func:`sort_by_group` order groups (numbers as numbers) wherever they
are listed; :func:`r2_text` writes an R^2 at the probes' floor as floored.
"""

from __future__ import annotations

import math

from interp.inspect.mechanism.levels import (  # noqa: F401 - the labels' words, re-exported
    CIRCLES, CODES, MECHANISMS, ROUTINGS, _ok, code, labels_of, mechanism, routing)
from interp.inspect.tools.probes import r2_text  # noqa: F401 - re-exported (labels.r2_text)
from interp.inspect.vocabulary import AXIS, axis_label, group_sort_key  # noqa: F401 - re-exported

#: one line per measure of :func:`interp.inspect.mechanism.measure.measure` (the construction's value)
LEGEND = {
    "acc": "accuracy on sampled inputs, f a permutation as in training (1)",
    "acc_any": "accuracy when f is any function [n] -> [n]; a lookup keeps it (1)",
    "mass": "last layer, final query: mean weight on the construction's position (1)",
    "self_mass": "last layer: the final position's weight on itself (0)",
    "hit": "fraction of inputs whose attention argmax is the construction's position (1)",
    "entropy": "attention entropy / log(seq_len): 0 one-hot, 1 uniform (0)",
    "mass_keypos": "cases 4-5: weight on the matching slot's key position 2j (0)",
    "mass_L0": "case 5, two layers: layer 0's weight on each position's key 2(p//2) (1)",
    "hit_L0": "case 5, two layers: layer 0's argmax at 2(p//2) (1)",
    "at": "where QK, circle and patching are read: value position (construction) or key (mirror)",
    "qk_diag": "QK rows (targets) peaking at the matching stored key (1)",
    "qk_margin": "QK: smallest (diagonal - best other) over the score range (> 0)",
    "qk_anti": "QK rows with their minimum at the matching key: inverted (0)",
    "ov_diag": "OV rows (values) whose largest logit is the value itself: copying (1)",
    "ov_margin": "OV: smallest copying margin over the logit range (> 0)",
    "ov_anti": "OV rows with their minimum on the diagonal: writes minus the value (0)",
    "qkpos_diag": "cases 1, 4: QK through the positional embedding alone peaking on the diagonal (1)",
    "circle": "order-free circle test of the score matrix: a circle with the match on the "
              "diagonal, thresholds from random/shuffled models (True)",
    "top2": "share of the centred score matrix's energy in its top two singular values (1)",
    "balance": "second / first singular value (1: a round circle)",
    "rcv": "radius std / mean of the circle fitted to the SVD points (0)",
    "spacing": "distance of the sorted angles from even steps, in steps (0)",
    "fit": "R^2 of the scores against c cos(theta_a - theta_b), best relabeling (1)",
    "inverted": "the circle fit has c < 0: scores lowest at the matching key (False)",
    "bias": "per-key column offset removed before the test, relative size (0)",
    "r2": "held-out cos/sin probe R^2 in label order, best frequency m and N angles (1; a "
          "circle in another order scores low)",
    "m": "frequency of the best cos/sin probe (1)",
    "N": "number of angles of the best cos/sin probe (n or n + 1)",
    "keys_top2": "PCA of the last layer's mean key vectors: top-2 variance (1)",
    "keys_rcv": "... radius std / mean in that plane (0)",
    "keys_gap": "... smallest gap / even gap of the sorted angles (~1)",
    "keys_in_order": "... keys in cyclic label order (True)",
    "emb_rank": "participation rank of the token (or value) table: ~1 means collapsed",
    "follow": "patching the attended position from a corrupted run moves the answer there (1)",
    "keep": "patching every other slot keeps the clean answer (1)",
    "acc_mean_mlp": "accuracy with every MLP's output replaced by its mean over the inputs "
                    "(NaN without an MLP; acc when the MLP passes values through)",
    "acc_zero_mlp": "accuracy with every MLP's output zeroed (NaN without an MLP)",
    "attn_entropy": "MLP models: last layer's final-position attention entropy, 1 = uniform (0)",
    "attn_picks_slot": "MLP models: attention argmax on the matching slot's key or value position (1)",
    "mlp_role": "what the MLP does: none (no MLP), passes (mean-ablation costs <= 5 points), "
                "needed (ablated accuracy < chance + 10 points), helps (between)",
}


#: the code level's measures (:mod:`interp.inspect.mechanism.codes`), for ``value_*`` and ``query_*``
CODE_LEGEND = {
    "dim": "interchange dimension: the least k whose principal-axes interchange carries it (2)",
    "iia1": "interchange accuracy along the code's first principal axis",
    "iia2": "interchange accuracy in the code's top-2 principal plane (1)",
    "iia_full": "interchange accuracy of the whole vector: is it read at this site at all (1)",
    "pr": "participation ratio of the code table's spectrum (2; one-hot: n - 1)",
    "top2": "code table: top-2 variance share (1)",
    "rcv": "code table, whitened top-2 plane: radius std / mean (0)",
    "gap": "code table, whitened top-2 plane: smallest gap / even gap (1: evenly spaced)",
    "cos": "mean |cos| between distinct centred code vectors (one-hot: 1 / (n - 1))",
}


def describe(measure: str) -> str:
    """The legend line of a measure (``qk_fit`` and ``ov_fit`` share ``fit``; ``r2_token_key``
    shares ``r2``), or of a mechanism label (:data:`MECHANISMS`, e.g. ``mlp-lookup``);
    KeyError names the unknown measure."""
    if measure in LEGEND:
        return LEGEND[measure]
    if measure == "n":
        return "table size: the labels' tests depend on it"
    variable, _, rest = measure.partition("_")
    if variable in ("value", "query") and rest in CODE_LEGEND:
        return f"{'value at the read slot' if variable == 'value' else 'target key at the query'}: {CODE_LEGEND[rest]}"
    if measure in MECHANISMS:
        return f"mechanism: {MECHANISMS[measure]}"
    head, _, rest = measure.partition("_")
    if head in ("qk", "ov") and rest in LEGEND:
        return f"{head.upper()}: {LEGEND[rest]}"
    if head in ("r2", "m", "N") and rest:
        return f"{LEGEND[head]} [{rest}]"
    raise KeyError(f"no legend for measure {measure!r}")


def verdict(row) -> str:
    """One sentence: accuracy, mechanism, its routing and codes, and whether QK is a circle read
    through the circuit."""
    label = mechanism(row)
    acc, acc_any = row.get("acc", math.nan), row.get("acc_any", math.nan)
    circle = row.get("qk_circle")
    geo = ("n < 4: no circle test" if circle is None else
           "QK is a circle with the match on the diagonal" if circle else
           f"QK is not a circle (fit {row.get('qk_fit', math.nan):.2f}, top-2 energy "
           f"{row.get('qk_top2', math.nan):.2f})")
    mlp = ""
    if row.get("mlp_role") in ("passes", "helps", "needed"):
        mlp = (f" MLP: {row['mlp_role']} (accuracy {row.get('acc_mean_mlp', math.nan):.3f} with its "
               f"output mean-ablated, {row.get('acc_zero_mlp', math.nan):.3f} zeroed; final-position "
               f"attention entropy {row.get('attn_entropy', math.nan):.2f}, argmax on the matching "
               f"slot {row.get('attn_picks_slot', math.nan):.2f}).")
    codes = ""
    if code(row) != "unmeasured":
        dims = [f"{w} {code(row, v)}" + (f" (dimension {int(row[v + '_dim'])})"
                                         if _ok(row, v + "_dim", 0) else "")
                for v, w in (("value", "values"), ("query", "target key"))]
        codes = f" Routing: {routing(row)}; code: {', '.join(dims)}."
    return (f"{label}: accuracy {acc:.3f} (any f: {acc_any:.3f}); {MECHANISMS[label]}{codes} "
            f"Geometry: {geo}.{mlp}")


# ----------------------------------------------------------------------------- written answers


def _mean(sub, col):
    return float(sub[col].astype(float).mean()) if col in sub and len(sub) else math.nan


def _range(sub, col) -> str:
    if col not in sub or not len(sub):
        return "n/a"
    x = sub[col].astype(float)
    return f"{x.mean():.2f} ({x.min():.2f}-{x.max():.2f})" if len(x) > 1 else f"{x.iloc[0]:.2f}"


def _functional(d) -> str:
    """Attention, circuits and patching of a set of seeds, in numbers."""
    s = (f"Attention mass on the construction's position {_range(d, 'mass')} (on the query "
         f"itself {_range(d, 'self_mass')}), argmax there {_range(d, 'hit')}, entropy "
         f"{_range(d, 'entropy')} (0 = one-hot, 1 = uniform); QK rows peaking on the diagonal "
         f"{_range(d, 'qk_diag')} (minimum there {_range(d, 'qk_anti')}), OV rows peaking on the "
         f"diagonal {_range(d, 'ov_diag')} (minimum there {_range(d, 'ov_anti')})")
    if "mass_keypos" in d and d["mass_keypos"].notna().any():
        s += f"; mass on the matching key position 2j {_range(d, 'mass_keypos')}"
    if "mass_L0" in d and d["mass_L0"].notna().any():
        s += f"; layer 0, every position to its key 2(p//2): mass {_range(d, 'mass_L0')}"
    if "qkpos_diag" in d and d["qkpos_diag"].notna().any():
        s += f"; positional-embedding QK on the diagonal {_range(d, 'qkpos_diag')}"
    roles = [r for r in dict.fromkeys(d["mlp_role"]) if r in ("passes", "helps", "needed")] \
        if "mlp_role" in d else []
    if roles:  # seeds with MLPs
        s += (f"; with the MLPs' output mean-ablated accuracy {_range(d, 'acc_mean_mlp')} (zeroed "
              f"{_range(d, 'acc_zero_mlp')}), MLP role {', '.join(roles)}, attention argmax on "
              f"the matching slot {_range(d, 'attn_picks_slot')}")
    return (s + f"; patching the attended position moves the answer in {_range(d, 'follow')} "
            f"of inputs; accuracy when f is an arbitrary function (trained on permutations) "
            f"{_range(d, 'acc_any')}.")


def _geometry(d, r2_cols) -> str:
    """The secondary geometry columns: ordered cos/sin probes and the key-vector PCA circle."""
    geo = [f"{c[3:]} R^2 {_range(d, c)} (m = {_mode(d, 'm_' + c[3:])}, N = {_mode(d, 'N_' + c[3:])})"
           for c in r2_cols]
    return ("Secondary (label-ordered, so a circle with its keys in another order scores low): "
            "best cos/sin probes " + "; ".join(geo) +
            f"; key vectors' top-2 PCA plane: variance {_range(d, 'keys_top2')}, radius cv "
            f"{_range(d, 'keys_rcv')}; embedding participation rank {_range(d, 'emb_rank')}.")


def _count(d, col) -> int:
    return int(d[col].fillna(False).astype(bool).sum())


def _circle_verdict(d) -> str:
    """The circuit circle test (:mod:`interp.inspect.tools.geometry`) of a set of seeds, in words."""
    if "qk_circle" not in d or not d["qk_circle"].notna().any():
        return " Circle test: not applicable at n < 4 (any three points lie on a circle)."
    k, qk, ov = len(d), _count(d, "qk_circle"), _count(d, "ov_circle")
    s = (f" **Circle, read through the circuit** (order-free; thresholds from random and shuffled "
         f"models, `experiments/analysis/geometry-null.md`): QK is a circle with the match on "
         f"the diagonal in {qk} of {k} seed(s) (fit to c cos(theta_a - theta_b) "
         f"{_range(d, 'qk_fit')}, top-2 energy {_range(d, 'qk_top2')}, radius cv "
         f"{_range(d, 'qk_rcv')}); OV in {ov} of {k} (fit {_range(d, 'ov_fit')}, top-2 energy "
         f"{_range(d, 'ov_top2')}).")
    if qk == 0 and _mean(d, "qk_top2") < 0.9:
        s += (" The scores use more than the construction's two dimensions: the key is matched, "
              "but not on a circle.")
    inv = _count(d, "qk_inverted")
    if inv:
        s += f" {inv} seed(s) have an inverted QK (scores lowest at the matching key)."
    return s


def _seeds(d) -> str:
    return ", ".join(str(int(s)) for s in d.seed) or "none"


def _mechanism_text(kind: str, d) -> str:
    """The opening of one mechanism's paragraph: what the seeds ``d`` do, read off their numbers."""
    head = f"**Successful seeds {_seeds(d)}"
    if kind == "construction" or kind.startswith("lookup"):
        what = ("the construction's mechanism, routing and circle code" if kind == "construction"
                else f"the construction's routing, {kind}")
        s = (f"{head}: {what}.** QK matches the target key to the stored key and the answer is "
             "read from the matching slot. ")
        mass, self_mass = _mean(d, "mass"), _mean(d, "self_mass")
        if mass >= 0.9:
            return s + "Attention sits on that slot as in the construction. "
        if self_mass >= 0.25 and mass + self_mass >= 0.75:
            return s + ("Softmax splits the attention between that slot and the query position "
                        "itself, which carries the same key and no value (the construction's "
                        "leftmost rule breaks this tie towards the slot). ")
        return s + f"Attention is softer than the construction's (mass {mass:.2f}). "
    if kind == "inverted":
        s = (f"{head}: an inverted mechanism.** Attention that *avoids* the matching slot "
             "(QK rows have their minimum on the diagonal) and an OV circuit that writes "
             "minus the value. When f is a permutation the values of all slots sum to the "
             "same vector for every input, so an almost uniform attention output differs "
             "between inputs only by the deficit at the matching slot, which OV turns into "
             "the answer. ")
        if _mean(d, "acc_any") < 0.5:
            s += "As that reading predicts, these seeds fail when f is an arbitrary function, "
        if _mean(d, "follow") < 0.5:
            s += ("and patching a single slot (which breaks the permutation) does not move "
                  "their answers. " if _mean(d, "acc_any") < 0.5 else
                  "Patching a single slot does not move their answers. ")
        return s
    if kind == "mirror":
        return (f"{head}: the construction run backwards.** The last layer attends the *key* "
                "position 2j with k_j = i* (not its value position 2j + 1), so the first layer "
                "must have moved each value back onto its key's position, where the paper's "
                "construction moves each key forward onto its value's; the answers stay right "
                "when f is an arbitrary function, so it is a lookup. QK, its circle and "
                "patching are measured at that key position (patching it from a corrupted run "
                "moves the answer); `mass` and the layer-0 measures score the paper's "
                "direction. ")
    if kind == "mlp-lookup":
        return (f"{head}: the MLP does the lookup.** The last layer's final-position attention "
                f"spreads (entropy {_range(d, 'attn_entropy')}) instead of picking the matching "
                "slot, and mean-ablating the MLPs' output leaves accuracy near chance: the "
                "attention output carries the input and the MLP reads f(i*) from it, as in "
                "Theorem 3.5. ")
    return (f"{head}: neither the construction's mechanism nor the inverted one** by these "
            "measures. ")


def _failed_text(bad, r2_cols) -> str:
    """The failed seeds' paragraph: the failure signatures their numbers show."""
    kinds = []
    if _mean(bad, "entropy") >= 0.8:
        kinds.append("near-uniform attention")
    elif _mean(bad, "hit") < 0.5:
        kinds.append("sharp attention on the wrong position")
    if _mean(bad, "qk_diag") < 0.5:
        kinds.append("no key matching in QK")
    if _mean(bad, "ov_diag") >= 0.9:
        kinds.append("an OV circuit that already copies")
    elif _mean(bad, "ov_diag") < 0.5:
        kinds.append("no copying OV")
    if _mean(bad, "emb_rank") < 1.5:
        kinds.append("a collapsed embedding (participation rank < 1.5)")
    return (f"**Failed seeds {_seeds(bad)}.** They show "
            + (", ".join(kinds) if kinds else "no single failure signature") + ": "
            + _functional(bad) + " " + _geometry(bad, r2_cols))


def answer(sub) -> str:
    """The written answer for one group of seeds (the per-seed table ``sub`` of
    :func:`interp.inspect.studies.analysis.analyze_sweep`): one paragraph per mechanism found among the
    successful seeds, then the failed and partial seeds, every claim read off their numbers."""
    ok, bad = sub[sub.outcome == "success"], sub[sub.outcome == "failed"]
    part = sub[sub.outcome == "partial"]
    text = [f"{len(ok)} successful seed(s) ({_seeds(ok)}), {len(bad)} failed ({_seeds(bad)}), "
            f"{len(part)} partial ({_seeds(part)})."]
    r2_cols = [c for c in sub.columns if c.startswith("r2_") and sub[c].notna().any()]
    for kind in MECHANISMS:
        d = ok[ok.mechanism == kind]
        if len(d):
            text.append(_mechanism_text(kind, d) + _functional(d) + _circle_verdict(d) + " "
                        + _geometry(d, r2_cols))
    if len(bad):
        text.append(_failed_text(bad, r2_cols))
    if len(part):
        text.append(f"**Partial seeds {_seeds(part)}** ("
                    + "; ".join(f"seed {int(r.seed)}: accuracy {r.accuracy:.2f}, QK rows on the "
                                f"diagonal {r.qk_diag:.2f}, OV {r.ov_diag:.2f}, mechanism "
                                f"{r.mechanism}" for _, r in part.iterrows())
                    + "). " + _functional(part))
    if len(sub) >= 3 and sub.accuracy.std() > 0.05:
        for col, what in (("qk_diag", "the fraction of keys whose QK row peaks on the match"),
                          ("ov_diag", "the fraction of values OV copies")):
            r = float(sub.accuracy.astype(float).corr(sub[col].astype(float)))
            if r >= 0.9:
                text.append(f"Across the {len(sub)} seeds, accuracy follows {what} "
                            f"(correlation {r:.2f}).")
    return "\n\n".join(text)


def _mode(d, col):
    if col not in d or not d[col].notna().any():
        return "n/a"
    return str(int(d[col].mode().iloc[0]))


# ----------------------------------------------------------------------------- order and numbers


def sort_by_group(df):
    """``df`` (a column ``group``, and ``seed`` if present) with its rows in
    :func:`group_sort_key` order of the group, then by seed; the index renumbered."""
    if df.empty:
        return df.reset_index(drop=True)
    seeds = list(df["seed"].astype(float)) if "seed" in df else [0.0] * len(df)
    order = sorted(range(len(df)), key=lambda i: (group_sort_key(df["group"].iloc[i]), seeds[i]))
    return df.iloc[order].reset_index(drop=True)
