import os
import warnings

import pytest
import torch


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


def pytest_configure(config):
    # Only TransformerLens's own HookedTransformer deprecation warning is silenced (pyproject).
    warnings.filterwarnings("default")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs one worker per core (xdist):
        torch.set_num_threads(1)  # each on one intra-op thread, or the workers' threads contend


@pytest.fixture
def assert_drawn():
    """Check that a PNG file is a drawn figure, not an empty or blank canvas: it decodes, is at
    least ``min_px`` on each side, and has ink (pixel spread and several distinct colours)."""

    def check(path, *, min_px: int = 200, min_colors: int = 8) -> None:
        import numpy as np
        from matplotlib.image import imread

        img = imread(path)
        assert img.ndim == 3 and min(img.shape[:2]) >= min_px, (path, img.shape)
        rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
        colors = len(np.unique(rgb, axis=0))
        assert img[..., :3].std() > 0.02 and colors >= min_colors, (path, float(img[..., :3].std()), colors)

    return check


@pytest.fixture
def probe_json():
    """``probe(model, folder, *flags) -> dict``: the model saved as a checkpoint in ``folder`` and
    read back through ``interp probe CKPT --json`` (batch 256), as a user would."""
    import contextlib
    import io
    import json

    from interp import cli
    from interp.training import checkpoints

    def probe(model, folder, *flags) -> dict:
        path = checkpoints.save(model, folder / "ckpt")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert cli.main(["probe", str(path), "--json", "--batch-size", "256", *flags]) == 0
        return json.loads(buf.getvalue())

    return probe
