"""Checkpoints: safetensors + JSON, checksum, atomic replace, no unpickling."""

import hashlib
import json
import pickle

import pytest
import torch

from interp.core import constructions, tasks
from interp.training import checkpoints
from interp.training.trainer import TrainConfig, train


@pytest.fixture(scope="module")
def result():
    return train(TrainConfig(case=2, n=5, d_token=4, max_steps=40, eval_batches=1, batch_size=32))


def _tokens(case, n, seed=0):
    return tasks.sample(case, n, 64, generator=torch.Generator().manual_seed(seed))


def test_round_trip_of_a_trained_run(result, tmp_path):
    path = checkpoints.save(result, tmp_path / "run")
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    meta = json.loads((path / "config.json").read_text())
    assert meta["train_config"] == result.config.to_dict()
    assert meta["sha256"] == hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    assert meta["result"]["accuracy"] == result.accuracy
    model = checkpoints.load(path)
    for (k, v), (k2, v2) in zip(model.state_dict().items(), result.model.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2)
    tokens, _ = _tokens(2, 5)
    assert torch.equal(model(tokens), result.model(tokens))
    assert list(tmp_path.iterdir()) == [path]  # no temporary directory left behind


@pytest.mark.parametrize("case", tasks.CASES)
def test_round_trip_of_a_construction_keeps_its_attention(case, tmp_path):
    model = constructions.build(case, 6)
    loaded = checkpoints.load(checkpoints.save(model, tmp_path / f"c{case}"))
    assert loaded.attention_modes == model.attention_modes
    tokens, _ = _tokens(case, 6)
    expected = [tasks.evaluate(case, 6, t) for t in tokens.tolist()]
    assert loaded(tokens)[:, -1].argmax(-1).tolist() == expected
    assert not any(p.requires_grad for p in loaded.parameters())


def test_save_replaces_atomically_and_survives_a_failed_save(result, tmp_path, monkeypatch):
    path = checkpoints.save(result, tmp_path / "run")
    first = (path / "model.safetensors").read_bytes()
    with torch.no_grad():  # the trainer turns autograd on for itself
        other = train(result.config.replace(seed=1))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints, "save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        checkpoints.save(other, path)
    assert (path / "model.safetensors").read_bytes() == first  # old checkpoint intact
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    monkeypatch.undo()
    checkpoints.save(other, path)
    assert torch.equal(checkpoints.load(path).unembed.W_U, other.model.unembed.W_U)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_truncated_weights_are_refused_naming_the_path(result, tmp_path):
    path = checkpoints.save(result, tmp_path / "run")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="run.*truncated or corrupt"):
        checkpoints.load(path)


