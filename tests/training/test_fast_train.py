"""The fast path against TransformerLens's own forward/backward and a plain TransformerLens loop."""

import itertools
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from interp.core import constructions, tasks
from interp.training import fast_train as ft
from interp.training.trainer import (
    TrainConfig, generator, init_model, one_thread, train, train_group, trainable,
)

@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


GRID = list(itertools.product(tasks.CASES, ("learned", "none"), (1, 2)))


def _perturbed(config):
    """A model of config with every trainable parameter (biases too) pushed off its init."""
    model = init_model(config)
    g = torch.Generator().manual_seed(config.seed + 100)
    with torch.no_grad():
        for p in trainable(model):
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def _assert_fast_path_matches_transformer_lens(model, case: int, n: int, seed: int = 1) -> dict:
    """The fast path's final logits and every parameter gradient equal TransformerLens's own
    forward/backward (1e-5) on 32 random inputs; returns TransformerLens's gradients."""
    tokens, answers = tasks.sample(case, n, 32, generator=torch.Generator().manual_seed(seed))
    ref_logits = model(tokens)[:, -1]  # TransformerLens's own forward
    F.cross_entropy(ref_logits, answers).backward()
    ref_grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)

    logits = ft.model_final_logits(model, tokens)
    F.cross_entropy(logits, answers).backward()
    torch.testing.assert_close(logits, ref_logits, atol=1e-5, rtol=0)
    for name, p in model.named_parameters():
        if p.requires_grad:
            # the last layer's b_K shifts every score equally: exact gradient 0, left out
            grad = p.grad if p.grad is not None else torch.zeros_like(p)
            torch.testing.assert_close(grad, ref_grads[name], atol=1e-5, rtol=0, msg=name)
    return ref_grads


@pytest.mark.parametrize("case,pos_embed,n_layers", GRID)
@pytest.mark.parametrize("d_token", [3, 8])  # d_model below and above n: both value paths
def test_logits_and_gradients_match_transformer_lens(case, pos_embed, n_layers, d_token):
    config = TrainConfig(case=case, n=6, d_token=d_token, n_layers=n_layers, pos_embed=pos_embed)
    model = _perturbed(config)
    _assert_fast_path_matches_transformer_lens(model, case, 6)
    if pos_embed == "none":
        assert model.pos_embed.W_pos.grad is None


@pytest.mark.parametrize("case,pos_embed,d_token", [(5, "learned", 16), (4, "none", 16), (2, "learned", 12)])
def test_two_layers_with_wide_heads(case, pos_embed, d_token):
    """d_head >= half the basis rows: the last layer goes through the rows' q.k table."""
    config = TrainConfig(case=case, n=4, d_token=d_token, n_layers=2, pos_embed=pos_embed)
    _assert_fast_path_matches_transformer_lens(_perturbed(config), case, 4, seed=3)


