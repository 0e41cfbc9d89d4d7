"""Mechanism timelines (issue 46): every snapshot of a run measured and labelled.

:func:`timeline` (``interp.timeline``) takes a run folder (a checkpoint folder: ``interp
train``'s, or a sweep's ``results/checkpoints/<run>``) or a results store (a store file, a
sweep folder) and returns one row per (run, snapshot step): the step, the training-batch loss
recorded there, the measures the two-level labels read (:func:`interp.inspect.mechanism.measure.measure`
at ``seed=0``) and the labels (:func:`interp.inspect.mechanism.levels.labels_of`: routing, code, key_code,
mechanism), the run's plateau exit and its outcome (:func:`interp.inspect.studies.analysis.classify` of
its final accuracy).

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

#: the routings :func:`formation` counts as formed
NAMED = ("lookup", "mirror", "inverted")
#: the measures the labels read (:mod:`interp.inspect.mechanism.levels`), kept as columns when measured
MEASURES = (
    "acc", "acc_any", "qk_diag", "qk_anti", "ov_anti", "follow", "at", "mass_keypos", "mlp_role",
    "attn_entropy", "value_dim", "value_top2", "value_rcv", "value_gap", "value_iia_full",
    "query_dim", "query_top2", "query_rcv", "query_gap", "query_iia_full",
)
LABELS = ("routing", "code", "key_code", "mechanism")


class _Run:
    """One run to draw a timeline of: its checkpoint folder, config and what training stored."""

    def __init__(self, folder: Path, config, accuracy, curve):
        self.folder, self.config, self.accuracy, self.curve = Path(folder), config, accuracy, list(curve or [])


def runs_of(source) -> list[_Run]:
    """The runs at ``source``: one run folder (a checkpoint with its TrainConfig), or every run
    of a store, each checked against its row (:func:`interp.sweeps.store.checked_checkpoint`)."""
    from interp.sweeps import store
    from interp.sweeps.frame import find_store
    from interp.training import checkpoints
    from interp.training.runs import TrainConfig

    p = Path(source)
    if not p.exists():
        raise ValueError(f"{p} does not exist; accepted: a run folder, a sweep folder or a store file")
    if p.is_dir() and (p / checkpoints.CONFIG).is_file():
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
        folder = store.checked_checkpoint(path, row)
        out.append(_Run(folder, TrainConfig.from_dict(_config_dict(row["config"])),
                        row["accuracy"], row["curve"]))
    return out


def _config_dict(value) -> dict:
    import json

    return json.loads(value) if isinstance(value, str) else dict(value)


def ensure_snapshots(runs: list[_Run], *, keep: int = 20) -> list[str]:
    """Train again, with snapshots, every run of ``runs`` without a ``timeline/`` (the seeds of
    one cell together), check each against its checkpoint bit for bit and save its snapshots;
    the folders written."""
    from interp.sweeps.folders import group_key
    from interp.training import snapshots

    groups: dict = {}
    for r in runs:
        if not snapshots.has_snapshots(r.folder):
            groups.setdefault(group_key(r.config), []).append(r)
    written = []
    for members in groups.values():
        results, snaps = snapshots.train_with_snapshots([r.config for r in members], keep=keep)
        for r, result in zip(members, results):
            _check_same(r.folder, result.model.state_dict(), "retrained")
            written.append(str(snapshots.save_snapshots(r.folder, snaps[r.config.seed])))
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


def timeline(run_or_store, *, batch_size: int = 256, keep: int = 20):
    """One row per (run, snapshot step) of ``run_or_store`` (module docstring), a pandas
    DataFrame sorted by run and step. ``keep``: the most snapshots per run, for runs trained
    again here (a saved timeline keeps what it holds)."""
    import pandas as pd

    from interp.training.machine import one_thread

    runs = runs_of(run_or_store)
    ensure_snapshots(runs, keep=keep)
    with one_thread():  # small operations: a second thread on shared cores costs many times over
        rows = [row for r in runs for row in measure_run(r, batch_size=batch_size)]
    return pd.DataFrame(rows)


def measure_run(run: _Run, *, batch_size: int = 256) -> list[dict]:
    """The rows of one run: each snapshot loaded into the checkpoint's model, measured, labelled."""
    from interp.inspect.mechanism import levels
    from interp.inspect.studies import analysis
    from interp.training import checkpoints, snapshots

    snaps = snapshots.load_snapshots(run.folder)
    last = max(snaps)
    _check_same(run.folder, snaps[last], "saved", f"{snapshots.FOLDER}/{snapshots.file_name(last)}")
    base = checkpoints.load(run.folder)
    c = run.config
    outcome = None if run.accuracy is None else analysis.classify(float(run.accuracy), c.n)
    head = dict(run=c.name(), seed=c.seed, case=c.case, n=c.n, d_token=c.d_token,
                n_layers=c.n_layers, pos_embed=c.pos_embed, d_mlp=c.d_mlp)
    rows = []
    for step in sorted(snaps):
        model = copy.deepcopy(base)
        where = run.folder / snapshots.FOLDER / snapshots.file_name(step)
        checkpoints.check_finite(snaps[step], where, constants=dict(model.named_buffers()))
        model.load_state_dict(snaps[step], strict=True)
        measured = analysis.measure(model, batch_size=batch_size, seed=0)
        loss = snaps.losses.get(step)
        rows.append(dict(**head, step=step, loss=math.nan if loss is None else loss,
                         **{k: measured.get(k) for k in MEASURES},
                         **levels.labels_of(measured), plateau_exit=snaps.plateau_exit,
                         final_accuracy=run.accuracy, outcome=outcome))
    return rows


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
