"""Names for what a seed does: its mechanism label, a one-line verdict, and a legend of measures.

One place for the words that :mod:`interp.inspect.analysis` (reports), :mod:`interp.inspect.viz`
(attention pages), :mod:`interp.inspect.explore` (the sweep explorer) and ``interp probe`` print
about a model. :func:`mechanism` reads the flat dict of :func:`interp.inspect.analysis.measure`;
:func:`verdict` turns it into one sentence; :data:`LEGEND` explains every measure in a line;
:func:`answer` writes a sweep report's paragraphs about one group of seeds;
:func:`group_sort_key` / :func:`sort_by_group` order groups (numbers as numbers) wherever they
are listed; :func:`r2_text` writes an R^2 at the probes' floor as floored.
"""

from __future__ import annotations

import math
import numbers
import re

#: one line per label of :func:`mechanism`
MECHANISMS = {
    "construction": "the paper's mechanism: QK matches the target i* to the stored key, the last "
                    "layer attends the matching slot and OV copies its value f(i*).",
    "inverted": "attention avoids the matching slot (QK rows have their minimum on the diagonal) "
                "and OV writes minus the value: over a permutation the slots' values sum to the "
                "same vector, so the deficit at the matching slot becomes the answer.",
    "mirror": "the last layer attends the key position 2j with k_j = i*, not the value position "
              "2j + 1: layer 0 moved each value back onto its key, the construction run backwards.",
    "mlp-lookup": "the MLP does the lookup: attention spreads over the input (final-position "
                  "entropy >= 0.5) instead of picking the matching slot, and the answer is gone "
                  "when the MLP's output is mean-ablated (Theorem 3.5's mechanism).",
    "none": "none of the named mechanisms by these measures (a failed seed, or one not named).",
}

#: one line per measure of :func:`interp.inspect.analysis.measure` (the construction's value)
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


#: a figure's axis label for a measure: what it is, in a few words (:func:`axis_label`)
AXIS = {
    "accuracy": "accuracy (fraction of inputs)",
    "acc": "accuracy (fraction of inputs)",
    "acc_any": "accuracy, f any function",
    "mass": "attention on the construction's position",
    "hit": "argmax at the construction's position",
    "qk_diag": "QK rows peaking on the diagonal",
    "ov_diag": "OV rows peaking on the diagonal",
    "keys_top2": "key vectors: top-2 variance fraction",
    "follow": "patched answers that follow",
}


def axis_label(measure: str) -> str:
    """A short axis label for a measure (:data:`AXIS`), else the measure's name."""
    return AXIS.get(measure, measure)


def describe(measure: str) -> str:
    """The legend line of a measure (``qk_fit`` and ``ov_fit`` share ``fit``; ``r2_token_key``
    shares ``r2``), or of a mechanism label (:data:`MECHANISMS`, e.g. ``mlp-lookup``);
    KeyError names the unknown measure."""
    if measure in LEGEND:
        return LEGEND[measure]
    if measure in MECHANISMS:
        return f"mechanism: {MECHANISMS[measure]}"
    head, _, rest = measure.partition("_")
    if head in ("qk", "ov") and rest in LEGEND:
        return f"{head.upper()}: {LEGEND[rest]}"
    if head in ("r2", "m", "N") and rest:
        return f"{LEGEND[head]} [{rest}]"
    raise KeyError(f"no legend for measure {measure!r}")


def _ok(row, key, least) -> bool:
    value = row.get(key)
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value >= least