def test_flipped_bytes_are_refused_by_the_checksum(result, tmp_path):
    path = checkpoints.save(result, tmp_path / "run")
    data = bytearray((path / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF
    (path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        checkpoints.load(path)


def test_corrupt_or_missing_json(result, tmp_path):
    path = checkpoints.save(result, tmp_path / "run")
    (path / "config.json").write_text('{"format": "interp-checkp')
    with pytest.raises(ValueError, match="config.json is truncated or corrupt"):
        checkpoints.load(path)
    with pytest.raises(ValueError, match="is not a checkpoint"):
        checkpoints.load(tmp_path / "nowhere")


def test_load_never_unpickles(result, tmp_path, monkeypatch):
    path = checkpoints.save(result, tmp_path / "run")

    def forbidden(*args, **kwargs):
        raise AssertionError("unpickling during load")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    checkpoints.load(path)


def test_save_refuses_other_objects(tmp_path):
    with pytest.raises(ValueError, match="RunResult or a HookedTransformer"):
        checkpoints.save({"W": torch.zeros(2)}, tmp_path / "x")


def test_round_trip_of_an_mlp_model(tmp_path):
    # d_mlp = 12 is not TransformerLens's default 4 * d_model = 16: the width must be stored
    r = train(TrainConfig(case=5, n=3, d_token=4, d_mlp=12, max_steps=5, eval_batches=1,
                          batch_size=16))
    path = checkpoints.save(r, tmp_path / "mlp")
    meta = json.loads((path / "config.json").read_text())
    assert meta["train_config"]["d_mlp"] == 12 and meta["model"]["hooked_config"]["d_mlp"] == 12
    model = checkpoints.load(path)
    assert not model.cfg.attn_only and model.cfg.d_mlp == 12
    for (k, v), (k2, v2) in zip(model.state_dict().items(), r.model.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2)
    tokens, _ = _tokens(5, 3)
    assert torch.equal(model(tokens), r.model(tokens))
    assert TrainConfig.from_dict(meta["train_config"]) == r.config


def test_attention_only_config_json_has_no_d_mlp(result, tmp_path):
    meta = json.loads((checkpoints.save(result, tmp_path / "run") / "config.json").read_text())
    assert "d_mlp" not in meta["model"]["hooked_config"]  # unchanged from older checkpoints


@pytest.mark.parametrize("field,value,message", [
    ("dtype", "__class__", "dtype='__class__'; accepted: one of"),
    ("d_model", 10**9, "d_model=1000000000; accepted: an integer in"),
    ("n_ctx", -1, "n_ctx=-1; accepted"),
    ("d_vocab", 2**26, "needs .* GiB; accepted: at most half"),
    ("act_fn", "gelu", "act_fn='gelu'"),
    ("surprise", 1, "unknown field 'surprise'"),
])
def test_config_values_are_checked_before_anything_is_allocated(tmp_path, field, value, message):
    """A config.json edited to an odd dtype name or huge sizes is refused naming the file and
    the field, before a model is built (no 4 TB allocation, no TypeError from getattr)."""
    import json
    import time

    from interp.core import models as core_models

    path = checkpoints.save(core_models.build_model(3, 5, 4, seed=0), tmp_path / "ckpt")
    meta = json.loads((path / "config.json").read_text())
    if field == "d_vocab":
        meta["model"]["hooked_config"]["d_model"] = 2**14  # with d_vocab 2**26: 4 TiB of W_E
    meta["model"]["hooked_config"][field] = value
    (path / "config.json").write_text(json.dumps(meta))
    start = time.process_time()
    with pytest.raises(ValueError, match=message) as e:
        checkpoints.load(path)
    assert str(path / "config.json") in str(e.value) and time.process_time() - start < 1.0


def test_config_attention_modes_are_checked(tmp_path):
    import json

    from interp.core import constructions as core_constructions

    path = checkpoints.save(core_constructions.build(2, 4), tmp_path / "ckpt")
    meta = json.loads((path / "config.json").read_text())
    meta["model"]["attention_modes"] = [["sideways", 1.0]]
    (path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"config.json: attention modes .*sideways.*accepted"):
        checkpoints.load(path)


def _poison(path, name, values):
    """Write ``values`` (flat index -> float) into tensor ``name`` of the checkpoint at ``path``
    and recompute the sha256 in config.json, as someone repairing the hashes would."""
    from safetensors.torch import load_file, save_file

    weights = path / "model.safetensors"
    state = load_file(str(weights))
    flat = state[name].view(-1)
    for i, v in values.items():
        flat[i] = v
    save_file(state, str(weights))
    meta = json.loads((path / "config.json").read_text())
    meta["sha256"] = hashlib.sha256(weights.read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("values, counts", [
    ({0: float("nan"), 1: float("nan"), 5: float("nan")}, "3 NaN"),
    ({2: float("inf"), 3: float("-inf")}, "2 inf"),
    ({0: float("nan"), 4: float("inf")}, "1 NaN, 1 inf"),
])
def test_non_finite_weights_with_consistent_hashes_are_refused(result, tmp_path, values, counts):
    path = checkpoints.save(result, tmp_path / "run")
    checkpoints.load(path)  # the attention mask buffer IGNORE is -inf in every model: loads
    _poison(path, "blocks.0.attn.W_Q", values)
    message = (f"{path / 'model.safetensors'}: tensor blocks.0.attn.W_Q has non-finite values "
               f"({counts})")
    for loader in (checkpoints.load, checkpoints.load_run):
        with pytest.raises(ValueError) as e:
            loader(path)
        assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_an_altered_constant_buffer_is_refused_too(tmp_path):
    path = checkpoints.save(constructions.build(3, 6), tmp_path / "c3")
    _poison(path, "blocks.0.attn.IGNORE", {0: float("nan")})
    with pytest.raises(ValueError, match=r"tensor blocks.0.attn.IGNORE has non-finite values \(1 NaN\)"):
        checkpoints.load(path)


# The architecture spec (issue 25): saved with the model, restored as model.spec.
ALL_CHOICES = dict(d_mlp=6, mlp="last", residual="embed", attn_bias=False, unembed_bias=False,
                   W_O="identity", init="mha")


def _spec_model(**choices):
    from interp.core import models

    model = models.build_model(3, 4, 3, 2, "none", seed=1, **{**ALL_CHOICES, **choices})
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.1)
    return model


def _edit_meta(path, edit):
    meta = json.loads((path / "config.json").read_text())
    edit(meta["model"])
    (path / "config.json").write_text(json.dumps(meta))


def test_round_trip_restores_the_spec_its_fixed_tensors_and_hooks(tmp_path):
    from interp.core import forward, models

    model = _spec_model()
    path = checkpoints.save(model, tmp_path / "m")
    assert json.loads((path / "config.json").read_text())["model"]["spec"]["residual"] == "embed"
    loaded = checkpoints.load(path)
    assert loaded.spec == model.spec
    assert {n for n, p in loaded.named_parameters() if not p.requires_grad} == set(
        models.fixed_weights(model, model.spec))
    models.check_spec(loaded, trainable=True)  # frozen at their values, the residual hook on
    tokens, _ = _tokens(3, 4)
    torch.testing.assert_close(loaded(tokens), model(tokens), atol=0, rtol=0)
    torch.testing.assert_close(forward.final_logits(loaded, tokens), model(tokens)[:, -1], atol=1e-5, rtol=0)


def test_a_trained_run_keeps_its_spec(tmp_path):
    r = train(TrainConfig(case=5, n=3, d_token=4, n_layers=2, max_steps=5, eval_batches=1,
                          batch_size=16, **ALL_CHOICES))
    run = checkpoints.load_run(checkpoints.save(r, tmp_path / "r"))
    assert run.model.spec == r.config.spec == run.config.spec


def test_checkpoints_from_before_the_spec_load_with_defaults(result, tmp_path):
    from interp.core import models

    path = checkpoints.save(result, tmp_path / "old")
    _edit_meta(path, lambda d: d.pop("spec"))  # as written before specs were stored
    assert checkpoints.load(path).spec == result.config.spec  # from its TrainConfig
    bare = checkpoints.save(models.build_model(4, 5, 3, seed=0), tmp_path / "bare")
    _edit_meta(bare, lambda d: d.pop("spec"))
    assert models.spec_of(checkpoints.load(bare)) is None  # nothing says what it is
    older = checkpoints.save(models.build_model(4, 5, 3, 2, seed=0, d_mlp=8), tmp_path / "older")
    _edit_meta(older, lambda d: d.update(spec={k: d["spec"][k] for k in ("case", "n", "d_token", "n_layers",
                                                                           "pos_embed", "d_mlp")}))
    assert checkpoints.load(older).spec == models.ModelSpec(4, 5, 3, 2, d_mlp=8)  # new fields: defaults


def test_a_spec_that_does_not_fit_is_refused_naming_the_file(tmp_path):
    path = checkpoints.save(_spec_model(attn_bias=True), tmp_path / "m")
    _edit_meta(path, lambda d: d["spec"].update(attn_bias=False))  # the biases are not zero
    with pytest.raises(ValueError, match=r"model.safetensors does not fit the spec.*b_Q.*attn_bias=False"):
        checkpoints.load(path)
    _edit_meta(path, lambda d: d["spec"].update(attn_bias=True, W_O="tied"))
    with pytest.raises(ValueError, match=r"config.json: spec .*W_O='tied'; accepted"):
        checkpoints.load(path)
    _edit_meta(path, lambda d: d["spec"].update(W_O="free", n_layers=1))
    with pytest.raises(ValueError, match=r"config.json: spec .*does not describe its hooked_config"):
        checkpoints.load(path)
