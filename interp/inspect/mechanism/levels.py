"""Two labels per model, apart (issue 42): how the answer flows, and how it is written.

:func:`routing` names the route of the answer's information (:data:`ROUTINGS`: the
construction's ``lookup``, ``mirror``, ``inverted``, ``mlp-lookup``, ``other``, ``none``);
:func:`code` names how the value and the target key are written where the answer is read
(:data:`CODES`: ``circle``, ``uneven-circle``, ``low-dim``, ``codebook``, ``unread``), from the
interchange measures of :mod:`interp.inspect.codes`; :func:`mechanism` puts them together
(:data:`MECHANISMS`): ``construction`` only when the routing is the construction's and both codes
are circles. Every threshold is :data:`interp.inspect.calibration.THRESHOLDS`, chosen on the
calibration table (``experiments/calibration/calibration.md``), not on the atlas. All three read
the flat dict of :func:`interp.inspect.analysis.measure` (or an atlas row).
"""

from __future__ import annotations

import math

#: one line per label of :func:`routing`: how the answer's information flows
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

#: one line per label of :func:`code`: how a variable is written where the answer is read
CODES = {
    "circle": "a circle as in the paper's cs(k), evenly spaced: interchanging a 2-dimensional "
              "subspace carries the variable, and its points lie evenly on an ellipse (a circle "
              "to a linear read-out).",
    "uneven-circle": "a 2-dimensional code on a circle (ellipse), its points not evenly spaced.",
    "low-dim": "a code of dimension <= 3 that is not a circle (another low-dimensional manifold).",
    "codebook": "a distributed code of dimension >= 4 (or n - 1): near-orthogonal directions, "
                "one-hot-like, not the paper's circle.",
    "unread": "interchanging the whole vector at the site does not carry the variable: it is not "
              "read there.",
    "untestable": "n below the code test's power: three points always lie on a circle and a "
                  "one-hot code of three symbols is 2-dimensional too.",
    "unmeasured": "no code measures (an atlas or table written before issue 42).",
}

#: one line per label of :func:`mechanism`: the routing and the code together
MECHANISMS = {
    "construction": "the paper's construction at both levels: the construction's routing "
                    f"(lookup: {ROUTINGS['lookup']}) with the values and the target key written on "
                    "evenly spaced circles, as cs(k).",
    "lookup-codebook": "the construction's routing with a distributed (one-hot-like) code of the "
                       "values: a lookup, not the paper's circle.",
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


def _ok(row, key, least) -> bool:
    value = row.get(key)
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value >= least


def _n(row) -> int | None:
    n = row.get("n")
    return None if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)


def routing(row) -> str:
    """How one seed's answer flows (:data:`ROUTINGS`), from the attention, circuit and patching
    measures alone, the same way with or without MLPs; thresholds from
    :data:`interp.inspect.calibration.THRESHOLDS`:

    * ``mirror`` (two-layer case 5): the last layer puts >= 0.9 of its mass on the key position
      2j with k_j = i* instead of the value position 2j + 1 (so the seed is measured there,
      ``at = "key"``), the answer is right on arbitrary functions (acc_any >= 0.9), and
      patching that key position from a corrupted run moves the answer (follow >= follow_min);
    * ``lookup``: QK rows peak on the diagonal (qk_diag >= qk_diag_min) and patching the
      attended slot moves the answer (follow >= follow_min). How the value is written (OV
      copying on the direct path, an MLP reading it out) is the code's question, not this one;
    * ``inverted``: QK rows have their *minimum* on the diagonal and OV writes minus the value
      (qk_anti, ov_anti >= anti_min);
    * ``mlp-lookup``: none of these, ``mlp_role == "needed"`` (mean-ablating the MLPs leaves
      accuracy below chance + 10 points), acc >= 0.9 and a spread final-position attention
      (attn_entropy >= 0.5): the MLP reads f(i*) from the whole input (Theorem 3.5);
    * ``other``: none of these, but acc >= 0.9; ``none``: none of these and acc < 0.9;
    * ``untestable``: n below ``min_n_routing``.
    """
    from interp.inspect.calibration import THRESHOLDS as T

    n = _n(row)
    if n is not None and n < T["min_n_routing"]:
        return "untestable"
    if (row.get("at") == "key" and _ok(row, "mass_keypos", 0.9) and _ok(row, "acc_any", 0.9)
            and _ok(row, "follow", T["follow_min"])):
        return "mirror"
    if _ok(row, "qk_diag", T["qk_diag_min"]) and _ok(row, "follow", T["follow_min"]):
        return "lookup"
    if _ok(row, "qk_anti", T["anti_min"]) and _ok(row, "ov_anti", T["anti_min"]):
        return "inverted"
    if row.get("mlp_role") == "needed" and _ok(row, "acc", 0.9) and _ok(row, "attn_entropy", 0.5):
        return "mlp-lookup"
    return "other" if _ok(row, "acc", 0.9) else "none"


