"""A stored run's evidence cross-checked before anyone shows it (issue 55).

The store's checksums defend against accidents (a flipped byte, a truncated file, a folder
swapped by mistake): every row carries a sha256 of its fields and every checkpoint file is
hashed. They do not defend against someone who edits a row or a file and recomputes the
checksums (the plain sha256s are public). What the readers add is cheap evidence from three
sources that must agree:

* the store row (accuracy, status, steps, the run's config);
* the checkpoint's ``config.json``, written from the same training result (its ``result``
  metrics, its ``train_config``, the ``hooked_config`` its weights must fit):
  :func:`interp.sweeps.store.checked_checkpoint`, which reads files only;
* the model itself, loaded (finite weights that fit what ``config.json`` describes), its shapes
  compared with the row's config, and its test accuracy measured again here on the run's own
  test inputs (:func:`accuracy_problem`).

:func:`checked_model` runs all three: a run whose sources disagree is a
:class:`~interp.sweeps.store.CheckpointMismatch` naming the run, its folder and what disagreed,
which every reader (atlas, explore, analyze-sweep, timeline, probe of a store's run folder)
turns into a named skip. :func:`cross_check` does it for a whole store (``interp store verify
--measure``, and any reader that shows stored accuracies, such as a report). A forger who edits
the row, ``config.json`` and the weights consistently, and recomputes every checksum, is not
caught: nothing here is signed.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from interp.sweeps.store_read import CheckpointMismatch, checked_checkpoint, read, shape_problem

#: the re-measured accuracy may differ from the stored one by this much plus the sampling term
#: of :func:`tolerance` (a prediction whose two top logits tie can flip on another CPU)
ACCURACY_SLACK = 0.005
#: at most this many of the run's test inputs are evaluated again (all of them when fewer)
RECHECK_INPUTS = 4096


def tolerance(stored: float, k: int, total: int) -> float:
    """How far the accuracy on the first ``k`` of a run's ``total`` test inputs may lie from the
    accuracy ``stored`` over all of them: :data:`ACCURACY_SLACK` plus four standard errors of a
    sample of ``k`` drawn without replacement from ``total`` (zero when ``k == total``)."""
    p = min(max(float(stored), 0.0), 1.0)
    finite = max(0.0, 1.0 - k / total) if total > 0 else 0.0
    return ACCURACY_SLACK + 4.0 * math.sqrt(p * (1.0 - p) / max(k, 1) * finite)


def accuracy_problem(model, config, stored) -> str | None:
    """Why the stored accuracy ``stored`` is not the model's (None: it is, within
    :func:`tolerance`): the model evaluated again on the first batches of the run's own test
    stream (:func:`interp.training.runs.evaluate_accuracy`, the pass that produced the stored
    number, with at most :data:`RECHECK_INPUTS` inputs). ``config``: the run's TrainConfig."""
    from interp.training.machine import one_thread
    from interp.training.runs import evaluate_accuracy

    if stored is None or (isinstance(stored, float) and math.isnan(stored)):
        return None
    batches = max(1, min(config.eval_batches, RECHECK_INPUTS // config.batch_size))
    k, total = batches * config.batch_size, config.eval_batches * config.batch_size
    with one_thread():
        measured = evaluate_accuracy(model, config.replace(eval_batches=batches))
    bound = tolerance(float(stored), k, total)
    if abs(measured - float(stored)) <= bound:
        return None
    return (f"the store row's accuracy {float(stored):.4f} is not the model's: it measures {measured:.4f} "
            f"on the first {k} of the run's {total} test inputs (tolerance {bound:.4f})")


def _get(row):
    return row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))


def checked_model(store_path, row, *, accuracy: bool = True):
    """The model of the stored run ``row`` (a row of :func:`interp.sweeps.store.read`, or a
    dict with its fields), after every cross-check of the module docstring; a
    :class:`CheckpointMismatch` (a ValueError naming the run, the folder and what disagreed)
    otherwise: no checkpoint, files that do not hash as recorded, a ``config.json`` of another
    run, recording other metrics or describing another shape, weights that are corrupt, not
    finite or do not fit, and (``accuracy``) a stored accuracy the model does not reproduce."""
    from interp.training import checkpoints
    from interp.training.runs import TrainConfig

    get = _get(row)
    name = str(get("name"))
    folder = checked_checkpoint(store_path, row)
    try:
        model = checkpoints.load(folder)
    except ValueError as e:  # corrupt, NaN or inf weights, weights that do not fit
        raise CheckpointMismatch(name, folder, str(e)) from None
    config = get("config")
    config = TrainConfig.from_dict(json.loads(config) if isinstance(config, str) else dict(config))
    problem = shape_problem(model.cfg, config, getattr(model, "spec", None))
    if problem is None and accuracy and str(get("status")) == "ok":
        problem = accuracy_problem(model, config, get("accuracy"))
    if problem is not None:
        raise CheckpointMismatch(name, folder, problem)
    return model


def cross_check(store_path, *, names=None, measure: bool = True, progress=None) -> dict[str, str]:
    """``{run name: what disagrees}`` for every run of the store ``store_path`` that has a
    checkpoint (``names``: only those), by :func:`checked_model` (``measure=False``: the files
    only, :func:`interp.sweeps.store.checked_checkpoint`, no model loaded). ``progress``: a
    wrapper ``progress(iterable, total=, desc=)``. Reads only."""
    df = read(store_path)
    rows = [r for r in df.to_dict("records") if isinstance(r.get("checkpoint"), str) and r["checkpoint"]
            and (names is None or str(r["name"]) in set(map(str, names)))]
    it = rows if progress is None else progress(rows, total=len(rows), desc="cross-checking runs")
    found = {}
    for r in it:
        try:
            if measure:
                checked_model(store_path, r)
            else:
                checked_checkpoint(store_path, r)
        except CheckpointMismatch as e:
            found[str(r["name"])] = e.what
    return found


def store_of_folder(path) -> tuple[Path, dict] | None:
    """``(store file, its row)`` when ``path`` is a run folder of a store (``<store
    folder>/checkpoints/<run>`` beside ``store.sqlite``), None otherwise; a folder among a
    store's checkpoints that the store does not list is a ValueError naming both."""
    folder = Path(os.path.realpath(path))
    store_file = folder.parent.parent / "store.sqlite"
    if folder.parent.name != "checkpoints" or not store_file.is_file():
        return None
    rows = read(store_file)
    row = rows[rows["name"].astype(str) == folder.name]
    if row.empty:
        raise ValueError(f"{path}: a folder among {store_file}'s checkpoints that the store does not "
                         "list; use a copy of it outside the store's folder if it is yours")
    return store_file, row.iloc[0].to_dict()


def timeline_problems(store_path) -> tuple[dict[str, str], list[Path]]:
    """``({run name: what is wrong with its saved timeline}, [temporary timeline folders a
    killed write left])`` for the store ``store_path``: each run folder's ``timeline/`` loaded as
    every reader loads it (:func:`interp.training.snapshots.load_snapshots`: its seal, every
    snapshot's sha256, the manifest against the run's checkpoint). Reads only."""
    from interp.training import snapshots

    problems, stale = {}, []
    for r in read(store_path, expand=True).to_dict("records"):
        folder = r.get("checkpoint")
        if not isinstance(folder, str) or not folder or not Path(folder).is_dir():
            continue
        stale += snapshots.stale_temporaries(folder)
        if snapshots.has_snapshots(folder):
            try:
                snapshots.load_snapshots(folder)
            except ValueError as e:
                problems[str(r["name"])] = str(e)
    return problems, stale
