"""TrainConfig.paper: the protocol the paper's tables run, checked against the tables' own
configs (experiments/table1, table2), field for field."""

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
        preset = TrainConfig.paper(config.case, config.n, config.d_token,
                                   **{name: getattr(config, name) for name in grid})
        assert dataclasses.asdict(preset) == dataclasses.asdict(config)  # names the field that differs
        assert preset == config and preset.name() == config.name()


def test_the_preset_is_the_defaults_with_the_tables_init():
    preset, plain = TrainConfig.paper(case=3, n=10, d_token=16), TrainConfig(case=3, n=10, d_token=16)
    differ = {f.name for f in dataclasses.fields(TrainConfig) if getattr(preset, f.name) != getattr(plain, f.name)}
    assert differ == {"init"} and preset.init == "pytorch"
    assert TrainConfig.paper(5, 10, 32, n_layers=2, max_steps=7).replace(init="gpt2", n_layers=1,
                                                                         max_steps=10_000) == \
        TrainConfig(case=5, n=10, d_token=32)


def test_the_preset_refuses_another_init_and_unknown_fields_by_name():
    with pytest.raises(ValueError, match=r"^init='gpt2'; TrainConfig.paper fixes init='pytorch'"):
        TrainConfig.paper(3, 10, 16, init="gpt2")
    assert TrainConfig.paper(3, 10, 16, init="pytorch").init == "pytorch"
    with pytest.raises(ValueError, match=r"^unknown TrainConfig fields \['layers'\]; accepted: "):
        TrainConfig.paper(3, 10, 16, layers=2)
    with pytest.raises(ValueError, match=r"^d_token=0; accepted"):  # the config's own checks
        TrainConfig.paper(3, 10, 0)
