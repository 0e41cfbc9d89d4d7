"""Shared helpers of the experiments/beyond scripts: resumable JSON rows, quiet threads, the
command line of the two law scripts and the look of their figures."""

from __future__ import annotations

import argparse
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


def run_law(name: str, compute, fit, outputs) -> None:
    """The command line of precision_law.py and temperature_law.py.

    ``compute(max_n) -> rows`` measures what HERE/name lacks (resuming from it), ``fit(rows)``
    fits the law, ``outputs(rows, fits)`` writes the CSV and figures and prints the fits.
    ``--max-n N`` stops at n = N (a quick partial run); ``--plot-only`` redraws from HERE/name
    without measuring or rewriting it.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=10_000)
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args()
    polite()
    if args.plot_only:
        rows = load_rows(name)
        fits = json.loads((HERE / name).read_text())["fits"] if rows else {}
    else:
        rows = compute(args.max_n)
        fits = fit(rows)
        save(name, dict(rows=rows, fits=fits))
    outputs(rows, fits)


def style_axes(ax, xlabel: str, ylabel: str | None = None, *, logx: bool = True, logy: bool = True) -> None:
    """Log scales, labels, light grid and a small legend, as every figure of this folder has."""
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def save_figure(fig, name: str) -> None:
    """Tight layout, 120 dpi, HERE/name."""
    fig.tight_layout()
    fig.savefig(HERE / name, dpi=120)
