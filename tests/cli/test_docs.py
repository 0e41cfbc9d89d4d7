"""Every code block in README.md and docs/*.md runs as written, and docs/cli.md is the parsers'.

Python blocks of one file run in order in one namespace (a guide reads as one session); shell
blocks are checked line by line: every ``interp ...`` command parses with the real parser, every
``make X`` names a Makefile target. Blocks in other languages (``text``) are output, not code.
"""

import contextlib
import io
import pathlib
import re
import shlex

import pytest

from interp import cli
from interp.cli import reference

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(page: pathlib.Path, languages: tuple[str, ...]) -> list[str]:
    return [code for lang, code in FENCE.findall(page.read_text()) if lang in languages]


def test_the_cli_reference_is_in_sync_with_the_parsers():
    assert (ROOT / "docs" / "cli.md").read_text() == reference.reference(), (
        "docs/cli.md is stale: run `python -m interp.cli.reference`")


def test_the_cli_reference_fails_when_a_flag_changes(monkeypatch):
    """The sync test can fail: a flag added to one command changes the reference."""
    module = __import__(cli.COMMANDS["verify"][0], fromlist=["add_arguments"])
    original = module.add_arguments

    def more(parser):
        original(parser)
        parser.add_argument("--brand-new-flag")
    monkeypatch.setattr(module, "add_arguments", more)
    assert "--brand-new-flag" in reference.reference()
    assert (ROOT / "docs" / "cli.md").read_text() != reference.reference()


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, ("python",))], ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block that writes files writes them here
    scope: dict = {"__name__": "__docs__"}
    for i, code in enumerate(blocks(page, ("python",))):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{page.name} block {i + 1}", "exec"), scope)


def _commands(code: str) -> list[list[str]]:
    lines = code.replace("\\\n", " ").splitlines()
    return [shlex.split(line.split("#", 1)[0]) for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, ("bash", "sh", "shell"))], ids=lambda p: p.name)
def test_shell_blocks_name_real_commands_and_flags(page):
    makefile = (ROOT / "Makefile").read_text()
    for code in blocks(page, ("bash", "sh", "shell")):
        for words in _commands(code):
            words = [w for w in words if "=" not in w or w.startswith("-")]  # drop VAR=value prefixes
            if words[:1] == ["make"]:
                for target in words[1:]:
                    assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{page.name}: make {target}"
            elif words[:1] == ["interp"] or words[:3] == ["python", "-m", "interp"]:
                argv = words[1:] if words[0] == "interp" else words[3:]
                assert argv and argv[0] in cli.COMMANDS, f"{page.name}: interp {argv[:1]}"
                parser = cli._parser(argv[0])
                try:
                    parser.parse_args(argv)
                except SystemExit as e:  # argparse refuses an unknown flag or a bad value
                    pytest.fail(f"{page.name}: `interp {' '.join(argv)}` does not parse ({e.code})")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_files_and_links_exist(page):
    text = page.read_text()
    for path in set(re.findall(r"`((?:experiments|interp|tests|docs)/[\w./-]+)`", text)):
        assert (ROOT / path).exists(), f"{page.name}: {path}"
    for link in set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)):
        assert (page.parent / link).exists(), f"{page.name}: link {link}"
