"""TrainConfig, train and train_group: validation, protocol, determinism."""

import dataclasses
import hashlib
import json
import math

import pytest
import torch
import torch.nn.functional as F

from interp.core import tasks
from interp.training.trainer import (
    RunResult, TrainConfig, generator, init_model, one_thread, stream_seed,
    train, train_group, trainable,
)

BAD_FIELDS = [
    dict(testcase_name="n below 2", field="n", value=1),
    dict(testcase_name="d_token 0", field="d_token", value=0),
    dict(testcase_name="case 0", field="case", value=0),
    dict(testcase_name="case -1", field="case", value=-1),  # no registry holds it
    dict(testcase_name="case bool", field="case", value=True),
    dict(testcase_name="3 layers", field="n_layers", value=3),
    dict(testcase_name="pos_embed", field="pos_embed", value="rotary"),
    dict(testcase_name="negative seed", field="seed", value=-1),
    dict(testcase_name="lr 0", field="lr", value=0.0),
    dict(testcase_name="lr nan", field="lr", value=float("nan")),
    dict(testcase_name="batch 0", field="batch_size", value=0),
    dict(testcase_name="max_steps 0", field="max_steps", value=0),
    dict(testcase_name="stop_loss negative", field="stop_loss", value=-0.1),
    dict(testcase_name="eval_batches 0", field="eval_batches", value=0),
    dict(testcase_name="curve_every 0", field="curve_every", value=0),
    dict(testcase_name="init", field="init", value="orthogonal"),
    dict(testcase_name="function", field="function", value="bijection"),
    dict(testcase_name="float n", field="n", value=10.0),
    dict(testcase_name="d_mlp negative", field="d_mlp", value=-1),
    dict(testcase_name="d_mlp bool", field="d_mlp", value=True),
    dict(testcase_name="mlp", field="mlp", value="first"),
    dict(testcase_name="mlp last without an MLP", field="mlp", value="last"),
    dict(testcase_name="attn_bias int", field="attn_bias", value=1),
    dict(testcase_name="unembed_bias str", field="unembed_bias", value="no"),
    dict(testcase_name="W_O", field="W_O", value="tied"),
    dict(testcase_name="residual", field="residual", value="pre-norm"),
    dict(testcase_name="init mha typo", field="init", value="MHA"),
]


@pytest.mark.parametrize("bad", BAD_FIELDS, ids=[b["testcase_name"] for b in BAD_FIELDS])
def test_bad_fields_fail_naming_field_value_and_range(bad):
    kwargs = dict(case=3, n=10, d_token=8)
    kwargs[bad["field"]] = bad["value"]
    with pytest.raises(ValueError, match=rf"^{bad['field']}=") as e:
        TrainConfig(**kwargs)
    assert "accepted" in str(e.value)


def test_defaults_are_the_papers_protocol():
    c = TrainConfig(case=1, n=100, d_token=8)
    assert (c.lr, c.batch_size, c.max_steps, c.stop_loss, c.eval_batches) == (
        1e-3, 256, 10_000, 0.01, 100
    )
    assert (c.n_layers, c.pos_embed, c.function) == (1, "learned", "permutation")


#: the fields a TrainConfig had before d_mlp and the architecture choices (issue 25) existed
OLD_FIELDS = ("case", "n", "d_token", "n_layers", "pos_embed", "seed", "lr", "batch_size",
              "max_steps", "stop_loss", "eval_batches", "curve_every", "init", "function")
NEW_CHOICES = dict(mlp="last", attn_bias=False, unembed_bias=False, W_O="identity", residual="embed")


