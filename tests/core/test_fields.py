"""A ModelSpec field is its declaration (issue 45, item 2): validation, the CLI flag, the
TransformerLens config (building and loading a checkpoint), the memory estimate, engine
refusals, run names and the atlas's grouping all read it from there (interp.core.fields).

``test_a_field_is_its_declaration`` adds a toy field, ``n_heads``, by one declaration inserted
into a copy of the package (nothing else edited) and checks each reader sees it, in a child
process; the others check the readers in this process against the real fields.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from interp.core import fields, models
from interp.training.runs import TrainConfig

ROOT = Path(__file__).resolve().parents[2]

#: the toy field: TransformerLens builds it (n_heads), the fast engine computes 1 head only
TOY = '''    n_heads: int = declare(1, accepted=(1, 2), words="1 or 2", hooked=lambda s: dict(n_heads=s.n_heads),
                           engines={"fast": (1,)}, reading=True, flag="--n-heads", help="attention heads per layer")
'''

CHECKS = textwrap.dedent('''
    import json, sys, tempfile
    from pathlib import Path
    import pytest, torch
    import interp
    from interp.cli import _parser, train as train_cli
    from interp.core import forward, limits, models, tasks
    from interp.inspect import analysis
    from interp.inspect.studies import atlas
    from interp.sweeps.configs_file import check_sizes
    from interp.training import checkpoints, fast_train, trainer
    from interp.training.runs import TrainConfig

    out = {"where": interp.__file__}
    with pytest.raises(ValueError, match=r"^n_heads=3; accepted: 1 or 2$"):  # validation
        models.ModelSpec(1, 3, 2, n_heads=3)
    args = _parser("train").parse_args(["train", "--case", "1", "--n", "3", "--d-token", "2", "--n-heads", "2",
                                        "--reading", "attention-only", "--out", "x"])
    config = train_cli.config_from_args(args).replace(max_steps=3, batch_size=8, eval_batches=1)
    out["flag"] = config.n_heads  # the CLI flag
    out["hooked"] = models.hooked_config(config.spec).n_heads  # the TransformerLens config
    fast_train.train_ensemble = None  # refused before the engine is reached
    with pytest.raises(ValueError, match=r"n_heads=2: the fast engine computes n_heads in \\(1,\\) only; "
                                         r"accepted: engine='reference'"):
        trainer.train(config, engine="fast")
    with pytest.raises(ValueError, match=r"CONFIGS\\[0\\]: n_heads=2: the fast engine"):  # a sweep: before its store
        check_sizes(Path("configs.py"), [config])
    result = trainer.train(config, engine="reference")  # TransformerLens computes it
    out["heads"] = result.model.blocks[0].attn.W_Q.shape[0]
    tokens = tasks.sample(1, 3, 16)[0]  # the package's evaluation pass gives TransformerLens's logits
    out["tl_logits"] = bool(torch.allclose(forward.final_logits(result.model, tokens),
                                           result.model(tokens)[:, -1], atol=1e-6, rtol=0))
    with pytest.raises(ValueError, match=r"^W_O='identity' fixes blocks.0.attn.W_O at a value of shape \\(1, 2, 2\\), "
                                         r"but this model's is \\(2, 2, 2\\) \\(n_heads=2\\); accepted: the other choice$"):
        models.build_model(1, 3, 2, n_heads=2, W_O="identity")  # the fixed W_O = I is one head's: refused
    swapped = models.build_model(1, 3, 2, n_heads=2, seed=1)
    with torch.no_grad():  # the same model with its heads swapped: the same logits
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
            getattr(swapped.blocks[0].attn, name).copy_(getattr(result.model.blocks[0].attn, name).flip(0))
        for name, p in result.model.named_parameters():
            if not name.startswith("blocks.0.attn.") or name.endswith("b_O"):
                swapped.get_parameter(name).copy_(p)
    out["swapped"] = bool(torch.allclose(swapped(tokens), result.model(tokens), atol=1e-6, rtol=0))
    for m in (result.model, swapped):  # a label read from head 0 would differ: measuring refuses both
        with pytest.raises(ValueError, match=r"reads one head per layer and this model has n_heads=2"):
            analysis.measure(m, batch_size=16)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints.save(result, Path(tmp) / "run")
        run = checkpoints.load_run(Path(tmp) / "run")  # loading: the same config, the same logits
        tokens = tasks.sample(1, 3, 4)[0]
        out["loaded"] = [run.model.cfg.n_heads, run.model.spec.n_heads, run.config == config,
                         bool(torch.equal(run.model(tokens), result.model(tokens)))]
    out["memory"] = limits.train_step_bytes(1, 3, 2, n_heads=2) > limits.train_step_bytes(1, 3, 2)
    out["atlas"] = atlas.architecture(1, 2, 0, **{**atlas.READING, "n_heads": 2})
    out["names"] = [config.replace(n_heads=1).name(), config.name()]
    print(json.dumps(out))
''')


def _with_toy_field(tmp_path: Path) -> Path:
    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "interp", copy / "interp", ignore=shutil.ignore_patterns("__pycache__"))
    source = copy / "interp" / "core" / "models.py"
    text = source.read_text()
    anchor = "    def __post_init__(self):\n        fields.check(self, ModelSpec)"
    assert text.count(anchor) == 1
    source.write_text(text.replace(anchor, TOY + "\n" + anchor))
    return copy


@pytest.mark.slow
def test_a_field_is_its_declaration(tmp_path):
    """One declaration, nothing else edited: every reader of fields sees the toy n_heads."""
    copy = _with_toy_field(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    proc = subprocess.run([sys.executable, "-c", CHECKS], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["where"].startswith(str(copy))
    assert (got["flag"], got["hooked"], got["heads"]) == (2, 2, 2)
    assert got["tl_logits"] and got["swapped"]
    assert got["loaded"] == [2, 2, True, True]
    assert got["memory"] is True
    assert got["atlas"] == "attention-only[n_heads=2]"  # never pooled with one-head runs
    one = TrainConfig.paper(1, 3, 2, reading="attention-only", max_steps=3, batch_size=8, eval_batches=1)
    assert got["names"][0] == one.name() and got["names"][1] != one.name()  # old names kept


def test_every_field_is_declared_with_its_facts():
    """Each ModelSpec field carries its Info: a flag, accepted values that hold its default, and
    either a HookedTransformerConfig mapping or words on how the model gets it."""
    infos = fields.infos(models.ModelSpec)
    assert list(infos) == [f.name for f in dataclasses.fields(models.ModelSpec)]
    for f in dataclasses.fields(models.ModelSpec):
        info = infos[f.name]
        assert info.flag.startswith("--") and info.help, f.name
        assert (info.hooked is None) == bool(info.built), f.name
        if f.default is not dataclasses.MISSING:
            assert info.accepts(f.default), f.name
    for name in fields.reading_fields(TrainConfig):  # a reading field can tell readings apart
        accepted = fields.infos(TrainConfig)[name].accepted
        assert isinstance(accepted, tuple) and len(accepted) >= 2, name


#: every value a ModelSpec field declares (a tuple of choices), off the base model below: read
#: from the declarations, so a field added later is checked here without editing this file
BASE = dict(case=5, n=3, d_token=4, n_layers=2, d_mlp=8)
#: the cell a field's other values need, where the base refuses them (pe_combine="concat": case 1)
CELL = {"pe_combine": dict(case=1)}
VALUES = [(name, value) for name, info in fields.infos(models.ModelSpec).items()
          if isinstance(info.accepted, tuple) and name not in ("case",)
          for value in info.accepted if value != BASE.get(name, dataclasses.MISSING)]


@pytest.mark.parametrize("name, value", VALUES, ids=[f"{n}={v}" for n, v in VALUES])
def test_every_declared_value_builds_the_model_transformer_lens_computes(name, value, tmp_path):
    """Meaning, not plumbing, for every declared value: the package's evaluation pass gives
    TransformerLens's own logits, the fast engine too where its declaration says it computes the
    value, a checkpoint gives back the same spec and logits, and the slot attribution of the
    attention-only model adds up to TransformerLens's logit of the answer."""
    from interp.core import forward, tasks
    from interp.training import checkpoints, fast_train

    base = {**BASE, **CELL.get(name, {})}
    spec = models.ModelSpec(**{**base, name: value})
    model = models.from_spec(spec, seed=2)
    with torch.no_grad():  # biases off zero, so a bias choice shows in the logits
        for p in model.parameters():
            if p.requires_grad and p.ndim == 1:
                p.normal_(0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    tokens, _ = tasks.sample(spec.case, spec.n, 32, generator=torch.Generator().manual_seed(0))
    want = model(tokens)[:, -1]
    torch.testing.assert_close(forward.final_logits(model, tokens), want, atol=1e-5, rtol=0)
    if fields.refusal(spec, "fast") is None:
        torch.testing.assert_close(fast_train.model_final_logits(model, tokens), want, atol=1e-5, rtol=0)
    loaded = checkpoints.load(checkpoints.save(model, tmp_path / "m"))
    assert loaded.spec == spec and torch.equal(loaded(tokens)[:, -1], want)
    assert getattr(loaded.spec, name) == value
    if name != "mlp":  # attention-only (mlp="last" needs an MLP): the attribution adds up to the logit
        _attribution_adds_up(models.from_spec(models.ModelSpec(**{**base, "d_mlp": 0, name: value}), seed=3), tokens)


def _attribution_adds_up(model, tokens) -> None:
    from interp.inspect.tools import interventions

    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad and p.ndim == 1:
                p.normal_(0, 0.3, generator=torch.Generator().manual_seed(p.numel()))
    d = interventions.slot_logit_attribution(model, tokens)
    logit = model(tokens)[torch.arange(len(tokens)), -1, d["answers"]]
    torch.testing.assert_close(d["per_position"].sum(-1) + d["residual"] + d["bias"], logit, atol=1e-5, rtol=0)


@pytest.mark.parametrize("spec", [models.ModelSpec(1, 5, 4), models.ModelSpec(3, 4, 3, 2, "none", d_mlp=6),
                                  models.ModelSpec(5, 3, 2, 2, d_mlp=4, mlp="last", residual="embed")])
def test_one_config_function_builds_and_loads(spec, tmp_path):
    """hooked_config is what building makes and what loading a checkpoint rebuilds."""
    from interp.training import checkpoints

    cfg = models.hooked_config(spec)
    legacy = models.make_config(spec.case, spec.n, spec.d_model, spec.n_layers, d_mlp=spec.d_mlp)
    assert cfg.to_dict() == legacy.to_dict()
    def shape(c) -> dict:
        return {k: getattr(c, k) for k in (*checkpoints._CFG_FIELDS, "d_mlp", "dtype")}

    model = models.from_spec(spec, seed=0)
    assert shape(model.cfg) == shape(cfg)
    loaded = checkpoints.load(checkpoints.save(model, tmp_path / "m"))
    assert shape(loaded.cfg) == shape(cfg) and loaded.spec == spec


def test_an_engine_refusal_comes_before_anything_is_built_or_stored(monkeypatch, tmp_path):
    """A declared engine limit (here W_O's, monkeypatched: the fast engine computes "free"
    only) refuses train and a sweep by name, naming the engine that can, before a model is
    built or a store opened; the reference engine trains it."""
    from interp import cli
    from interp.training import trainer

    real = fields.infos

    def infos(cls):
        got = real(cls)
        if "W_O" in got:
            got["W_O"] = dataclasses.replace(got["W_O"], engines={"fast": ("free",)})
        return got

    monkeypatch.setattr(fields, "infos", infos)
    config = TrainConfig(case=1, n=3, d_token=2, W_O="identity", max_steps=2, batch_size=4, eval_batches=1)
    built = []
    monkeypatch.setattr(trainer.fast_train, "train_ensemble", lambda *a, **k: built.append(a))
    with pytest.raises(ValueError, match=r"^W_O='identity': the fast engine computes W_O in \('free',\) only; "
                                         r"accepted: engine='reference', which computes it$"):
        trainer.train(config)
    assert built == []
    assert trainer.train(config, engine="reference").status == "ok"
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "configs.py").write_text(
        "from interp.sweeps import TableLayout\nfrom interp.training import TrainConfig\n"
        "CONFIGS = [TrainConfig(case=1, n=3, d_token=2, W_O='identity')]\n"
        "LAYOUT = TableLayout(rows=('case',), column='d_token')\n")
    assert cli.main(["sweep", str(folder)]) == 2
    assert not (folder / "results").exists()


