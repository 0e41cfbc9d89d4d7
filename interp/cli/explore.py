"""``interp explore STORE --out DIR``: a sweep's seeds as one offline HTML page.

``STORE`` is a sweep folder (with ``results/store.sqlite``) or a store file, in any spelling
(the page is titled after the sweep its runs recorded). Every finished run with a checkpoint
(``--where FIELD=VALUE``, repeatable, to pick configs) is measured and labelled
(:func:`interp.inspect.mechanism.measure.measure`, ``mechanism``); :func:`interp.inspect.studies.explore.write_explorer`
writes ``DIR/index.html`` (the sweep's table and violins, groups in numeric order, and per seed,
about a screen tall, its mechanism verdict, a compact attention view of ``--inputs`` inputs with
a "show all" button for circuitsvis's full views, QK/OV heatmaps and probes),
``DIR/circuitsvis.js`` (written once, referenced by every view) and the figures. Open
``DIR/index.html#seed=<run name>`` in a browser (an unknown seed is said so on the page);
nothing is loaded from the network. When the sweep has a mechanism atlas (``interp atlas``'s
``atlas.csv``: ``--atlas PATH``, or one in or beside ``DIR``, in the sweep folder or beside the
store), the page also shows it as clickable grids (:mod:`interp.inspect.studies.explore_atlas`): a cell
lists its seeds, each linked to its view.
"""

from __future__ import annotations

import json


def add_arguments(p) -> None:
    p.add_argument("store", help="sweep folder (with results/store.sqlite) or a store file")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--where", action="append", metavar="FIELD=VALUE",
                   help="only configs with this field value (repeatable), e.g. --where case=2")
    p.add_argument("--inputs", type=int, default=3, help="sampled inputs per attention view (default 3)")
    p.add_argument("--batch-size", type=int, default=256, help="sampled inputs per measure")
    p.add_argument("--atlas", metavar="PATH",
                   help="the atlas.csv (interp atlas) to show as the page's atlas view (default: an "
                        "atlas.csv in or beside --out, in the sweep folder or beside the store, if "
                        "it names this store's runs)")
    p.add_argument("--json", action="store_true", help="print the written page as JSON")


def run(args) -> int:
    from tqdm import tqdm

    from interp.inspect.studies import explore
    from interp.sweeps import driver as sweeps

    index = explore.write_explorer(args.store, args.out, where=sweeps.parse_where(args.where),
                                   inputs=args.inputs, batch_size=args.batch_size,
                                   progress=None if args.json else tqdm, atlas=args.atlas)
    if args.json:
        print(json.dumps({"index": str(index)}))
    else:
        print(f"explorer written: {index} (open it in a browser; add #seed=<run name> to pick a seed)")
    return 0
