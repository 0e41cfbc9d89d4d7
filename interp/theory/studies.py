"""Helpers of the experiment scripts of the theory studies (``experiments/precision-law``,
``temperature-law``, ``counterexamples``, ``theorem35``, ``trained-models``): resumable JSON rows
in the study's folder, one thread, the law scripts' command line and the look of the figures.

A script makes ``study = Study(Path(__file__).resolve().parent)`` and writes only there.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from interp.training.files import save_figure, write_file


def polite() -> None:
    """One thread: other jobs share the machine."""
    import torch

    torch.set_num_threads(1)


def style_axes(ax, xlabel: str, ylabel: str | None = None, *, logx: bool = True, logy: bool = True) -> None:
    """Log scales, labels, light grid and a small legend, as every figure of the studies has."""
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


@dataclass(frozen=True)
class Study:
    """A study's folder: where its script reads and writes its results."""

    folder: Path

    def load_rows(self, name: str) -> list[dict]:
        path = self.folder / name
        return json.loads(path.read_text())["rows"] if path.exists() else []

    def save(self, name: str, payload: dict) -> None:
        """Write folder/name whole or not at all (a killed run or a full disk keeps the previous
        file; :func:`interp.training.files.write_file`)."""
        write_file(self.folder / name, json.dumps(payload, indent=1))

    def save_figure(self, fig, name: str) -> None:
        """Tight layout, 120 dpi, folder/name."""
        fig.tight_layout()
        save_figure(fig, self.folder / name, dpi=120)

    def run_law(self, name: str, compute, fit, outputs) -> None:
        """The command line of the precision and temperature law scripts.

        ``compute(max_n) -> rows`` measures what folder/name lacks (resuming from it), ``fit(rows)``
        fits the law, ``outputs(rows, fits)`` writes the CSV and figures and prints the fits.
        ``--max-n N`` stops at n = N (a quick partial run); ``--plot-only`` redraws from
        folder/name without measuring or rewriting it.
        """
        ap = argparse.ArgumentParser()
        ap.add_argument("--max-n", type=int, default=10_000)
        ap.add_argument("--plot-only", action="store_true")
        args = ap.parse_args()
        polite()
        if args.plot_only:
            rows = self.load_rows(name)
            fits = json.loads((self.folder / name).read_text())["fits"] if rows else {}
        else:
            rows = compute(args.max_n)
            fits = fit(rows)
            self.save(name, dict(rows=rows, fits=fits))
        outputs(rows, fits)
