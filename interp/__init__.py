"""interp: how small transformers evaluate functions f: [n] -> [n].

A toolkit around Strobl, Angluin & Frank, "Concise One-Layer Transformers Can Do Function
Evaluation (Sometimes)": the five input presentations (:mod:`interp.tasks`), TransformerLens
``HookedTransformer`` models for them (:mod:`interp.models`), hard and softmax attention through
hooks (:mod:`interp.attention`), the paper's constructions as exact weights
(:mod:`interp.constructions`), and the one evaluation forward pass (:mod:`interp.forward`).

Axis names follow TransformerLens throughout: ``batch``, ``pos``, ``d_model``, ``head_index``,
``d_head``, ``query_pos``, ``key_pos``, ``d_vocab``; ``n`` is the table size.

Names are imported on first use (PEP 562), so ``interp --help`` and the CLI's refusals of bad
input answer before TransformerLens loads.
"""

import importlib

#: public name -> the module that defines it (a module itself where the two are equal)
_EXPORTS = {
    "attention": "interp.attention",
    "constructions": "interp.constructions",
    "forward": "interp.forward",
    "models": "interp.models",
    "tasks": "interp.tasks",
    "build": "interp.constructions",
    "load": "interp.checkpoints",
    "save": "interp.checkpoints",
    "find_counterexample": "interp.counterexample",
    "RunResult": "interp.training",
    "TrainConfig": "interp.training",
    "train": "interp.training",
    "train_group": "interp.training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'interp' has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name])
    value = module if module.__name__ == f"interp.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
