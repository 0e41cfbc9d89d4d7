"""Run names are the stores' and checkpoints' keys: every run the repository declared when the
architecture spec (issue 25) was introduced keeps its name (tests/training/data/run_names.json,
written by the old code: experiments' configs.py files, the readings, and hand-made configs of
every init, MLP width, positional embedding and layer count)."""

import json
from pathlib import Path

from interp.training.runs import TrainConfig

DATA = Path(__file__).with_name("data") / "run_names.json"


def _runs():
    table = json.loads(DATA.read_text())
    fields = table["fields"]
    return [dict(zip(fields, row, strict=True)) for row in table["runs"]]


def test_every_stored_run_name_is_reproduced():
    runs = _runs()
    assert len(runs) > 1000
    wrong = []
    for row in runs:
        name = row.pop("name")
        config = TrainConfig.from_dict(row)  # an old stored config dict still loads
        if config.name() != name:
            wrong.append((name, config.name(), row))
    assert not wrong, f"{len(wrong)} of {len(runs)} run names changed, e.g. {wrong[:3]}"


def test_the_stored_names_cover_every_init_mlp_and_positional_embedding():
    runs = _runs()
    assert {r["init"] for r in runs} >= {"gpt2", "pytorch", "xavier_uniform", "xavier_normal",
                                         "kaiming_uniform", "kaiming_normal"}
    assert {r["pos_embed"] for r in runs} == {"learned", "none"}
    assert {r["n_layers"] for r in runs} == {1, 2}
    assert {r["d_mlp"] > 0 for r in runs} == {True, False}
