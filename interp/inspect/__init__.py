"""Seeing inside a model: hooks, probes, circuits, patching, analyses and views.

Every function that takes a model reads its task from it (``model.task``, ``n =
model.cfg.d_vocab_out``): ``f(model, tokens=None, *, case=None, n=None, ...)``, where ``case=``
and ``n=`` are optional and checked against the model's.

* :mod:`~interp.inspect.hooks` - attention patterns and where the construction attends.
* :mod:`~interp.inspect.probes` - cos/sin probes and circle tests of key encodings.
* :mod:`~interp.inspect.circuits` - QK and OV circuits through the embeddings.
* :mod:`~interp.inspect.interventions` - one patching engine (a generic patch and its setters),
  patching of the attended position, ablation, direct logit attribution, logit lens, path
  patching and attribution patching, returning tensors.
* :mod:`~interp.inspect.analysis` - per-seed measures of a sweep, mechanism labels, reports.
* :mod:`~interp.inspect.mlp_measures` - what the MLPs contribute (ablated accuracy) and whether
  the attention alone picks the matching slot.
* :mod:`~interp.inspect.levels` - the two labels per model (issue 42): ``routing`` (how the
  answer flows) and ``code`` (how keys and values are written), and ``mechanism`` from both.
* :mod:`~interp.inspect.codes` - the code level measured: interchange interventions along the
  code's principal axes (its dimension) and its whitened-plane circle geometry.
* :mod:`~interp.inspect.das` - distributed alignment search with a learned rotation: the code's
  dimension where the principal axes only bound it.
* :mod:`~interp.inspect.controls` - models of known mechanism: one-hot lookups, inverted ones,
  recoded values, constructions hidden in wider widths, shuffled weights.
* :mod:`~interp.inspect.controls_case5` - the two-layer case-5 controls: the construction run
  backwards (``mirror``) and its routing with one-hot keys and values (re-exported by controls).
* :mod:`~interp.inspect.calibration` - the labels' thresholds and the nulls and controls they
  were chosen on (``experiments/calibration``).
* :mod:`~interp.inspect.labels` - the labels' words re-exported, one-line verdicts, the legend of
  measures, the written answers of the sweep reports.
* :mod:`~interp.inspect.viz` - circuitsvis HTML (offline) and matplotlib figures.
* :mod:`~interp.inspect.geometry` - the circle test of QK/OV read through the scores, calibrated on a null.
* :mod:`~interp.inspect.notebook` - circuitsvis views in Jupyter, the script once per session,
  each with a small PNG beside it (what a code host shows).
* :mod:`~interp.inspect.explore` - the sweep explorer: one offline HTML page of a sweep's seeds.
* :mod:`~interp.inspect.explore_atlas` - the explorer's atlas view: the atlas as clickable grids.
* :mod:`~interp.inspect.explore_timeline` - the explorer's timeline view: a seed's labels through
  training, drawn from ``interp timeline``'s CSV.
* :mod:`~interp.inspect.curves` - loss curves drawn: one run, or a store's cells as small multiples.
* :mod:`~interp.inspect.timelines` - mechanism timelines: every snapshot of a run measured and
  labelled (``interp.timeline``); :mod:`~interp.inspect.timeline_report` - their figures and tables.
* :mod:`~interp.inspect.atlas` - the mechanism atlas: one row per seed (cell, outcome, measures,
  label), ``atlas.md``; :mod:`~interp.inspect.atlas_predictions` - its pre-registered
  predictions computed; :mod:`~interp.inspect.atlas_figures` - its phase diagrams;
  :mod:`~interp.inspect.atlas_markdown` - ``atlas.md`` written; :mod:`~interp.inspect.atlas_levels`
  - its two-level section; :mod:`~interp.inspect.atlas_cache` - which cached rows may be reused.
"""
