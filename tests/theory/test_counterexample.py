"""interp.find_counterexample: every returned input is checked with the model's own
TransformerLens forward (hard attention through hooks) and the plain-Python evaluator."""

import copy
import types

import pytest
import torch

import interp
from interp.core import attention, models, tasks
from interp.theory import softmax_construction
from interp.theory.counterexample import find_counterexample, l_input, r_input

MODES = ("leftmost", "rightmost", "average")


def _assert_wrong(model, c, mode):
    n = model.cfg.d_vocab_out
    keys, values, target = tasks.decode(5, n, c.tokens)  # a valid case-5 input
    assert sorted(keys) == list(range(n)) and target == 0
    assert c.expected == tasks.evaluate(5, n, c.tokens)
    m = copy.deepcopy(model)
    attention.set_attention(m, mode)
    with torch.no_grad():
        assert c.predicted == int(m(torch.tensor([c.tokens]))[0, -1].argmax())
    assert c.predicted != c.expected and c.attention == mode


def test_proof_inputs():
    assert l_input(4, 2, 3) == [0, 2, 1, 3, 2, 2, 3, 3, 0]
    assert r_input(5, 1, 0) == [1, 1, 0, 0, 2, 2, 3, 3, 4, 4, 0]
    assert tasks.evaluate(5, 4, l_input(4, 2, 3)) == 2 and tasks.evaluate(5, 4, r_input(4, 2, 3)) == 3


@pytest.mark.parametrize("mode", MODES)
def test_random_models(mode):
    for seed in range(6):
        for n, d in [(4, 3), (5, 8), (9, 16)]:
            model = models.build_model(5, n, d, seed=seed, pos_embed="none" if seed % 3 == 0 else "learned")
            before = [p.clone() for p in model.parameters()]
            c = interp.find_counterexample(model, attention=mode)
            _assert_wrong(model, c, mode)
            assert getattr(model, "attention_modes", [("softmax", 1.0)]) == [("softmax", 1.0)]  # unchanged
            assert all(torch.equal(a, b) for a, b in zip(before, list(model.parameters()), strict=True))


def _parity_model(n: int):
    """Scores 10 at positions 1 and 3, 0 elsewhere; OV copies the token; the best such model.

    Coordinates: 0..n-1 one-hot token, n = "position 1 or 3", n+1 = "final position".
    """
    cfg = models.make_config(5, n, n + 2, 1)
    m = models.new_model(cfg, 5)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.embed.W_E[:, :n] = torch.eye(n)
        m.pos_embed.W_pos[1, n] = m.pos_embed.W_pos[3, n] = 1.0
        m.pos_embed.W_pos[2 * n, n + 1] = 1.0
        a = m.blocks[0].attn
        a.W_Q[0, n + 1, 0] = 10.0
        a.W_K[0, n, 0] = 1.0
        a.W_V[0, :n, :n] = torch.eye(n)
        a.W_O[0, :n, :n] = 2 * torch.eye(n)
        m.unembed.W_U[:n] = 3 * torch.eye(n)
    return m


@pytest.mark.parametrize("mode,step,family", [("leftmost", "B", "r(0, 1) o t"), ("rightmost", "A", "l(1, 0) o t"),
                                              ("average", "D", "l(1, 0) o t")])
def test_each_step_of_the_proof(mode, step, family):
    model = _parity_model(5)
    c = find_counterexample(model, mode)
    _assert_wrong(model, c, mode)
    assert (c.step, c.family) == (step, family)
    if mode == "average":
        assert c.details["S"] == c.details["T"] == [0, 1, 2, 3]


def test_trained_models():
    from interp.training.trainer import TrainConfig, train

    for n, seed in [(4, 0), (6, 1)]:
        model = train(TrainConfig(case=5, n=n, d_token=8, seed=seed, max_steps=40, eval_batches=1)).model
        for mode in MODES:
            _assert_wrong(model, find_counterexample(model, mode), mode)


def test_theorem35_model_under_hard_attention():
    model = softmax_construction.build(4, dtype=torch.float32)  # one layer + MLP: exact under softmax
    tokens, answers = tasks.sample(5, 4, 64)
    assert bool((model(tokens)[:, -1].argmax(-1) == answers).all())
    for mode in MODES:
        _assert_wrong(model, find_counterexample(model, mode), mode)


