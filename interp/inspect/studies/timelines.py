"""Mechanism timelines (issue 46): every snapshot of a run measured and labelled.

:func:`timeline` (``interp.timeline``) takes a run folder (a checkpoint folder: ``interp
train``'s, or a sweep's ``results/checkpoints/<run>``) or a results store (a store file, a
sweep folder) and returns one row per (run, snapshot step): the step, the training-batch loss
recorded there, the measures the two-level labels read (:func:`interp.inspect.mechanism.measure.measure`
at ``seed=0``) and the labels (:func:`interp.inspect.mechanism.levels.labels_of`: routing, code, key_code,
mechanism), the graded progress measures (:func:`interp.inspect.mechanism.progress.progress`, issue
52: the QK margin and attention mass on the matching slot, the read-out given that slot, the codes'
interchange accuracies, the answer's share of the residual; read where the labels read, ``at``),
the run's plateau exit, its outcome (:func:`interp.inspect.studies.analysis.classify` of its final
accuracy) and the measures version (``measures_version``: :data:`MEASURES_VERSION`).
:func:`read_timeline` reads a written table back and refuses, saying to measure it again, one
whose rows fail their seal or hold another version (or none: written before issue 52).

Snapshots come from ``<checkpoint>/timeline/`` (:func:`interp.training.snapshots.load_snapshots`,
every file checked against its manifest). A run without them is trained again with snapshots
(:func:`interp.training.snapshots.train_with_snapshots`, the seeds of one cell together), its
final parameters compared bit for bit with the stored checkpoint (a machine that trains another
model is refused by name: training is deterministic on one kind of CPU, not across kinds), and
the snapshots are saved beside the checkpoint; a saved timeline whose last snapshot is not the
checkpoint is refused by name too.

:func:`formation` reads one run's rows as ``experiments/timelines/PREDICTIONS.md`` defines
them: when the routing forms (the first snapshot whose routing is named, ``lookup``,
``mirror`` or ``inverted``, and stays named at every later one) and when the code settles (the
first snapshot from which the value code's label no longer changes).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

from interp.inspect.mechanism import progress
from interp.inspect.studies.atlas_cache import MEASURES_VERSION as _MEASURE_VERSION

#: the routings :func:`formation` counts as formed
NAMED = ("lookup", "mirror", "inverted")
#: the measures the labels read (:mod:`interp.inspect.mechanism.levels`), then the graded progress
#: measures (:mod:`interp.inspect.mechanism.progress`, issue 52), kept as columns when measured
MEASURES = (
    "acc", "acc_any", "qk_diag", "qk_anti", "ov_anti", "follow", "at", "mass_keypos", "mlp_role",
    "attn_entropy", "value_dim", "value_top2", "value_rcv", "value_gap", "value_iia_full",
    "query_dim", "query_top2", "query_rcv", "query_gap", "query_iia_full", *progress.COLUMNS,
)
LABELS = ("routing", "code", "key_code", "mechanism")
#: what a timeline row's measures mean: :func:`interp.inspect.mechanism.measure.measure`'s version
#: (:data:`interp.inspect.studies.atlas_cache.MEASURES_VERSION`) and the progress measures'
#: (:data:`interp.inspect.mechanism.progress.VERSION`); every row carries it (``measures_version``),
#: and :func:`read_timeline` refuses a table of another (or none: written before issue 52)
MEASURES_VERSION = f"measure{_MEASURE_VERSION}-progress{progress.VERSION}"
VERSION_COLUMN = "measures_version"


class _Run:
    """One run to draw a timeline of: its checkpoint folder, config, what training stored, and
    where its timeline lives (``into``: None for ``<folder>/timeline/``)."""

    def __init__(self, folder: Path, config, accuracy, curve, into=None):
        self.folder, self.config, self.accuracy, self.curve = Path(folder), config, accuracy, list(curve or [])
        self.into = into


def runs_of(source, *, skipped: dict | None = None) -> list[_Run]:
    """The runs at ``source``: one run folder (a checkpoint with its TrainConfig; one inside a
    store is first checked against its store row), or every run of a store, each checked against
    its row (:func:`interp.sweeps.store.checked_model`: files, config.json, shape, accuracy). A
    store's run that fails is left out, named in ``skipped`` (run name -> why); a ValueError
    when no run is left."""
    from interp.sweeps import store
    from interp.sweeps.frame import find_store
    from interp.training import checkpoints
    from interp.training.runs import TrainConfig

    skipped = {} if skipped is None else skipped
    p = Path(source)
    if not p.exists():
        raise ValueError(f"{p} does not exist; accepted: a run folder, a sweep folder or a store file")
    if p.is_dir() and (p / checkpoints.CONFIG).is_file():
        inside = store.store_of_folder(p)  # a store's run folder: its row says what it must hold
        if inside is not None:
            store.checked_model(*inside)
        meta = checkpoints.read_meta(p)
        if not meta.get("train_config"):
            raise ValueError(f"{p} is a checkpoint of a bare model (no TrainConfig): no run to follow")
        result = meta.get("result") or {}
        return [_Run(p, TrainConfig.from_dict(meta["train_config"]), result.get("accuracy"),
                     result.get("curve"))]
    path = find_store(p)
    df = store.read(path)
    if df.empty:
        raise ValueError(f"no runs in {path}")
    out = []
    for _, row in df.iterrows():
        try:
            store.checked_model(path, row)
        except store.CheckpointMismatch as e:
            skipped[str(row["name"])] = str(e)
            continue
        out.append(_Run(Path(row["checkpoint"]), TrainConfig.from_dict(_config_dict(row["config"])),
                        row["accuracy"], row["curve"]))
    if not out:
        raise ValueError(f"no run of {path} can be read: {len(skipped)} skipped (e.g. {next(iter(skipped.values()))})")
    return out


def _config_dict(value) -> dict:
    import json

    return json.loads(value) if isinstance(value, str) else dict(value)


def place(runs: list[_Run], snapshots_out=None) -> None:
    """Where each run's timeline is read from or saved: its folder's ``timeline/`` when one is
    saved there or the folder is writable, else ``snapshots_out/<run>/`` (a store the user cannot
    write; a ValueError naming the folder when there is no ``snapshots_out``)."""
    import os

    from interp.training import snapshots

    for r in runs:
        elsewhere = None if snapshots_out is None else Path(snapshots_out) / r.config.name()
        if snapshots.has_snapshots(r.folder):
            continue
        if elsewhere is not None and snapshots.has_snapshots(r.folder, elsewhere):
            r.into = elsewhere
        elif not os.access(r.folder, os.W_OK | os.X_OK):
            if elsewhere is None:
                raise ValueError(f"{r.folder}: not writable by this user, and its run has no saved timeline; "
                                 "pass --out DIR: the snapshots are then saved under DIR/snapshots/")
            r.into = elsewhere


def ensure_snapshots(runs: list[_Run], *, keep: int = 20, skipped: dict | None = None,
                     milestones=None) -> list[str]:
    """Train again, with snapshots, every run of ``runs`` without a saved timeline (the seeds of
    one cell together), check each against its checkpoint bit for bit and save its snapshots
    (into ``run.into`` where set); the folders written. A run that fails is removed from
    ``runs`` and named in ``skipped`` (without ``skipped``: the ValueError is raised).

    ``milestones`` (names of :mod:`interp.training.milestones`, or None): a run whose saved
    timeline lacks a snapshot at one of them is trained again with snapshots at step 0, exactly
    those milestones and its last step (the saved timeline is replaced). Every group's plan is
    made, and so checked, before any group trains: a milestone a run's curve never reaches is a
    ValueError naming it, and nothing is trained."""
    from interp.sweeps.folders import group_key
    from interp.training import milestones as marks
    from interp.training import snapshots

    names = None if milestones is None else marks.check_names(milestones)
    if names:
        def lacks(r):
            return not snapshots.has_milestones(r.folder, r.config, r.curve, names, r.into)
    else:
        def lacks(r):
            return not snapshots.has_snapshots(r.folder, r.into)
    groups: dict = {}
    for r in runs:
        if lacks(r):
            groups.setdefault(group_key(r.config), []).append(r)
    plans = {k: marks.plan([(r.config, r.curve) for r in m], names) for k, m in groups.items()} if names else {}
    written = []
    for key, members in groups.items():
        results, snaps = snapshots.train_with_snapshots([r.config for r in members], keep=keep, plan=plans.get(key))
        for r, result in zip(members, results):
            try:
                _check_same(r.folder, result.model.state_dict(), "retrained")
                written.append(str(snapshots.save_snapshots(r.folder, snaps[r.config.seed], into=r.into)))
            except ValueError as e:
                if skipped is None:
                    raise
                skipped[r.config.name()] = str(e)
                runs.remove(r)
    return written


def _check_same(folder: Path, state: dict, what: str, file: str | None = None) -> None:
    """Refuse, by name, a ``state`` that is not the checkpoint's in ``folder`` bit for bit."""
    import torch

    from interp.training import checkpoints
    from interp.training.machine import mkl_branch

    stored = checkpoints.load(folder).state_dict()
    if set(stored) != set(state):
        differs = sorted(set(stored) ^ set(state))
    else:
        differs = [k for k in sorted(stored)
                   if stored[k].dtype != state[k].dtype or not torch.equal(stored[k], state[k])]
    if not differs:
        return
    if what == "retrained":
        raise ValueError(f"run {folder}: this machine trains another model than the stored one "
                         f"(tensor {differs[0]} differs after training again with snapshots): a run "
                         "trains the same bits again only on the same kind of CPU with the same MKL "
                         f"setting (this process's MKL branch: {mkl_branch()}; the interp command "
                         "sets MKL_CBWR=AUTO before torch starts)")
    raise ValueError(f"run {folder}: snapshot {file} is not the checkpoint's model (tensor "
                     f"{differs[0]} differs); delete its timeline/ to train it again with snapshots")