@pytest.mark.parametrize("case", [2, 3])
def test_pair_token_at_the_last_position_takes_the_general_path(case):
    """An input whose last token is a pair token (not tasks' layout) is still computed exactly."""
    config = TrainConfig(case=case, n=5, d_token=4)
    model = _perturbed(config)
    tokens, _ = tasks.sample(case, 5, 16, generator=torch.Generator().manual_seed(2))
    tokens[:8, -1] = tokens[:8, 0]  # a pair token where the query belongs
    model.embed.input_check = False  # off the task's layout on purpose: TransformerLens as reference
    torch.testing.assert_close(
        ft.model_final_logits(model, tokens), model(tokens)[:, -1], atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("case", tasks.CASES)
@pytest.mark.parametrize("function", tasks.FUNCTIONS)
@pytest.mark.parametrize("key_order", tasks.KEY_ORDERS)
def test_sample_indices_reproduce_tasks_sample(case, function, key_order):
    for n in (2, 7, 100):
        g1, g2 = torch.Generator().manual_seed(n), torch.Generator().manual_seed(n)
        for _ in range(3):
            tokens, answers = tasks.sample(case, n, 64, generator=g1, function=function, key_order=key_order)
            J, answers2 = ft.sample_indices(case, n, 64, generator=g2, function=function, key_order=key_order)
            assert torch.equal(ft.token_indices(case in tasks.SAME_POSITION, n, tokens), J)
            assert torch.equal(answers, answers2)
            assert answers.tolist() == [tasks.evaluate(case, n, t) for t in tokens.tolist()]


@pytest.mark.parametrize("n", [2, 9, 100, 300])
def test_argsort_matches_torch_including_ties(n):
    r = torch.rand(400, n, generator=torch.Generator().manual_seed(n))
    r[::3, 1] = r[::3, 0]  # ties, as torch.rand produces about once in 4000 rows of 100
    r[::7, -1] = r[::7, n // 2]
    assert torch.equal(ft._argsort_rows(r), r.argsort(dim=1))


def _plain_loop(config, steps):
    """The plain TransformerLens loop from the same init and data: losses per step."""
    model = init_model(config)
    opt = torch.optim.Adam(trainable(model), lr=config.lr)
    g = generator(config.seed, "train")
    losses = []
    for _ in range(steps):
        tokens, answers = tasks.sample(config.case, config.n, config.batch_size, generator=g,
                                       key_order=config.key_order)
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize(
    "case,n,d_token,n_layers,pos_embed,screen",
    [(3, 8, 4, 1, "none", {}), (4, 6, 8, 1, "learned", {}), (5, 5, 8, 2, "learned", {}),
     # issue 28's three screening fields off their defaults, through the whole loop
     (5, 5, 8, 2, "learned", dict(key_order="batch", pos_init="zero", embed_scale="sqrt_d_model"))],
)
def test_200_steps_follow_the_plain_loop(case, n, d_token, n_layers, pos_embed, screen):
    config = TrainConfig(
        case=case, n=n, d_token=d_token, n_layers=n_layers, pos_embed=pos_embed, max_steps=200,
        stop_loss=0.0, curve_every=1, eval_batches=1, batch_size=64, **screen,
    )
    ref_losses, ref_model = _plain_loop(config, 200)
    result = train(config)
    assert [s for s, _ in result.curve] == list(range(1, 201))
    torch.testing.assert_close(
        torch.tensor([v for _, v in result.curve]), torch.tensor(ref_losses), atol=1e-4, rtol=0
    )
    for (name, p), q in zip(result.model.named_parameters(), ref_model.parameters(), strict=True):
        if name.endswith("b_K"):  # q . b_K is the same for every key: its gradient is 0 up to
            continue  # rounding, which Adam normalises to steps of lr whatever its sign
        torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)


def _assert_same_runs(a, b):
    assert (a.steps, a.accuracy, a.final_loss, a.curve, a.status) == (
        b.steps, b.accuracy, b.final_loss, b.curve, b.status
    )
    for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        assert torch.equal(p, q)


def test_ensemble_seeds_equal_seeds_trained_alone():
    # stop_loss is reached by some seeds and not others: per-seed stopping is exercised. The
    # stacked (batched) ensemble needs MKL_CBWR from process start: the subprocess test below.
    base = TrainConfig(case=2, n=3, d_token=4, lr=0.01, max_steps=120, stop_loss=0.1,
                       eval_batches=2, batch_size=64)
    configs = [base.replace(seed=s) for s in range(3)]
    group = ft.Ensemble(configs, batched=False)
    while not group.done:
        group.step()
    results = group.results()
    assert len({r.steps for r in results}) > 1  # the seeds stopped at different steps
    for r in results:
        _assert_same_runs(r, train(r.config))
    assert [r.steps for r in results] == [r.steps for r in train_group(configs)]


def test_batched_ensemble_is_exact_when_mkl_is_reproducible():
    """A stacked [seed, ...] ensemble gives each seed its solo bits under MKL_CBWR (subprocess):
    two layers without and with MLPs, with ModelSpec's choices, and one layer with seeds that
    stop at different steps."""
    code = (
        "from interp.training import fast_train as ft\n"
        "from interp.training.trainer import TrainConfig, train, train_group\n"
        "assert ft.mkl_reproducible()\n"
        "two = [TrainConfig(case=5, n=4, d_token=6, n_layers=2, seed=s, max_steps=40,"
        " eval_batches=1, batch_size=32) for s in range(3)]\n"
        "stops = [TrainConfig(case=2, n=3, d_token=4, lr=0.01, max_steps=120, stop_loss=0.1,"
        " eval_batches=2, batch_size=64, seed=s) for s in range(3)]\n"
        "mlp = [c.replace(d_mlp=12, max_steps=20) for c in two]\n"
        "spec = [c.replace(d_mlp=12, mlp='last', residual='embed', attn_bias=False, W_O='identity',"
        " init='mha', max_steps=20) for c in two]\n"
        "for cs in (two, mlp, spec, stops):\n"
        "    e = ft.Ensemble(cs, batched=True)\n"
        "    while not e.done: e.step()\n"
        "    results = e.results()\n"
        "    for r in results:\n"
        "        a = train(r.config)\n"
        "        assert (r.steps, r.curve, r.accuracy, r.final_loss) == (a.steps, a.curve, a.accuracy, a.final_loss)\n"
        "        assert all((p == q).all() for p, q in zip(list(r.model.parameters()), list(a.model.parameters()), strict=True))\n"
        "    assert [r.steps for r in results] == [r.steps for r in train_group(cs)]\n"
        "assert len({r.steps for r in results}) > 1  # the seeds stopped at different steps\n"
        "print('ok')\n"
    )
    if not torch.backends.mkl.is_available():
        pytest.skip("torch has no MKL here: the stacked mode is never chosen")
    env = dict(os.environ, MKL_CBWR="AUTO", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


def test_non_finite_loss_stops_only_that_seed():
    configs = [TrainConfig(case=1, n=4, d_token=2, seed=s, max_steps=5, stop_loss=0.0,
                           eval_batches=1, batch_size=16) for s in range(2)]
    models = [init_model(c) for c in configs]
    with torch.no_grad():
        models[0].unembed.b_U[0] = float("nan")
    group = ft.Ensemble(configs, models_=models)
    while not group.done:
        group.step()
    bad, good = group.results()
    assert bad.status.startswith("failed: non-finite loss") and bad.steps == 0
    assert good.status == "ok" and good.steps == 5


def test_refuses_hard_attention():
    with pytest.raises(ValueError, match="attention modes"):
        ft.check_model(constructions.build(3, 4))


@pytest.mark.parametrize("case,pos_embed", [(1, "learned"), (2, "none"), (3, "learned"), (5, "learned"), (4, "none")])
@pytest.mark.parametrize("d_token", [3, 8])
def test_one_layer_mlp_logits_and_gradients_match_transformer_lens(case, pos_embed, d_token):
    config = TrainConfig(case=case, n=6, d_token=d_token, pos_embed=pos_embed, d_mlp=10, init="pytorch")
    model = _perturbed(config)
    ref_grads = _assert_fast_path_matches_transformer_lens(model, case, 6)
    assert ref_grads["blocks.0.mlp.W_in"].abs().sum() > 0  # the MLP is on the gradient path


@pytest.mark.parametrize("case,pos_embed", list(itertools.product(tasks.CASES, ("learned", "none"))))
@pytest.mark.parametrize("d_token", [3, 8])
def test_two_layer_mlp_logits_and_gradients_match_transformer_lens(case, pos_embed, d_token):
    """Layer 0's MLP at every position, the last layer's at the final one: every logit and
    gradient (both MLPs' included) as TransformerLens's own forward/backward gives them."""
    config = TrainConfig(case=case, n=6, d_token=d_token, n_layers=2, pos_embed=pos_embed, d_mlp=10)
    ref_grads = _assert_fast_path_matches_transformer_lens(_perturbed(config), case, 6)
    assert ref_grads["blocks.0.mlp.W_in"].abs().sum() > 0  # both MLPs are on the gradient path
    assert ref_grads["blocks.1.mlp.W_in"].abs().sum() > 0


@pytest.mark.parametrize("case,pos_embed", [(1, "learned"), (2, "none"), (3, "learned"), (4, "none"), (5, "learned")])
def test_two_layer_mlp_is_exact_in_float64(case, pos_embed):
    """The regrouping is the same function, not an approximation: in float64, with PyTorch's
    larger init (logits of tens), logits and gradients agree with TransformerLens to 1e-10."""
    config = TrainConfig(case=case, n=6, d_token=8, n_layers=2, pos_embed=pos_embed, d_mlp=12,
                         init="pytorch")
    model = init_model(config).to(torch.float64, print_details=False)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in trainable(model):
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    tokens, answers = tasks.sample(case, 6, 32, generator=torch.Generator().manual_seed(2))
    ref_logits = model(tokens)[:, -1]
    F.cross_entropy(ref_logits, answers).backward()
    ref = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    logits = ft.model_final_logits(model, tokens)
    F.cross_entropy(logits, answers).backward()
    assert ref_logits.abs().max() > 5  # large values: rounding would show at 1e-10
    torch.testing.assert_close(logits, ref_logits, atol=1e-10, rtol=0)
    for name, p in model.named_parameters():
        if p.requires_grad and not name.endswith("b_K"):  # b_K: exact gradient 0, left out
            torch.testing.assert_close(p.grad, ref[name], atol=1e-10, rtol=0, msg=name)


def test_mlp_100_steps_follow_the_plain_loop_and_seeds_group_exactly():
    config = TrainConfig(case=5, n=4, d_token=8, d_mlp=16, init="pytorch", max_steps=100,
                         stop_loss=0.0, curve_every=1, eval_batches=1, batch_size=64)
    ref_losses, ref_model = _plain_loop(config, 100)
    result = train(config)
    torch.testing.assert_close(
        torch.tensor([v for _, v in result.curve]), torch.tensor(ref_losses), atol=1e-4, rtol=0
    )
    for (name, p), q in zip(result.model.named_parameters(), ref_model.parameters(), strict=True):
        if not name.endswith("b_K"):  # exact gradient 0: the plain loop random-walks it
            torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)
    short = [config.replace(max_steps=30, seed=s) for s in range(2)]
    for r in train_group(short):
        _assert_same_runs(r, train(r.config))


def test_two_layer_mlp_100_steps_follow_the_plain_loop_and_seeds_group_exactly():
    config = TrainConfig(case=5, n=4, d_token=8, n_layers=2, d_mlp=16, init="pytorch",
                         max_steps=100, stop_loss=0.0, curve_every=1, eval_batches=1, batch_size=64)
    ref_losses, ref_model = _plain_loop(config, 100)
    result = train(config)
    torch.testing.assert_close(
        torch.tensor([v for _, v in result.curve]), torch.tensor(ref_losses), atol=1e-4, rtol=0
    )
    for (name, p), q in zip(result.model.named_parameters(), ref_model.parameters(), strict=True):
        if not name.endswith("b_K"):  # exact gradient 0: the plain loop random-walks it
            torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)
    short = [config.replace(max_steps=30, seed=s) for s in range(2)]
    for r in train_group(short):
        _assert_same_runs(r, train(r.config))


