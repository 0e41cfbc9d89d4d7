"""The sweep explorer: one offline page whose seed sections render in real headless Chromium.

The store holds three seeds of one config whose mechanisms are known by how they were made (not
by the code under test): seed 0 is the paper's construction, seed 1 the construction with W_Q and
W_O negated (attention avoids the match and OV writes minus the value: inverted), seed 2 a random
initialisation (no mechanism). Accuracies are measured, not invented.
"""

import html
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
import torch

from interp.inspect.mechanism import labels
from interp.core import constructions, models
from interp.inspect.studies import analysis, explore
from interp.inspect.tools import hooks, viz
from interp.training import checkpoints
from interp.sweeps import store
from interp.training.trainer import TrainConfig
from interp.training.runs import evaluate_accuracy  # the stored accuracy, as training measures it

CASE, N, INPUTS = 3, 10, 2  # n >= 10: the circle test has power (min_n_circle)
MECHANISM = {0: "construction", 1: "inverted", 2: "none"}
GROUP = f"case {CASE}, n={N}, d_token=2, 1 layer, PE none"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def make_store(root, seeds=(0, 1, 2)):
    """A sweep folder ``root`` whose store holds the seeds of the module docstring."""
    with store.Store(root / "results" / "store.sqlite") as db:
        for seed in seeds:
            cfg = TrainConfig(case=CASE, n=N, d_token=2, pos_embed="none", seed=seed)
            if seed < 2:
                model = constructions.build(CASE, N)
                if seed == 1:
                    with torch.no_grad():
                        model.blocks[0].attn.W_Q.neg_(), model.blocks[0].attn.W_O.neg_()
            else:
                model = models.build_model(CASE, N, 2, pos_embed="none", seed=seed)
            acc = evaluate_accuracy(model, cfg)
            path = checkpoints.save(model, root / "results" / "checkpoints" / cfg.name(), cfg)
            db.put(store.RunRecord(name=cfg.name(), sweep="tiny", config=cfg.to_dict(),
                                   seed=seed, status="ok", accuracy=acc), path)
    return root


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = make_store(tmp_path_factory.mktemp("tiny"))
    index = explore.write_explorer(root, root / "explore", inputs=INPUTS, batch_size=64)
    ids = {seed: explore.seed_id(TrainConfig(case=CASE, n=N, d_token=2, pos_embed="none",
                                             seed=seed).name()) for seed in MECHANISM}
    return root, index, ids


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_page_is_offline_and_shares_one_circuitsvis_script(written):
    _, index, ids = written
    out = index.parent
    text = index.read_text()
    parser = _Tags()
    parser.feed(text)
    scripts = [a["src"] for t, a in parser.tags if t == "script" and "src" in a]
    assert scripts == [viz.CIRCUITSVIS_JS]  # referenced once, by a relative path
    assert "var CircuitsVis" not in text and len(text) < 200_000  # the bundle is not inlined
    assert [p.name for p in out.rglob("*.js")] == [viz.CIRCUITSVIS_JS]
    assert "var CircuitsVis" in (out / viz.CIRCUITSVIS_JS).read_text()
    for tag, attrs in parser.tags:  # nothing from elsewhere; every image is a written file
        for key in ("src", "href"):
            assert not re.match(r"\s*([a-z]+:|//)", attrs.get(key) or ""), (tag, attrs)
        if tag == "img":
            assert (out / attrs["src"]).is_file(), attrs["src"]
    assert text.count('class="cv-props"') == INPUTS * len(MECHANISM)
    for seed, sid in ids.items():
        assert f'<option value="{sid}">seed {seed} (' in text
        assert (out / "seeds" / sid / "circuits.png").is_file()


def test_table_names_each_seeds_mechanism(written, assert_drawn):
    _, index, ids = written
    text = index.read_text()
    for seed, sid in ids.items():
        row = re.search(rf'<tr data-seed="{sid}">(.*?)</tr>', text).group(1)
        cells = re.findall(r"<td>(.*?)</td>", row)
        assert cells[3:5] == [("success" if seed == 0 else "failed"), MECHANISM[seed]], cells
    for name in ("violins.png", "measures.png", f"seeds/{ids[1]}/circuits.png"):
        assert_drawn(index.parent / name)


def _sections(dom: str) -> dict[str, tuple[bool, str]]:
    """seed id -> (hidden, inner HTML) of every seed section of a dumped DOM."""
    found = {}
    for m in re.finditer(r"<section ([^>]*)>(.*?)</section>", dom, re.DOTALL):
        sid = re.search(r'data-seed="([\w-]+)"', m.group(1)).group(1)
        found[sid] = (re.search(r"\bhidden\b", m.group(1)) is not None, m.group(2))
    return found


