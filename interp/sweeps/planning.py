"""Planning a sweep: which configs to train now, in which groups (re-exported by
:mod:`interp.sweeps.driver`, whose :func:`~interp.sweeps.driver.run_sweep` calls them).

:func:`select` keeps the configs ``--where`` names (:func:`parse_where`), :func:`plan` the ones
the store does not have yet, grouped by :func:`group_by_seed` (configs that differ only in their
seed train together).
"""

from __future__ import annotations

from typing import Sequence

from interp.sweeps.folders import group_key
from interp.sweeps.workers import environmental_failure


def group_by_seed(configs: Sequence) -> list[list]:
    """Group configs that differ only in seed, keeping first-appearance order."""
    groups: dict = {}
    for c in configs:
        groups.setdefault(group_key(c), []).append(c)
    return list(groups.values())


def parse_where(items: Sequence[str] | None) -> dict[str, str]:
    """``["case=5", "d_token=16"]`` -> ``{"case": "5", "d_token": "16"}``."""
    where = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--where {item!r}; accepted: FIELD=VALUE, e.g. case=5")
        key, value = key.strip(), value.strip()
        if where.get(key, value) != value:
            raise ValueError(
                f"--where gives {key} two values ({where[key]!r}, {value!r}); accepted: one "
                "value per field (run the sweep once per value)"
            )
        where[key] = value
    return where


def select(configs: Sequence, where: dict[str, str] | None = None) -> list:
    """The configs whose fields equal every ``where`` value (compared as strings)."""
    if not where:
        return list(configs)
    fields = configs[0].to_dict() if configs else {}
    unknown = [k for k in where if k not in fields]
    if unknown:
        raise ValueError(f"--where field {unknown[0]!r} is not a TrainConfig field; accepted: {sorted(fields)}")
    return [c for c in configs if all(str(c.to_dict()[k]) == v for k, v in where.items())]


def plan(configs: Sequence, done: dict[str, str], *, retry_failed: bool = False,
         limit: int | None = None) -> list[list]:
    """The groups still to train: stored runs are skipped (failed ones too, unless
    ``retry_failed``); at most ``limit`` runs in all.

    A status that records a fault of the machine rather than of training
    (:func:`~interp.sweeps.workers.environmental_failure`: ``lost: ...``, or an older
    store's ``failed: OSError: ...`` from a progress save) is no result: those runs are
    trained again without ``retry_failed``."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit={limit!r}; accepted: an integer >= 0")

    def finished(c) -> bool:
        status = done.get(c.name())
        if status is None or environmental_failure(status):
            return False
        return status == "ok" or not retry_failed

    todo = [c for c in configs if not finished(c)]
    if limit is not None:
        todo = todo[:limit]
    return group_by_seed(todo)
