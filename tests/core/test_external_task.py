"""A presentation defined here, outside interp, registered and used end to end (issue 45):
sampled, trained by both engines, swept in worker processes, probed and explored.

:class:`ValueFirst` is the sixth presentation a new contributor tried: consecutive positions,
permuted keys, the value before its key (slot j's value at 2j, its key at 2j + 1, i* at 2n).
It subclasses a layout family of :mod:`interp.core.tasks` and says only where its tokens go;
``interp.tasks.register`` makes it a case. Checked against references written here: a
plain-Python evaluator reading the tokens by this layout's rule, the plain TransformerLens
trainer for the fast engine, the stored rows for the sweep; then probed.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

import interp
from interp.inspect.studies import analysis, explore
from interp.inspect.tools import hooks
from interp.sweeps import driver as sweeps
from interp.training import checkpoints, fast_data, trainer
from interp.training.trainer import TrainConfig

REPO = Path(__file__).resolve().parents[2]
CASE = 6  # the next free number; tests of "an invalid case" use -1, which no registry holds


class ValueFirst(interp.tasks.Consecutive):
    """Consecutive positions, permuted keys, value first: v_j at 2j, k_j at 2j + 1, i* at 2n."""

    def value_pos(self, n, j):
        return 2 * self._slot(n, j)

    def key_pos(self, n, j):
        return 2 * self._slot(n, j) + 1

    def layout(self, n, keys, values, target):
        return torch.cat([torch.stack([values, keys], dim=2).flatten(1), target[:, None]], dim=1)

    def split(self, n, tokens):
        return tokens[:, 1 : 2 * n : 2], tokens[:, 0 : 2 * n : 2], tokens[:, 2 * n]

    def _decode(self, n, toks):
        return toks[1 : 2 * n : 2], toks[0 : 2 * n : 2], toks[2 * n]

    def _labels(self, n, keys, values):
        return [label for k, v in zip(keys, values) for label in (f"v{v}", f"k{k}")]


PRESENTATION = ValueFirst(CASE, "consecutive, permuted keys, value first", True)


@pytest.fixture
def registered():
    task = interp.tasks.register(PRESENTATION)
    yield task
    if CASE in interp.tasks.CASES:
        interp.tasks.unregister(CASE)
    assert interp.tasks.CASES == (1, 2, 3, 4, 5)


def plain_answer(row: list[int], n: int) -> int:
    """f(i*) read off one input by this layout's rule: values at even positions, keys at odd."""
    values, keys, target = row[0 : 2 * n : 2], row[1 : 2 * n : 2], row[2 * n]
    return values[keys.index(target)]


def test_it_samples_against_a_plain_python_evaluator(registered):
    assert interp.tasks.encode(CASE, [1, 2, 0], [2, 0, 1], 0).tolist() == [[2, 1, 0, 2, 1, 0, 0]]
    n = 5
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    tokens, answers = interp.tasks.sample(CASE, n, 200, generator=g1)
    assert answers.tolist() == [plain_answer(row, n) for row in tokens.tolist()]
    assert len({tuple(row[1 : 2 * n : 2]) for row in tokens.tolist()}) > 50  # keys permuted per input
    J, fast_answers = fast_data.sample_indices(CASE, n, 200, generator=g2)  # the fast engine's data
    assert torch.equal(J[0], tokens) and torch.equal(fast_answers, answers)
    assert registered.position_labels(n, tokens[0])[:2] == [f"v{tokens[0, 0]}", f"k{tokens[0, 1]}"]
    # where the construction's layers would attend, from the positions alone: layer 0 moves each
    # key (2j + 1) onto its value (2j); the last layer reads the matching slot's value at 2j
    targets = hooks.construction_targets(CASE, n, 2, tokens[:3])
    assert targets[0, 0].tolist() == [1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 10]
    for b, row in enumerate(tokens[:3].tolist()):
        assert targets[1, b, -1] == 2 * row[1 : 2 * n : 2].index(row[2 * n])


def test_both_engines_give_the_same_losses(registered):
    config = TrainConfig(case=CASE, n=5, d_token=8, n_layers=2, max_steps=20, stop_loss=0.0,
                         curve_every=1, eval_batches=1, batch_size=64)
    fast = trainer.train(config, engine="fast")
    reference = trainer.train(config, engine="reference")
    assert [s for s, _ in fast.curve] == list(range(1, 21))
    torch.testing.assert_close(torch.tensor([v for _, v in fast.curve]),
                               torch.tensor([v for _, v in reference.curve]), atol=1e-4, rtol=0)


SWEEP = """
from interp.core import tasks
from interp.sweeps import TableLayout
from interp.training.trainer import TrainConfig
from {module} import PRESENTATION

tasks.register(PRESENTATION)  # what a user's configs.py does: import the module, register
CONFIGS = [TrainConfig(case={case}, n=4, d_token=d, n_layers=2, seed=0, max_steps=30,
                       batch_size=64, eval_batches=2, curve_every=10) for d in (4, 8)]
LAYOUT = TableLayout(rows=("case",), column="d_token",
                     paper={{"case": "case", "d_token": "d_token"}}, title="value first")
"""


def test_a_tiny_sweep_of_it_trains_in_workers_and_is_probed(registered, tmp_path):
    folder = tmp_path / "value-first"
    folder.mkdir()
    (folder / "configs.py").write_text(textwrap.dedent(SWEEP.format(module=__name__, case=CASE)))
    shutil.copy(REPO / "experiments" / "table1" / "paper.csv", folder / "paper.csv")
    interp.tasks.unregister(CASE)  # the driver learns it from the configs its loader sends back
    sweep = sweeps.load(folder)
    assert interp.tasks.get(CASE) == PRESENTATION
    summary = sweeps.run_sweep(sweep, workers=2)  # two groups: each in a worker process
    assert (summary.trained, summary.failed, summary.lost) == (2, 0, 0)
    runs = interp.read_runs(folder)
    assert sorted(runs.d_token) == [4, 8] and set(runs.status) == {"ok"} and set(runs.case) == {CASE}
    model = checkpoints.load(runs.checkpoint.iloc[0])
    assert model.task == PRESENTATION
    measured = analysis.measure(model, batch_size=64)
    assert math.isfinite(measured["acc"]) and 0 <= measured["acc"] <= 1
    assert math.isfinite(measured["mass_L0"])  # layer 0 scored at the task's own key positions
    index = explore.write_explorer(folder, tmp_path / "explore", inputs=1, batch_size=64)
    assert f"case {CASE}, n=4" in Path(index).read_text()