# ModelSpec's architecture choices (issue 25): each alone, then together (two layers with
# mlp="last" and residual="embed" among them); every logit and gradient as TransformerLens's.
SPEC_CHOICES = [
    dict(d_mlp=10, mlp="last"), dict(attn_bias=False), dict(unembed_bias=False),
    dict(W_O="identity"), dict(residual="embed"), dict(d_mlp=10, residual="embed"), dict(init="mha"),
]
ALL_CHOICES = dict(d_mlp=10, mlp="last", residual="embed", attn_bias=False, unembed_bias=False,
                   W_O="identity")
# float32 at 1e-5 needs logits of a few units: TransformerLens's own forward is ~1e-6 relative
# from the exact value, and N(0, 1) embeddings ("pytorch", "mha") put two-layer MLP logits near
# 20, where TransformerLens and the fast path are both ~1e-5 from float64. There the float64
# test below shows exactness (1e-10); with init="mha" here, one layer or no MLP.
SPEC_COMBOS = [
    dict(n_layers=2, d_mlp=10, mlp="last", residual="embed"),
    dict(n_layers=2, **ALL_CHOICES),
    dict(n_layers=2, attn_bias=False, W_O="identity", residual="embed", init="mha"),
    dict(n_layers=1, **ALL_CHOICES, init="mha"),
]


