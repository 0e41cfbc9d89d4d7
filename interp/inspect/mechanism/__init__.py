"""Which mechanism is it? Two labels per model, the measures they read, and their calibration.

* :mod:`~interp.inspect.mechanism.measure` - one model reduced to a flat dict of measures
  (attention, circuits, probes, patching, MLPs, codes), validated once.
* :mod:`~interp.inspect.mechanism.levels` - the labels: ``routing`` (how the answer flows),
  ``code`` (how keys and values are written) and ``mechanism`` from both.
* :mod:`~interp.inspect.mechanism.codes` - the code level measured by interchange interventions;
  :mod:`~interp.inspect.mechanism.das` - its dimension under a learned rotation
  (:mod:`~interp.inspect.mechanism.das_batch`: the same search, many models of one cell at once);
  :mod:`~interp.inspect.mechanism.figures` - the figure a code draws (simplex, orthoplex, circle,
  codebook) and the ``geometry`` label.
* :mod:`~interp.inspect.mechanism.mlp_measures` - what the MLPs contribute.
* :mod:`~interp.inspect.mechanism.progress` - graded progress measures, none gated on accuracy:
  QK matching of the target key, attention mass on its slot, the read-out given that slot,
  interchange accuracies of the codes, the answer's share of the residual (issue 52).
* :mod:`~interp.inspect.mechanism.controls` and :mod:`~interp.inspect.mechanism.controls_case5` -
  models of known mechanism;
  :mod:`~interp.inspect.mechanism.calibration` - the thresholds and the nulls and controls they
  were chosen on; :mod:`~interp.inspect.mechanism.shapes` - the circle test's positives and near
  misses as point sets; :mod:`~interp.inspect.mechanism.figure_controls` - the geometry label's
  point sets in any dimension, and lookups whose values are given points.
* :mod:`~interp.inspect.mechanism.labels` - the labels' words re-exported, one-line verdicts, the
  legend of measures, the written answers of the sweep reports.

Uses :mod:`interp.inspect.tools`; never imports :mod:`interp.inspect.studies`.
"""
