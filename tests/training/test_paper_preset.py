"""TrainConfig.paper: the protocol the paper's tables run, checked against the tables' own
configs (experiments/table1, table2; reading "attention-only") and the atlas grid's
(experiments/atlas/grid.py; reading f14, the preset's default), field for field."""

import dataclasses
import pathlib
import runpy

import pytest

from interp.training.runs import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("table, grid", [("table1", ("pos_embed", "seed")),
                                         ("table2", ("n_layers", "seed"))])
def test_the_preset_is_every_config_of_the_tables(table, grid):
    configs = runpy.run_path(str(ROOT / "experiments" / table / "configs.py"))["CONFIGS"]
    assert len(configs) in (150, 160)
    for config in configs:
        preset = TrainConfig.paper(config.case, config.n, config.d_token, reading="attention-only",
                                   **{name: getattr(config, name) for name in grid})
        assert dataclasses.asdict(preset) == dataclasses.asdict(config)  # names the field that differs
        assert preset == config and preset.name() == config.name()


def test_attention_only_is_the_defaults_with_the_tables_init():
    preset = TrainConfig.paper(case=3, n=10, d_token=16, reading="attention-only")
    plain = TrainConfig(case=3, n=10, d_token=16)
    differ = {f.name for f in dataclasses.fields(TrainConfig) if getattr(preset, f.name) != getattr(plain, f.name)}
    assert differ == {"init"} and preset.init == "pytorch"
    assert TrainConfig.paper(5, 10, 32, n_layers=2, max_steps=7, reading="attention-only").replace(
        init="gpt2", n_layers=1, max_steps=10_000) == TrainConfig(case=5, n=10, d_token=32)


def test_the_default_reading_is_the_screens_choice_f14():
    """No reading named: f14 (fields.CHOSEN), the fields it sets acting where they can."""
    from interp.core import fields
    from interp.inspect.studies import atlas

    assert fields.CHOSEN == "f14" and set(atlas.NAMED) <= set(fields.READINGS)
    two = TrainConfig.paper(5, 10, 8, n_layers=2)
    assert two == TrainConfig.paper(5, 10, 8, n_layers=2, reading="f14")
    assert (two.d_mlp, two.mlp, two.unembed_bias, two.W_O, two.residual, two.key_order, two.init) == \
        (32, "last", False, "identity", "embed", "batch", "pytorch")
    one = TrainConfig.paper(1, 10, 8)  # one layer: residual and placement do not act; case 1: no key order
    assert (one.d_mlp, one.mlp, one.residual, one.key_order) == (32, "every", "stream", "sequence")
    assert TrainConfig.paper(5, 10, 8, n_layers=2, W_O="free").W_O == "free"  # a given field wins
    with pytest.raises(ValueError, match=r"^reading='f99'; accepted: one of \('attention-only', 'mlp-4x', 'f14'\)"):
        TrainConfig.paper(5, 10, 8, reading="f99")


def test_f14_is_every_mlp_config_of_the_atlas_grid():
    """The atlas grid's chosen-reading configs are TrainConfig.paper's (same fields, same run names)."""
    grid = runpy.run_path(str(ROOT / "experiments" / "atlas" / "grid.py"))
    configs = grid["configs"]("core", "mlp-4x", "f14")
    assert len(configs) > 100
    for c in configs:
        preset = TrainConfig.paper(c.case, c.n, c.d_token, n_layers=c.n_layers, pos_embed=c.pos_embed,
                                   function=c.function, seed=c.seed)
        assert dataclasses.asdict(preset) == dataclasses.asdict(c) and preset.name() == c.name()


def test_the_preset_refuses_another_init_and_unknown_fields_by_name():
    with pytest.raises(ValueError, match=r"^init='gpt2'; TrainConfig.paper fixes init='pytorch'"):
        TrainConfig.paper(3, 10, 16, init="gpt2")
    assert TrainConfig.paper(3, 10, 16, init="pytorch").init == "pytorch"
    with pytest.raises(ValueError, match=r"^unknown TrainConfig fields \['layers'\]; accepted: "):
        TrainConfig.paper(3, 10, 16, layers=2)
    with pytest.raises(ValueError, match=r"^d_token=0; accepted"):  # the config's own checks
        TrainConfig.paper(3, 10, 0)
