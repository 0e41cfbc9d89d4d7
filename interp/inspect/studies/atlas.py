"""The mechanism atlas (issue 29): every seed of a store with its cell, outcome, measures and
mechanism label, the pre-registered predictions counted, and the phase diagrams drawn.

:func:`build_atlas` reads a results store (:func:`interp.sweeps.frame.read_runs`) and returns one
row per stored run (seed):

============== ==================================================================================
column         meaning
============== ==================================================================================
case, n,       the cell: TrainConfig's fields of that name
d_token,
n_layers,
pos_embed,
d_mlp, mlp,
function
architecture   the cell's architecture, named by :func:`architecture`
seed, name     the run's seed and its name in the store
status         the store's status (``ok``, or ``failed: ...`` for a run whose training failed)
accuracy,      the store's test accuracy and steps trained
steps
outcome        :func:`interp.inspect.studies.analysis.classify` of the accuracy (``success``,
               ``partial``, ``failed``); ``failed`` for a run whose training failed
label          :func:`interp.inspect.mechanism.labels.mechanism` of the seed's measures; ``failed`` for a
               failed seed (not measured), ``unmeasured`` for a seed without a checkpoint
routing, code, the two levels behind it (:mod:`interp.inspect.mechanism.levels`; an atlas written before
key_code       issue 42 has no code columns: its ``construction`` reads ``lookup``, the routing)
acc, acc_any,  every measure of :func:`interp.inspect.mechanism.measure.measure` (its docstring says what
mass, ...     each is), NaN for failed seeds; ``acc_mean_mlp``, ``attn_entropy``, ... where
               ``measure`` gives them
value_das_dim, with ``das=True``: the learned (DAS) dimension beside ``value_dim`` and
query_das_dim  ``query_dim`` (their upper bounds), for every successful lookup
               (:mod:`interp.inspect.studies.atlas_das`; ``das_with``: how it was computed)
geometry,      with ``geometry=True``: the figure each code of a successful lookup draws, its
key_geometry   measures ``value_fig_*``, ``query_fig_*`` (:mod:`interp.inspect.studies.atlas_geometry`)
============== ==================================================================================

Measuring a seed loads its checkpoint (a second or so of CPU, on one thread), so only successful
and partial seeds are measured, and ``cache`` (an earlier ``atlas.csv``) lends the rows whose
name, cell, seed, status and accuracy match. Labels are always recomputed from the measures.

:func:`write_atlas` writes ``atlas.csv`` (this table), ``atlas.md`` (per case, layers,
architecture and function: n down, d_token across, each cell its successes and mechanism mix;
then the predictions of ``experiments/atlas/PREDICTIONS.md``, computed by
:mod:`interp.inspect.studies.atlas_predictions`) and the phase diagrams of
:mod:`interp.inspect.studies.atlas_figures`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from interp.core import tasks
from interp.core.fields import READINGS, reading_fields
from interp.core.fields import acting as declared_acting
from interp.inspect.mechanism import labels
from interp.inspect.studies import analysis, atlas_cache, atlas_das, atlas_geometry
from interp.sweeps import store
from interp.sweeps.store import CheckpointMismatch, checked_model
from interp.training.runs import TrainConfig
from interp.inspect.studies.atlas_figures import figures, mix, panels, theory_line  # noqa: F401 - re-exported
from interp.inspect.studies.atlas_markdown import (  # noqa: F401 - re-exported
    FAILED, SUMMARY_LABELS, UNMEASURED, cell_text, markdown, predictions_markdown, summary_markdown,
    theory_markdown)
from interp.inspect.studies.atlas_levels import add_formation
from interp.inspect.studies.atlas_predictions import ATTN, number, predictions

log = logging.getLogger(__name__)

#: the cell's fields, as TrainConfig names them; ``architecture`` is named from them
CELL = ("case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "mlp", "function")
RUN = ("seed", "name", "status", "accuracy", "steps", "outcome", "label")
LEVELS = ("routing", "code", "key_code")
#: the fields a cached row must share with the store's run to lend its measures
_MATCH = ("case", "n", "d_token", "n_layers", "d_mlp", "function", "seed", "status")


#: the model's fields beyond its MLP (issue 28's screen factors, ``experiments/readings/screen``):
#: those declared ``reading=True`` (:mod:`interp.core.fields`), at the atlas grid's values (the
#: paper preset's, ``TrainConfig.paper(..., reading="attention-only")``); a run with any other
#: value is named with it (:func:`architecture`), so a store holding another reading's runs never
#: pools them with the grid's architectures
READING = {k: getattr(TrainConfig.paper(1, 2, 1, reading="attention-only"), k) for k in reading_fields(TrainConfig)}


#: named readings of the paper's model: name -> its fields off :data:`READING`'s values
#: (:data:`interp.core.fields.READINGS`, those with any). ``f14`` is issue 28's screen's choice
#: (``experiments/readings/screen/scores.md``; its levels there, a test checks);
#: :func:`architecture` names a run with exactly a named reading's fields ``[f14]``. The bracket
#: names the fields only; the MLP's width and placement stay in the base name (f14's own
#: two-layer models, MLP after the last attention only, are ``mlp-4x-last[f14]``)
NAMED = {name: dict(r.fields) for name, r in READINGS.items() if r.fields}


def acting(fields: dict, case: int, n_layers: int, pos_embed: str | None = None) -> dict:
    """The reading ``fields`` that can act in a cell, as the screen writes a cell's fields
    (``experiments/readings/screen/design.py``, ``cell_fields``), by each field's declared
    ``acts`` (:func:`interp.core.fields.acting`): the residual only with two layers, the PE
    init only with a learned PE (``pos_embed`` None: assumed), the key order only where keys
    are permuted; the others everywhere."""
    return declared_acting(TrainConfig, fields, case, n_layers, pos_embed)


def architecture(case: int, d_token: int, d_mlp: int, mlp: str = "every", n_layers: int = 1,
                 *, pos_embed: str | None = None, **reading) -> str:
    """The architecture's name, by rule: ``attention-only`` when d_mlp = 0; else ``mlp-<r>x``
    when d_mlp = r d_model for a whole r (d_model = 2 d_token in cases 2-3, else d_token), else
    ``mlp-<d_mlp>``; ``-last`` appended when a two-layer model has its MLP after the last layer
    only (``mlp="last"``; with one layer it is the same model as ``"every"``). The name
    ``mlp-4x`` is d_mlp = 4 d_model after every attention layer; the atlas's grid
    (``experiments/atlas/grid.py``) trains f14's fields under it since issue 28's gate, named
    ``mlp-4x[f14]``.
    ``reading``: any of :data:`READING`'s fields; those off its value are appended in brackets
    (``mlp-4x[W_O=identity,init=mha]``), or the name of a :data:`NAMED` reading when they are
    exactly its fields that act in the cell (:func:`acting`; ``pos_embed``: the cell's PE), as
    ``mlp-4x[f14]``; ValueError for a field it does not name."""
    unknown = sorted(set(reading) - set(READING))
    if unknown:
        raise ValueError(f"reading fields {unknown}; accepted: {list(READING)}")
    if d_mlp == 0:
        name = ATTN
    else:
        d_model = tasks.get(case).d_model(d_token)
        name = f"mlp-{d_mlp // d_model}x" if d_mlp % d_model == 0 else f"mlp-{d_mlp}"
        name += "-last" if mlp == "last" and n_layers > 1 else ""
    off = {k: str(v) for k, v in reading.items() if str(v) != str(READING[k])}
    if not off:
        return name
    for named, fields in NAMED.items():
        if off == {k: str(v) for k, v in acting(fields, case, n_layers, pos_embed).items()}:
            return f"{name}[{named}]"
    return name + f"[{','.join(sorted(f'{k}={v}' for k, v in off.items()))}]"


def _base(r) -> dict:
    """A stored run's cell, architecture, seed, result and outcome."""
    base = {k: (int(r[k]) if k in ("case", "n", "d_token", "n_layers", "d_mlp") else r[k]) for k in CELL}
    base["architecture"] = architecture(base["case"], base["d_token"], base["d_mlp"], base["mlp"],
                                        base["n_layers"], pos_embed=base["pos_embed"],
                                        **{k: r[k] for k in READING})
    acc, steps = number(r["accuracy"]), number(r["steps"])
    base.update(seed=int(r["seed"]), name=str(r["name"]), status=str(r["status"]), accuracy=acc,
                steps=steps if math.isnan(steps) else int(steps))
    ok = base["status"] == "ok" and not math.isnan(acc)
    base["outcome"] = analysis.classify(acc, base["n"]) if ok else FAILED
    return base


def read_cache(path) -> dict[str, dict]:
    """The rows of an earlier ``atlas.csv`` by run name ({} when there is none), each marked
    ``_cache``: ``sealed`` (its row_sha holds), ``bad`` (cut or edited) or ``legacy`` (an atlas
    written before seals, :mod:`interp.inspect.studies.atlas_cache`); ValueError when the file is there
    but is no atlas table (it would be overwritten)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        return {}
    try:
        text = path.read_text()
        # a name of 12 decimal digits, or a hex digest like 5e12..., stays text
        df = pd.read_csv(path, dtype={"name": str, **{k: str for k in atlas_cache.KEY}})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not an atlas table ({e}); move it away or pass another --out") from e
    lacking = [c for c in (*CELL, *RUN) if c not in df.columns]
    if lacking:
        raise ValueError(f"{path} is not an atlas table (no columns {lacking}); move it away or "
                         "pass another --out")
    sealed, _ = atlas_cache.read_sealed(text)
    legacy = atlas_cache.SEAL not in df.columns
    rows = df.to_dict("records")
    for i, r in enumerate(rows):
        r["_cache"] = "legacy" if legacy else "sealed" if i in sealed else "bad"
    return {str(r["name"]): r for r in rows}


def _reusable(old: dict | None, base: dict, has_checkpoint: bool) -> bool:
    """A cached row lends its measures when it is the same run (cell, seed, status, accuracy)
    measured the same way: a sealed row with this run's checksum digest and measuring options,
    or a legacy row for a run with no checkpoint to measure (module docstring of
    :mod:`interp.inspect.studies.atlas_cache`)."""
    if old is None or old["label"] == UNMEASURED or old.get("_cache") == "bad":
        return False
    if old.get("_cache") == "legacy":
        if has_checkpoint and base["outcome"] != FAILED:
            return False
    elif (atlas_cache.text(old.get("checksum")) != atlas_cache.text(base.get("checksum"))
          or not atlas_cache.same_measures(old, base["measured_with"])):
        return False
    for k in _MATCH:
        a, b = old[k], base[k]
        if isinstance(b, str) and str(a) != b or not isinstance(b, str) and number(a) != number(b):
            return False
    a, b = number(old["accuracy"]), base["accuracy"]
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12


def _has_checkpoint(r) -> bool:
    ckpt = r["checkpoint"]
    return isinstance(ckpt, str) and bool(ckpt) and Path(ckpt).exists()


def _measure(r, base: dict, batch_size: int, store_path=None, stored=None) -> dict:
    """The measures of one stored run's model, on one thread
    (:func:`interp.training.machine.one_thread`), or ``{"note": "skipped: ..."}`` naming the run
    when it has no checkpoint or its checkpoint cannot be used: not its store row's ``stored``,
    corrupt, NaN weights, another shape, an accuracy the model does not reproduce
    (:func:`interp.sweeps.store.checked_model`, issue 55)."""
    from interp.training.machine import one_thread

    if not _has_checkpoint(r):
        why = (f"run {base['name']}: no checkpoint (stored without one)" if not isinstance(r["checkpoint"], str)
               or not r["checkpoint"] else f"run {base['name']}: checkpoint folder {r['checkpoint']}: the folder is missing")
        log.warning("skipped: %s", why)
        return {"note": f"skipped: {why}"}
    with one_thread():
        try:  # checked against its store row before anything is measured (issues 43, 55)
            model = checked_model(store_path, stored if stored is not None else r)
        except CheckpointMismatch as e:
            log.warning("skipped: %s", e)
            return {"note": f"skipped: {e}"}
        return analysis.measure(model, case=base["case"], n=base["n"], batch_size=batch_size)


def label(row: dict) -> str:
    """``failed``, ``unmeasured`` (no measures), else :func:`interp.inspect.mechanism.levels.mechanism`."""
    if row["outcome"] == FAILED:
        return FAILED
    if row.get("label") == UNMEASURED:
        return UNMEASURED
    return labels.mechanism(row)


def _order(row: dict) -> tuple:
    return (row["case"], row["n_layers"], row["architecture"] != ATTN, row["architecture"],
            row["function"] != "permutation", row["function"], row["n"], row["d_token"], row["seed"],
            row["name"])


def build_atlas(store_or_dir, *, batch_size: int = 512, cache=None, progress=None, das: bool = False,
                geometry: bool = False):
    """One row per run of the store ``store_or_dir`` (a store file or a folder holding one), as
    the module docstring says; ``cache``: an earlier ``atlas.csv`` whose rows are reused.
    ``progress``: a wrapper ``progress(iterable, total=, desc=)`` such as ``tqdm.tqdm``.
    ``das``: every successful lookup also gets its learned dimension
    (:mod:`interp.inspect.studies.atlas_das`: ``value_das_dim``, ``query_das_dim``).
    ``geometry``: and its codes' figure (:mod:`interp.inspect.studies.atlas_geometry`)."""
    import pandas as pd

    from interp.sweeps.frame import find_store, read_runs

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: an integer >= 1")
    path = find_store(store_or_dir)
    known = read_cache(cache) if cache is not None else {}
    runs = read_runs(path)
    if runs.empty:
        raise ValueError(f"{path} holds no runs")
    stored = {str(x["name"]): x for x in store.read(path).to_dict("records")}
    rows, todo, cached = [], [], 0
    for _, r in runs.iterrows():
        base = _base(r)
        base.update(checksum=atlas_cache.run_checksum((stored.get(base["name"]) or {}).get("checksums")),
                    measured_with=atlas_cache.measured_with(batch_size))
        old = known.get(base["name"])
        if _reusable(old, base, _has_checkpoint(r)):
            rows.append({k: v for k, v in {**old, **base}.items() if k not in ("_cache", atlas_cache.SEAL)})
            cached += 1
        elif base["outcome"] == FAILED:
            rows.append(base)
        else:
            todo.append((r, base))
    bad = sum(1 for o in known.values() if o.get("_cache") == "bad")
    log.info("atlas of %s: %d runs, %d from the cache, %d to measure", path, len(runs), cached, len(todo))
    it = todo if progress is None else progress(todo, total=len(todo), desc="measuring seeds")
    for r, base in it:
        m = _measure(r, base, batch_size, path, stored.get(base["name"]))
        rows.append({**base, **m} if "note" not in m else {**base, **m, "label": UNMEASURED})
    for row in rows:
        row["label"] = label(row)
        measured = row["label"] not in (FAILED, UNMEASURED)
        row.update(routing=labels.routing(row) if measured else row["label"],
                   code=labels.code(row, "value") if measured else row["label"],
                   key_code=labels.code(row, "query") if measured else row["label"])
    found = atlas_das.add_das(rows, path, stored, batch_size=batch_size, progress=progress) if das else None
    shaped = atlas_geometry.add_geometry(rows, path, stored, batch_size=batch_size,
                                         progress=progress) if geometry else None
    rows.sort(key=_order)
    df = pd.DataFrame(rows)
    front = [*CELL, "architecture", *RUN, *LEVELS]
    df = add_formation(df[front + [c for c in df.columns if c not in front]], path).reset_index(drop=True)
    skipped = int(df["note"].notna().sum()) if "note" in df else 0
    df.attrs["cache"] = dict(reused=cached, measured=len(todo) - skipped, bad=bad, skipped=skipped)
    if found is not None:
        df.attrs["das"] = found
    if shaped is not None:
        df.attrs["geometry"] = shaped
    return df


def write_atlas(df, out_dir, *, source: str = "STORE_OR_DIR") -> dict:
    """Write ``atlas.csv`` (sealed: :func:`interp.inspect.studies.atlas_cache.seal`), ``atlas.md``,
    ``atlas-success.png`` and ``atlas-mechanism.png`` into ``out_dir`` as one set, all or none
    (:func:`interp.training.files.write_files`); returns their paths (and the predictions)."""
    from interp.training.files import figure_bytes, write_files

    out = Path(out_dir)
    preds = predictions(df)
    contents = {"table": (out / "atlas.csv", atlas_cache.seal(df.to_csv(index=False))),
                "report": (out / "atlas.md", markdown(df, preds, source))}
    for name, fig in figures(df).items():
        contents[name] = (out / f"{name}.png", figure_bytes(fig, ".png", close=True, dpi=100))
    write_files(dict(contents.values()))
    return {**{k: p for k, (p, _) in contents.items()}, "predictions": preds}