def code(row, variable: str = "value") -> str:
    """How ``variable`` ("value", or "query": the target key) is written where the answer is
    read (:data:`CODES`), from :mod:`interp.inspect.codes`'s columns ``<variable>_dim``,
    ``_top2``, ``_rcv``, ``_gap``; thresholds from :data:`interp.inspect.calibration.THRESHOLDS`.
    ``unmeasured`` for a row without them (written before issue 42)."""
    from interp.inspect.calibration import THRESHOLDS as T

    if variable not in ("value", "query"):
        raise ValueError(f"variable={variable!r}; accepted: 'value' or 'query'")
    p = variable + "_"
    if all(row.get(p + k) is None for k in ("dim", "iia_full")):
        return "unmeasured"
    n = _n(row)
    if n is not None and n < T["min_n_code"]:
        return "untestable"
    dim = row.get(p + "dim")
    if dim is None or (isinstance(dim, float) and math.isnan(dim)):
        return "unread"
    rcv = row.get(p + "rcv")
    round_enough = rcv is not None and not (isinstance(rcv, float) and math.isnan(rcv)) and rcv <= T["rcv_max"]
    if dim <= 2 and round_enough and _ok(row, p + "top2", T["top2_min"]):
        return "circle" if _ok(row, p + "gap", T["gap_min"]) else "uneven-circle"
    return "codebook" if dim >= min(4, (n or 5) - 1) else "low-dim"


CIRCLES = ("circle", "uneven-circle")


def mechanism(row) -> str:
    """The routing and the code together (:data:`MECHANISMS`): ``construction`` only when the
    routing is the construction's ``lookup`` *and* both the value and the target key are
    written on evenly spaced circles, as the paper's cs(k); a lookup with another code is
    ``lookup-<the value's code>`` (``lookup-uneven-circle`` included), or ``lookup-key-code``
    when only the key's is not a circle; other routings keep their name."""
    route = routing(row)
    if route != "lookup":
        return route
    value, key = code(row, "value"), code(row, "query")
    if value == "unmeasured":
        return "lookup"
    if value == "untestable":
        return "lookup-untestable"
    if value == "circle":
        return "construction" if key == "circle" else "lookup-key-code"
    return f"lookup-{value}"


def labels_of(row) -> dict:
    """``routing``, ``code`` (values), ``key_code`` (the target key) and ``mechanism`` of a row."""
    return dict(routing=routing(row), code=code(row, "value"), key_code=code(row, "query"),
                mechanism=mechanism(row))


def routes(df):
    """Each atlas row's routing (a DataFrame's rows): its ``routing`` where measured, else its
    label with the old ``construction`` read as ``lookup`` (before issue 42 it measured the
    routing only)."""
    old = df["label"].replace({"construction": "lookup"})
    if "routing" not in df.columns:
        return old
    return df["routing"].where(df["routing"].notna() & (df["routing"] != "unmeasured"), old)