def _hash(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def test_dict_round_trip_and_name():
    c = TrainConfig(case=5, n=20, d_token=200, n_layers=2, seed=3)
    d = json.loads(json.dumps(c.to_dict()))
    assert TrainConfig.from_dict(d) == c
    old = {k: d[k] for k in OLD_FIELDS}
    assert c.name() == _hash(old)  # every field added since is at its default: not hashed
    assert TrainConfig.from_dict(old) == c  # dicts written before d_mlp existed still load
    m = c.replace(d_mlp=64)
    md = m.to_dict()
    assert md["d_mlp"] == 64 and TrainConfig.from_dict(md) == m
    assert m.name() == _hash({**old, "d_mlp": 64})
    for field, value in NEW_CHOICES.items():  # each new choice off its default enters the name
        changed = m.replace(**{field: value})
        assert changed.name() == _hash({**old, "d_mlp": 64, field: value}), field
        assert TrainConfig.from_dict(json.loads(json.dumps(changed.to_dict()))) == changed
    assert c.replace(seed=4).name() != c.name()
    with pytest.raises(ValueError, match="unknown TrainConfig fields"):
        TrainConfig.from_dict({**d, "dropout": 0.1})


def test_names_of_existing_runs_are_pinned():
    """Names of attention-only runs are the ones stores hold from before d_mlp existed."""
    assert TrainConfig(case=3, n=100, d_token=32).name() == "dca783ae7261"
    assert TrainConfig(
        case=5, n=10, d_token=32, n_layers=2, init="pytorch", seed=3
    ).name() == "af145e45bfdf"
    assert TrainConfig(case=3, n=100, d_token=32, d_mlp=0).name() == "dca783ae7261"
    assert TrainConfig(case=3, n=100, d_token=32, d_mlp=128).name() != "dca783ae7261"


def test_label_mentions_the_mlp():
    assert TrainConfig(case=5, n=2, d_token=16, d_mlp=64).label() == (
        "case5 n2 d16 L1 mlp64 pe=learned seed0"
    )
    assert "mlp" not in TrainConfig(case=5, n=2, d_token=16).label()


def test_streams_are_distinct_per_seed_and_purpose():
    seeds = {stream_seed(s, k) for s in range(5) for k in ("train", "test")}
    assert len(seeds) == 10


def _tiny(**kw):
    base = dict(case=3, n=5, d_token=4, max_steps=60, eval_batches=3, batch_size=64,
                curve_every=20)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_same_config_same_bits(engine):
    a, b = train(_tiny(), engine=engine), train(_tiny(), engine=engine)
    assert a.accuracy == b.accuracy and a.curve == b.curve
    for p, q in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True):
        assert torch.equal(p, q)
    c = train(_tiny(seed=1), engine=engine)
    assert not torch.equal(c.model.unembed.W_U, a.model.unembed.W_U)


def test_training_leaves_global_rng_and_threads_alone():
    torch.manual_seed(123)
    threads = torch.get_num_threads()
    expected = torch.rand(3)
    torch.manual_seed(123)
    train(_tiny(max_steps=2))
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_result_fields_and_curve_sampling():
    r = train(_tiny(stop_loss=0.0))
    assert isinstance(r, RunResult) and r.status == "ok"
    assert r.steps == 60 and [s for s, _ in r.curve] == [1, 20, 40, 60]
    assert r.final_loss == r.curve[-1][1]
    cfg = r.config  # accuracy is a count over the finite test stream, not any number in [0, 1]
    correct = r.accuracy * cfg.eval_batches * cfg.batch_size
    assert correct == round(correct) and 0 <= correct <= cfg.eval_batches * cfg.batch_size and r.seconds > 0
    assert r.cpu_seconds > 0 and r.metrics()["cpu_seconds"] == r.cpu_seconds
    assert train(_tiny(max_steps=3), engine="reference").cpu_seconds > 0
    assert r.model.cfg.d_model == 8 and r.model.cfg.d_head == 8  # d_model = 2 d_token, d_head = d_model


def test_accuracy_is_the_transformer_lens_models_accuracy_on_the_test_stream():
    r = train(_tiny(max_steps=150))
    config = r.config
    g = generator(config.seed, "test")
    correct = 0
    with torch.no_grad():
        for _ in range(config.eval_batches):
            tokens, _ = tasks.sample(config.case, config.n, config.batch_size, generator=g)
            answers = torch.tensor([tasks.evaluate(3, 5, t) for t in tokens.tolist()])
            correct += int((r.model(tokens)[:, -1].argmax(-1) == answers).sum())
    assert r.accuracy == correct / (config.eval_batches * config.batch_size)


