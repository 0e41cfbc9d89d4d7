"""The labels' thresholds, and the models they were calibrated on (issue 42).

Every number in :data:`THRESHOLDS` was chosen on the calibration table that
``experiments/calibration/calibrate.py`` writes (``experiments/calibration/calibration.md`` and
``thresholds.json``), never on the atlas: per label and per n of the atlas (3, 5, 10, 20, 50), its
false-positive rate on nulls and its true-positive rate on positive controls
(:func:`calibration_models`). A test holds this dict to the committed ``thresholds.json``.

========================  =====================================================================
threshold                 used by
========================  =====================================================================
qk_diag_min, follow_min   routing ``lookup``: QK rows peaking at the matching key, and patching
                          the attended slot moving the answer (:func:`interp.inspect.mechanism.labels.routing`)
anti_min                  routing ``inverted``: QK rows and OV rows with their minimum on the
                          diagonal
iia_min                   code: the least k whose interchange accuracy reaches it is the code's
                          dimension (:mod:`interp.inspect.mechanism.codes`); below it at every k: ``unread``
top2_min, rcv_max         code ``circle``: dimension <= 2, top-2 variance share and radius spread
                          in the whitened plane
gap_min                   a circle is evenly spaced when its smallest gap / even gap reaches it
min_n_code                below this n the code is ``untestable`` (three points always lie on a
                          circle, and a one-hot code of 3 symbols is 2-dimensional too)
min_n_circle              below this n a 2-D code is ``untestable``, neither ``circle`` nor
                          ``uneven-circle`` nor ``low-dim``: squares, spirals and arcs of so few
                          points pass any threshold that keeps noisy circles, and the case-1 and
                          case-5 constructions' own code tables miss rcv_max there (rcv_max, gap_min
                          and min_n_circle were chosen on near misses: ``experiments/calibration/circle.md``)
min_n_routing             below this n the routing is ``untestable``
simplex_norm_max,         geometry ``simplex`` (:mod:`interp.inspect.mechanism.figures`): norm
simplex_dev_max           spread and RMS distance of the centred cosines from -1/(n-1)
orthoplex_norm_max,       geometry ``orthoplex`` (even n): norm spread and RMS distance of the
orthoplex_dev_max         cosines from the cross-polytope's under the greedy antipodal pairing
codebook_pr_min,          geometry ``codebook``: effective dimension (participation ratio), the
codebook_cos_max,         largest |cosine| (no near-duplicates, no antipodes), and the spreads of
codebook_norm_min,        random vectors' norms and cosines (amendment A1: without them perturbed
codebook_sd_min           simplices and anisotropic clouds passed at every n)
geometry_testable         per figure, the calibrated n at which its label is certified (FPR upper
                          <= 1%, TPR lower >= 95%); elsewhere it reads ``untestable``. These nine
                          were chosen by ``experiments/calibration/geometry_check.py`` on 11,280
                          point sets (``geometry.md``; rule in ``PREDICTIONS-geometry.md``)
========================  =====================================================================
"""

from __future__ import annotations

#: the chosen thresholds (``experiments/calibration/thresholds.json``; module docstring)
THRESHOLDS = {
    "qk_diag_min": 0.95,
    "follow_min": 0.9,
    "anti_min": 0.95,
    "iia_min": 0.9,
    "top2_min": 0.9,
    "rcv_max": 0.05,
    "gap_min": 0.7,
    "min_n_code": 4,
    "min_n_circle": 10,
    "min_n_routing": 3,
    "simplex_norm_max": 0.1,
    "simplex_dev_max": 0.02,
    "orthoplex_norm_max": 0.2,
    "orthoplex_dev_max": 0.05,
    "codebook_pr_min": 3.5,
    "codebook_cos_max": 0.98,
    "codebook_norm_min": 0.04,
    "codebook_sd_min": 0.08,
    "geometry_testable": {"simplex": [5, 10, 20, 50], "orthoplex": [10, 20, 50], "circle": [10, 20],
                          "codebook": [20, 50]},
}


