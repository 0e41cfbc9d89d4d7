"""TransformerLens's ActivationCache bookkeeping and ``transformer_lens.patching`` on every
architecture a ModelSpec allows, against direct computations.

References: the cached streams themselves (``hook_resid_pre``/``mid``/``post``, what the forward
computed), interp's own evaluator :func:`interp.core.forward.final_logits` (the final stream
unembedded), and a patch written by hand with ``run_with_hooks``.
"""

import warnings

import pytest
import torch

from interp.core import attention, forward, models, tasks
from interp.core.cache import TaskCache

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformer_lens import patching

ATOL = 1e-5
#: one model per ModelSpec field off its default (and the hard attention modes, set after)
ARCHITECTURES = {
    "stream-1": dict(),
    "stream-2": dict(n_layers=2),
    "embed-2": dict(n_layers=2, residual="embed"),
    "embed-2-mlp": dict(n_layers=2, residual="embed", d_mlp=8),
    "stream-2-mlp-last": dict(n_layers=2, d_mlp=8, mlp="last"),
    "embed-2-mlp-last": dict(n_layers=2, d_mlp=8, mlp="last", residual="embed"),
    "W_O-identity-no-biases": dict(n_layers=2, W_O="identity", attn_bias=False, unembed_bias=False),
    "no-pos-embed-scaled": dict(n_layers=2, pos_embed="none", embed_scale="sqrt_d_model", d_mlp=4),
    "leftmost": dict(n_layers=2, residual="embed", d_mlp=4),
    "average": dict(n_layers=2),
}


def _model(name, case):
    model = models.build_model(case, 4, 4, seed=1, **ARCHITECTURES[name])
    if name in ("leftmost", "average"):
        attention.set_attention(model, name)
    tokens, answers = tasks.sample(case, 4, 6, generator=torch.Generator().manual_seed(2))
    return model, tokens, answers


def _streams(model, cache):
    """TransformerLens's (layer, mlp_input) -> the stream it names, read from the cache."""
    L, out = model.cfg.n_layers, {}
    for layer in range(L):
        out[(layer, False)] = cache[f"blocks.{layer}.hook_resid_pre"]
        if not model.cfg.attn_only:
            out[(layer, True)] = cache[f"blocks.{layer}.hook_resid_mid"]
    out[(L, False)] = cache[f"blocks.{L - 1}.hook_resid_post"]
    return out


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("case", [1, 3, 5])
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_every_decomposition_sums_to_the_stream_it_decomposes(name, case):
    model, tokens, _ = _model(name, case)
    _, cache = model.run_with_cache(tokens)
    assert isinstance(cache, TaskCache)
    streams = _streams(model, cache)
    final = streams[(model.cfg.n_layers, False)]
    # the final stream is what interp's own evaluator unembeds
    torch.testing.assert_close(final[:, -1] @ model.W_U + model.b_U, forward.final_logits(model, tokens),
                               atol=ATOL, rtol=0)
    for (layer, mlp_input), stream in streams.items():
        parts = cache.decompose_resid(layer, mlp_input=mlp_input)
        torch.testing.assert_close(parts.sum(0), stream, atol=ATOL, rtol=0)
        for expand in (True, False):
            full = _quiet(cache.get_full_resid_decomposition, layer, mlp_input=mlp_input, expand_neurons=expand)
            torch.testing.assert_close(full.sum(0), stream, atol=ATOL, rtol=0)
    for layer in range(model.cfg.n_layers + 1):
        heads = _quiet(cache.stack_head_results, layer, incl_remainder=True)
        if layer:
            torch.testing.assert_close(heads.sum(0), cache[f"blocks.{layer - 1}.hook_resid_post"],
                                       atol=ATOL, rtol=0)
    accumulated = cache.accumulated_resid()
    torch.testing.assert_close(accumulated, torch.stack([streams[(l, False)] for l in range(model.cfg.n_layers + 1)]))


@pytest.mark.parametrize("name", ["embed-2", "embed-2-mlp", "stream-2-mlp-last"])
def test_residual_embed_leaves_block_0_out_of_block_1s_stream_by_label(name):
    model, tokens, _ = _model(name, 5)
    _, cache = model.run_with_cache(tokens)
    _, labels = cache.decompose_resid(return_labels=True)
    _, full_labels = _quiet(cache.get_full_resid_decomposition, return_labels=True)
    _, head_labels = _quiet(cache.stack_head_results, return_labels=True)
    if model.spec.residual == "embed":
        assert not any(label.startswith(("0_", "L0")) for label in labels + full_labels + head_labels)
        assert "1_attn_out" in labels and "L1H0" in head_labels
    else:
        assert "0_attn_out" in labels and "L0H0" in head_labels
    # resid_pre of block 1 is block 0's output: nothing left out there
    assert "0_attn_out" in cache.decompose_resid(1, return_labels=True)[1]


@pytest.mark.parametrize("name", ["embed-2", "embed-2-mlp", "W_O-identity-no-biases"])
def test_logit_attrs_of_the_decomposition_add_up_to_the_answers_logit(name):
    model, tokens, answers = _model(name, 1)
    logits, cache = model.run_with_cache(tokens)
    parts = cache.decompose_resid(pos_slice=-1)  # [component, batch, d_model]
    attrs = cache.logit_attrs(parts, tokens=answers, pos_slice=-1)  # [component, batch]
    rows = torch.arange(len(answers))
    torch.testing.assert_close(attrs.sum(0) + model.b_U[answers], logits[rows, -1, answers], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["embed-2-mlp", "leftmost", "stream-2-mlp-last"])
def test_transformer_lens_patching_is_a_hand_written_patch(name):
    model, clean, answers = _model(name, 5)
    corrupted = tasks.sample(5, 4, 6, generator=torch.Generator().manual_seed(3))[0]
    _, clean_cache = model.run_with_cache(clean)

    def metric(logits):
        return logits[torch.arange(len(answers)), -1, answers].mean()

    for tl, hook in [(patching.get_act_patch_resid_pre, "hook_resid_pre"),
                     (patching.get_act_patch_attn_out, "hook_attn_out"),
                     (patching.get_act_patch_mlp_out, "hook_mlp_out")]:
        result = _quiet(tl, model, corrupted, clean_cache, metric)
        assert result.shape == (model.cfg.n_layers, clean.shape[1])
        for layer, pos in [(1, 3), (0, 8), (1, 8)]:
            name_ = f"blocks.{layer}.{hook}"

            def put(act, hook, pos=pos, name_=name_):
                act[:, pos] = clean_cache[name_][:, pos]
                return act

            by_hand = metric(model.run_with_hooks(corrupted, fwd_hooks=[(name_, put)]))
            torch.testing.assert_close(result[layer, pos], by_hand, atol=ATOL, rtol=0)


def test_the_cache_class_survives_copies_and_batch_slices(tmp_path):
    from interp.training import checkpoints

    model, tokens, _ = _model("embed-2", 5)
    for m in (model, checkpoints.load(checkpoints.save(model, tmp_path / "ckpt")), _quiet(models.to_vanilla, model)):
        _, cache = m.run_with_cache(tokens)
        assert isinstance(cache.apply_slice_to_batch_dim(slice(0, 2)), TaskCache)
        sliced = cache.apply_slice_to_batch_dim(slice(0, 2))
        torch.testing.assert_close(sliced.decompose_resid().sum(0), sliced["blocks.1.hook_resid_post"],
                                   atol=ATOL, rtol=0)