def test_stop_rule_update_then_stop():
    """A step whose loss is below stop_loss is the last one, and its update is applied."""
    config = _tiny(stop_loss=100.0)
    r = train(config)
    assert r.steps == 1 and [s for s, _ in r.curve] == [1]
    model = init_model(config)  # one plain TransformerLens Adam step from the same init
    opt = torch.optim.Adam(trainable(model), lr=config.lr)
    with one_thread():
        tokens, answers = tasks.sample(3, 5, 64, generator=generator(config.seed, "train"))
        loss = F.cross_entropy(model(tokens)[:, -1], answers)
        loss.backward()
        opt.step()
    assert math.isclose(r.final_loss, loss.item(), abs_tol=1e-6)
    # Adam's first step moves each weight by lr * g / (|g| + eps): lr where the gradient is
    # clear, a rounding-sensitive amount where it is ~eps (e.g. b_K, whose exact gradient is 0).
    for p, q in zip(r.model.parameters(), model.parameters(), strict=True):
        if q.grad is None:
            continue
        clear = q.grad.abs() > 1e-5
        torch.testing.assert_close(p[clear], q[clear], atol=1e-6, rtol=0)
        assert ((p - q).abs() <= config.lr * 1.001).all()


def test_trained_parameters_are_the_models_own():
    r = train(_tiny(case=2))
    names = {n for n, p in r.model.named_parameters() if p.requires_grad}
    assert "embed.parametrizations.W_E.original0" in names  # the key table is trained
    init = init_model(r.config)
    for (name, p), q in zip(r.model.named_parameters(), init.parameters(), strict=True):
        if p.requires_grad and not name.endswith("b_K"):  # b_K: softmax-invariant, grad 0
            assert not torch.equal(p, q), name


def test_no_positional_embedding_stays_zero():
    r = train(_tiny(case=1, pos_embed="none"))
    assert not r.model.pos_embed.W_pos.requires_grad
    assert not r.model.pos_embed.W_pos.any()


def test_learns_a_small_table():
    """Behaviour that cannot be faked: case 2 with n = 4 is learned to 100% test accuracy."""
    r = train(TrainConfig(case=2, n=4, d_token=8, lr=0.01, max_steps=1500, eval_batches=4))
    assert r.steps < 1500 and r.final_loss < 0.01
    assert r.accuracy == 1.0


def test_case_1_without_positions_stays_at_chance():
    r = train(TrainConfig(case=1, n=8, d_token=8, pos_embed="none", max_steps=300,
                          eval_batches=8, lr=0.01))
    assert r.accuracy < 0.25  # chance is 1/8: the model cannot tell positions apart


def test_group_validation():
    with pytest.raises(ValueError, match="differ only in seed"):
        train_group([_tiny(), _tiny(seed=1, d_token=8)])
    with pytest.raises(ValueError, match="repeated seeds"):
        train_group([_tiny(), _tiny()])
    with pytest.raises(ValueError, match="engine"):
        train(_tiny(), engine="jax")
    assert train_group([]) == []


def test_other_initialisations_are_seeded():
    a = init_model(_tiny(init="xavier_normal"))
    b = init_model(_tiny(init="xavier_normal"))
    c = init_model(_tiny())
    assert torch.equal(a.blocks[0].attn.W_Q, b.blocks[0].attn.W_Q)
    assert not torch.equal(a.blocks[0].attn.W_Q, c.blocks[0].attn.W_Q)


def test_pytorch_initialisation_follows_the_layer_defaults():
    config = _tiny(case=2, d_token=16, init="pytorch")
    m = init_model(config)
    key = m.embed.parametrizations.W_E.original0
    assert abs(key.std().item() - 1.0) < 0.3  # nn.Embedding: N(0, 1)
    bound = 1 / 32**0.5  # d_model = 32
    for p in (m.blocks[0].attn.W_Q, m.blocks[0].attn.b_K, m.unembed.W_U):
        assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound
    assert torch.equal(init_model(config).unembed.W_U, m.unembed.W_U)  # seeded
    assert not m.pos_embed.W_pos.requires_grad or m.pos_embed.W_pos.std() > 0.5


