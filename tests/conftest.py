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