def _chromium(index, fragment: str, tmp_path, script: str = "") -> str:
    """The DOM of ``index#fragment`` after headless Chromium ran its scripts (1280 x 1000
    window); ``script`` (run 1 s after the page's load event, as a user would act) goes into a
    copy of the page beside it, so the page's own code handles what the script does."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed: apt-get install -y chromium (make test installs it)"
    page = index
    if script:
        page = index.with_name(f"test-{tmp_path.name}.html")
        page.write_text(index.read_text().replace(
            "</body>", '<script>window.addEventListener("load", function () { setTimeout('
            f"function () {{ {script} }}, 1000); }});</script></body>"))
    try:
        return subprocess.run(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1000",
             "--virtual-time-budget=5000", "--dump-dom", f"{page.as_uri()}#{fragment}"],
            check=True, capture_output=True, timeout=120, text=True,
        ).stdout
    finally:
        if page != index:
            page.unlink()


#: written into the DOM by the test's script: the chosen section's rendered height in pixels
MEASURE = ('document.body.dataset.height = String(Math.round(document.querySelector('
           '"section.seed:not([hidden])").getBoundingClientRect().height));')


def test_selecting_a_seed_shows_a_compact_view_that_fits_a_screen_in_chromium(written, tmp_path):
    _, index, ids = written
    chosen = ids[1]  # not the first seed: the page must follow the URL's #seed=
    dom = _chromium(index, f"seed={chosen}", tmp_path, MEASURE)
    sections = _sections(dom)
    assert set(sections) == set(ids.values())
    hidden, inner = sections[chosen]
    assert not hidden, "the chosen seed's section is still hidden"
    assert "<b>mechanism: inverted</b>" in inner and labels.MECHANISMS["inverted"] in inner
    assert inner.count('<td class="what"') == INPUTS  # the compact view: one line per input
    assert "<canvas" not in inner and re.search(r'<div class="full" hidden', inner)
    height = int(re.search(r'data-height="(\d+)"', dom).group(1))
    assert 200 < height < 1000, f"the seed's section is {height} px tall: more than a screen"
    for sid, (hidden, inner) in sections.items():
        if sid != chosen:  # other seeds stay hidden and unrendered
            assert hidden and "<canvas" not in inner and "data-rendered" not in inner, sid
    assert re.search(rf'<tr data-seed="{chosen}" class="selected">', dom)
    assert not re.search(r'<p id="hash-note"[^>]*>[^<]', dom)  # a known seed: no note


def test_show_all_opens_the_rendered_circuitsvis_views_in_chromium(written, tmp_path):
    _, index, ids = written
    chosen = ids[1]
    click = f'document.querySelector("#seed-{chosen} button.show-all").click();'
    dom = _chromium(index, f"seed={chosen}", tmp_path, click)
    _, inner = _sections(dom)[chosen]
    assert not re.search(r'<div class="full" hidden', inner), "the full views are still hidden"
    assert re.search(r'<button[^>]*aria-expanded="true"[^>]*>hide the full attention views<', inner)
    for k in range(INPUTS):  # circuitsvis ran: each view div holds its rendered canvases
        view = re.search(rf'<div id="cv-{chosen}-{k}"[^>]*>(.*?)</div>\s*<script', inner, re.DOTALL)
        assert view and "<canvas" in view.group(1), f"view {k} of the chosen seed not rendered"
    for sid, (_, other) in _sections(dom).items():
        if sid != chosen:
            assert "<canvas" not in other, sid


@pytest.mark.parametrize("fragment, said", [
    ("seed=bogus", "No seed named 'bogus' in this sweep; showing the first seed"),
    ("group=2", "The address asks for '#group=2', which this page does not know"),
])
def test_an_unknown_seed_in_the_address_is_said_on_the_page(written, tmp_path, fragment, said):
    _, index, ids = written
    dom = _chromium(index, fragment, tmp_path)
    note = re.search(r'<p id="hash-note"([^>]*)>(.*?)</p>', dom, re.DOTALL)
    assert note and "hidden" not in note.group(1), "no note on the page"
    assert said in html.unescape(note.group(2)), note.group(2)
    first = ids[0]  # the sweep's first seed is shown instead, and the note names it
    assert f"showing the first seed, {GROUP}, seed 0 (run {first})." in note.group(2)
    assert not _sections(dom)[first][0]


@pytest.mark.parametrize("form", [".", "./", "results", "results/", "results/store.sqlite",
                                  "{root}", "{root}/", "{root}/results", "{root}/results/store.sqlite"])
def test_the_sweep_is_named_whatever_form_its_path_takes(written, monkeypatch, form):
    root, _, _ = written
    monkeypatch.chdir(root)
    path = form.format(root=root)
    assert analysis.sweep_name(explore.runs(path), analysis.find_store(path)) == "tiny"


def test_the_page_title_names_the_sweep_under_make_runs_relative_path(written, monkeypatch):
    root, _, ids = written
    monkeypatch.chdir(root)  # `make run` passes results/store.sqlite, relative to the repo
    index = explore.write_explorer("results/store.sqlite", "page", where={"seed": "0"}, inputs=1,
                                   batch_size=32)
    text = (root / index).read_text()
    assert re.search(r"<title>(.*?)</title>", text).group(1) == "Sweep explorer: tiny"
    assert re.search(r"<h1>(.*?)</h1>", text).group(1) == "Sweep explorer: tiny"


def test_bad_stores_and_arguments_fail_before_any_work(tmp_path, written):
    root, _, _ = written
    out = tmp_path / "never"
    with pytest.raises(ValueError, match="no results store"):
        explore.write_explorer(tmp_path / "nowhere", out)
    with store.Store(tmp_path / "empty" / "store.sqlite"):
        pass
    with pytest.raises(ValueError, match="holds no runs"):
        explore.write_explorer(tmp_path / "empty" / "store.sqlite", out)
    with pytest.raises(ValueError, match="no finished runs with a checkpoint"):
        explore.write_explorer(root, out, where={"d_token": "99"})
    with pytest.raises(ValueError, match="where names 'width'"):
        explore.write_explorer(root, out, where={"width": "3"})
    with pytest.raises(ValueError, match="inputs=0"):
        explore.write_explorer(root, out, inputs=0)
    assert not out.exists()
