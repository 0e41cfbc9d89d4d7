"""What a TransformerLens user does first, on three model kinds, each against a forward pass
computed by hand from the weights (plain torch matmuls, never the model's own forward).

Kinds: Theorem 3.1's construction (case 3, leftmost hard attention, pair tokens), a one-layer
f14-reading model (case 3) and a two-layer f14 model (case 5, residual="embed", MLP after the
last layer), both randomly initialised and pushed off their init. Each habit gives the right
number, or is refused (a ValueError naming the problem) or warned about; :data:`EXPECTED` holds
every outcome, each test checks it, and docs/transformerlens.md's table is rendered from it
(``INTERP_WRITE_DOCS=1`` rewrites the table; otherwise the test fails when the page differs).
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import interp
from interp.core import attention, fields, models, tasks
from test_spec import _perturb  # tests/core is on sys.path (pytest rootdir), as test_explore_atlas does

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformer_lens import ActivationCache, HookedTransformer, patching

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "transformerlens.md"
ATOL = 1e-4
KINDS = {"construction": "case-3 construction", "f14-1": "one-layer f14 (case 3)",
         "f14-2": "two-layer f14 (case 5, embed residual)"}


def build(kind):
    if kind == "construction":
        return interp.build(3, n=4)
    case, layers = (3, 1) if kind == "f14-1" else (5, 2)
    spec_fields = fields.infos(models.ModelSpec)
    choices = {k: v for k, v in fields.reading_values(interp.TrainConfig, "f14", case, 4, layers).items()
               if k in spec_fields}  # key_order is training's, not the model's
    return _perturb(models.build_model(case, 4, 4, layers, seed=0, **choices))


def inputs(model, seed):
    return tasks.sample(model.task.case, 4, 8, generator=torch.Generator().manual_seed(seed))


def hand(model, tokens, *, scores=None, mid=None, pre=None, x0=None, keep=None):
    """(logits [batch, pos, n], final stream, last layer's pattern) from the weights: x_0 = s W_E[t]
    + W_pos; per layer q, k, v, scores / sqrt(d_head), the layer's declared mode (softmax(beta s),
    or weight 1 on the first score within 8 ulps of the maximum), attn_out = pattern v W_O + b_O
    added to x_0 (residual="embed", l >= 1) or to x, then the MLP where the spec places one.
    ``scores``/``mid``/``pre``: fn(layer, tensor) -> tensor, edits at those points; ``keep``: a
    dict that gets each layer's input and attention output, their gradients retained."""
    spec = models.spec_of(model)
    scale = math.sqrt(model.cfg.d_model) if spec is not None and spec.embed_scale != "1" else 1.0
    if x0 is None:
        x0 = scale * model.W_E[tokens] + model.W_pos[: tokens.shape[1]]
    x, embed = x0, spec is not None and spec.residual == "embed"
    for layer, block in enumerate(model.blocks):
        x = pre(layer, x) if pre else x
        a, mode = block.attn, attention.modes(model)[layer]
        q, k, v = (x @ W[0] + b[0] for W, b in ((a.W_Q, a.b_Q), (a.W_K, a.b_K), (a.W_V, a.b_V)))
        s = q @ k.transpose(-1, -2) / math.sqrt(model.cfg.d_head)
        s = scores(layer, s) if scores else s
        if mode.mode == "softmax":
            pattern = torch.softmax(mode.beta * s, dim=-1)
        else:
            top = s.max(-1, keepdim=True).values
            tied = s >= top - 8 * torch.finfo(s.dtype).eps * (1 + top.abs())
            pattern = F.one_hot(tied.int().argmax(-1), s.shape[-1]).to(s.dtype)
        attn_out = (pattern @ v) @ a.W_O[0] + a.b_O
        if keep is not None:
            keep[("pre", layer)], keep[("attn_out", layer)] = x, attn_out
            x.retain_grad()
            attn_out.retain_grad()
        x = (x0 if embed and layer > 0 else x) + attn_out
        x = mid(layer, x) if mid else x
        if models.mlp_layers(model)[layer]:
            m = block.mlp
            x = x + torch.relu(x @ m.W_in + m.b_in) @ m.W_out + m.b_out
    return x @ model.W_U + model.b_U, x, pattern


def _close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def _stream_point(model):
    last = model.cfg.n_layers - 1
    return last, f"blocks.{last}.hook_resid_{'post' if model.cfg.attn_only else 'mid'}"


# ---- the habits: each returns its outcome, after checking the numbers it gives

def stop_then_start(model, X, Y):
    residual = model(Y, stop_at_layer=1)
    model(X, stop_at_layer=1)  # another input's pass, stopped after block 0
    try:
        out = model(residual, start_at_layer=1)
    except ValueError as e:
        assert "start_at_layer=1 on a residual='embed' model" in str(e)
        _close(model(residual, start_at_layer=1, tokens=Y), hand(model, Y)[0])
        return "refused; right with tokens="
    _close(out, hand(model, Y)[0])
    return "right"


