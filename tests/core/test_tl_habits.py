"""What a TransformerLens user reaches for first, on a task model: generate, utils.test_prompt,
prepend_bos, the query's label, and a state dict taken out to a plain HookedTransformer and back.

References: the plain-Python decoder (tasks.decode) for the query's label, TransformerLens's own
HookedTransformer for what a plain model computes, the paper's Appendix B logits [0, -1, 0, 1].
"""

import copy
import pathlib
import pickle
import re
import warnings

import pytest
import torch

import interp
from interp.core import attention, constructions, models, roundtrip, tasks
from interp.training import checkpoints

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformer_lens import HookedTransformer, utils

ROOT = pathlib.Path(__file__).resolve().parents[2]
APPENDIX_B = dict(keys=[0, 2, 1, 3], values=[2, 3, 2, 1], target=2)


def _one_input(case: int, n: int, seed: int = 0):
    return tasks.sample(case, n, 1, generator=torch.Generator().manual_seed(seed), function="any")


def _quiet_to_vanilla(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return models.to_vanilla(model)


# ---- generate, test_prompt, prepend_bos


@pytest.mark.parametrize("case", tasks.CASES)
def test_generate_is_refused_with_one_line_that_says_how_the_model_answers(case, tmp_path):
    model = models.build_model(case, 4, 4, seed=0)
    tokens, _ = _one_input(case, 4)
    copies = [model, copy.deepcopy(model), checkpoints.load(checkpoints.save(model, tmp_path / "ckpt")),
              _quiet_to_vanilla(model)]
    if case not in tasks.SAME_POSITION:  # (torch pickles no parametrized module)
        copies.append(pickle.loads(pickle.dumps(model)))
    for m in copies + [constructions.build(case, 4)]:
        for prompt in (tokens, m.to_string(tokens[0])):
            with pytest.raises(ValueError, match=r"^generate\(\) does not apply: .*final position: "
                                                 r"logits\[:, -1\]\.argmax\(-1\)") as e:
                m.generate(prompt, max_new_tokens=1, verbose=False)
            assert "\n" not in str(e.value)


@pytest.mark.parametrize("case", tasks.CASES)
def test_test_prompt_is_refused_saying_the_answer_is_not_an_appended_token(case):
    model = constructions.build(case, 4)
    tokens, answers = _one_input(case, 4)
    prompt, answer = model.to_string(tokens[0]), str(int(answers[0]))
    refusal = (r"an answer f\(i\*\) is an output class" if case in tasks.SAME_POSITION
               else r"inputs of length .*; a task model reads one whole input and answers once")
    with pytest.raises(ValueError, match=refusal):
        utils.test_prompt(prompt, answer, model, print_details=False)
    # the query taken for the answer to append (the prompt stops before it): refused by the label
    labels = model.to_str_tokens(tokens[0])
    with pytest.raises(ValueError, match=r"'i\*=\d' is the query's label: accepted only as the last"):
        utils.test_prompt(" ".join(labels[:-1]), labels[-1], model, print_details=False)


@pytest.mark.parametrize("case", [1, 3, 5])
def test_prepend_bos_true_is_refused_by_name_wherever_a_string_is_read(case):
    model = constructions.build(case, 4)
    tokens, _ = _one_input(case, 4)
    text = model.to_string(tokens[0])
    calls = {
        "to_tokens": lambda: model.to_tokens(text, prepend_bos=True),
        "to_str_tokens": lambda: model.to_str_tokens(text, prepend_bos=True),
        "forward": lambda: model(text, prepend_bos=True),
        "run_with_cache": lambda: model.run_with_cache(text, prepend_bos=True),
        "a batch of strings": lambda: model.to_tokens([text, text], prepend_bos=True),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"^prepend_bos=True: a task input has no BOS token"):
            call()
    assert torch.equal(model.to_tokens(text, prepend_bos=False), tokens)
    assert torch.equal(model.to_tokens(text), tokens)
    torch.testing.assert_close(model(text, prepend_bos=False), model(tokens))
    assert model.cfg.default_prepend_bos is False  # TransformerLens restored its default


# ---- the query's label


@pytest.mark.parametrize("n", [2, 5])
@pytest.mark.parametrize("case", tasks.CASES)
def test_every_case_labels_its_query_i_star_and_to_tokens_reads_what_is_printed(case, n):
    model = models.build_model(case, n, 4, seed=0)
    batch, _ = tasks.sample(case, n, 8, generator=torch.Generator().manual_seed(n), function="any")
    for row in batch:
        labels = model.to_str_tokens(row)
        target = tasks.decode(case, n, row.tolist())[2]  # the plain-Python reader
        assert labels[-1] == f"i*={target}" == tasks.get(case).position_labels(n, row)[-1]
        ids = row.tolist()
        if case in tasks.SAME_POSITION:  # every other label is the token's own
            assert labels[:-1] == [f"({t // n},{t % n})" for t in ids[:-1]]
        else:
            assert labels[:-1] == [str(t) for t in ids[:-1]]
        text = " ".join(labels)
        assert model.to_string(row) == text
        assert model.to_tokens(text).tolist() == [ids]
        assert model.to_str_tokens(text) == labels
        assert model.to_string(batch)[0] == model.to_string(batch[0])
    both = model.to_tokens([model.to_string(r) for r in batch])  # a batch of strings
    assert torch.equal(both, batch)


@pytest.mark.parametrize("case", tasks.CASES)
def test_the_query_label_is_refused_anywhere_but_the_last_position(case):
    n = 4
    model = models.build_model(case, n, 4, seed=0)
    tokens, _ = _one_input(case, n)
    labels = model.to_str_tokens(tokens[0])
    swapped = [labels[-1]] + labels[1:-1] + [labels[0]]
    for text in (" ".join(swapped), labels[-1], " ".join(labels[1:])):
        with pytest.raises(ValueError, match=r"is the query's label: accepted only as the last of a "
                                             rf"whole input's {model.cfg.n_ctx} labels"):
            model.to_tokens(text)
    if case not in tasks.SAME_POSITION:  # the plain id at the query position still reads
        plain = " ".join(labels[:-1] + [labels[-1].removeprefix("i*=")])
        assert torch.equal(model.to_tokens(plain), tokens)


# ---- a state dict out to a plain HookedTransformer and back


def test_the_readme_round_trip_warns_and_from_state_dict_gives_appendix_b_back():
    model = interp.build(3, n=4)
    tokens = tasks.encode(3, **APPENDIX_B)
    with pytest.warns(UserWarning, match=r"^to_vanilla: a plain HookedTransformer .* loses layer 0's "
                                         r"leftmost attention, the task tokenizer and loss \(case 3\)"):
        vanilla = models.to_vanilla(model)
    state = vanilla.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = HookedTransformer(vanilla.cfg)
    plain.load_state_dict(state)  # TransformerLens's own class: softmax attention, no tokenizer
    softmax = attention.set_attention(copy.deepcopy(model), "softmax")
    torch.testing.assert_close(plain(tokens), softmax(tokens))
    torch.testing.assert_close(plain(tokens)[0, -1], torch.tensor([-0.2280, -0.1570, 0.2280, 0.1570]),
                               atol=1e-4, rtol=0)
    extras = roundtrip.extras(model)
    assert extras["case"] == 3 and [m.mode for m in extras["attention"]] == ["leftmost"]
    back = roundtrip.from_state_dict(vanilla.cfg, state, **extras)
    torch.testing.assert_close(back(tokens)[0, -1], torch.tensor([0.0, -1, 0, 1]), atol=1e-6, rtol=0)
    assert back.to_str_tokens(tokens[0]) == ["(0,2)", "(2,3)", "(1,2)", "(3,1)", "i*=2"]
    assert back.task is tasks.get(3) and back.cfg is not vanilla.cfg
    # the pair model's own state dict (parametrized W_E) comes back the same way
    torch.testing.assert_close(roundtrip.from_state_dict(model.cfg, model.state_dict(), **extras)(tokens),
                               model(tokens), atol=0, rtol=0)


def _spec_model():
    model = models.build_model(5, 4, 4, 2, "none", residual="embed", W_O="identity", seed=0)
    return attention.set_attention(model, "softmax", beta=2.0, layers=[1])


@pytest.mark.parametrize("make", [lambda: constructions.build(5, 4), lambda: constructions.build(1, 4),
                                  _spec_model], ids=["case5-construction", "case1-construction", "spec"])
def test_what_a_plain_model_loses_is_named_and_given_back(make):
    model = make()
    tokens, _ = tasks.sample(model.task.case, 4, 16, generator=torch.Generator().manual_seed(1))
    with pytest.warns(UserWarning, match="loses layer") as record:
        vanilla = models.to_vanilla(model)
    message = str(record[0].message)
    for layer, m in enumerate(attention.modes(model)):
        assert (f"layer {layer}'s {m.mode} attention" in message) == (m[:2] != ("softmax", 1.0))
    assert ("residual='embed' hooks of layers [1]" in message) == (models.spec_of(model) is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = HookedTransformer(vanilla.cfg)
    plain.load_state_dict(vanilla.state_dict())
    assert not torch.allclose(plain(tokens), model(tokens))  # what the warning is about
    back = roundtrip.from_state_dict(vanilla.cfg, vanilla.state_dict(), **roundtrip.extras(model))
    torch.testing.assert_close(back(tokens), model(tokens), atol=0, rtol=0)
    assert attention.modes(back) == attention.modes(model)
    models.check_spec(back, trainable=True)  # the spec's hooks and frozen tensors are back


def test_to_vanilla_of_a_softmax_model_stays_quiet():
    for model in (models.build_model(3, 4, 4, seed=0), models.build_model(5, 4, 4, 2, seed=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            models.to_vanilla(model)


def test_from_state_dict_refuses_what_does_not_fit_by_name():
    model = constructions.build(1, 4)
    cfg, state = model.cfg, model.state_dict()
    with pytest.raises(ValueError, match=r"^attention=\['leftmost', 'leftmost'\]; accepted: .* 1 per layer"):
        roundtrip.from_state_dict(cfg, state, case=1, attention=["leftmost", "leftmost"])
    with pytest.raises(ValueError, match="attention='sideways'; accepted: one of"):
        roundtrip.from_state_dict(cfg, state, case=1, attention="sideways")
    with pytest.raises(ValueError, match=r"^spec=.*accepted: None or a ModelSpec of case=1"):
        roundtrip.from_state_dict(cfg, state, case=1, spec=models.ModelSpec(3, 4, 2))
    with pytest.raises(ValueError, match="^the state dict does not fit cfg"):
        roundtrip.from_state_dict(cfg, {k: v for k, v in state.items() if "W_Q" not in k}, case=1)
    with pytest.raises(ValueError, match=r"needs n_ctx=5 and d_vocab=20"):
        roundtrip.from_state_dict(cfg, state, case=2)
    with pytest.raises(ValueError, match="^state is a list"):
        roundtrip.from_state_dict(cfg, list(state.values()), case=1)
    spec_model = models.build_model(1, 4, 4, pos_embed="none", seed=0)
    edited = dict(spec_model.state_dict())
    edited["pos_embed.W_pos"] = torch.ones_like(edited["pos_embed.W_pos"])
    with pytest.raises(ValueError, match="pos_embed.W_pos is not its fixed value"):
        roundtrip.from_state_dict(spec_model.cfg, edited, **roundtrip.extras(spec_model))


def _round_trip_block() -> tuple[str, str]:
    """(page, code) of the docs' python block that shows the round trip."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for code in re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M):
            if "from_state_dict" in code:
                return page.name, code
    pytest.fail("no python block of README.md or docs/*.md shows roundtrip.from_state_dict")


def test_the_docs_round_trip_shows_the_logits_it_gives():
    name, code = _round_trip_block()
    scope: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, name, "exec"), scope)
    assert any("to_vanilla: a plain HookedTransformer" in str(w.message) for w in caught)
    torch.testing.assert_close(scope["plain"](scope["tokens"])[0, -1],
                               torch.tensor([-0.2280, -0.1570, 0.2280, 0.1570]), atol=1e-4, rtol=0)
    torch.testing.assert_close(scope["back"](scope["tokens"])[0, -1], torch.tensor([0.0, -1, 0, 1]),
                               atol=1e-6, rtol=0)
    for value in ("-0.23, -0.16, 0.23, 0.16", "[0, -1, 0, 1]"):
        assert value in code  # the comments say what it gives
