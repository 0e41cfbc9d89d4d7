"""``interp curves RUN_OR_STORE [--out FILE.png]``: loss curves drawn.

``RUN_OR_STORE``: a run folder (``interp train``'s, or a sweep's checkpoint folder): its curve
with the step it stopped marked; or a store (a store file, a sweep folder, an ``interp train``
folder with ``--where``): one panel per cell, seeds overlaid, stop steps marked
(:func:`interp.inspect.tools.curves.curves_figure`). Written whole or not at all to ``--out``
(default: ``curves.png`` in the run or sweep folder, or beside the store file).
"""

from __future__ import annotations

import json
from pathlib import Path

FORMATS = (".png", ".svg", ".pdf")


def add_arguments(p) -> None:
    p.add_argument("source", metavar="RUN_OR_STORE",
                   help="a run folder, a sweep folder (with results/store.sqlite) or a store file")
    p.add_argument("--out", default=None,
                   help="figure file (.png, .svg or .pdf; default: curves.png in the folder)")
    p.add_argument("--where", action="append", metavar="FIELD=VALUE",
                   help="only configs with this field value (repeatable), e.g. --where case=2")
    p.add_argument("--json", action="store_true", help="print the written path as JSON")


def default_out(source: Path) -> Path:
    return (source if source.is_dir() else source.parent) / "curves.png"


def run(args) -> int:
    from interp.inspect.tools import curves
    from interp.sweeps.driver import parse_where

    source = Path(args.source)
    if not source.exists():
        raise ValueError(f"{source} does not exist; accepted: a run folder, a sweep folder or a store file")
    out = Path(args.out) if args.out else default_out(source)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"--out {out}: the suffix {out.suffix or '(none)'} names no figure format; "
                         f"accepted: {', '.join(FORMATS)}")
    where = parse_where(args.where) if args.where else None
    path = curves.write_curves(source, out, where=where)
    print(json.dumps({"figure": str(path)}) if args.json else f"loss curves written: {path}")
    return 0
