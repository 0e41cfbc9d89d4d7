"""What do many runs do? Studies over a sweep's seeds, built on the labels of one model.

* :mod:`~interp.inspect.studies.analysis` - a sweep's seeds classified, measured and answered
  (``analyze_sweep``); re-exports :func:`~interp.inspect.mechanism.measure.measure`.
* :mod:`~interp.inspect.studies.atlas` - the mechanism atlas: one row per seed, ``atlas.md``;
  :mod:`~interp.inspect.studies.atlas_predictions` (its pre-registered predictions computed),
  :mod:`~interp.inspect.studies.atlas_figures` (phase diagrams),
  :mod:`~interp.inspect.studies.atlas_markdown` (``atlas.md`` written),
  :mod:`~interp.inspect.studies.atlas_levels` (its two-level section),
  :mod:`~interp.inspect.studies.atlas_cache` (which cached rows may be reused),
  :mod:`~interp.inspect.studies.atlas_das` (the learned dimension of every successful lookup),
  :mod:`~interp.inspect.studies.atlas_geometry` (the figure every successful lookup's codes draw).
* :mod:`~interp.inspect.studies.timelines` - every snapshot of a run measured and labelled;
  :mod:`~interp.inspect.studies.timeline_report` - their figures and tables.
* :mod:`~interp.inspect.studies.explore` - the sweep explorer, one offline HTML page;
  :mod:`~interp.inspect.studies.explore_atlas` and
  :mod:`~interp.inspect.studies.explore_timeline` - its atlas and timeline views.
"""