def test_a_field_the_readers_cannot_compute_is_refused_by_each_by_name(tmp_path):
    """A LayerNorm field, declared on a subclass (its declaration alone): TransformerLens builds it;
    every reader that would compute it wrongly refuses by name instead (the evaluation pass, the
    fast engine, the attribution, measuring), and a checkpoint of a spec this version cannot
    build is refused naming the field. Issue 50: the attribution stopped adding up, silently."""
    from dataclasses import dataclass

    from interp.core import forward, tasks
    from interp.inspect.mechanism.measure import measure
    from interp.inspect.tools import interventions
    from interp.training import checkpoints, fast_train

    @dataclass(frozen=True)
    class WithNorm(models.ModelSpec):
        norm: str = fields.declare("none", accepted=("none", "LN"), flag="--norm", help="LayerNorm",
                                   hooked=lambda s: dict(normalization_type=None if s.norm == "none" else s.norm))

    model = models.from_spec(WithNorm(5, 3, 4, n_layers=2, norm="LN"), seed=0)
    assert model.cfg.normalization_type == "LN"
    tokens, _ = tasks.sample(5, 3, 8, generator=torch.Generator().manual_seed(0))
    for reader, words in ((forward.final_logits, "normalization_type='LN'"),
                          (fast_train.model_final_logits, "normalization_type='LN'"),
                          (interventions.slot_logit_attribution, "without LayerNorm.*normalization_type='LN'"),
                          (lambda m, t: measure(m, batch_size=16), "normalization_type='LN'")):
        with pytest.raises(ValueError, match=words):
            reader(model, tokens)
    with pytest.raises(ValueError, match=r"spec field\(s\) \['norm'\] \(= \['LN'\]\): this version of interp cannot build"):
        checkpoints.load(checkpoints.save(model, tmp_path / "ln"))