def timeline(run_or_store, *, batch_size: int = 256, keep: int = 20, snapshots_out=None, milestones=None):
    """One row per (run, snapshot step) of ``run_or_store`` (module docstring), a pandas
    DataFrame sorted by run and step, with ``df.attrs["skipped"]``: run name -> why it was left
    out (a checkpoint that is not its row's, corrupt or NaN weights, a timeline that does not
    check). ``keep``: the most snapshots per run, for runs trained again here (a saved timeline
    keeps what it holds). ``snapshots_out``: where the snapshots of runs whose folder this user
    cannot write go (:func:`place`). ``milestones``: :func:`ensure_snapshots`'s. A ValueError when
    no run can be read."""
    import pandas as pd

    from interp.training.machine import one_thread

    skipped: dict = {}
    runs = runs_of(run_or_store, skipped=skipped)
    place(runs, snapshots_out)
    ensure_snapshots(runs, keep=keep, skipped=skipped, milestones=milestones)
    rows = []
    with one_thread():  # small operations: a second thread on shared cores costs many times over
        for r in runs:
            try:
                rows += measure_run(r, batch_size=batch_size)
            except ValueError as e:  # this run's timeline does not check: named, the others go on
                skipped[r.config.name()] = str(e)
    if not rows and len(skipped) == 1:  # one run (a run folder): its own reason
        raise ValueError(next(iter(skipped.values())))
    if not rows:
        raise ValueError(f"no timeline of {run_or_store} can be read: {len(skipped)} run(s) skipped (e.g. "
                         f"{next(iter(skipped.values()), 'none')})")
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skipped
    return df


