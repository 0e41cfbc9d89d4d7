"""Attention HTML (offline, rendered in real headless Chromium) and the matplotlib figures."""

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from interp.inspect.mechanism import labels
from interp.core import constructions, models
from interp.inspect.tools import hooks, viz

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.inline = [], []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data):
        if self._in_script:
            self.inline.append(data)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed: apt-get install -y chromium (make test installs it)"
    return exe


def dump_dom(url: str, tmp_path) -> str:
    """The DOM after the page's scripts ran, as headless Chromium serialises it."""
    out = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=5000", "--dump-dom", url],
        check=True, capture_output=True, timeout=120, text=True,
    )
    return out.stdout


def decode_case3(tokens, n):
    """Plain-Python reading of case-3 inputs: per input (i*, f(i*), position of the slot k_j = i*)."""
    rows = []
    for row in tokens.tolist():
        pairs, target = row[:n], row[n] - n * n
        j = [t // n for t in pairs].index(target)
        rows.append((target, pairs[j] % n, j))
    return rows


@pytest.fixture(scope="module")
def case3_html(tmp_path_factory):
    path = tmp_path_factory.mktemp("viz") / "attention.html"
    model = constructions.build(3, 6)
    tokens = hooks.sample_inputs(3, 6, 3, seed=0)
    viz.save_attention_html(path, model, tokens, mechanism="construction")
    return path, tokens


def test_attention_html_loads_no_remote_script(case3_html):
    path, _ = case3_html
    text = path.read_text()
    parser = _Scripts()
    parser.feed(text)
    scripts = [attrs for tag, attrs in parser.tags if tag == "script"]
    assert scripts, "the page has no script at all"
    assert all("src" not in attrs for attrs in scripts)  # everything inline
    for tag, attrs in parser.tags:  # no stylesheet, image or frame from elsewhere either
        for key in ("src", "href"):
            assert not re.match(r"\s*(https?:)?//", attrs.get(key) or ""), (tag, attrs)
    code = "".join(parser.inline)
    assert "CircuitsVis.render(" in code and len(code) > 100_000  # the bundled iife.js is inlined
    assert not re.search(r"""(import\s*\(?|from)\s*["']https?://""", code)
    assert "unpkg.com" not in text


def test_attention_html_carries_the_pattern_and_labels(case3_html):
    path, tokens = case3_html
    text = path.read_text()
    labels = viz.token_labels(3, 6, tokens[:1])
    assert labels[-1].startswith("i*=") and all(f'"{lab}"' in text for lab in labels)
    assert '"maskUpperTri": false' in text


def test_attention_html_states_each_input_and_the_mechanism(case3_html):
    path, tokens = case3_html
    text = path.read_text()
    assert "<b>mechanism: construction</b>" in text and labels.MECHANISMS["construction"] in text
    for k, (target, answer, pos) in enumerate(decode_case3(tokens, 6)):
        assert f"<h4>input {k + 1}</h4>" in text
        assert f"target i* = {target}, answer f(i*) = {answer}, model answers <span>{answer}</span>" in text
        assert f"construction attends position {pos} " in text
        assert f"last layer attends position {pos} " in text  # the construction's hard attention
    # the construction's cell is also the model's argmax, once per input, in token and weight rows
    assert text.count('<td class="construction argmax">') == 2 * len(tokens)
    assert text.count('class="cv-props"') == 3


def test_attention_html_renders_in_headless_chromium(case3_html, tmp_path):
    path, _ = case3_html
    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=900,900",
         "--virtual-time-budget=5000", f"--screenshot={shot}", path.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    from matplotlib.image import imread

    img = imread(shot)[..., :3]  # floats in [0, 1]
    assert img.std() > 0.05, "the screenshot is blank"
    # circuitsvis paints attention weight 1 in saturated blue: only the rendered heatmap has it
    blue = (img[..., 2] > 0.8) & (img[..., 0] < 0.3) & (img[..., 1] < 0.3)
    assert blue.sum() > 2000, f"no rendered attention heatmap ({blue.sum()} blue pixels)"


def inverted(case, n):
    """The construction with W_Q and W_O negated: attention avoids the match, OV writes minus
    the value (a hand-made inverted circuit)."""
    import torch

    model = constructions.build(case, n)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.neg_(), model.blocks[0].attn.W_O.neg_()
    return model


def test_side_by_side_shares_one_script_and_renders_every_view(tmp_path):
    views = [("construction", constructions.build(3, 6), "construction"),
             ("negated", inverted(3, 6), "inverted")]
    page = viz.save_side_by_side_html(tmp_path / "side.html", views, inputs=2,
                                      script_src=viz.CIRCUITSVIS_JS)
    bundle = tmp_path / viz.CIRCUITSVIS_JS
    assert bundle.stat().st_size > 1_000_000 and "var CircuitsVis" in bundle.read_text()
    text = page.read_text()
    parser = _Scripts()
    parser.feed(text)
    srcs = [attrs["src"] for tag, attrs in parser.tags if tag == "script" and "src" in attrs]
    assert srcs == ["circuitsvis.js"] and len(text) < 100_000  # referenced, not inlined
    before = bundle.stat().st_mtime_ns
    viz.save_attention_html(tmp_path / "one.html", views[0][1], script_src="circuitsvis.js")
    assert bundle.stat().st_mtime_ns == before  # written once, kept while identical
    dom = dump_dom(page.as_uri(), tmp_path)
    for m in ("m0", "m1"):
        for k in range(2):
            view = re.search(rf'<div id="cv-{m}-{k}"[^>]*>(.*?)</div>\s*<script', dom, re.DOTALL)
            assert view and "<canvas" in view.group(1), f"view cv-{m}-{k} not rendered"
    assert "<b>mechanism: construction</b>" in dom and "<b>mechanism: inverted</b>" in dom
    # the negated model attends away from the match: its argmax is never the construction's cell
    right = dom[dom.index("<h3>negated</h3>"):]
    assert '<td class="construction argmax">' not in right and right.count('class="argmax"') == 4


@pytest.mark.parametrize("kw, match", [
    ({"script_src": "https://unpkg.com/circuitsvis/dist/cdn/iife.js"}, "nothing remote"),
    ({"script_src": "//cdn.example/cv.js"}, "nothing remote"),
    ({"mechanism": "backwards"}, "mechanism='backwards'; accepted"),
    ({"inputs": 0}, "inputs=0; accepted: an integer in 1..32"),
])
def test_attention_html_rejects_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        viz.attention_html(constructions.build(3, 6), **kw)
    with pytest.raises(ValueError, match="non-empty list"):
        viz.side_by_side_html([])


@pytest.mark.parametrize("case", [1, 5])
def test_write_all_writes_every_file(case, tmp_path, assert_drawn):
    model = constructions.build(case, 6)
    paths = viz.write_all(model, tmp_path / "out")
    assert set(paths) == {"attention", "circles", "circuits", "spectra"}
    assert "AttentionPatterns" in paths["attention"].read_text()  # the circuitsvis view (rendered in Chromium above)
    for name in ("circles", "circuits", "spectra"):
        assert_drawn(paths[name])


def test_figures_of_a_trained_shape_model_and_violins(tmp_path, assert_drawn):
    import pandas as pd

    model = models.build_model(3, 8, 4, pos_embed="none", seed=0)
    fig = viz.plot_circles(model)
    assert len(fig.axes) == 2  # key table and value table
    df = pd.DataFrame(dict(d_token=[4] * 5 + [8] * 5, accuracy=np.r_[np.linspace(0, 1, 5), [1.0] * 5]))
    fig = viz.plot_violins(df)
    fig.savefig(tmp_path / "v.png")
    assert_drawn(tmp_path / "v.png")
