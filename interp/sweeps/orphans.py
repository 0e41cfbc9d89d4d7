"""Orphaned progress files: files in ``<store folder>/progress/`` that no sweep will ever resume.

A group's progress file (:mod:`interp.training.progress`) is removed by the driver once the
group's rows are committed. Two kinds stay forever unless someone removes them:

* **orphaned**: its runs are no longer declared by the sweep's ``configs.py`` (the file was
  edited between a killed sweep and its resume), so no group will ever match it;
* **done**: every run it holds is stored already (a driver killed between the commit and the
  removal, or a store whose rows came another way);

and files an earlier sweep set aside (``*.bad``, damaged or edited) or that are not progress
files at all. :func:`orphans` names each with the reason; ``interp store verify`` and
``interp runs`` report them, ``interp store verify --remove-orphans`` removes them, and the
driver warns about them. A file whose runs are declared and not all stored is the resumable
state of an unfinished group: never reported, never removed.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path

from interp.training import progress

log = logging.getLogger(__name__)


def _runs_of(path: Path) -> list[str]:
    """The run names a progress file holds (from its metadata's configs); ValueError if it
    cannot be read as one."""
    from interp.training.runs import TrainConfig

    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n > 100 << 20:
                raise ValueError("header too large")
            header = json.loads(f.read(n))
        meta = json.loads(header["__metadata__"][progress.META_KEY])
        return [TrainConfig.from_dict(c).name() for c in meta["configs"]]
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        raise ValueError(str(e)) from None


def orphans(store_path: str | os.PathLike, declared: set[str] | None, stored: set[str]) -> dict[Path, str]:
    """``{progress file: why no sweep will resume it}`` in the progress folder of the store at
    ``store_path``. ``declared``: the run names of the sweep's ``configs.py`` (None: not known,
    so a file is orphaned only by the other reasons); ``stored``: the store's run names."""
    folder = progress.folder(store_path)
    try:
        entries = sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return {}
    found: dict[Path, str] = {}
    for p in entries:
        if p.name.startswith("."):  # a temporary file: the driver cleans those itself
            continue
        if p.name.endswith(progress.SUFFIX + ".bad"):
            found[p] = "set aside by an earlier sweep (damaged or edited); kept only for a look"
            continue
        if not p.name.endswith(progress.SUFFIX) or not p.is_file():
            continue
        try:
            names = _runs_of(p)
        except ValueError as e:
            found[p] = f"not a readable progress file ({e})"
            continue
        if declared is not None and not set(names) <= declared:
            gone = sorted(set(names) - declared)
            found[p] = (f"its {len(gone)} run(s) ({', '.join(gone[:3])}{', ...' if len(gone) > 3 else ''}) "
                        "are no longer declared by configs.py: no sweep will resume it")
        elif set(names) <= stored:
            found[p] = "every run it holds is stored already"
    return found


def sweep_folder_of(store_path: str | os.PathLike) -> Path | None:
    """The sweep folder whose default store ``store_path`` is (``DIR/results/<store>`` with a
    ``DIR/configs.py``), or None."""
    folder = Path(store_path).resolve().parent.parent
    return folder if Path(store_path).resolve().parent.name == "results" and (folder / "configs.py").is_file() else None


def declared_runs(sweep_dir: str | os.PathLike | None, timeout: float | None = None) -> set[str] | None:
    """The run names ``sweep_dir``'s ``configs.py`` declares (loaded in a child process,
    :func:`interp.sweeps.loader.load`), or None without a sweep folder."""
    if sweep_dir is None:
        return None
    from interp.sweeps.loader import load

    return {c.name() for c in load(sweep_dir, timeout=timeout).configs}


def warn(store_path: Path, configs, stored) -> None:
    """The driver's one warning naming the progress files no sweep of ``configs`` will resume
    and the command that removes them (``stored``: the store's run names)."""
    found = orphans(store_path, {c.name() for c in configs}, set(stored))
    if found:
        first, why = next(iter(found.items()))
        log.warning("%d orphaned progress file(s) in %s (e.g. %s: %s); `interp store verify %s "
                    "--remove-orphans` removes them", len(found), first.parent, first.name, why, store_path)