def measure_run(run: _Run, *, batch_size: int = 256) -> list[dict]:
    """The rows of one run: each snapshot loaded into the checkpoint's model, measured, labelled."""
    from interp.inspect.studies import analysis
    from interp.inspect.mechanism import levels
    from interp.training import checkpoints, snapshots

    snaps = snapshots.load_snapshots(run.folder, run.into)
    last = max(snaps)
    where = snapshots.timeline_dir(run.folder, run.into)
    named = f"{snapshots.FOLDER}/" if run.into is None else f"{where}/"
    _check_same(run.folder, snaps[last], "saved", named + snapshots.file_name(last))
    base = checkpoints.load(run.folder)
    c = run.config
    outcome = None if run.accuracy is None else analysis.classify(float(run.accuracy), c.n)
    head = dict(run=c.name(), seed=c.seed, case=c.case, n=c.n, d_token=c.d_token,
                n_layers=c.n_layers, pos_embed=c.pos_embed, d_mlp=c.d_mlp)
    rows = []
    for step in sorted(snaps):
        model = copy.deepcopy(base)
        checkpoints.check_finite(snaps[step], where / snapshots.file_name(step),
                                 constants=dict(model.named_buffers()))
        model.load_state_dict(snaps[step], strict=True)
        measured = analysis.measure(model, batch_size=batch_size, seed=0)
        # read where the labels read (measure's at), on the same inputs' size and seed
        graded = progress.progress(model, batch_size=batch_size, seed=0, at=measured["at"])
        loss = snaps.losses.get(step)
        rows.append(dict(**head, step=step, loss=math.nan if loss is None else loss,
                         **{k: {**graded, **measured}.get(k) for k in MEASURES},
                         **levels.labels_of(measured), plateau_exit=snaps.plateau_exit,
                         final_accuracy=run.accuracy, outcome=outcome,
                         **{VERSION_COLUMN: MEASURES_VERSION}))
    return rows


