"""``interp train --case C --n N --d-token D --out DIR``: one run from the shell.

Trains one :class:`interp.training.runs.TrainConfig` with the paper's protocol as the tables
run it (Adam 1e-3, batches of 256, at most 10,000 steps, stop below loss 0.01, one layer,
learned positions, and ``init="pytorch"`` as ``experiments/table1`` and ``table2`` use, where
TrainConfig's own default is TransformerLens's ``"gpt2"``), with a bar on stderr: steps and
the training-batch loss (the engines measure no accuracy per step; the test accuracy shows
when training ends). Then writes ``DIR``, whole or not at all (a temporary sibling folder,
renamed into place):

* ``model.safetensors`` + ``config.json``: a checkpoint (:func:`interp.load_run`, ``interp
  probe DIR``, ``interp viz DIR``);
* ``store.sqlite``: a one-run results store whose run's checkpoint is ``DIR`` itself
  (``interp explore DIR``, ``interp curves DIR``, :func:`interp.read_runs`).

Ctrl-C (or SIGTERM) while training writes nothing. An existing ``DIR`` that is not empty is
refused unless ``--force``, which replaces only a folder holding exactly an earlier run's files
(anything else there is named and kept); a ``DIR`` inside a results store's folder (a sweep's
``results/checkpoints/<run>``) is refused, ``--force`` or not.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

#: the paper's protocol flags (the model's come from its fields' declarations: :func:`model_flags`);
#: tests/cli/test_train.py checks these against TrainConfig's defaults
DEFAULTS = dict(seed=0, max_steps=10_000, lr=1e-3, batch_size=256, stop_loss=0.01, function="permutation")
#: what ``--force`` may replace: a folder holding these and STORE only (an earlier ``interp train``)
RUN_FILES = ("model.safetensors", "config.json")
STORE = "store.sqlite"


def add_arguments(p) -> None:
    from interp.core.fields import CHOSEN, READINGS

    d = DEFAULTS
    others = ", ".join(f"{k} ({r.source})" for k, r in READINGS.items() if k != CHOSEN)
    p.add_argument("--reading", default=CHOSEN, choices=list(READINGS),
                   help=f"a named reading of the architecture, the preset TrainConfig.paper trains (default "
                        f"{CHOSEN}: {READINGS[CHOSEN].source}); others: {others}. A model flag below "
                        "overrides the reading's value for its field. With one layer, residual embed and mlp last are the model residual stream, mlp every, as config.json spells them")
    model_flags(p)
    p.add_argument("--seed", type=int, default=d["seed"], help="seed of init, data and test data (default 0)")
    p.add_argument("--steps", type=int, default=d["max_steps"], help=f"at most this many steps (default {d['max_steps']})")
    p.add_argument("--stop-loss", type=float, default=d["stop_loss"],
                   help=f"stop once the training-batch loss is below this (default {d['stop_loss']}; 0: never)")
    p.add_argument("--function", default=d["function"], help="permutation (default, the paper) or any")
    p.add_argument("--lr", type=float, default=d["lr"], help=f"Adam learning rate (default {d['lr']:g})")
    p.add_argument("--batch-size", type=int, default=d["batch_size"], help=f"inputs per step (default {d['batch_size']})")
    p.add_argument("--engine", default="fast", help="fast (default) or reference (the plain TransformerLens loop)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--out", required=True, help="output folder (created; refused if not empty, unless --force)")
    p.add_argument("--force", action="store_true",
                   help="replace --out if it holds exactly an earlier run's files (model.safetensors, config.json, "
                        "store.sqlite; anything else is named and refused); never a folder inside a results "
                        "store's folder, such as a sweep's checkpoints")
    p.add_argument("--json", action="store_true", help="no bar; print the run's metrics as JSON")


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


_bool.__name__ = "true/false"  # argparse's "invalid true/false value"

def model_flags(p) -> list[str]:
    """One flag per TrainConfig field that declares one (:mod:`interp.core.fields`): the model's
    fields and key_order, each parsed as its default's type, unset (None) unless given; the
    fields without a default are required. Returns the fields, in order."""
    import dataclasses

    from interp.core import fields
    from interp.training.runs import PAPER_INIT, TrainConfig

    declared = {f.name: f for f in dataclasses.fields(TrainConfig)}
    set_by_readings = {k for r in fields.READINGS.values() for k in (*r.fields, "d_mlp", "mlp")}
    names = []
    for name, info in fields.infos(TrainConfig).items():
        if not info.flag:
            continue
        default = declared[name].default
        required = default is dataclasses.MISSING
        kind = int if required else {bool: _bool}.get(type(default), type(default))
        accepted = info.words or "/".join(str(a).lower() if kind is _bool else str(a) for a in info.accepted)
        preset = str(PAPER_INIT if name == "init" else default)
        preset = preset.lower() if kind is _bool else preset
        said = ("required" if required else f"default: the reading's, else {preset}" if name in set_by_readings
                else f"default {preset}")
        p.add_argument(info.flag, dest=name, type=kind, required=required,
                       help=f"{info.help}" + (f"; {accepted}" if accepted else "") + f" ({said})")
        names.append(name)
    return names


def check_out(out: Path, force: bool) -> None:
    """Refuse, before any training: an ``--out`` that is a file or a link; one inside the folder
    of a results store (a sweep's ``results/checkpoints/<run>``, or any folder below a store
    file: its checkpoints are the store's, and a model written there would be measured as the
    stored run); a name too long for this file system once the temporary names are added
    (:func:`interp.training.files.check_name_length`); a folder that is not empty, unless
    ``force`` and it holds exactly an earlier run's files (:func:`foreign_files`)."""
    from interp.training.files import check_name_length

    check_name_length(out, "--out", sqlite_file="/" + STORE)  # first: a name too long fails every call
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise ValueError(f"--out {out} is the current folder or holds it; accepted: a new or "
                         "empty folder below or beside it")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ValueError(f"--out {out} is {'a link' if out.is_symlink() else 'a file'}; "
                         "accepted: a new or empty folder")
    holder = store_above(out)
    if holder is not None:
        raise ValueError(f"--out {out} is inside the folder of the results store {holder} (a sweep's "
                         "checkpoints are its store's, never replaced by interp train); accepted: a "
                         "folder outside it")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise ValueError(f"--out {out} exists and is not empty; pass --force to replace it, "
                         "or choose another --out")
    foreign = foreign_files(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ValueError(f"--out {out} is not only an earlier run's files ({shown}); --force replaces "
                         f"only a folder holding exactly {', '.join(RUN_FILES)} and {STORE}")


def foreign_files(out: Path) -> list[str]:
    """What in the folder ``out`` is not an earlier ``interp train`` run's: every name but
    ``model.safetensors``, ``config.json`` (an interp checkpoint's, by its format tag),
    ``store.sqlite`` (a results store) and ``timeline/`` (``interp timeline``'s snapshots of this
    run, checked against their manifest and the checkpoint's config), sorted; a missing checkpoint
    file is named too. Empty: the folder holds exactly a run's files, and ``--force`` may replace
    it whole."""
    from interp.sweeps.store_files import check_header
    from interp.sweeps.store_schema import identify
    from interp.training.checkpoints import read_meta

    from interp.training import snapshots

    names = sorted(p.name for p in out.iterdir())
    own = (*RUN_FILES, STORE, snapshots.FOLDER)
    foreign = [n + ("/" if (out / n).is_dir() else "") for n in names if n not in own]
    if snapshots.FOLDER in names:  # ``interp timeline``'s snapshots of this run: its own, if they check
        try:
            if (out / snapshots.FOLDER).is_symlink() or not (out / snapshots.FOLDER).is_dir():
                raise ValueError("not a folder")
            snapshots.load_snapshots(out)
        except (ValueError, OSError):
            foreign.append(f"{snapshots.FOLDER}/ (not this run's timeline)")
    foreign += [f"no {f}" for f in RUN_FILES if f not in names]
    if not foreign:
        try:
            read_meta(out)
        except ValueError:
            foreign.append(f"{RUN_FILES[1]} (not an interp checkpoint's)")
    if STORE in names:
        try:
            if (out / STORE).is_symlink() or not (out / STORE).is_file():
                raise ValueError("not a plain file")
            check_header(out / STORE)
            if identify(out / STORE) not in ("ours", "older"):
                raise ValueError("not a results store")
        except ValueError:
            foreign.append(f"{STORE} (not a results store)")
    return foreign


def store_above(out: Path) -> Path | None:
    """A results store file in a folder that holds ``out`` (its parent, or one further up), or
    None: a store's folder holds its ``checkpoints/`` and ``progress/``. A store is recognised
    by SQLite's header and interp's application id (``PRAGMA application_id``), or, for a store
    older than the id, by the name ``store.sqlite`` with SQLite's header."""
    import os

    from interp.sweeps.store_files import SQLITE_HEADER
    from interp.sweeps.store_schema import APPLICATION_ID

    for folder in Path(os.path.realpath(out)).parents:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_file():
                    continue
                with open(entry.path, "rb") as f:
                    head = f.read(72)
            except OSError:
                continue
            if head[:16] == SQLITE_HEADER and (int.from_bytes(head[68:72], "big") == APPLICATION_ID
                                               or entry.name == STORE):
                return Path(entry.path)
    return None


def config_from_args(args):
    """The TrainConfig of the parsed flags: ``TrainConfig.paper`` of ``--reading``, with every
    model flag given over the reading's value (an ``--init`` other than the preset's too)."""
    import argparse

    from interp.training.runs import TrainConfig

    names = model_flags(argparse.ArgumentParser(add_help=False))
    given = {k: getattr(args, k) for k in names if k not in ("case", "n", "d_token") and getattr(args, k) is not None}
    init = given.pop("init", None)
    config = TrainConfig.paper(args.case, args.n, args.d_token, reading=args.reading, seed=args.seed,
                               max_steps=args.steps, stop_loss=args.stop_loss, function=args.function,
                               lr=args.lr, batch_size=args.batch_size, **given)
    return config if init is None else config.replace(init=init)


def write_run(result, out: Path, *, started_at: str | None = None) -> Path:
    """Write ``result`` to the folder ``out`` (the module docstring's files), whole or not at all:
    built in a temporary sibling folder, renamed into place (an earlier folder is replaced)."""
    import hashlib
    import shutil
    import uuid

    from interp.sweeps.store import RunRecord, Store
    from interp.training import checkpoints
    from interp.training.files import replace_folder

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        checkpoints.save(result, tmp)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)  # a folder as mkdir makes it (save's temporary one is 0700)
        sums = {f: hashlib.sha256((tmp / f).read_bytes()).hexdigest() for f in RUN_FILES}
        c = result.config
        record = RunRecord(
            name=c.name(), sweep=out.name, config=c.to_dict(), seed=c.seed, status=result.status,
            accuracy=float(result.accuracy), steps=int(result.steps),
            final_loss=float(result.final_loss), seconds=float(result.seconds),
            curve=[[int(s), float(v)] for s, v in result.curve], started_at=started_at,
            cpu_seconds=None if result.cpu_seconds is None else float(result.cpu_seconds),
        )
        with Store(tmp / STORE) as db:
            db.put(record, tmp, sums)  # the run's checkpoint is the folder itself: "."
        replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def summary(result, out: Path) -> str:
    c = result.config
    how = (f"stopped: loss {result.final_loss:.4f} < {c.stop_loss:g}" if result.final_loss < c.stop_loss
           else f"loss {result.final_loss:.4f}")
    if result.status != "ok":
        how = result.status
    return (f"{c.label()}: test accuracy {100 * result.accuracy:.1f}% after {result.steps} steps "
            f"({how}) in {result.seconds:.1f} s\n"
            f"written: {out} ({', '.join(RUN_FILES)}, {STORE})\n"
            f"next: interp probe {out} | interp viz {out} --out {out}-viz | interp curves {out} | "
            f"interp explore {out} --out {out}-explore")


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(args) -> int:
    from interp.cli.bars import step_bar
    from interp.sweeps.store import now
    from interp.training import trainer

    out = Path(args.out)
    check_out(out, args.force)
    config = config_from_args(args)  # bad values: one line each (TrainConfig's checks)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill`, `timeout`: as Ctrl-C
    try:
        started = now()
        result = trainer.train(config, engine=args.engine, device=args.device,
                               progress=None if args.json else step_bar)
        check_out(out, args.force)  # again: the folder may have changed while training
        write_run(result, out, started_at=started)
    except KeyboardInterrupt:
        print(f"interrupted: nothing written ({out} is as it was)", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(dict(result.metrics(), out=str(out)), indent=1, default=float))
    else:
        print(summary(result, out))
    return 0
