"""A checkpoint names what it holds (issue 50, item 3): a registered task by its module-qualified
class and name, not only its case number, and every spec field; loading checks both.

The failure this guards against: a model of one registered case 6 loaded silently as another
module's same-shape case 6 (and measured 18% instead of 95%). References: the task objects
themselves (the one saved, the one registered at load) and TransformerLens's logits.
"""

from __future__ import annotations

import json

import pytest
import torch

import interp
from core.test_external_task import PRESENTATION as VALUE_FIRST
from core.test_query_first import QueryFirst
from interp.training import checkpoints

CASE = VALUE_FIRST.case
OTHER = QueryFirst(CASE, "query first, same shape", True)  # same n_ctx and d_vocab as VALUE_FIRST


@pytest.fixture
def saved(tmp_path):
    interp.tasks.register(VALUE_FIRST)
    model = interp.models.build_model(CASE, 4, 4, n_layers=2, seed=1)
    path = checkpoints.save(model, tmp_path / "run")
    yield model, path
    if CASE in interp.tasks.CASES:
        interp.tasks.unregister(CASE)


def _edit(path, change) -> None:
    meta = json.loads((path / checkpoints.CONFIG).read_text())
    change(meta["model"])
    (path / checkpoints.CONFIG).write_text(json.dumps(meta))


def test_it_stores_the_task_by_name_and_loads_it_back(saved):
    model, path = saved
    stored = json.loads((path / checkpoints.CONFIG).read_text())["model"]["task"]
    assert stored == {"case": CASE, "class": f"{ValueFirstModule()}.ValueFirst", "name": VALUE_FIRST.name}
    loaded = checkpoints.load(path)
    assert loaded.task is VALUE_FIRST
    tokens, _ = VALUE_FIRST.sample(4, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(loaded(tokens), model(tokens))


def ValueFirstModule() -> str:
    return type(VALUE_FIRST).__module__


def test_another_task_under_its_case_is_refused_by_name(saved):
    _, path = saved
    interp.tasks.unregister(CASE)
    interp.tasks.register(OTHER)
    with pytest.raises(ValueError, match=rf"config.json: case {CASE} is .*ValueFirst \('consecutive, permuted keys, "
                                         rf"value first'\), but case {CASE} here is .*QueryFirst \('query first, "
                                         rf"same shape'\); accepted: the same presentation registered as case {CASE}"):
        checkpoints.load(path)


def test_an_unregistered_task_is_refused_saying_how_to_register_it(saved):
    _, path = saved
    interp.tasks.unregister(CASE)
    with pytest.raises(interp.tasks.UnknownCase, match=r"config.json: case 6 is .*ValueFirst .* not registered "
                                                       r"here; .*interp.tasks.register.*INTERP_TASKS"):
        checkpoints.load_run(path)


def test_an_old_checkpoint_without_the_identity_loads_as_before(saved):
    model, path = saved
    _edit(path, lambda m: m.pop("task"))
    assert checkpoints.load(path).task is VALUE_FIRST


def test_a_spec_field_this_version_cannot_build_is_refused_by_name(saved):
    _, path = saved
    _edit(path, lambda m: m["spec"].update(layer_norm="pre"))
    with pytest.raises(ValueError, match=r"config.json: spec field\(s\) \['layer_norm'\] \(= \['pre'\]\): this version "
                                         r"of interp cannot build them"):
        checkpoints.load(path)
    _edit(path, lambda m: (m["spec"].pop("layer_norm"), m["spec"].update(W_O="half")))
    with pytest.raises(ValueError, match=r"config.json: spec .*W_O='half'; accepted: one of \('free', 'identity'\)"):
        checkpoints.load(path)


def test_the_papers_checkpoints_keep_their_config_json(tmp_path):
    path = checkpoints.save(interp.models.build_model(5, 3, 2, seed=0), tmp_path / "p")
    assert "task" not in json.loads((path / checkpoints.CONFIG).read_text())["model"]
    assert checkpoints.load(path).task is interp.tasks.get(5)


def test_a_stored_spec_says_what_its_config_may_be():
    """The allow-list of hooked_config values holds for checkpoints without a spec; with one, the
    spec's declarations say (a LayerNorm field's normalization_type saved, then refused on load,
    was issue 50's finding), and load holds the config to the one the spec builds."""
    hc = {"normalization_type": "LN", "dtype": "float32", "n_layers": 1}
    checkpoints.check_config(hc, "x", spec=True)
    with pytest.raises(ValueError, match=r"^x: normalization_type='LN'; accepted: one of \(None,\)$"):
        checkpoints.check_config(hc, "x")
    with pytest.raises(ValueError, match=r"^x: dtype='float16'"):
        checkpoints.check_config({**hc, "dtype": "float16"}, "x", spec=True)


def test_a_config_its_spec_does_not_build_is_refused_naming_the_field(saved):
    _, path = saved
    _edit(path, lambda m: m["hooked_config"].update(normalization_type="LN"))
    with pytest.raises(ValueError, match=r"does not describe its hooked_config: normalization_type='LN' "
                                         r"\(its spec builds normalization_type=None\)"):
        checkpoints.load(path)
