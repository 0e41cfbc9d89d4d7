"""What the paper leaves open, made operational.

* :mod:`~interp.theory.precision` - least bits p at which a model stays exact (Theorem 3.4's p).
* :mod:`~interp.theory.probe_inputs` - inputs that exercise every comparison a construction makes.
* :mod:`~interp.theory.temperature` - least softmax inverse temperature for exactness.
* :mod:`~interp.theory.counterexample` - Theorem 3.6 as a counterexample finder; the
  separability argument for one-layer attention-only softmax models.
* :mod:`~interp.theory.softmax_construction` - Theorem 3.5 with an explicit ReLU MLP.
* :mod:`~interp.theory.lower_bounds` - trained one-layer models against Theorems 3.4/3.7.
* :mod:`~interp.theory.studies` - helpers of the studies' scripts (resumable JSON rows, figures).
"""
