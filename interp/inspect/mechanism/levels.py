"""Two labels per model, apart (issue 42): how the answer flows, and how it is written.

:func:`routing` names the route of the answer's information (:data:`ROUTINGS`: the
construction's ``lookup``, ``mirror``, ``inverted``, ``mlp-lookup``, ``other``, ``none``);
:func:`code` names how the value and the target key are written where the answer is read
(:data:`CODES`: ``circle``, ``uneven-circle``, ``low-dim``, ``codebook``, ``unread``), from the
interchange measures of :mod:`interp.inspect.mechanism.codes`; :func:`mechanism` puts them together
(:data:`MECHANISMS`): ``construction`` only when the routing is the construction's and both codes
are circles. Every threshold is :data:`interp.inspect.mechanism.calibration.THRESHOLDS`, chosen on the
calibration table (``experiments/calibration/calibration.md``), not on the atlas. All three read
the flat dict of :func:`interp.inspect.mechanism.measure.measure` (or an atlas row).
"""

from __future__ import annotations

import math

from interp.inspect.vocabulary import CODES, MECHANISMS, ROUTINGS  # noqa: F401 - the labels' words


def _ok(row, key, least) -> bool:
    value = row.get(key)
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value >= least


def _n(row) -> int | None:
    n = row.get("n")
    return None if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)


def routing(row) -> str:
    """How one seed's answer flows (:data:`ROUTINGS`), from the attention, circuit and patching
    measures alone, the same way with or without MLPs; thresholds from
    :data:`interp.inspect.mechanism.calibration.THRESHOLDS`:

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
    from interp.inspect.mechanism.calibration import THRESHOLDS as T

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
    read (:data:`CODES`), from :mod:`interp.inspect.mechanism.codes`'s columns ``<variable>_dim``,
    ``_top2``, ``_rcv``, ``_gap``; thresholds from :data:`interp.inspect.mechanism.calibration.THRESHOLDS`.
    ``unmeasured`` for a row without them (written before issue 42)."""
    from interp.inspect.mechanism.calibration import THRESHOLDS as T

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
    if dim <= 2 and n is not None and n < T["min_n_circle"]:
        return "untestable"  # a 2-D code of so few points: no threshold tells a circle from almost one
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
