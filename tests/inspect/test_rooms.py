"""inspect/ in three rooms (issue 50): the old flat paths still import, naming the new one, and
measuring a model validates it once."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import interp.inspect as inspect_pkg
from interp.core import constructions, tasks
from interp.inspect.mechanism.measure import measure
from interp.inspect.tools import hooks


def test_every_old_path_is_the_new_module_and_names_it():
    """One fresh interpreter (the warning fires once per module): each old path, imported both
    ways, is the same module object as the new path, keeps its own spec, and warns with it."""
    code = ("import importlib, warnings\n"
            "import interp.inspect as I\n"
            "warnings.simplefilter('always')\n"
            "for m, room in sorted(I.ROOMS.items()):\n"
            "    new = importlib.import_module(f'interp.inspect.{room}.{m}')\n"
            "    with warnings.catch_warnings(record=True) as w:\n"
            "        old = importlib.import_module(f'interp.inspect.{m}')\n"
            "        attr = getattr(I, m)\n"
            "    assert old is new and attr is new and new.__spec__.name == new.__name__, m\n"
            "    print(w[0].message)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for module, room in inspect_pkg.ROOMS.items():
        assert f"interp.inspect.{module} moved to interp.inspect.{room}.{module}" in out.stdout


def test_an_unknown_name_is_still_an_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        inspect_pkg.nothing  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("interp.inspect.nothing")


def _count_checks(monkeypatch, model) -> list:
    calls = []
    cls = type(model.task)
    original = cls.check_config
    monkeypatch.setattr(cls, "check_config", lambda self, cfg: (calls.append(1), original(self, cfg))[1])
    return calls


def test_measure_validates_its_model_once(monkeypatch):
    model = constructions.build(3, 5)
    calls = _count_checks(monkeypatch, model)
    measure(model, batch_size=64, code=False)
    assert len(calls) == 1
    calls.clear()  # the measures it runs, called one by one, each validate again: the count can fail
    hooks.accuracy(model, hooks.sample_inputs(3, 5, 16))
    hooks.check_model(model)
    assert len(calls) == 2


def test_checked_still_checks_another_model_or_a_wrong_case():
    a, b = constructions.build(3, 5), constructions.build(2, 5)
    with hooks.checked(a) as (task, n):
        assert (task.case, n) == (3, 5)
        assert hooks.check_model(b)[0].case == 2  # not a's answer
        with pytest.raises(ValueError):
            hooks.check_model(a, case=2)
    assert tasks.of(a)[0].case == 3
