"""The words every sub-package shares: the labels, the measures' axis names, the group order.

The vocabulary every sub-package shares: :mod:`interp.inspect.mechanism.levels` assigns these
labels, :mod:`interp.inspect.tools.viz` and the studies print them. It sits at the top of
``inspect/`` so that a view can name a label without importing the code that assigns it.
"""

from __future__ import annotations

import numbers
import re

#: one line per label of :func:`~interp.inspect.mechanism.levels.routing`: how the answer's information flows
ROUTINGS = {
    "lookup": "the construction's routing: the final query attends the slot whose key matches "
              "(QK rows peak at the matching key) and reads its value (patching that slot from "
              "a corrupted run moves the answer).",
    "inverted": "attention avoids the matching slot (QK rows have their minimum on the diagonal) "
                "and OV writes minus the value: over a permutation the slots' values sum to the "
                "same vector, so the deficit at the matching slot becomes the answer.",
    "mirror": "the last layer attends the key position 2j with k_j = i*, not the value position "
              "2j + 1: layer 0 moved each value back onto its key, the construction run backwards.",
    "mlp-lookup": "the MLP does the lookup: attention spreads over the input (final-position "
                  "entropy >= 0.5) instead of picking the matching slot, and the answer is gone "
                  "when the MLP's output is mean-ablated (Theorem 3.5's mechanism).",
    "other": "the model answers (accuracy >= 0.9) by a route none of these tests names.",
    "none": "no named route and no working answer (a failed or partial seed).",
    "untestable": "n below the routing tests' power (calibration table).",
}

#: one line per label of :func:`~interp.inspect.mechanism.levels.code`: how a variable is written where the answer is read
CODES = {
    "circle": "a circle as in the paper's cs(k), evenly spaced: interchanging a 2-dimensional "
              "subspace carries the variable, and its points lie evenly on an ellipse (a circle "
              "to a linear read-out).",
    "uneven-circle": "a 2-dimensional code on a circle (ellipse), its points not evenly spaced.",
    "low-dim": "a code of dimension <= 3 that does not pass the circle test (another "
               "low-dimensional figure, or a circle too uneven in radius to tell).",
    "codebook": "a code of dimension >= 4 (or n - 1) by its principal axes, not the paper's "
                "circle; the dimension only, no figure (the geometry label reads the figure: on "
                "the core atlas no such code is a simplex or a circle).",
    "unread": "interchanging the whole vector at the site does not carry the variable: it is not "
              "read there.",
    "untestable": "n below the code test's power: three points always lie on a circle and a "
                  "one-hot code of three symbols is 2-dimensional too; and below n = 10 any 2-D "
                  "code, whose shape no threshold tells from squares, spirals and arcs of so "
                  "few points (experiments/calibration/circle.md).",
    "unmeasured": "no code measures (an atlas or table written before issue 42).",
}

#: one line per label of :func:`~interp.inspect.mechanism.levels.mechanism`: the routing and the code together
MECHANISMS = {
    "construction": "the paper's construction at both levels: the construction's routing "
                    f"(lookup: {ROUTINGS['lookup']}) with the values and the target key written on "
                    "evenly spaced circles, as cs(k).",
    "lookup-codebook": "the construction's routing with a value code of dimension >= 4: a "
                       "lookup, not the paper's circle (its figure: the geometry label).",
    "lookup-low-dim": "the construction's routing with a low-dimensional value code that is not a "
                      "circle.",
    "lookup-uneven-circle": "the construction's routing with the values on a circle (ellipse) "
                            "that is not evenly spaced, unlike the paper's cs(k).",
    "lookup-key-code": "the construction's routing and a circle code of the values, but the "
                       "target key is not written on an evenly spaced circle.",
    "lookup-unread": "the construction's routing, but interchanging the slot's value vector does "
                     "not carry the answer.",
    "lookup-untestable": "the construction's routing at an n where the code test has no power.",
    "lookup": "the construction's routing, code not measured (an atlas written before issue 42: "
              "its old label 'construction' measured the routing only).",
    **{k: ROUTINGS[k] for k in ("mirror", "inverted", "mlp-lookup", "other", "none", "untestable")},
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


def group_sort_key(label) -> tuple:
    """The order of group labels (and any label text) everywhere they are listed: the numbers in
    the text compare as numbers, so ``d_token=8`` comes before ``d_token=16``."""
    if isinstance(label, numbers.Real) and not isinstance(label, bool):
        return ("", float(label))  # a number itself (1e-05 is no text to split)
    parts = re.split(r"(\d+(?:\.\d+)?)", str(label))
    return tuple(float(p) if i % 2 else p for i, p in enumerate(parts))
