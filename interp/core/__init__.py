"""The tasks, the models and the constructions: everything else builds on these.

* :mod:`~interp.core.tasks` - the five presentations' token layout, sampling, plain-Python
  reference evaluator (:func:`~interp.core.tasks.evaluate`).
* :mod:`~interp.core.models` - ``HookedTransformer`` models for a task (pair embeddings, no PE).
* :mod:`~interp.core.tokens` - the task tokenizer (``to_str_tokens``) and the input check that
  every model carries.
* :mod:`~interp.core.attention` - leftmost/rightmost/average/softmax attention as permanent
  hooks, the tie rule, :func:`~interp.core.attention.modes`.
* :mod:`~interp.core.constructions` - the paper's constructions as exact weights (``build``).
* :mod:`~interp.core.limits` - how far each construction is exact, checked before any work.
* :mod:`~interp.core.forward` - the one evaluation forward pass (final position).
* :mod:`~interp.core.verify` - every construction against the reference evaluator.
"""