def test_metrics_are_json():
    r = train(_tiny(max_steps=3))
    d = json.loads(json.dumps(r.metrics()))
    assert d["name"] == r.config.name() and d["config"] == dataclasses.asdict(r.config)


def test_pytorch_initialisation_covers_the_mlp():
    config = _tiny(case=5, d_token=16, d_mlp=64, init="pytorch")
    m = init_model(config)
    mlp = m.blocks[0].mlp
    for p, fan_in in ((mlp.W_in, 16), (mlp.b_in, 16), (mlp.W_out, 64), (mlp.b_out, 64)):
        bound = 1 / fan_in**0.5  # nn.Linear: U(+-1/sqrt(fan_in)), d_model = 16, d_mlp = 64
        assert p.abs().max() <= bound and p.abs().max() > 0.8 * bound
    assert torch.equal(init_model(config).blocks[0].mlp.W_out, mlp.W_out)  # seeded
    gpt2 = init_model(config.replace(init="gpt2")).blocks[0].mlp  # TransformerLens's own
    assert gpt2.W_in.abs().max() > 0 and not gpt2.b_in.any()


def _all_case5_n2_inputs_right(model) -> bool:
    tokens, _ = tasks.enumerate_inputs(5, 2, "permutation")
    answers = torch.tensor([tasks.evaluate(5, 2, t) for t in tokens.tolist()])  # plain Python
    with torch.no_grad():
        return bool((model(tokens)[:, -1].argmax(-1) == answers).all())


def test_one_layer_with_an_mlp_learns_case_5_at_n_2():
    """The point of d_mlp: one attention layer + MLP learns case 5 at n = 2 to 100% on every
    input, where no one-layer attention-only softmax model can exceed 75% (one of the four
    separable inputs per query is wrong: find_counterexample_attention_only), which refuses it."""
    from interp.theory import counterexample

    config = TrainConfig(case=5, n=2, d_token=4, d_mlp=16, lr=1e-2, init="pytorch",
                         max_steps=1000, eval_batches=8, batch_size=128)
    r = train(config)
    assert r.status == "ok" and r.steps < 1000 and r.final_loss < 0.01
    assert r.accuracy == 1.0 and _all_case5_n2_inputs_right(r.model)
    with pytest.raises(ValueError, match="attn_only=False"):
        counterexample.find_counterexample_attention_only(r.model)
    # the same model without its MLP is attention-only: the argument finds a wrong input
    assert TrainConfig.from_dict({**config.to_dict(), "d_mlp": 0}).d_mlp == 0
    found = counterexample.find_counterexample_attention_only(init_model(config.replace(d_mlp=0)))
    assert found.predicted != found.expected


def test_two_layers_with_an_mlp_train_with_the_fast_engine(monkeypatch):
    """Nothing falls back to the plain loop: train_group trains two-layer MLP models as a fast
    ensemble, and each seed follows what the reference engine gives it (to float rounding)."""
    from interp.training import trainer as trainer_mod

    configs = [_tiny(case=5, n=3, n_layers=2, d_mlp=8, max_steps=10, eval_batches=1, seed=s,
                     curve_every=1) for s in range(2)]
    reference = [train(c, engine="reference") for c in configs]

    def no_fallback(*a, **k):
        raise AssertionError("train_group fell back to the plain TransformerLens loop")

    monkeypatch.setattr(trainer_mod, "train_reference", no_fallback)
    for r, ref in zip(train_group(configs), reference, strict=True):
        assert (r.steps, r.status) == (ref.steps, ref.status)
        torch.testing.assert_close(torch.tensor(r.curve), torch.tensor(ref.curve), atol=1e-5, rtol=0)
        for (name, p), q in zip(r.model.named_parameters(), ref.model.parameters(), strict=True):
            if not name.endswith("b_K"):  # the fast engine leaves it out (exact gradient 0)
                torch.testing.assert_close(p, q, atol=1e-4, rtol=0, msg=name)
        assert r.model.blocks[1].mlp.W_in.shape == (4, 8)  # [d_model, d_mlp]


