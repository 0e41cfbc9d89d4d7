"""Attention HTML (offline, rendered in real headless Chromium) and the matplotlib figures."""

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from interp.core import constructions, models
from interp.inspect import hooks, viz

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


@pytest.fixture(scope="module")
def case3_html(tmp_path_factory):
    path = tmp_path_factory.mktemp("viz") / "attention.html"
    model = constructions.build(3, 6)
    tokens = hooks.sample_inputs(3, 6, 1, seed=0)
    viz.save_attention_html(path, model, 3, 6, tokens)
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
    labels = viz.token_labels(3, 6, tokens)
    assert labels[-1].startswith("i*=") and all(f'"{lab}"' in text for lab in labels)
    assert '"maskUpperTri": false' in text


def test_attention_html_renders_in_headless_chromium(case3_html, tmp_path):
    path, _ = case3_html
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed: apt-get install -y chromium (make test installs it)"
    shot = tmp_path / "shot.png"
    subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=900,900",
         "--virtual-time-budget=5000", f"--screenshot={shot}", path.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    from matplotlib.image import imread

    img = imread(shot)[..., :3]  # floats in [0, 1]
    assert img.std() > 0.05, "the screenshot is blank"
    # circuitsvis paints attention weight 1 in saturated blue: only the rendered heatmap has it
    blue = (img[..., 2] > 0.8) & (img[..., 0] < 0.3) & (img[..., 1] < 0.3)
    assert blue.sum() > 2000, f"no rendered attention heatmap ({blue.sum()} blue pixels)"


@pytest.mark.parametrize("case", [1, 5])
def test_write_all_writes_every_file(case, tmp_path, assert_drawn):
    model = constructions.build(case, 6)
    paths = viz.write_all(model, case, 6, tmp_path / "out")
    assert set(paths) == {"attention", "circles", "circuits", "spectra"}
    assert "AttentionPatterns" in paths["attention"].read_text()  # the circuitsvis view (rendered in Chromium above)
    for name in ("circles", "circuits", "spectra"):
        assert_drawn(paths[name])


def test_figures_of_a_trained_shape_model_and_violins(tmp_path, assert_drawn):
    import pandas as pd

    model = models.build_model(3, 8, 4, pos_embed="none", seed=0)
    fig = viz.plot_circles(model, 3, 8)
    assert len(fig.axes) == 2  # key table and value table
    df = pd.DataFrame(dict(d_token=[4] * 5 + [8] * 5, accuracy=np.r_[np.linspace(0, 1, 5), [1.0] * 5]))
    fig = viz.plot_violins(df)
    fig.savefig(tmp_path / "v.png")
    assert_drawn(tmp_path / "v.png")
