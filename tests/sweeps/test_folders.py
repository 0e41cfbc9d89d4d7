"""interp.sweeps.folders: the table layout's one name, and its old one for a release."""

import importlib
import warnings

import pytest

import interp.sweeps
from interp.core import layouts
from interp.sweeps import folders


def test_the_two_layouts_have_two_names():
    assert interp.sweeps.TableLayout is folders.TableLayout is not layouts.Layout
    layout = interp.sweeps.TableLayout(rows=("case",), column="d_token")
    assert (layout.rows, layout.column) == (("case",), "d_token")


@pytest.mark.parametrize("module", ["interp.sweeps", "interp.sweeps.folders", "interp.sweeps.driver"])
def test_the_old_name_still_imports_and_warns_with_the_new_one(module):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        old = importlib.import_module(module).Layout
    assert old is folders.TableLayout
    assert [w.category for w in seen] == [DeprecationWarning]
    assert "interp.sweeps.TableLayout" in str(seen[0].message)
