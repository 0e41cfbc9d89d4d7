"""Progress bars for the library's long calls, and ``interp.train``/``interp.train_group``.

The library never writes to the terminal: its long calls take a bar factory (``progress=``,
called as ``progress(total=, desc=, unit=)``; ``tqdm.auto.tqdm`` is one). This module, in the
CLI stage, supplies the package's bar, :func:`step_bar` (tqdm.auto: a widget in a notebook
with ipywidgets, text on stderr elsewhere, redrawn at most 4 times a second), and the top-level
``interp.train`` and ``interp.train_group``, which are :func:`interp.training.trainer.train` and
``train_group`` with ``progress=True`` meaning that bar.
"""

from __future__ import annotations

#: seconds between two redraws of a bar, at least
REDRAW = 0.25


def step_bar(*, total: int, desc: str, unit: str = "step"):
    """A tqdm.auto bar of ``total`` steps (stderr, or a notebook widget)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, mininterval=REDRAW, dynamic_ncols=True)


def _bar(progress):
    return step_bar if progress is True else progress


def train(config, *, engine: str = "fast", device: str = "cpu", progress: bool = False,
          callback=None):
    """Train one run (:func:`interp.training.trainer.train`); ``progress=True`` shows a bar of
    its steps and training-batch loss (:func:`step_bar`; the test accuracy when it ends), a bar
    factory such as ``tqdm.auto.tqdm`` is used as given. ``callback(step, loss)`` is called after
    every step; an exception it raises stops training and is raised here."""
    from interp.training import trainer

    return trainer.train(config, engine=engine, device=device, progress=_bar(progress),
                         callback=callback)


def train_group(configs, *, engine: str = "fast", device: str = "cpu", progress: bool = False,
                callback=None, state_file=None, every: float = 600.0):
    """Train runs that differ only in seed (:func:`interp.training.trainer.train_group`);
    ``progress=True``: one bar for the group. ``callback(step, {seed: loss})`` after every step.
    ``state_file``: where the group's state is saved every ``every`` seconds and resumed from."""
    from interp.training import trainer

    return trainer.train_group(configs, engine=engine, device=device, progress=_bar(progress),
                               callback=callback, state_file=state_file, every=every)
