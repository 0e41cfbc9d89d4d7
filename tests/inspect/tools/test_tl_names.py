"""One convention with TransformerLens: no public name of interp's analysis modules is a
TransformerLens name with another meaning, the patch setters take TL's argument order, and where
interp does what TL does it calls TL (equal to TL's recipe)."""

import inspect
import warnings

import pytest
import torch

from interp.core import constructions, forward, models, tasks
from interp.inspect.tools import circuits, hooks
from interp.inspect.tools import interventions as iv

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import transformer_lens
    from transformer_lens import ActivationCache, FactoredMatrix, HookedTransformer, patching, utils
    from transformer_lens.tools import analysis

#: TransformerLens's public names a user meets first: the package, patching, utils, the analysis
#: tools, and the methods of a model and a cache
#: (sub-modules left out: interp's attribution_patching is the technique TL's module is named for)
TL_NAMES = {name for module in (transformer_lens, patching, utils, analysis)
            for name in dir(module) if not name.startswith("_") and not inspect.ismodule(getattr(module, name))}
TL_NAMES |= {name for cls in (HookedTransformer, ActivationCache) for name in dir(cls) if not name.startswith("_")}


@pytest.mark.parametrize("module", [iv, hooks, circuits, forward])
def test_no_public_name_is_a_transformer_lens_name_with_another_meaning(module):
    shadows = []
    for name, obj in vars(module).items():
        if name.startswith("_") or name not in TL_NAMES or inspect.ismodule(obj):
            continue
        theirs = [getattr(m, name) for m in (transformer_lens, patching, utils, analysis) if hasattr(m, name)]
        if not any(obj is t for t in theirs):
            shadows.append(name)
    assert not shadows, f"{module.__name__} defines {shadows}, names TransformerLens uses for something else"


def test_setters_take_transformer_lens_argument_order():
    tl = list(inspect.signature(patching.layer_pos_patch_setter).parameters)
    assert tl == ["corrupted_activation", "index", "clean_activation"]
    for setter in (iv.pos_setter, iv.pos_head_setter, iv.mask_setter):
        params = list(inspect.signature(setter).parameters)
        assert params[0] == tl[0] and params[2] == tl[2], setter.__name__
    assert list(inspect.signature(iv.patch).parameters)[1:3] == ["corrupted_tokens", "clean_activations"]


def test_the_engine_patches_in_transformer_lens_direction():
    """patch_positions(model, corrupted, clean_cache) equals TL's get_act_patch_resid_pre cell."""
    model = models.build_model(5, 4, 4, n_layers=2, seed=0)
    clean, corrupted = (tasks.sample(5, 4, 6, generator=torch.Generator().manual_seed(s))[0] for s in (0, 1))
    _, clean_cache = model.run_with_cache(clean)
    answers = tasks.get(5).answers(4, clean)

    def metric(logits):
        return logits[torch.arange(6), -1, answers].mean()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl = patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric)
    name = "blocks.1.hook_resid_pre"
    for pos in (2, 5, 8):
        ours = iv.patch_positions(model, corrupted, {name: clean_cache[name]}, pos)
        torch.testing.assert_close(ours[torch.arange(6), answers].mean(), tl[1, pos], atol=1e-6, rtol=0)


@pytest.mark.parametrize("kw", [dict(), dict(n_layers=2, residual="embed", d_mlp=4)])
def test_logit_lens_and_patterns_are_transformer_lens_recipes(kw):
    model = models.build_model(5, 4, 4, seed=0, **kw)
    tokens = tasks.sample(5, 4, 6, generator=torch.Generator().manual_seed(0))[0]
    _, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(iv.logit_lens(model, tokens), model.unembed(cache.accumulated_resid(pos_slice=-1)),
                               atol=0, rtol=0)
    assert torch.equal(hooks.attention_patterns(model, tokens), cache.stack_activation("pattern")[:, :, 0])


@pytest.mark.parametrize("case", tasks.CASES)
def test_ov_matrix_is_transformer_lens_factored_ov_and_batch_addmm_is_tls(case):
    from transformer_lens.utilities.addmm import batch_addmm

    assert forward.batch_addmm is batch_addmm
    for model in (constructions.build(case, 5), models.build_model(case, 5, 4, n_layers=2, d_mlp=4, seed=0)):
        E = circuits.value_embeddings(model).double()
        OV = model.OV[model.cfg.n_layers - 1, 0]
        assert isinstance(OV, FactoredMatrix)
        ref = (E @ FactoredMatrix(OV.A.double(), OV.B.double()) @ model.W_U.double()).AB.float()
        assert torch.equal(circuits.ov_matrix(model).matrix, ref.detach())
        # and the float32 FactoredMatrix of the issue, to float rounding
        torch.testing.assert_close(circuits.ov_matrix(model).matrix,
                                   (E.float() @ OV @ model.W_U).AB.detach(), atol=1e-6, rtol=0)
