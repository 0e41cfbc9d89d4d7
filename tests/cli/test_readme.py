"""The README's code runs as written and every command and file it names exists."""

import pathlib
import re

import torch

from interp import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_first_python_example_runs_and_shows_what_it_says():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    cache, logits = scope["cache"], scope["logits"]
    assert scope["model"].to_str_tokens(scope["tokens"][0]) == ["(0,2)", "(2,3)", "(1,2)", "(3,1)", "i*=2"]
    s = 2**-0.5
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"][0, 0, -1],
                               torch.tensor([-s, s, 0, 0, s]), atol=1e-6, rtol=0)
    assert cache["blocks.0.attn.hook_pattern"][0, 0, -1].tolist() == [0, 1, 0, 0, 0]
    torch.testing.assert_close(logits[0, -1], torch.tensor([0.0, -1, 0, 1]), atol=1e-6, rtol=0)
    assert scope["dla"]["per_position"][0].tolist() == [0, 1, 0, 0, 0]


def test_named_commands_exist():
    named = set(re.findall(r"`interp ([a-z0-9-]+)", README))
    assert named and named <= set(cli.COMMANDS), named - set(cli.COMMANDS)
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"(?:^|`)make (\w+)", README, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_named_files_exist():
    for path in set(re.findall(r"`((?:experiments|interp|tests)/[\w./-]+)`", README)):
        assert (ROOT / path).exists(), path
