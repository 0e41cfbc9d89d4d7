"""The guides read as guides (issue 45, item 4; STYLE item 14: what you can do first, short
sentences, numbers in tables). Checked on every page of ``docs/`` but ``cli.md`` (generated from
the parsers) and on the README:

1. **A table cell fits three lines.** A cell's text as written, wrapped at 100 characters (the
   guides' line width) by ``textwrap.wrap``, is at most three lines.
2. **A guide opens with an example.** Each page of ``docs/`` has a ``python`` block (run by
   ``test_docs.py``) or a ``bash`` block of ``interp``/``make`` commands (parsed there) before its
   first ``##`` heading.
3. **Counts sit in tables, keys out of prose.** Every claim ``experiments/readings/claims.py``
   says a guide quotes is quoted inside one table row of that guide, and no sentence names a
   claim key (``claims.py`` followed by a key, or a key in brackets).
4. **Sentences are short.** No sentence of prose (outside code blocks, tables and headings) has
   more than ``MAX_WORDS`` words, split at ``.``, ``?`` or ``!`` followed by a space.
"""

import ast
import importlib.util
import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")
PAGES = [ROOT / "README.md", *GUIDES]
WIDTH, LINES = 100, 3
MAX_WORDS = 40
FENCE = re.compile(r"^```(\w*)\n.*?^```\n?", re.S | re.M)


def flat(text: str) -> str:
    return " ".join(text.split())


def cells(text: str) -> list[str]:
    """The cells of every table row (code blocks left out); a ``|`` inside backticks is no border."""
    out = []
    for line in FENCE.sub("", text).splitlines():
        if line.startswith("|"):
            out += [c.strip() for c in re.split(r"(?<!\\)\|(?=(?:[^`]*`[^`]*`)*[^`]*$)", line.strip().strip("|"))]
    return out


def prose(text: str) -> list[str]:
    """The page's paragraphs of prose (a list item is a paragraph of its own): no code blocks,
    tables, headings or the guides' link bar."""
    lines = [line for line in FENCE.sub("\n", text).splitlines()
             if not line.startswith(("|", "#", "[README]"))]
    return [flat(p) for p in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.) )", "\n".join(lines)) if p.strip()]


def sentences(paragraph: str) -> list[str]:
    return re.split(r"(?<=[.?!])\s+(?=[A-Z`*(\[])", paragraph)


@pytest.fixture(scope="module")
def claims():
    spec = importlib.util.spec_from_file_location("claims", ROOT / "experiments" / "readings" / "claims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.claims()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_table_cell_fits_three_lines(page):
    long = [c[:60] for c in cells(page.read_text()) if len(textwrap.wrap(c, WIDTH)) > LINES]
    assert long == [], f"{page.name}: cells longer than {LINES} lines of {WIDTH}: {long}"


def test_the_cell_rule_can_fail():
    row = "| a | " + "word " * 70 + "|"
    assert len(textwrap.wrap(cells(row)[1], WIDTH)) > LINES
    assert cells("| `a|b` | c |") == ["`a|b`", "c"]


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.name)
def test_each_guide_opens_with_an_example(page):
    text = page.read_text()
    first_section = re.split(r"^## ", text, maxsplit=1, flags=re.M)[0]
    examples = [lang for lang, code in re.findall(r"^```(\w*)\n(.*?)^```", first_section, re.S | re.M)
                if lang == "python" or (lang == "bash" and re.search(r"^(interp|make|\.venv/bin/interp) ", code, re.M))]
    assert examples, f"{page.name}: no python block or interp command before its first ## heading"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quoted_counts_sit_in_tables_and_prose_names_no_claim_key(page, claims):
    name = page.relative_to(ROOT).as_posix()
    text = page.read_text()
    rows = [flat(line) for line in FENCE.sub("", text).splitlines() if line.startswith("|")]
    outside = [c.key for c in claims if name in c.where and not any(flat(c.text) in row for row in rows)]
    assert outside == [], f"{name}: claims quoted outside a table row: {outside}"
    keys = {c.key for c in claims} | {"a-*", "c-*", "bench-*", "tables-*"}
    said = [(k, s[:80]) for p in prose(text) for s in sentences(p) for k in keys
            if re.search(rf"claims\.py`?,? (?:lines? |keys? )?{re.escape(k)}(?![\w-])|\[{re.escape(k)}\]", s)]
    assert said == [], f"{name}: claim keys in prose: {said}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_sentences_are_short(page):
    long = [s[:80] for p in prose(page.read_text()) for s in sentences(p) if len(s.split()) > MAX_WORDS]
    assert long == [], f"{page.name}: sentences over {MAX_WORDS} words: {long}"


def test_the_prose_rules_can_fail():
    text = "# T\n\nThe count is 3 (`claims.py` t1). " + "word " * (MAX_WORDS + 1) + ".\n\n| a | b |\n"
    assert [s for p in prose(text) for s in sentences(p) if len(s.split()) > MAX_WORDS]
    assert re.search(r"claims\.py`?,? t1(?![\w-])", prose(text)[0])
    assert prose(text)[0].startswith("The count") and "| a" not in " ".join(prose(text))


def test_where_to_add_a_presentation_names_what_an_outside_presentation_needs():
    """The README's "Where to add things" rows for a presentation name what the presentation
    defined outside interp in ``tests/core/test_external_task.py`` needs (issue 45, items 3-4):
    its layout family, every method its class defines, the registration call, the sweep's
    ``configs.py`` and the optional construction's three places."""
    source = (ROOT / "tests" / "core" / "test_external_task.py").read_text()
    cls = next(node for node in ast.parse(source).body if isinstance(node, ast.ClassDef) and node.name == "ValueFirst")
    methods = [f.name for f in cls.body if isinstance(f, ast.FunctionDef)]
    family = cls.bases[0].attr  # interp.tasks.<family>
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Where to add things", 1)[1]
    rows = "\n".join(line for line in table.splitlines()
                     if line.startswith(("| a presentation", "| ... ")))
    assert methods and all(f"`{m}`" in rows for m in methods), (methods, rows)
    assert f"`{family}`" in rows
    assert "interp.tasks.register(" in source and "`interp.tasks.register(task)`" in rows
    assert "configs.py" in source and "`configs.py`" in rows
    for place in ("`Paper(...)`", "`@tasks.register_builder`", "`experiments/precision/measure.py`"):
        assert place in rows, place
