"""Shared helpers of the experiments/beyond scripts: resumable JSON rows, quiet threads."""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_rows(name: str) -> list[dict]:
    path = HERE / name
    return json.loads(path.read_text())["rows"] if path.exists() else []


def save(name: str, payload: dict) -> None:
    """Write HERE/name atomically (a killed run keeps the previous file)."""
    path = HERE / name
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


def polite() -> None:
    """One thread: other jobs share the machine."""
    import torch

    torch.set_num_threads(1)
