"""interp runs STORE: the runs of a results store by config, with their checkpoints.

STORE: a store file, a sweep folder (``DIR/results/store.sqlite``) or an ``interp train`` folder
(:func:`interp.sweeps.frame.find_store`, as every command that reads a store). Orphaned
progress files beside the store are named on stderr (``interp store verify --remove-orphans``
removes them)."""

from __future__ import annotations

import json

COLUMNS = ["name", "case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "seed", "status", "accuracy",
           "steps", "checkpoint"]


def add_arguments(p) -> None:
    p.add_argument("store", help="a results store or its sweep folder (e.g. experiments/table1)")
    p.add_argument("--where", action="append", metavar="FIELD=VALUE", help="only runs whose config field has this value")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")


def select_runs(store_path, where: dict[str, str]):
    """The store's rows (a DataFrame) whose config fields equal ``where``'s values."""
    from interp.sweeps import store
    from interp.sweeps.frame import find_store

    df = store.read(find_store(store_path))
    for key, value in where.items():
        if key not in df.columns:
            raise ValueError(f"--where {key}={value}: no field {key!r}; accepted: "
                             f"{sorted(c for c in df.columns if c in COLUMNS or c in ('lr', 'init', 'function'))}")
        df = df[df[key].astype(str) == value]
    return df


def run(args) -> int:
    from interp.sweeps.driver import parse_where

    df = select_runs(args.store, parse_where(args.where))
    cols = [c for c in COLUMNS if c in df.columns]
    if args.json:
        print(json.dumps(df[cols].to_dict(orient="records"), indent=1, default=str))
        return 0
    if df.empty:
        print("no runs match")
        report_orphans(args.store)
        return 0
    print(df[cols].sort_values(["case", "n", "d_token", "seed"] if "case" in cols else cols[:1])
          .to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    print(f"{len(df)} run(s); load one with interp.load_run(CHECKPOINT)")
    report_orphans(args.store)
    return 0


def report_orphans(store_arg) -> None:
    """One line on stderr per orphaned progress file beside the store (:mod:`interp.sweeps.orphans`)
    and the command that removes them; nothing when there are none."""
    import sys

    from interp.cli.store import orphaned
    from interp.sweeps.frame import find_store

    found = orphaned(find_store(store_arg))
    for p, why in found.items():
        print(f"orphaned progress file {p}: {why}", file=sys.stderr)
    if found:
        print(f"`interp store verify {store_arg} --remove-orphans` removes them", file=sys.stderr)
