"""The task tokenizer and the input check every model carries (interp.core.tokens)."""

import copy
import pickle

import pytest
import torch

import interp
from interp.core import constructions, models, tasks, tokens
from interp.training import checkpoints


def test_to_str_tokens_names_the_task_tokens():
    t = tasks.encode(3, keys=[0, 2, 1, 3], values=[2, 3, 2, 1], target=2)  # Appendix B
    model = constructions.build(3, 4)
    assert model.to_str_tokens(t[0]) == ["(0,2)", "(2,3)", "(1,2)", "(3,1)", "i*=2"]
    assert model.to_string(t[0]) == "(0,2) (2,3) (1,2) (3,1) i*=2"
    five = constructions.build(5, 4)
    t5 = tasks.encode(5, keys=[1, 0, 3, 2], values=[2, 3, 0, 1], target=3)
    assert five.to_str_tokens(t5[0]) == ["1", "2", "0", "3", "3", "0", "2", "1", "i*=3"]  # the query by position
    assert five.to_string(t5[0]) == "1 2 0 3 3 0 2 1 i*=3"


@pytest.mark.parametrize("case", tasks.CASES)
def test_strings_go_back_to_the_same_tokens(case, tmp_path):
    model = models.build_model(case, 5, 4, seed=0)
    batch, _ = tasks.sample(case, 5, 6, function="any")
    for row in batch:
        assert torch.equal(model.to_tokens(model.to_string(row))[0], row)
    loaded = checkpoints.load(checkpoints.save(model, tmp_path / "ckpt"))  # a loaded model too
    assert loaded.to_str_tokens(batch[0]) == model.to_str_tokens(batch[0])
    with pytest.raises(ValueError, match="is not a token of"):
        model.to_tokens("banana")


def test_inputs_the_model_cannot_mean_are_refused_with_a_message():
    model = constructions.build(2, 4)
    good, answers = tasks.sample(2, 4, 3)
    bad = {
        "token ids from -1": torch.full((1, 5), -1),
        "inputs of length 4; accepted: 5": good[:, :4],
        "reads n pair tokens": good.flip(-1),
        "an integer tensor": good.float(),
    }
    for message, x in bad.items():
        with pytest.raises(ValueError, match=message):
            model(x)
    assert torch.equal(model(good)[:, -1].argmax(-1), answers)  # valid input: untouched answers


def test_the_check_survives_reset_hooks_and_can_be_turned_off():
    model = models.build_model(1, 4, 4, seed=0)
    model.reset_hooks(including_permanent=True)
    with pytest.raises(ValueError, match="token ids from 0 to 9"):
        model(torch.tensor([[0, 1, 2, 3, 9]]))
    model.embed.input_check = False
    with pytest.raises(IndexError):  # TransformerLens's own failure, once the check is off
        model(torch.tensor([[0, 1, 2, 3, 9]]))


@pytest.mark.parametrize("case", [1, 3])
def test_models_with_the_check_still_copy_and_pickle(case):
    model = interp.build(case, 4)
    twin = copy.deepcopy(model)
    if case == 1:  # a trained-shape model pickles (hook-free, no parametrization), check included
        model = models.build_model(1, 4, 4, seed=0)
        twin = pickle.loads(pickle.dumps(model))
    t, _ = tasks.sample(case, 4, 2)
    assert torch.equal(twin(t), model(t))
    with pytest.raises(ValueError, match="length"):
        twin(t[:, :2])
    assert isinstance(twin.tokenizer, tokens.TaskTokenizer)


@pytest.mark.parametrize("case", tasks.CASES)
def test_return_type_loss_is_the_task_loss(case):
    """model(tokens, return_type="loss") is the cross-entropy at the final position against
    the plain-Python evaluator's answers, not TransformerLens's next-token loss."""
    import torch.nn.functional as F

    model = models.build_model(case, 5, 4, seed=1)
    batch, _ = tasks.sample(case, 5, 16, function="any")
    answers = torch.tensor([tasks.evaluate(case, 5, row) for row in batch.tolist()])
    expected = F.cross_entropy(model(batch)[:, -1], answers, reduction="none")
    torch.testing.assert_close(model(batch, return_type="loss"), expected.mean())
    torch.testing.assert_close(model(batch, return_type="loss", loss_per_token=True), expected)
