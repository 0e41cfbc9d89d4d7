"""Every model built, constructed, trained or loaded carries its task (``model.task``), and every
model-taking function reads the case from it: a case= that disagrees is refused by name, and an
old positional (model, case, n) call fails loudly instead of misreading an int."""

import copy
import json

import pytest
import torch

from interp.core import constructions, models, tasks, tokens
from interp.training import checkpoints


@pytest.mark.parametrize("case", tasks.CASES)
def test_built_constructed_and_copied_models_carry_their_task(case):
    task = tasks.get(case)
    built = models.build_model(case, 4, 3, seed=0)
    assert built.task is task and tasks.of(built) == (task, 4)
    assert constructions.build(case, 4).task is task
    assert models.to_vanilla(built).task is task  # a pair model takes the new_model path
    assert copy.deepcopy(built).task is task


def test_theory_models_carry_their_task():
    from interp.theory import softmax_construction, temperature

    assert softmax_construction.build(3).task is tasks.get(5)
    assert temperature.tiebroken_case5(3).task is tasks.get(5)


def test_a_trained_model_carries_its_task():
    from interp.training import TrainConfig, train

    for engine in ("fast", "reference"):
        run = train(TrainConfig(case=3, n=4, d_token=4, max_steps=3, eval_batches=1, batch_size=8),
                    engine=engine)
        assert run.model.task is tasks.get(3), engine


def test_a_loaded_checkpoint_carries_its_task(tmp_path):
    from interp.training import TrainConfig, train

    model = models.build_model(4, 5, 3, seed=0)
    path = checkpoints.save(model, tmp_path / "bare")
    meta = json.loads((path / "config.json").read_text())
    assert meta["model"]["case"] == 4  # saved with the model
    assert checkpoints.load(path).task is tasks.get(4)
    run = train(TrainConfig(case=5, n=4, d_token=4, max_steps=2, eval_batches=1, batch_size=8))
    trained = checkpoints.save(run, tmp_path / "run")
    assert checkpoints.load(trained).task is tasks.get(5) and checkpoints.load_run(trained).case == 5


def _drop_case(path):
    meta = json.loads((path / "config.json").read_text())
    del meta["model"]["case"]
    (path / "config.json").write_text(json.dumps(meta))


def test_old_checkpoints_take_the_case_of_their_train_config_or_none(tmp_path):
    """A checkpoint from before the task object: its TrainConfig's case; with no TrainConfig
    either, no task (the loss and tasks.of then ask for the case; attach_task gives it)."""
    from interp.training import TrainConfig, train

    run = train(TrainConfig(case=2, n=3, d_token=4, max_steps=2, eval_batches=1, batch_size=8))
    with_config = checkpoints.save(run, tmp_path / "old-run")
    _drop_case(with_config)
    assert checkpoints.load(with_config).task is tasks.get(2)

    bare = checkpoints.save(models.build_model(5, 4, 3, seed=0), tmp_path / "old-bare")
    _drop_case(bare)
    model = checkpoints.load(bare)
    assert model.task is None
    batch, _ = tasks.sample(5, 4, 3)
    with pytest.raises(ValueError, match="carries no task"):
        model(batch, return_type="loss")
    with pytest.raises(ValueError, match="carries no task"):
        tasks.of(model)
    row = batch[0].tolist()  # labels by vocabulary, the query by position
    assert model.to_str_tokens(batch[0]) == [str(t) for t in row[:-1]] + [f"i*={row[-1]}"]
    assert tasks.of(model, case=5) == (tasks.get(5), 4)  # by shape
    with pytest.raises(ValueError, match=r"case 2 .* needs n_ctx=5 and d_vocab=20"):
        tasks.of(model, case=2)
    tokens.attach_task(model, 5)
    assert model.task is tasks.get(5) and model(batch, return_type="loss").ndim == 0
    with pytest.raises(ValueError, match="needs n_ctx=5"):
        tokens.attach_task(model, 3)


