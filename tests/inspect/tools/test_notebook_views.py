"""interp.inspect.tools.notebook's views: each shows as two outputs, circuitsvis's HTML and a PNG of
the same attention patterns (what a static renderer such as GitHub shows). The PNG is decoded
with Pillow, not by the code that wrote it, and compared with the patterns read through hooks."""

import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from interp.core import attention, constructions
from interp.inspect.tools import hooks, notebook

#: the most a view's picture may weigh, in bytes (the brief of issue 26: small committed outputs)
MAX_PNG = 60_000


def _pixels(png: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGB")).astype(int)  # [height, width, 3]


def _near(pixels: np.ndarray, rgb, tol: int = 8) -> int:
    """How many pixels are within ``tol`` of ``rgb`` (0-255) in every channel."""
    return int((np.abs(pixels - np.asarray(rgb)).max(-1) <= tol).sum())


def _level(weight: float) -> tuple:
    """The colour the heatmaps give ``weight`` (matplotlib's Blues in notebook._CMAP's steps)."""
    from matplotlib import colormaps

    name, steps = notebook._CMAP
    return tuple(round(255 * c) for c in colormaps[name].resampled(steps)(weight)[:3])


def _uniform(case: int, n: int):
    """The construction with softmax attention and zero queries: every score 0, so every query
    spreads its attention evenly over the positions (checked below through hooks)."""
    model = constructions.build(case, n)
    attention.remove_attention(model)
    for block in model.blocks:
        block.attn.W_Q.data.zero_()
        block.attn.b_Q.data.zero_()
    return model


def test_a_view_shows_its_html_then_its_picture_through_ipython():
    """What Jupyter does with a cell's last value: IPython calls ``_ipython_display_``, which
    publishes two outputs (and the display hook prints nothing of its own)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    view = notebook.attention(constructions.build(5, 6), inputs=2, title="case 5", mechanism="construction")
    shell = InteractiveShell.instance()
    shell.user_ns["view"] = view
    with capture_output() as captured:
        shell.run_cell("view")
    assert [sorted(o.data) for o in captured.outputs] == [["text/html", "text/plain"], ["image/png", "text/plain"]]
    html_out, png_out = captured.outputs
    assert html_out.data["text/html"] == view._repr_html_() and "cv-props" in html_out.data["text/html"]
    png = base64.b64decode(png_out.data["image/png"])
    assert png == view.png and png_out.data["text/plain"] == "<attention views: case 5, n = 6 (PNG)>"
    assert "attention views" not in captured.stdout  # no execute result of its own


@pytest.mark.parametrize("make", [
    lambda: notebook.attention(constructions.build(2, 8), inputs=3),
    lambda: notebook.side_by_side([("a", constructions.build(5, 10), "construction"),
                                   ("b", _uniform(5, 10), None)], inputs=2),
], ids=["one model, 3 inputs", "two 2-layer models, 2 inputs"])
def test_the_picture_is_a_small_png_that_is_not_blank(make):
    view = make()
    assert len(view.png) <= MAX_PNG, len(view.png)
    pixels = _pixels(view.png)
    height, width, _ = pixels.shape
    assert 150 <= height <= 2000 and 300 <= width <= 2000, (height, width)
    white = _near(pixels, (255, 255, 255), tol=2)
    assert 0.2 < white / (height * width) < 0.98  # a picture, not a blank page
    assert _near(pixels, _level(0.95)) > 0  # the darkest weight is drawn (at least in the colour bar)


def test_the_pictures_pixels_follow_the_attention_pattern():
    """Two models that differ only in where they attend: the construction's leftmost hard
    attention (every row one-hot) and the same weights with zero queries (every row uniform).
    Their pictures differ as the patterns do: the one-hot model has n + 1 more cells in the
    darkest colour, the uniform one more cells in the colour of weight 1/(n + 1). A change that
    leaves the patterns alone (the unembedding doubled) leaves the picture's bytes alone."""
    case, n = 2, 6
    tokens = hooks.sample_inputs(case, n, 1, seed=3)
    onehot, uniform = constructions.build(case, n), _uniform(case, n)
    p1, p0 = hooks.attention_patterns(onehot, tokens)[0, 0], hooks.attention_patterns(uniform, tokens)[0, 0]
    assert torch.equal(p1.max(-1).values, torch.ones(n + 1))  # the reference: patterns by hooks
    assert torch.allclose(p0, torch.full((n + 1, n + 1), 1 / (n + 1)))

    a, b = _pixels(notebook.attention_png([("", onehot, tokens)])), _pixels(notebook.attention_png([("", uniform, tokens)]))
    assert a.shape == b.shape and (a != b).any()
    dark = _near(a, _level(0.95)) - _near(b, _level(0.95))
    light = _near(b, _level(1 / (n + 1))) - _near(a, _level(1 / (n + 1)))
    # a heatmap cell of 7 positions is about 24 x 24 pixels here (the panel is 2.4 in at 80 dpi):
    # at least 300 pixels per cell that changed colour
    assert dark >= (n + 1) * 300, dark
    assert light >= (n + 1) * n * 300, light

    doubled = constructions.build(case, n)
    doubled.W_U.data.mul_(2.0)
    assert notebook.attention_png([("", doubled, tokens)]) == notebook.attention_png([("", onehot, tokens)])


def test_bad_views_are_refused_before_any_work():
    model = constructions.build(5, 6)
    with pytest.raises(ValueError, match="inputs=0"):
        notebook.attention(model, inputs=0)
    with pytest.raises(ValueError, match="mechanism='backwards'"):
        notebook.attention(model, mechanism="backwards")
