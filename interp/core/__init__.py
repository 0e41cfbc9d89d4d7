"""The tasks, the models and the constructions: everything else builds on these.

* :mod:`~interp.core.tasks` - the five presentations as :class:`~interp.core.tasks.Task`
  objects (``tasks.get(case)``, ``model.task``): token layout, sampling, plain-Python reference
  evaluator (:func:`~interp.core.tasks.evaluate`), the paper's construction of each.
* :mod:`~interp.core.layouts` - the three token layouts a task is one of; where each token
  sits (the query included) is said there once and held to the task's own tokens by
  :mod:`~interp.core.positions` when a task is registered. :mod:`~interp.core.calls`: functions
  that take a model read its task from it (``tasks.reads_task``).
* :mod:`~interp.core.models` - ``ModelSpec`` (every architecture choice, validated once) and the
  ``HookedTransformer`` built from it (``build_model``, ``from_spec``; ``model.spec``); its
  parts: :mod:`~interp.core.pairs` (the pair embedding of cases 2-3), :mod:`~interp.core.inits`
  (the initialisation families), :mod:`~interp.core.residual` (residual="embed" as hooks),
  :mod:`~interp.core.embed_scale` (embed_scale="sqrt_d_model" as a hook),
  :mod:`~interp.core.pe_combine` (case 1's pe_combine="concat", d_model = 2 d_token),
  :mod:`~interp.core.cache` (its class: TransformerLens's residual decompositions right on every spec);
  :mod:`~interp.core.roundtrip` takes a model's weights out to a plain ``HookedTransformer``
  and back (``to_vanilla``, ``from_state_dict``, with what a state dict does not hold).
* :mod:`~interp.core.fields` - what each field declares (accepted values, its TransformerLens
  config, engine limits, reading field, CLI flag) and the named readings (f14, ...).
* :mod:`~interp.core.tokens` - the task tokenizer (``to_str_tokens``) and the input check that
  every model carries.
* :mod:`~interp.core.attention` - leftmost/rightmost/average/softmax attention as permanent
  hooks, the tie rule, :func:`~interp.core.attention.modes`.
* :mod:`~interp.core.constructions` - the paper's constructions as exact weights (``build``).
* :mod:`~interp.core.limits` - how far each construction is exact, checked before any work.
* :mod:`~interp.core.bounds` - Theorems 3.4 and 3.7 as plain formulas (for theory and the atlas).
* :mod:`~interp.core.forward` - the one evaluation forward pass (final position).
* :mod:`~interp.core.verify` - every construction against the reference evaluator.
"""