def read_timeline(path):
    """The rows of a ``timeline.csv`` that ``interp timeline`` wrote (a pandas DataFrame, the
    seal column dropped), once it checks: every row's seal (issue 55) and the measures version
    (:data:`MEASURES_VERSION`). A ValueError naming the file and saying to re-measure otherwise:
    a table written before seals or before issue 52 (no ``measures_version``), a row edited or
    cut, or rows of another version."""
    import io

    import pandas as pd

    from interp.inspect.studies.atlas_cache import SEAL, read_sealed

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist; accepted: a timeline.csv written by `interp timeline`")
    text = path.read_text()
    df = pd.read_csv(io.StringIO(text), dtype={"run": str, VERSION_COLUMN: str})
    again = f"run `interp timeline RUN_OR_STORE --out {path.parent}` to measure it again"
    if SEAL not in df.columns:
        raise ValueError(f"{path} was written before timeline seals (issue 55); {again}")
    _, bad = read_sealed(text)
    if bad:
        raise ValueError(f"{path}: {bad} row(s) fail their seal (edited or cut); {again}")
    held = held_version(df)
    if held != MEASURES_VERSION:
        raise ValueError(f"{path} holds measures version {held}; this code measures version "
                         f"{MEASURES_VERSION} (issue 52's progress measures); {again}")
    return df.drop(columns=[SEAL])


def held_version(df) -> str:
    """The measures version a timeline table's rows hold: the one version, ``"none"`` (written
    before issue 52), or the versions found joined with ``" and "``."""
    if VERSION_COLUMN not in df.columns:
        return "none"
    found = sorted({"none" if v != v else str(v) for v in df[VERSION_COLUMN]})
    return " and ".join(found) if found else "none"


def formation(rows) -> dict:
    """When the routing forms and the code settles in one run's rows (sorted by step; dicts or
    a DataFrame), as ``PREDICTIONS.md`` defines them; None where the routing never forms."""
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)
    rows = sorted(rows, key=lambda r: r["step"])
    forms = None
    for r in reversed(rows):
        if r["routing"] not in NAMED:
            break
        forms = r["step"]
    settles, final_code = rows[-1]["step"], rows[-1]["code"]
    for r in reversed(rows):
        if r["code"] != final_code:
            break
        settles = r["step"]
    last = rows[-1]
    return dict(run=last["run"], seed=last["seed"], routing_forms=forms, code_settles=settles,
                plateau_exit=last["plateau_exit"], outcome=last["outcome"],
                routing=last["routing"], code=last["code"], mechanism=last["mechanism"],
                last_step=last["step"])


def changes(rows) -> list[tuple[int, str]]:
    """``(step, "routing none -> lookup")`` for each snapshot where a label differs from the
    one before it (routing or value code), in order."""
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)
    rows = sorted(rows, key=lambda r: r["step"])
    out = []
    for before, after in zip(rows, rows[1:]):
        for label in ("routing", "code"):
            if before[label] != after[label]:
                out.append((after["step"], f"{label} {before[label]} -> {after[label]}"))
    return out
