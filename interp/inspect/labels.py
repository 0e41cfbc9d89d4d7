"""Names for what a seed does: its mechanism label, a one-line verdict, and a legend of measures.

One place for the words that :mod:`interp.inspect.analysis` (reports), :mod:`interp.inspect.viz`
(attention pages), :mod:`interp.inspect.explore` (the sweep explorer) and ``interp probe`` print
about a model. :func:`mechanism` reads the flat dict of :func:`interp.inspect.analysis.measure`;
:func:`verdict` turns it into one sentence; :data:`LEGEND` explains every measure in a line.
"""

from __future__ import annotations

import math

#: one line per label of :func:`mechanism`
MECHANISMS = {
    "construction": "the paper's mechanism: QK matches the target i* to the stored key, the last "
                    "layer attends the matching slot and OV copies its value f(i*).",
    "inverted": "attention avoids the matching slot (QK rows have their minimum on the diagonal) "
                "and OV writes minus the value: over a permutation the slots' values sum to the "
                "same vector, so the deficit at the matching slot becomes the answer.",
    "mirror": "the last layer attends the key position 2j with k_j = i*, not the value position "
              "2j + 1: layer 0 moved each value back onto its key, the construction run backwards.",
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
}


def describe(measure: str) -> str:
    """The legend line of a measure (``qk_fit`` and ``ov_fit`` share ``fit``; ``r2_token_key``
    shares ``r2``); KeyError names the unknown measure."""
    if measure in LEGEND:
        return LEGEND[measure]
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
    """Which mechanism one seed's numbers show (a per-seed column of the reports):

    * ``mirror`` (two-layer case 5): the last layer puts >= 0.9 of its mass on the key position
      2j with k_j = i* instead of the value position 2j + 1 (so the seed is measured there,
      ``at = "key"``), the answer is right on arbitrary functions (acc_any >= 0.9), and
      patching that key position from a corrupted run moves the answer (follow >= 0.9, the
      mechanism's own check): layer 0 moved each value back onto its key's position, the
      paper's construction run backwards;
    * ``construction``: QK rows peak on the diagonal, OV copies, patching the attended slot moves
      the answer (qk_diag, ov_diag >= 0.95, follow >= 0.9);
    * ``inverted``: QK rows have their *minimum* on the diagonal and OV writes minus the value
      (qk_anti, ov_anti >= 0.95): attention avoids the matching slot;
    * ``none``: none of these (failed seeds, or a mechanism these measures do not name).
    """
    if (row.get("at") == "key" and _ok(row, "mass_keypos", 0.9) and _ok(row, "acc_any", 0.9)
            and _ok(row, "follow", 0.9)):
        return "mirror"
    if _ok(row, "qk_diag", 0.95) and _ok(row, "ov_diag", 0.95) and _ok(row, "follow", 0.9):
        return "construction"
    if _ok(row, "qk_anti", 0.95) and _ok(row, "ov_anti", 0.95):
        return "inverted"
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
    return (f"{label}: accuracy {acc:.3f} (any f: {acc_any:.3f}); {MECHANISMS[label]} "
            f"Geometry: {geo}.")
