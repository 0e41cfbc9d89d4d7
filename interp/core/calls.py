"""Functions that take a model read its task from it: :func:`reads_task` refuses an old call that
still passes the case or n by position (``fn(model, 10)``), naming it, instead of binding the int
to another parameter. Used as ``interp.core.tasks.reads_task``."""

from __future__ import annotations

import functools
import numbers
from inspect import Parameter, signature


def reads_task(fn):
    """Mark ``fn(model, ..., *, case=None, n=None)`` as reading its task from the model: an old
    call that still passes the case or n by position (``fn(model, 10)``) raises a ValueError
    that says so, instead of binding the int to another parameter."""
    params = signature(fn).parameters.values()
    names = [p.name for p in params if p.kind is Parameter.POSITIONAL_OR_KEYWORD]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ints = [f"{name}={a!r}" for name, a in zip(names[1:], args[1:])
                if isinstance(a, numbers.Integral) and not isinstance(a, bool)]
        if len(args) > len(names) or ints:
            got = ", ".join(ints) or f"{len(args)} positional arguments"
            raise ValueError(f"{fn.__name__}() got {got}: the case and n come from the model "
                             f"(model.task, model.cfg.d_vocab_out); call {fn.__name__}("
                             f"{', '.join(names)}, ...) and pass case= / n= as keywords, if at all")
        return fn(*args, **kwargs)

    return wrapper