#: what each kind of calibration model is expected to be labelled (None: a null, expected to
#: get no named routing and no circle)
EXPECTED = {
    "circle": dict(routing="lookup", code="circle", mechanism="construction"),
    "one-hot": dict(routing="lookup", code="codebook", mechanism="lookup-codebook"),
    "inverted": dict(routing="inverted", mechanism="inverted"),
    "mirror": dict(routing="mirror", mechanism="mirror"),
    "plane": dict(routing="lookup", code="low-dim", mechanism="lookup-low-dim"),
    "uneven": dict(routing="lookup", code="uneven-circle", mechanism="lookup-uneven-circle"),
    "untrained": None,
    "shuffled": None,
    "trained-shuffled": None,
    "other-presentation": None,
    "transfer": {},
}
#: ``other-presentation`` models whose accuracy on the presentation they are read as reaches
#: this are counted as ``transfer`` (no expectation: a model that answers may really look the
#: key up there), fixed before their first measurement (:func:`trained_nulls`)
TRANSFER_ACC = 0.5
#: the atlas's table sizes (``experiments/atlas/grid.py``, NS): every test is calibrated at each
NS = (3, 5, 10, 20, 50)


def kind_of(row) -> str:
    """The calibration kind a measured row counts as: an ``other-presentation`` model that
    answers the presentation it is read as (acc >= :data:`TRANSFER_ACC`) is a ``transfer``."""
    if row["kind"] == "other-presentation" and (row.get("acc") or 0.0) >= TRANSFER_ACC:
        return "transfer"
    return row["kind"]


def trained_nulls(n: int, store_path):
    """Yield ``(kind, name, model)``: nulls from the trained checkpoints of a store at table
    size ``n`` (issue 42: "trained models with permuted weights, models trained on another
    presentation"):

    * ``trained-shuffled``: every run's checkpoint with each weight tensor's entries permuted
      (:func:`~interp.inspect.mechanism.controls.shuffle_weights`): a trained model's weight statistics,
      no mechanism;
    * ``other-presentation``: every case-4 run (ordered keys, learned positions) read as a case-5
      model (the same shapes; keys permuted): what it learned is not case 5's lookup unless it
      really matches keys, in which case it answers case 5 and is counted as a ``transfer``
      (:func:`kind_of`), not as a null. Cases 2 and 3 (no positions: a case-2 model must match
      keys) and case 5 read as case 4 (ordered keys are a case-5 table) would transfer by
      construction, and case 1 shares no shape: none of them is used.

    Runs in the store's order; checkpoints are checked against their store rows."""
    from interp.core import tokens
    from interp.inspect.mechanism import controls
    from interp.sweeps import store
    from interp.training import checkpoints

    df = store.read(store_path)
    df = df[(df["n"] == n) & (df["status"] == "ok")]
    for _, run in df.iterrows():
        model = checkpoints.load(store.checked_checkpoint(store_path, run))
        yield "trained-shuffled", f"{run['name']} shuffled", controls.shuffle_weights(model, seed=0)
        if int(run["case"]) == 4:
            yield "other-presentation", f"{run['name']} read as case 5", tokens.attach_task(model, 5)