def _ids(choices):
    return ",".join(f"{k}={v}" for k, v in choices.items())


@pytest.mark.parametrize("choices", SPEC_CHOICES, ids=_ids)
@pytest.mark.parametrize("n_layers", [1, 2])
@pytest.mark.parametrize("case,pos_embed,d_token", [(1, "learned", 3), (2, "none", 8), (4, "none", 3), (5, "learned", 8)])
def test_each_architecture_choice_is_exact(choices, n_layers, case, pos_embed, d_token):
    config = TrainConfig(case=case, n=6, d_token=d_token, n_layers=n_layers, pos_embed=pos_embed, **choices)
    ref_grads = _assert_fast_path_matches_transformer_lens(_perturbed(config), case, 6)
    if config.d_mlp:
        assert ref_grads[f"blocks.{n_layers - 1}.mlp.W_in"].abs().sum() > 0


@pytest.mark.parametrize("choices", SPEC_COMBOS, ids=_ids)
@pytest.mark.parametrize("case,pos_embed", list(itertools.product(tasks.CASES, ("learned", "none"))))
@pytest.mark.parametrize("d_token", [3, 8])  # d_model below and above n: both value paths
def test_architecture_combinations_are_exact(choices, case, pos_embed, d_token):
    config = TrainConfig(case=case, n=6, d_token=d_token, pos_embed=pos_embed, **choices)
    model = _perturbed(config)
    ref_grads = _assert_fast_path_matches_transformer_lens(model, case, 6)
    assert set(ref_grads) == {k for k, p in model.named_parameters() if p.requires_grad}
    if config.mlp == "last" and config.n_layers == 2:  # the zero MLP of block 0 is left out
        assert "W_in" not in ft.stack_params([model])["layers"][0]


