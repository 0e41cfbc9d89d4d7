"""Seeing inside a model, in three rooms, one per question a reader brings:

* :mod:`interp.inspect.tools` - *what does this model do?* TransformerLens-level tools on one
  model: attention patterns, cos/sin probes, QK/OV circuits, patching and attribution, views.
* :mod:`interp.inspect.mechanism` - *which mechanism is it?* The two labels per model (routing and
  code), the measures they read (:func:`~interp.inspect.mechanism.measure.measure`), the models
  of known mechanism they were calibrated on, and the calibration.
* :mod:`interp.inspect.studies` - *what do many runs do?* The mechanism atlas, timelines through
  training, the sweep explorer and a sweep's per-seed analysis.

Imports point one way: ``studies`` may use ``mechanism`` and ``tools``; ``mechanism`` may use
``tools``; ``tools`` uses neither. :mod:`interp.inspect.vocabulary` holds the words all three
print (the labels, the measures' axis names), so a view can name a label without the code that
assigns it.

Every function that takes a model reads its task from it (``model.task``, ``n =
model.cfg.d_vocab_out``): ``f(model, tokens=None, *, case=None, n=None, ...)``, where ``case=``
and ``n=`` are optional and checked against the model's.

The flat module paths of earlier releases (``interp.inspect.hooks``, ``from interp.inspect import
atlas``) still import, with a DeprecationWarning that names the new path; they go in the next
release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: module -> its room; the old flat path ``interp.inspect.<module>`` resolves to the new one
ROOMS = {
    **dict.fromkeys(("hooks", "probes", "circuits", "interventions", "geometry", "viz", "notebook",
                     "curves"), "tools"),
    **dict.fromkeys(("levels", "codes", "das", "controls", "controls_case5", "calibration",
                     "mlp_measures", "labels", "measure"), "mechanism"),
    **dict.fromkeys(("analysis", "atlas", "atlas_cache", "atlas_figures", "atlas_levels",
                     "atlas_markdown", "atlas_predictions", "timelines", "timeline_report",
                     "explore", "explore_atlas", "explore_timeline"), "studies"),
}


def new_path(module: str) -> str:
    """The module's path since the split: ``hooks`` -> ``interp.inspect.tools.hooks``."""
    return f"{__name__}.{ROOMS[module]}.{module}"


def _moved(module: str):
    new = new_path(module)
    warnings.warn(f"{__name__}.{module} moved to {new}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import interp.inspect.hooks`` (and ``from interp.inspect.hooks import x``) gives the
    module at its new path: the same module object, so patches and ``is`` checks agree."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, module = fullname.rpartition(".")
        if prefix == __name__ and module in ROOMS:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = _moved(spec.name.rpartition(".")[2])
        self._spec = module.__spec__  # the import system sets the alias's spec on it next
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec  # its own spec back: nothing to run, it is imported


if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
    sys.meta_path.append(_OldPaths())


def __getattr__(name: str):  # ``from interp.inspect import hooks`` (PEP 562)
    if name in ROOMS:
        return _moved(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