def test_a_checkpoint_whose_case_does_not_fit_is_refused(tmp_path):
    path = checkpoints.save(models.build_model(1, 4, 3, seed=0), tmp_path / "ckpt")
    meta = json.loads((path / "config.json").read_text())
    for case, match in [(2, "case 2 .* needs n_ctx=5 and d_vocab=20"), (-1, "case=-1 is not a presentation")]:
        meta["model"]["case"] = case
        (path / "config.json").write_text(json.dumps(meta))
        with pytest.raises(ValueError, match=match) as e:
            checkpoints.load(path)
        assert "config.json" in str(e.value)


def test_a_case_that_disagrees_with_the_model_is_refused():
    from interp.theory import counterexample, lower_bounds, softmax_construction

    model = models.build_model(5, 4, 3, seed=0)
    assert tasks.of(model, case=5, n=4) == (tasks.get(5), 4)
    with pytest.raises(ValueError, match=r"case=3 but the model was built for case 5 \(consecutive, permuted keys\)"):
        tasks.of(model, case=3)
    with pytest.raises(ValueError, match="n=6 but the model's table size is n=4"):
        tasks.of(model, n=6)
    with pytest.raises(ValueError, match="case=3 but the model was built for case 5"):
        softmax_construction.accuracy(model, case=3)
    with pytest.raises(ValueError, match=r"case=4; accepted here: only case 5"):
        counterexample.check_bound(model, case=4)
    with pytest.raises(ValueError, match=r"only case 5 .* the model was built for case 2"):
        lower_bounds.error_rates(models.build_model(2, 4, 3, seed=0))
    assert softmax_construction.accuracy(model, case=5, n=4, count=16)["inputs"] == 16


@pytest.mark.parametrize("call", [
    lambda f, m: f.check_bound(m, 4),
    lambda f, m: f.find_counterexample(m, 5),
])
def test_an_old_positional_case_or_n_fails_loudly(call):
    from interp.theory import counterexample

    with pytest.raises(ValueError, match="the case and n come from the model"):
        call(counterexample, models.build_model(5, 4, 3, seed=0))


def test_old_positional_calls_of_the_theory_functions_fail_loudly():
    from interp.theory import lower_bounds, softmax_construction

    model = softmax_construction.build(3)
    for call in (lambda: softmax_construction.accuracy(model, 3),
                 lambda: lower_bounds.error_rates(model, 3)):
        with pytest.raises(ValueError, match=r"got n=3|got 2 positional"):
            call()


def test_a_model_that_is_not_a_task_model_is_refused():
    with pytest.raises(ValueError, match="not a task model"):
        tasks.of(object())
    model = models.build_model(1, 3, 2, seed=0)
    model.task = 1
    with pytest.raises(ValueError, match="model.task=1 is not a Task"):
        tasks.of(model)


def test_the_cli_refuses_a_case_that_disagrees_with_the_model(tmp_path, capsys):
    from interp.cli import main

    assert main(["probe", "--construction", "3", "--n", "4", "--case", "2"]) == 2
    assert "--case 2 but --construction 3" in capsys.readouterr().err
    path = checkpoints.save(models.build_model(4, 3, 2, seed=0), tmp_path / "ckpt")
    assert main(["viz", str(path), "--case", "5", "--out", str(tmp_path / "viz")]) == 2
    assert "case=5 but the model was built for case 4" in capsys.readouterr().err
    assert main(["probe", str(path), "--n", "4"]) == 2
    assert "n=4 but the model's table size is n=3" in capsys.readouterr().err


def test_probe_inputs_of_another_task_are_refused():
    from interp.theory import precision as P
    from interp.theory import temperature as T

    model = constructions.build(3, 4)
    with pytest.raises(ValueError, match="case=2 but the model was built for case 3"):
        P.least_precision(model, P.ProbeSet(2, 4))
    with pytest.raises(ValueError, match="n=5 but the model's table size is n=4"):
        P.check(model, P.ProbeSet(3, 5))
    with pytest.raises(ValueError, match="case=1 but the model was built for case 3"):
        T.least_beta(model, P.ProbeSet(1, 4))