# embed_scale="sqrt_d_model" multiplies the embeddings by 4 here: logits of tens, where float32
# TransformerLens and the fast path are both ~1e-5 from float64, so it is tested in float64
@pytest.mark.parametrize("scaled", [{}, dict(embed_scale="sqrt_d_model", pos_init="zero")], ids=["", "scaled"])
@pytest.mark.parametrize("case,n_layers", [(1, 2), (2, 2), (5, 2), (3, 1), (4, 1)])
def test_architecture_combination_is_exact_in_float64(case, n_layers, scaled):
    """Every choice at once: the regrouping is the same function (1e-10)."""
    config = TrainConfig(case=case, n=6, d_token=8, n_layers=n_layers, **ALL_CHOICES, init="mha", **scaled)
    model = _perturbed(config).to(torch.float64, print_details=False)
    tokens, answers = tasks.sample(case, 6, 32, generator=torch.Generator().manual_seed(2))
    ref_logits = model(tokens)[:, -1]
    F.cross_entropy(ref_logits, answers).backward()
    ref = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    logits = ft.model_final_logits(model, tokens)
    F.cross_entropy(logits, answers).backward()
    torch.testing.assert_close(logits, ref_logits, atol=1e-10, rtol=0)
    for name, p in model.named_parameters():
        if p.requires_grad and not name.endswith("b_K"):
            torch.testing.assert_close(p.grad, ref[name], atol=1e-10, rtol=0, msg=name)


def test_architecture_choices_train_as_the_plain_loop_and_keep_fixed_tensors():
    config = TrainConfig(case=5, n=4, d_token=8, n_layers=2, max_steps=100, stop_loss=0.0,
                         curve_every=1, eval_batches=1, batch_size=64, **ALL_CHOICES, init="mha")
    ref_losses, ref_model = _plain_loop(config, 100)
    result = train(config)
    torch.testing.assert_close(
        torch.tensor([v for _, v in result.curve]), torch.tensor(ref_losses), atol=1e-4, rtol=0
    )
    fixed = init_model(config).state_dict()
    for (name, p), q in zip(result.model.named_parameters(), ref_model.parameters(), strict=True):
        if not p.requires_grad:  # a fixed tensor: untouched by training
            assert torch.equal(p, fixed[name]) and torch.equal(q, fixed[name]), name
        elif not name.endswith("b_K"):
            torch.testing.assert_close(p, q, atol=1e-3, rtol=0, msg=name)
    assert result.model.spec == config.spec


def test_refuses_a_model_whose_fixed_tensor_was_edited_or_unfrozen():
    config = TrainConfig(case=4, n=5, d_token=4, n_layers=2, d_mlp=6, mlp="last", attn_bias=False)
    model = init_model(config)
    model.blocks[0].mlp.W_out.requires_grad_(True)
    with pytest.raises(ValueError, match=r"blocks\.0\.mlp\.W_out is trainable, but mlp='last'"):
        ft.check_model(model)
    model = init_model(config)
    with torch.no_grad():
        model.blocks[1].attn.b_V[0, 0] = 0.5
    with pytest.raises(ValueError, match=r"blocks\.1\.attn\.b_V.*attn_bias=False"):
        ft.Ensemble([config], models_=[model])
