"""interp: how small transformers evaluate functions f: [n] -> [n].

A toolkit around Strobl, Angluin & Frank, "Concise One-Layer Transformers Can Do Function
Evaluation (Sometimes)": the five input presentations (:mod:`interp.tasks`), TransformerLens
``HookedTransformer`` models for them (:mod:`interp.models`), hard and softmax attention through
hooks (:mod:`interp.attention`), and the paper's constructions as exact weights
(:mod:`interp.constructions`).

Axis names follow TransformerLens throughout: ``batch``, ``pos``, ``d_model``, ``head_index``,
``d_head``, ``query_pos``, ``key_pos``, ``d_vocab``; ``n`` is the table size.
"""

from interp import attention, constructions, models, tasks
from interp.checkpoints import load, save
from interp.constructions import build
from interp.counterexample import find_counterexample
from interp.training import RunResult, TrainConfig, train, train_group

__all__ = [
    "RunResult", "TrainConfig", "attention", "build", "constructions", "find_counterexample",
    "load", "models", "save", "tasks", "train", "train_group",
]