def calibration_models(n: int, *, seeds: int = 2, null_seeds: int = 3):
    """Yield ``(kind, name, model)``: the positive controls and nulls at table size ``n``
    (:data:`EXPECTED` says what each kind should be labelled).

    * ``circle``: the paper's construction of every case 1-5 (hard attention, as built) hidden by
      :func:`interp.inspect.mechanism.controls.widen` in d_token 16 and 32, ``seeds`` random maps each;
    * ``one-hot``: :func:`~interp.inspect.mechanism.controls.one_hot_lookup`, cases 1-4, widened by 4;
    * ``inverted``: its inverted mechanism, cases 1-4, widened by 4;
    * case 5's one-hot, inverted and ``mirror`` controls (:func:`_case5_controls`);
    * ``plane``: case 2 and 3 constructions whose values are random points of the plane
      (:func:`~interp.inspect.mechanism.controls.recode_values`), widened to d_token 16: a 2-dimensional
      code that is not a circle (a near miss for the circle test);
    * ``uneven``: the same with the values at random angles on the circle;
    * ``untrained``: the atlas's shapes untrained (cases 1-4 one layer, case 5 two layers; the
      grid's "pytorch" init and PE; d_token 4 and 16), ``null_seeds`` seeds each;
    * ``shuffled``: every circle and one-hot control above with its weights permuted
      (:func:`~interp.inspect.mechanism.controls.shuffle_weights`): their weight statistics, no mechanism.
    """
    import math

    import torch

    from interp.core import constructions, models
    from interp.inspect.mechanism import controls

    pe = {1: "learned", 2: "none", 3: "none", 4: "learned", 5: "learned"}  # the grid's (grid.PE)
    for case in (1, 2, 3, 4, 5):
        base = constructions.build(case, n, check_precision=False)
        for d_token in (16, 32):
            for s in range(seeds):
                m = controls.widen(base, d_token, seed=s)
                yield "circle", f"case {case} construction, d_token {d_token}, map {s}", m
                if d_token == 16 and s == 0:
                    yield "shuffled", f"case {case} construction, shuffled", controls.shuffle_weights(m, seed=s)
    for case in controls.ONE_HOT_CASES:
        for inverted in (False, True):
            base = controls.one_hot_lookup(case, n, inverted=inverted)
            width = (base.cfg.d_model // (2 if case in (2, 3) else 1)) + 4
            for s in range(seeds if not inverted else 1):
                m = controls.widen(base, width, seed=s)
                yield ("inverted" if inverted else "one-hot"), f"case {case} one-hot{' inverted' if inverted else ''}, map {s}", m
                if not inverted and s == 0:
                    yield "shuffled", f"case {case} one-hot, shuffled", controls.shuffle_weights(m, seed=s)
    yield from _case5_controls(n, seeds)
    g = torch.Generator().manual_seed(n)
    for case in (2, 3):
        for s in range(seeds):
            plane = torch.rand(n, 2, generator=g, dtype=torch.float64) * 2 - 1
            yield "plane", f"case {case} plane values, draw {s}", controls.widen(
                controls.recode_values(case, n, plane), 16, seed=s)
            angles = torch.rand(n, generator=g, dtype=torch.float64).sort().values * 2 * math.pi
            ring = torch.stack([angles.cos(), angles.sin()], 1)
            yield "uneven", f"case {case} uneven circle, draw {s}", controls.widen(
                controls.recode_values(case, n, ring), 16, seed=s)
    for case in (1, 2, 3, 4, 5):
        for d_token in (4, 16):
            for s in range(null_seeds):
                m = models.build_model(case, n, d_token, 2 if case == 5 else 1, pe[case], seed=s, init="pytorch")
                yield "untrained", f"case {case} untrained, d_token {d_token}, seed {s}", m


def _case5_controls(n: int, seeds: int):
    """The two-layer controls of :func:`calibration_models`: case 5's one-hot lookup
    (:func:`~interp.inspect.mechanism.controls.one_hot_case5`, ``seeds`` maps) and its inverted mechanism
    (one), widened by 4; ``mirror``: the case-5 construction run backwards
    (:func:`~interp.inspect.mechanism.controls.mirror_lookup`: the last layer reads the key position),
    widened to d_token 16, ``seeds`` maps."""
    from interp.inspect.mechanism import controls

    for inverted in (False, True):
        base = controls.one_hot_case5(n, inverted=inverted)
        for s in range(seeds if not inverted else 1):
            m = controls.widen(base, base.cfg.d_model + 4, seed=s)
            yield ("inverted" if inverted else "one-hot"), f"case 5 one-hot{' inverted' if inverted else ''}, map {s}", m
    for s in range(seeds):
        yield "mirror", f"case 5 mirror, d_token 16, map {s}", controls.widen(controls.mirror_lookup(n), 16, seed=s)
