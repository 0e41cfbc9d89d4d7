"""``interp atlas STORE_OR_DIR``: the mechanism atlas of a store (issue 29).

Reads a results store (a store file, a sweep folder's ``results/store.sqlite`` or a folder's
``store.sqlite``), classifies every seed, measures the successful and partial ones
(:func:`interp.inspect.mechanism.measure.measure`) and labels their mechanism, then writes into ``--out``
(default: the folder given, or the store file's folder):

* ``atlas.csv``: one row per seed: cell, accuracy, steps, outcome, label and the measures;
* ``atlas.md``: per case, layers, architecture and function a table (n down, d_token across; each
  cell its successful seeds and their mechanisms, e.g. ``4/5 c3 m1``), then the predictions of
  ``experiments/atlas/PREDICTIONS.md``: confirmed, refuted or untested, with their numbers;
* ``atlas-success.png`` and ``atlas-mechanism.png``: the same cells as heatmaps.

``--das``: every successful lookup also gets its code's learned (DAS) dimension, ``value_das_dim``
and ``query_das_dim`` beside the principal-axes bounds ``value_dim`` and ``query_dim``
(:mod:`interp.inspect.studies.atlas_das`). ``--geometry``: and the figure its codes draw, ``geometry``
and ``key_geometry`` with their measures (:mod:`interp.inspect.studies.atlas_geometry`).

A rerun reuses the rows of the ``atlas.csv`` already in ``--out`` that are provably the same run
measured the same way (:mod:`interp.inspect.studies.atlas_cache`: its checksums, the batch size and
the measures' version, each row's seal) and measures the rest, saying how many (``--remeasure``:
every run again). A checkpoint that is not its store row's is skipped with a line naming it.
The files are written as one set, all or none. Prints the predictions' table (``--json``: the
predictions and the files written).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


EPILOG = ("Writes atlas.csv (one row per seed: cell, architecture, accuracy, steps, outcome, "
          "mechanism label and the measures behind it), atlas.md (per case, layers, architecture "
          "and function: n down, d_token across, each cell 'k/t' successful seeds and their "
          "mechanisms, e.g. '4/5 c3 m1'; then P1-P9 of experiments/atlas/PREDICTIONS.md, each "
          "confirmed, refuted or untested, with its numbers), atlas-success.png and "
          "atlas-mechanism.png (the cells as heatmaps). Only successful and partial seeds are "
          "measured (their checkpoints loaded); a rerun measures only the runs atlas.csv lacks.")


def add_arguments(p) -> None:
    p.epilog = EPILOG
    p.add_argument("store", metavar="STORE_OR_DIR",
                   help="a results store file, a sweep folder (with results/store.sqlite) or a folder "
                        "holding store.sqlite")
    p.add_argument("--out", default=None,
                   help="folder for atlas.csv, atlas.md and the figures (default: the folder given, "
                        "or the store file's folder); an atlas.csv there is reused as a cache")
    p.add_argument("--batch-size", type=int, default=512,
                   help="sampled inputs per measure of a seed (default 512)")
    p.add_argument("--remeasure", action="store_true",
                   help="measure every seed again instead of reusing the rows of --out's atlas.csv")
    p.add_argument("--das", action="store_true",
                   help="also learn each successful lookup's code dimension under a learned rotation "
                        "(columns value_das_dim, query_das_dim beside value_dim, query_dim; the seeds "
                        "of a cell searched together; cached like the measures)")
    p.add_argument("--geometry", action="store_true",
                   help="also measure the figure each successful lookup's codes draw (columns geometry, "
                        "key_geometry and value_fig_*, query_fig_*; cached like the measures)")
    p.add_argument("--json", action="store_true", help="print the predictions and the files as JSON")


def default_out(given: str, store: Path) -> Path:
    """The folder given (a sweep or run folder), or the folder of the store file given."""
    return Path(given) if Path(given).is_dir() else store.parent


def writable(out: Path, *, given: bool) -> None:
    """Refuse, before any measuring, an output folder this user cannot write (a read-only
    store's folder, the default output), naming it whole and what to do."""
    folder = out.resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        flag = "--out" if given else "the default output (the store's folder)"
        raise ValueError(f"{folder}: not writable by this user ({flag}); pass --out DIR, a folder you can write")


def _shown(path: str) -> str:
    """``path`` relative to the working folder when it lies inside it (atlas.md names it)."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:  # another drive
        return path


def run(args) -> int:
    from interp.sweeps.frame import find_store

    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}; accepted: an integer >= 1")
    store = find_store(args.store)  # a path with no store: one line, before any work
    out = Path(args.out) if args.out else default_out(args.store, store)
    writable(out, given=bool(args.out))
    cache = None if args.remeasure else out / "atlas.csv"
    if cache is not None:
        from interp.inspect.studies.atlas import read_cache

        read_cache(cache)  # a file there that is no atlas table: refused before measuring

    from tqdm import tqdm

    from interp.inspect.studies import atlas
    from interp.inspect.studies.atlas import predictions_markdown

    df = atlas.build_atlas(store, batch_size=args.batch_size, cache=cache,
                           progress=None if args.json else tqdm, das=args.das,
                           geometry=args.geometry)
    c = df.attrs.get("cache", {})
    cache_line = (f"{c.get('reused', 0)} rows from the cache, {c.get('measured', 0)} measured "
                  f"({c.get('bad', 0)} cached rows cut or edited, measured again); "
                  f"{c.get('skipped', 0)} skipped (each named above: no usable checkpoint)")
    if "das" in df.attrs:
        cache_line += (f"; learned dimension: {df.attrs['das']['searched']} successful lookups searched, "
                       f"{df.attrs['das']['cached']} from the cache")
    if "geometry" in df.attrs:
        cache_line += (f"; geometry: {df.attrs['geometry']['measured']} successful lookups measured, "
                       f"{df.attrs['geometry']['cached']} from the cache")
    for note in (df["note"].dropna() if "note" in df else []):
        print(note, file=sys.stderr)
    written = atlas.write_atlas(df, out, source=_shown(args.store))
    preds = written.pop("predictions")
    if args.json:
        print(json.dumps(dict(seeds=len(df), cache=c, das=df.attrs.get("das"),
                              geometry=df.attrs.get("geometry"), predictions=preds,
                              files={k: str(v) for k, v in written.items()}), indent=1, default=str))
    else:
        print("\n".join(predictions_markdown(preds)))
        print(f"\n{len(df)} seeds; {cache_line}; wrote " + ", ".join(str(v) for v in written.values()))
    return 0
