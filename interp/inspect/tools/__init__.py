"""What does this model do? TransformerLens-level tools on one model, trained or built.

* :mod:`~interp.inspect.tools.hooks` - attention patterns, sampled inputs, accuracy, and where
  the construction attends.
* :mod:`~interp.inspect.tools.probes` - cos/sin probes and circle tests of key encodings.
* :mod:`~interp.inspect.tools.circuits` - QK and OV circuits through the embeddings.
* :mod:`~interp.inspect.tools.geometry` - the circle test of QK/OV read through the scores,
  calibrated on a null.
* :mod:`~interp.inspect.tools.interventions` - one patching engine (a generic patch and its
  setters), patching of the attended position, ablation, direct logit attribution, logit lens,
  path patching and attribution patching, returning tensors.
* :mod:`~interp.inspect.tools.viz` - circuitsvis HTML (offline) and matplotlib figures;
  :mod:`~interp.inspect.tools.notebook` - the same views in Jupyter;
  :mod:`~interp.inspect.tools.curves` - loss curves drawn.

Nothing here labels a mechanism or reads a sweep: those are :mod:`interp.inspect.mechanism` and
:mod:`interp.inspect.studies`, which import this package, never the other way.
"""