def test_where_the_theorem_does_not_apply():
    with pytest.raises(ValueError, match="one-layer"):
        find_counterexample(models.build_model(5, 5, 4, n_layers=2, seed=0))
    with pytest.raises(ValueError, match="softmax"):
        find_counterexample(models.build_model(5, 5, 4, seed=0), attention="softmax")
    with pytest.raises(ValueError, match="n >= 4"):
        find_counterexample(models.build_model(5, 3, 4, seed=0))
    with pytest.raises(ValueError, match="case 5"):
        find_counterexample(models.build_model(3, 5, 4, seed=0))
    from transformer_lens import HookedTransformerConfig

    cfg = {**models.make_config(5, 5, 4, 1, d_head=2).to_dict(), "n_heads": 2}
    two_heads = models.new_model(HookedTransformerConfig(**cfg), 5)
    with pytest.raises(ValueError, match="one head"):
        find_counterexample(two_heads)


def test_cli(capsys):
    import json

    from interp.cli import main

    assert main(["counterexample", "--random", "--n", "5", "--d-token", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["attention"] for c in out["counterexamples"]] == list(MODES)
    for c in out["counterexamples"]:
        assert c["predicted"] != c["expected"] == tasks.evaluate(5, 5, c["tokens"])
    assert main(["counterexample"]) == 2
    assert main(["counterexample", "--random", "--n", "3"]) == 2


def test_cli_checkpoint(tmp_path, capsys):
    import json

    from interp.cli import main

    model = models.build_model(5, 6, 4, seed=7)
    interp.save(model, tmp_path / "ckpt")
    assert main(["counterexample", str(tmp_path / "ckpt"), "--attention", "average", "--json"]) == 0
    (c,) = json.loads(capsys.readouterr().out)["counterexamples"]
    # what the CLI printed is checked against the model and the plain-Python evaluator, not
    # against the library call it wraps: a valid input, its true answer, the model's own wrong one
    printed = types.SimpleNamespace(**c)
    _assert_wrong(interp.load(tmp_path / "ckpt"), printed, "average")
    _assert_wrong(model, printed, "average")


def test_attention_only_softmax_models_are_wrong_somewhere():
    import torch.nn.functional as F

    from interp.theory.counterexample import find_counterexample_attention_only, separable_inputs

    for n in (2, 3, 6):
        for seed in range(4):
            model = models.build_model(5, n, 6, seed=seed)
            c = find_counterexample_attention_only(model)
            with torch.no_grad():
                assert c.predicted == int(model(torch.tensor([c.tokens]))[0, -1].argmax())
            assert c.predicted != c.expected == tasks.evaluate(5, n, c.tokens)
    # the hardest case: a model fitted to the four inputs themselves still gets one wrong
    n = 3
    inputs = separable_inputs(n)
    tokens = torch.tensor([t for t, _ in inputs])
    answers = torch.tensor([a for _, a in inputs])
    assert answers.tolist() == [tasks.evaluate(5, n, t) for t in tokens.tolist()]
    model = models.build_model(5, n, 8, seed=0)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    for _ in range(400):
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        right = int((model(tokens)[:, -1].argmax(-1) == answers).sum())
    assert right == 3  # the best possible, reached by the optimiser
    c = find_counterexample_attention_only(model)
    assert c.predicted != c.expected and c.step == "separable"
    with pytest.raises(ValueError, match="MLP can decode"):
        find_counterexample_attention_only(softmax_construction.build(4))
    with pytest.raises(ValueError, match="find_counterexample"):
        find_counterexample_attention_only(attention.set_attention(models.build_model(5, 4, 4, seed=0), "leftmost"))


def test_the_attention_only_argument_refuses_several_heads():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    from interp.theory.counterexample import find_counterexample_attention_only

    cfg = HookedTransformerConfig(n_layers=1, d_model=8, d_head=4, n_heads=2, n_ctx=5, d_vocab=2,
                                  d_vocab_out=2, attn_only=True, normalization_type=None,
                                  attention_dir="bidirectional", act_fn="relu")
    with pytest.raises(ValueError, match="n_heads=2: the separability argument covers one head only"):
        find_counterexample_attention_only(HookedTransformer(cfg))


@pytest.fixture
def one_thread():
    """Small fits run faster on one thread; the process's setting is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _fit(n, heads, tokens, answers, *, seed, steps, lr, d=16, until=None):
    """A one-layer attention-only case-5 model with ``heads`` heads fitted by Adam to the inputs
    (``until``, optional: stop once ``until(model)`` holds, asked every 50 steps)."""
    import torch.nn.functional as F
    from transformer_lens import HookedTransformer

    from interp.training import runs

    cfg = models.make_config(5, n, d, 1, seed=seed)
    cfg.n_heads, cfg.d_head = heads, d // heads
    model = HookedTransformer(cfg)
    torch.manual_seed(seed)
    runs._pytorch_init(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(1, steps + 1):
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if until is not None and step % 50 == 0 and until(model):
            break
    return model


def test_xor_families_follow_the_reference_evaluator():
    from interp.theory.counterexample import xor_family

    tokens, _ = tasks.enumerate_inputs(5, 4, "permutation")
    for toks in tokens[::97].tolist():
        keys, values, target = tasks.decode(5, 4, toks)
        j = keys.index(target)
        for q in (x for x in range(4) if x != j):
            fam = xor_family(4, toks, q)
            assert fam[0] == toks and len({tuple(f) for f in fam}) == 4
            answers = [tasks.evaluate(5, 4, f) for f in fam]  # no swap, values, keys, both
            assert answers[0] == answers[3] == values[j] and answers[1] == answers[2] == values[q]
        with pytest.raises(ValueError, match="other than the target's slot"):
            xor_family(4, toks, j)


@pytest.mark.parametrize("n, steps", [(3, 600), (4, 300)])
def test_fitted_one_head_models_stay_at_or_below_75_percent(n, steps, one_thread):
    """Fitted to every input (f a permutation), one head stays <= 75% and every XOR family
    holds a wrong input, although the fit is well above chance."""
    from interp.theory.counterexample import ATTENTION_ONLY_BOUND, check_bound

    tokens, answers = tasks.enumerate_inputs(5, n, "permutation")
    for seed in (0, 1):
        model = _fit(n, 1, tokens, answers, seed=seed, steps=steps, lr=0.02)
        check = check_bound(model)
        assert check.inputs == tasks.count_inputs(5, n, "permutation")
        assert check.families == check.inputs * (n - 1) // 4
        assert check.families_all_right == 0
        assert 1 / n + 0.03 < check.accuracy <= ATTENTION_ONLY_BOUND


def test_two_heads_can_exceed_75_percent(one_thread):
    """The bound needs one head: fitted to one slot pair's families at n = 3 (24 inputs), two
    heads get every input right; one head does not exceed 3 in 4 on the same inputs."""
    import itertools

    from interp.theory.counterexample import check_bound, xor_family

    base = [[0, v[0], 1, v[1], 2, v[2], t] for v in itertools.permutations(range(3)) for t in (0, 1)]
    subset = sorted({tuple(f) for b in base for f in xor_family(3, b, 1 - b[-1])})
    tokens = torch.tensor(subset)
    answers = torch.tensor([tasks.evaluate(5, 3, t) for t in subset])
    assert len(subset) == 24

    def acc(model):
        with torch.no_grad():
            return float((model(tokens)[:, -1].argmax(-1) == answers).float().mean())

    # seeds in turn until one fits every input (seed 0 does within 100 steps; seeds 1 and 2 stay
    # at 71% and 54% through 2,000): all right puts every family right, beyond the 3-in-4 bound
    for s in range(3):
        two = _fit(3, 2, tokens, answers, seed=s, steps=2000, lr=0.01, d=32, until=lambda m: acc(m) == 1.0)
        if acc(two) == 1.0:
            break
    assert acc(two) == 1.0  # every input right: above the 3-in-4 bound one head keeps
    assert check_bound(two).families_all_right > 0
    one = [_fit(3, 1, tokens, answers, seed=s, steps=2000, lr=0.01, d=32) for s in range(2)]
    assert all(acc(m) <= 0.75 and check_bound(m).families_all_right == 0 for m in one)


@pytest.mark.parametrize("mode", MODES)
def test_the_proof_reads_the_package_forward_which_matches_transformer_lens(mode):
    """_run reads predictions, scores and patterns through interp.core.forward (the package's
    one evaluation pass); they are TransformerLens's own (run_with_cache), row for row."""
    from interp.theory.counterexample import _run, _with_mode, l_input, r_input

    model = _with_mode(models.build_model(5, 5, 8, seed=2), mode)
    inputs = [l_input(5, x, y) for x in range(4) for y in range(4)] + [r_input(5, 1, 2)]
    preds, pattern, scores = _run(model, inputs)
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.tensor(inputs))
    assert preds == logits[:, -1].argmax(-1).tolist()
    torch.testing.assert_close(scores, cache["blocks.0.attn.hook_attn_scores"][:, 0, -1])
    torch.testing.assert_close(pattern, cache["blocks.0.attn.hook_pattern"][:, 0, -1])