# --------------------------------------------------------------------------- devices

BAD_DEVICES = ["tpu", "cuda:x", "cpu:0", "", "gpu", 3, None]


@pytest.mark.parametrize("device", BAD_DEVICES)
def test_bad_devices_are_refused_before_training(device, monkeypatch):
    from interp.training import fast_train
    from interp.training import trainer as trainer_mod

    def no_work(*a, **k):
        raise AssertionError("training started")

    monkeypatch.setattr(trainer_mod, "train_reference", no_work)
    monkeypatch.setattr(fast_train, "train_ensemble", no_work)
    for engine in ("fast", "reference"):
        with pytest.raises(ValueError, match=r"^device=.*accepted: one of \('cpu', 'cuda'\)"):
            train(_tiny(), engine=engine, device=device)
        with pytest.raises(ValueError, match=r"^device="):
            train_group([_tiny()], engine=engine, device=device)


def test_cuda_without_a_gpu_is_refused_naming_it():
    from interp.training.runs import check_device

    if torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda:99'; this machine has \d+ GPU"):
            check_device("cuda:99")
        pytest.skip(f"CUDA is available here ({torch.cuda.get_device_name()}): the refusal "
                    "of 'cuda' is for machines without it")
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ValueError, match=r"CUDA is not available here .* accepted: 'cpu'"):
            train(_tiny(), device=device)
    assert check_device("cpu") == check_device(torch.device("cpu")) == "cpu"


CUDA_ONLY = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason=f"CUDA is not available here (torch {torch.__version__}): CPU/CUDA equality is "
    "checked only where a GPU is present",
)


@CUDA_ONLY
@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("kw", [
    dict(case=3, n=6, d_token=4, pos_embed="none"),
    dict(case=2, n=5, d_token=4, d_mlp=8),
    dict(case=5, n=4, d_token=8, n_layers=2),
    dict(case=5, n=4, d_token=8, n_layers=2, d_mlp=16, init="pytorch"),
])
def test_cuda_results_equal_cpu_results(engine, kw):
    """Both engines on CUDA: the same curves, weights and accuracy as on the CPU, to float
    rounding; the models come back on the CPU (checkpoints are saved from CPU tensors)."""
    configs = [_tiny(**kw, seed=s, max_steps=50, stop_loss=0.0, curve_every=1, eval_batches=2)
               for s in range(2)]
    on_cpu = train_group(configs, engine=engine)
    on_gpu = train_group(configs, engine=engine, device="cuda")
    for a, b in zip(on_cpu, on_gpu, strict=True):
        assert (b.status, b.steps) == (a.status, a.steps) and b.cpu_seconds > 0
        torch.testing.assert_close(torch.tensor(b.curve), torch.tensor(a.curve), atol=1e-4, rtol=0)
        for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
            assert q.device.type == "cpu"
            if not name.endswith("b_K"):  # rounding noise in the plain loop's gradient
                torch.testing.assert_close(q, p, atol=1e-3, rtol=0, msg=name)
        assert abs(a.accuracy - b.accuracy) <= 0.02


@CUDA_ONLY
def test_fast_path_on_cuda_matches_transformer_lens_on_cuda():
    from interp.training import fast_train as ft

    config = _tiny(case=5, n=6, d_token=8, n_layers=2, d_mlp=10)
    model = init_model(config).to("cuda", print_details=False)
    tokens, answers = tasks.sample(5, 6, 32, generator=torch.Generator().manual_seed(1))
    tokens, answers = tokens.cuda(), answers.cuda()
    ref = model(tokens)[:, -1]
    F.cross_entropy(ref, answers).backward()
    ref_grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad}
    model.zero_grad(set_to_none=True)
    logits = ft.model_final_logits(model, tokens)
    F.cross_entropy(logits, answers).backward()
    torch.testing.assert_close(logits, ref, atol=1e-5, rtol=0)
    for name, p in model.named_parameters():
        if p.requires_grad and not name.endswith("b_K"):
            torch.testing.assert_close(p.grad, ref_grads[name], atol=1e-5, rtol=0, msg=name)