def mechanism(row) -> str:
    """Which mechanism one seed's numbers show (a per-seed column of the reports). The attention
    is labelled first, from the attention measures alone, the same way with or without MLPs:

    * ``mirror`` (two-layer case 5): the last layer puts >= 0.9 of its mass on the key position
      2j with k_j = i* instead of the value position 2j + 1 (so the seed is measured there,
      ``at = "key"``), the answer is right on arbitrary functions (acc_any >= 0.9), and
      patching that key position from a corrupted run moves the answer (follow >= 0.9, the
      mechanism's own check): layer 0 moved each value back onto its key's position, the
      paper's construction run backwards;
    * ``construction``: QK rows peak on the diagonal, OV copies, patching the attended slot moves
      the answer (qk_diag, ov_diag >= 0.95, follow >= 0.9). Where the answer goes through an
      MLP (``mlp_role`` ``helps``/``needed``), the direct-path ``ov_diag`` is replaced by
      ``attn_picks_slot`` >= 0.9: the attention finds the slot, the MLP reads its value out;
    * ``inverted``: QK rows have their *minimum* on the diagonal and OV writes minus the value
      (qk_anti, ov_anti >= 0.95): attention avoids the matching slot;
    * ``none``: none of these (failed seeds, or a mechanism these measures do not name).

    How an MLP enters (``mlp_role``, :mod:`interp.inspect.mlp_measures`). An attention label
    above stands whatever the MLP does: the attention found the slot (patching it moves the
    answer) and the MLP passes the value through, helps, or reads it out; ``mlp_role`` says
    which. Only a model the attention measures leave at ``none`` can be labelled

    * ``mlp-lookup``: the MLP does the lookup: ``mlp_role == "needed"`` (mean-ablating the
      MLPs leaves accuracy below chance + 10 points), the model answers (acc >= 0.9) and the
      last layer's final-position attention spreads (attn_entropy >= 0.5, as Theorem 3.5's
      weights (t_j + 1) / S do) rather than picking a slot: the attention carries the whole
      input to the final position and the MLP reads f(i*) from it.

    Attention-only rows (``mlp_role`` ``none`` or missing) get exactly the four labels above.
    """
    if (row.get("at") == "key" and _ok(row, "mass_keypos", 0.9) and _ok(row, "acc_any", 0.9)
            and _ok(row, "follow", 0.9)):
        return "mirror"
    copies = _ok(row, "ov_diag", 0.95) or (row.get("mlp_role") in ("helps", "needed")
                                           and _ok(row, "attn_picks_slot", 0.9))
    if _ok(row, "qk_diag", 0.95) and copies and _ok(row, "follow", 0.9):
        return "construction"
    if _ok(row, "qk_anti", 0.95) and _ok(row, "ov_anti", 0.95):
        return "inverted"
    if row.get("mlp_role") == "needed" and _ok(row, "acc", 0.9) and _ok(row, "attn_entropy", 0.5):
        return "mlp-lookup"
    return "none"


def verdict(row) -> str:
    """One sentence: accuracy, mechanism, and whether QK is a circle read through the circuit."""
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
    return (f"{label}: accuracy {acc:.3f} (any f: {acc_any:.3f}); {MECHANISMS[label]} "
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
    """The circuit circle test (:mod:`interp.inspect.geometry`) of a set of seeds, in words."""
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
    if kind == "construction":
        s = (f"{head}: the construction's mechanism.** QK matches the target key to the stored "
             "key, OV copies the value, and the answer is read from the matching slot. ")
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
    :func:`interp.inspect.analysis.analyze_sweep`): one paragraph per mechanism found among the
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


def group_sort_key(label) -> tuple:
    """The order of group labels (and any label text) everywhere they are listed: the numbers in
    the text compare as numbers, so ``d_token=8`` comes before ``d_token=16``."""
    if isinstance(label, numbers.Real) and not isinstance(label, bool):
        return ("", float(label))  # a number itself (1e-05 is no text to split)
    parts = re.split(r"(\d+(?:\.\d+)?)", str(label))
    return tuple(float(p) if i % 2 else p for i, p in enumerate(parts))


def sort_by_group(df):
    """``df`` (a column ``group``, and ``seed`` if present) with its rows in
    :func:`group_sort_key` order of the group, then by seed; the index renumbered."""
    if df.empty:
        return df.reset_index(drop=True)
    seeds = list(df["seed"].astype(float)) if "seed" in df else [0.0] * len(df)
    order = sorted(range(len(df)), key=lambda i: (group_sort_key(df["group"].iloc[i]), seeds[i]))
    return df.iloc[order].reset_index(drop=True)


def r2_text(value, fmt: str = ".4f") -> str:
    """An R^2 as text: a value at the probes' floor (:data:`interp.inspect.probes.R2_FLOOR`, -1)
    reads ``<= -1 (floored)``, since the true held-out R^2 may be far below it."""
    from interp.inspect.probes import R2_FLOOR

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if float(value) <= R2_FLOOR:
        return f"<= {R2_FLOOR:g} (floored)"
    return format(float(value), fmt)