def split_qkv(model, X, Y):
    for setter in (model.set_use_split_qkv_input, model.set_use_attn_in):
        setter(True)
        try:
            _close(model(X), hand(model, X)[0])
            _close(model(X[:1]), hand(model, X[:1])[0])
        finally:
            setter(False)
    return "right"


def plain_activation_cache(model, X, Y):
    store = {}
    model.add_caching_hooks(cache=store)
    try:
        model(X)
    finally:
        model.reset_hooks()
    cache = ActivationCache(store, model)
    try:
        parts = cache.decompose_resid()
    except ValueError as e:
        assert "TaskCache" in str(e)
        return "refused"
    _close(parts.sum(0), hand(model, X)[1])
    return "right"


def plain_hooked_transformer(model, X, Y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = model.state_dict()
        plain = HookedTransformer(model.cfg)
    warned = any("state_dict() holds the weights only" in str(w.message) for w in caught)
    try:
        plain.load_state_dict(state)
    except RuntimeError as e:  # a pair model's tables: keys a plain model does not have
        assert "Unexpected key(s)" in str(e) and "embed.parametrizations.W_E.original0" in str(e)
        return "warns; load refused" if warned else "load refused"
    if warned:
        assert not torch.allclose(plain(X), hand(model, X)[0], atol=1e-3)  # what it warns of
        return "warns"
    _close(plain(X), hand(model, X)[0])
    return "right"


def mask_attended_key(model, X, Y):
    last = model.cfg.n_layers - 1
    attended = hand(model, X)[2][:, -1].argmax(-1)  # the final query's key
    rows = torch.arange(len(X))

    def edit(layer, s):
        if layer != last:
            return s
        s = s.clone()
        s[rows, -1, attended] = -1e4
        return s

    def hook(act, hook):
        act = act.clone()
        act[rows, 0, -1, attended] = -1e4
        return act

    expected = hand(model, X, scores=edit)[0]
    name = f"blocks.{last}.attn.hook_attn_scores"
    _close(model.run_with_hooks(X, fwd_hooks=[(name, hook)]), expected)
    model.add_hook(name, hook, prepend=True)
    try:
        _close(model(X), expected)
    finally:
        model.reset_hooks()
    return "right"


def hook_on_the_residual(model, X, Y):
    last, name = _stream_point(model)
    expected = hand(model, X, mid=lambda layer, x: 0.5 * x if layer == last else x)[0]
    for prepend in (True, False):
        model.add_hook(name, lambda act, hook: 0.5 * act, prepend=prepend)
        try:
            _close(model(X), expected)
        finally:
            model.reset_hooks()
    return "right"


def decode_prediction(model, X, Y):
    logits = model(X)
    prediction = logits[:, -1].argmax(-1)
    try:
        text = model.to_string(prediction)
    except ValueError as e:
        assert "output classes" in str(e)
        with pytest.raises(ValueError, match="output classes"):
            model.to_str_tokens(logits.argmax(-1))
        return "refused"
    assert text == " ".join(str(k) for k in hand(model, X)[0][:, -1].argmax(-1).tolist())
    return "right"


def generate_stream(model, X, Y):
    with pytest.raises(ValueError, match=r"^generate_stream\(\) does not apply"):
        next(iter(model.generate_stream(X, max_new_tokens=1)))
    with pytest.raises(ValueError, match=r"^generate\(\) does not apply"):
        model.generate(X, max_new_tokens=1, verbose=False)
    return "refused"


def gradients(model, X, Y):
    try:
        _, cache = model.run_with_cache(X, return_type="loss", incl_bwd=True)
    except ValueError as e:
        assert "no parameter of this model requires grad" in str(e)
        return "refused"
    x0, keep = (model.W_E[X] + model.W_pos[: X.shape[1]]).detach().requires_grad_(True), {}
    loss = F.cross_entropy(hand(model, X, x0=x0, keep=keep)[0][:, -1], tasks.answers(model.task.case, 4, X))
    loss.backward()
    _close(cache["blocks.0.hook_resid_pre_grad"], x0.grad)
    for (point, layer), tensor in keep.items():
        _close(cache[f"blocks.{layer}.hook_{'resid_pre' if point == 'pre' else point}_grad"], tensor.grad)
    return "right"


def cache_and_pattern(model, X, Y):
    logits, cache = model.run_with_cache(X)
    expected, _, pattern = hand(model, X)
    _close(logits, expected)
    _close(cache[f"blocks.{model.cfg.n_layers - 1}.attn.hook_pattern"][:, 0], pattern)
    return "right"


def decomposition_and_lens(model, X, Y):
    logits, cache = model.run_with_cache(X)
    expected, final, _ = hand(model, X)
    _close(cache.decompose_resid().sum(0), final)
    _close(cache.get_full_resid_decomposition().sum(0), final)
    _close(model.unembed(cache.accumulated_resid(pos_slice=-1))[-1], expected[:, -1])
    return "right"


def task_loss(model, X, Y):
    expected = F.cross_entropy(hand(model, X)[0][:, -1], tasks.answers(model.task.case, 4, X))
    _close(model(X, return_type="loss"), expected)
    return "right"


def ov_circuit(model, X, Y):
    a = model.blocks[0].attn
    _close(model.OV[0, 0].AB, a.W_V[0] @ a.W_O[0])
    return "right"


def patch_resid_pre(model, X, Y):
    """TransformerLens's patching of the last layer's resid_pre (one position per cell; here the
    final one), and all positions patched by a hook: the clean run only where the last layer
    reads nothing else, since residual="embed" still adds the corrupted run's x_0 (the hand pass
    patches x_l and keeps x_0)."""
    last = model.cfg.n_layers - 1
    _, clean = model.run_with_cache(X)
    name = f"blocks.{last}.hook_resid_pre"

    def final(layer, x):
        if layer != last:
            return x
        x = x.clone()
        x[:, -1] = clean[name][:, -1]
        return x

    grid = patching.get_act_patch_resid_pre(model, Y, clean, lambda logits: logits[:, -1].sum())
    _close(grid[last, -1], hand(model, Y, pre=final)[0][:, -1].sum())
    every = model.run_with_hooks(Y, fwd_hooks=[(name, lambda act, hook: clean[name])])
    _close(every, hand(model, Y, pre=lambda layer, x: clean[name] if layer == last else x)[0])
    return "right"


HABITS = {
    "`model(r, start_at_layer=1)` on another input's `stop_at_layer=1` residual": stop_then_start,
    "`set_use_split_qkv_input(True)` / `set_use_attn_in(True)`, then a forward": split_qkv,
    "`ActivationCache(store, model)` from `add_caching_hooks`, then `decompose_resid()`": plain_activation_cache,
    "`HookedTransformer(model.cfg).load_state_dict(model.state_dict())`": plain_hooked_transformer,
    "a `hook_attn_scores` hook masking the attended key (`run_with_hooks`, `prepend=True`)": mask_attended_key,
    "`add_hook` on the last `hook_resid_mid`/`post`, `prepend=True` or not": hook_on_the_residual,
    "`model.to_string(logits[:, -1].argmax(-1))`": decode_prediction,
    "`generate_stream` / `generate`": generate_stream,
    "`run_with_cache(return_type=\"loss\", incl_bwd=True)`": gradients,
    "`run_with_cache`: logits and the last `hook_pattern`": cache_and_pattern,
    "`decompose_resid`, `get_full_resid_decomposition`, logit lens": decomposition_and_lens,
    "`model(X, return_type=\"loss\")`": task_loss,
    "`model.OV[0, 0]`": ov_circuit,
    "`patching.get_act_patch_resid_pre` / a hook patching all of the last `resid_pre`": patch_resid_pre,
}
R = "right"
EXPECTED = {
    stop_then_start: (R, R, "refused; right with tokens="),
    split_qkv: (R, R, R),
    plain_activation_cache: (R, R, "refused"),
    plain_hooked_transformer: ("warns; load refused", "load refused", "warns"),
    mask_attended_key: (R, R, R),
    hook_on_the_residual: (R, R, R),
    decode_prediction: ("refused", "refused", R),
    generate_stream: ("refused", "refused", "refused"),
    gradients: ("refused", R, R),
    cache_and_pattern: (R, R, R),
    decomposition_and_lens: (R, R, R),
    task_loss: (R, R, R),
    ov_circuit: (R, R, R),
    patch_resid_pre: (R, R, R),
}


@pytest.fixture(scope="module", params=list(KINDS))
def kind(request):
    model = build(request.param)
    return request.param, model, inputs(model, 0)[0], inputs(model, 1)[0]


@pytest.mark.parametrize("habit", list(HABITS.values()), ids=lambda f: f.__name__)
def test_each_habit_gives_the_right_number_or_a_clear_refusal(habit, kind):
    name, model, X, Y = kind
    assert habit(model, X, Y) == EXPECTED[habit][list(KINDS).index(name)]
    _close(model(X), hand(model, X)[0])  # nothing the habit did is left behind


def render() -> str:
    head = "| habit | " + " | ".join(KINDS.values()) + " |\n|---|" + "---|" * len(KINDS) + "\n"
    return head + "".join(f"| {text} | " + " | ".join(EXPECTED[fn]) + " |\n" for text, fn in HABITS.items())


def test_the_guide_lists_every_habit_with_its_outcome():
    page = GUIDE.read_text()
    block = re.compile(r"(<!-- habits: .*? -->\n)(.*?)(<!-- /habits -->)", re.S)
    assert block.search(page), "docs/transformerlens.md has no <!-- habits: ... --> block"
    if os.environ.get("INTERP_WRITE_DOCS") == "1":
        GUIDE.write_text(block.sub(lambda m: m.group(1) + render() + m.group(3), page))
    assert block.search(GUIDE.read_text()).group(2) == render(), \
        "the table differs from the suite's outcomes: INTERP_WRITE_DOCS=1 pytest tests/core/test_tl_reproductions.py"
