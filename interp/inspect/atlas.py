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
outcome        :func:`interp.inspect.analysis.classify` of the accuracy (``success``,
               ``partial``, ``failed``); ``failed`` for a run whose training failed
label          :func:`interp.inspect.labels.mechanism` of the seed's measures; ``failed`` for a
               failed seed (not measured), ``unmeasured`` for a seed without a checkpoint
routing, code, the two levels behind it (:mod:`interp.inspect.levels`; an atlas written before
key_code       issue 42 has no code columns: its ``construction`` reads ``lookup``, the routing)
acc, acc_any,  every measure of :func:`interp.inspect.analysis.measure` (its docstring says what
mass, ...     each is), NaN for failed seeds; ``acc_mean_mlp``, ``attn_entropy``, ... where
               ``measure`` gives them
============== ==================================================================================

Measuring a seed loads its checkpoint (a second or so of CPU, on one thread), so only successful
and partial seeds are measured, and ``cache`` (an earlier ``atlas.csv``) lends the rows whose
name, cell, seed, status and accuracy match. Labels are always recomputed from the measures.

:func:`write_atlas` writes ``atlas.csv`` (this table), ``atlas.md`` (per case, layers,
architecture and function: n down, d_token across, each cell its successes and mechanism mix;
then the predictions of ``experiments/atlas/PREDICTIONS.md``, computed by
:mod:`interp.inspect.atlas_predictions`) and the phase diagrams of
:mod:`interp.inspect.atlas_figures`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from interp.core import bounds, tasks
from interp.inspect import analysis, labels
from interp.inspect.atlas_figures import figures, mix, panels, theory_line
from interp.inspect.atlas_predictions import ATTN, number, predictions, shared_readings

log = logging.getLogger(__name__)

#: the cell's fields, as TrainConfig names them; ``architecture`` is named from them
CELL = ("case", "n", "d_token", "n_layers", "pos_embed", "d_mlp", "mlp", "function")
RUN = ("seed", "name", "status", "accuracy", "steps", "outcome", "label")
LEVELS = ("routing", "code", "key_code")
FAILED, UNMEASURED = "failed", "unmeasured"
#: the fields a cached row must share with the store's run to lend its measures
_MATCH = ("case", "n", "d_token", "n_layers", "d_mlp", "function", "seed", "status")


#: the model's fields beyond its MLP (issue 28's screen factors, ``experiments/readings/screen``)
#: at the atlas grid's values; a run with any other value is named with it (:func:`architecture`),
#: so a store holding another reading's runs never pools them with the grid's architectures
READING = {"attn_bias": True, "unembed_bias": True, "W_O": "free", "residual": "stream",
           "init": "pytorch", "pos_init": "drawn", "embed_scale": "1", "key_order": "sequence"}


#: named readings of the paper's model: name -> its fields off :data:`READING`'s values. ``f14``
#: is issue 28's screen's choice (``experiments/readings/screen/scores.md``; its levels there, a
#: test checks); :func:`architecture` names a run with exactly a named reading's fields ``[f14]``.
#: The bracket names the fields only; the MLP's width and placement stay in the base name (f14's
#: own two-layer models, MLP after the last attention only, are ``mlp-4x-last[f14]``)
NAMED = {"f14": {"unembed_bias": False, "W_O": "identity", "residual": "embed", "key_order": "batch"}}


def acting(fields: dict, case: int, n_layers: int, pos_embed: str | None = None) -> dict:
    """The reading ``fields`` that can act in a cell, as the screen writes a cell's fields
    (``experiments/readings/screen/design.py``, ``cell_fields``): the residual only with two
    layers, the PE init only with a learned PE (``pos_embed`` None: assumed), the key order only
    where keys are permuted; the others everywhere."""
    def acts(k: str) -> bool:
        return {"residual": n_layers > 1, "pos_init": pos_embed in (None, "learned"),
                "key_order": tasks.get(case).permuted}.get(k, True)

    return {k: v for k, v in fields.items() if acts(k)}


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
    """The rows of an earlier ``atlas.csv`` by run name ({} when there is none); ValueError when
    the file is there but is no atlas table (it would be overwritten)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        return {}
    try:
        df = pd.read_csv(path, dtype={"name": str})  # a name of 12 decimal digits stays text
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not an atlas table ({e}); move it away or pass another --out") from e
    lacking = [c for c in (*CELL, *RUN) if c not in df.columns]
    if lacking:
        raise ValueError(f"{path} is not an atlas table (no columns {lacking}); move it away or "
                         "pass another --out")
    return {str(r["name"]): r for r in df.to_dict("records")}


def _reusable(old: dict | None, base: dict) -> bool:
    """A cached row lends its measures when it is the same run, measured (or failed) then."""
    if old is None or old["label"] == UNMEASURED:
        return False
    for k in _MATCH:
        a, b = old[k], base[k]
        if isinstance(b, str) and str(a) != b or not isinstance(b, str) and number(a) != number(b):
            return False
    a, b = number(old["accuracy"]), base["accuracy"]
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12


def _measure(r, base: dict, batch_size: int) -> dict | None:
    """The measures of one stored run's model, on one thread
    (:func:`interp.training.machine.one_thread`); None when it has no checkpoint to load."""
    from interp.training import checkpoints
    from interp.training.machine import one_thread

    ckpt = r["checkpoint"]
    if not isinstance(ckpt, str) or not ckpt or not Path(ckpt).exists():
        log.warning("run %s has no checkpoint; not measured", base["name"])
        return None
    with one_thread():
        model = checkpoints.load(ckpt)
        return analysis.measure(model, case=base["case"], n=base["n"], batch_size=batch_size)


def label(row: dict) -> str:
    """``failed`` for a failed seed, ``unmeasured`` for a seed with no measures, else the
    mechanism its measures show (:func:`interp.inspect.labels.mechanism`)."""
    if row["outcome"] == FAILED:
        return FAILED
    if row.get("label") == UNMEASURED:
        return UNMEASURED
    return labels.mechanism(row)


def _order(row: dict) -> tuple:
    return (row["case"], row["n_layers"], row["architecture"] != ATTN, row["architecture"],
            row["function"] != "permutation", row["function"], row["n"], row["d_token"], row["seed"],
            row["name"])


def build_atlas(store_or_dir, *, batch_size: int = 512, cache=None, progress=None):
    """One row per run of the store ``store_or_dir`` (a store file or a folder holding one), as
    the module docstring says; ``cache``: an earlier ``atlas.csv`` whose rows are reused.
    ``progress``: a wrapper ``progress(iterable, total=, desc=)`` such as ``tqdm.tqdm``."""
    import pandas as pd

    from interp.sweeps.frame import find_store, read_runs

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; accepted: an integer >= 1")
    path = find_store(store_or_dir)
    known = read_cache(cache) if cache is not None else {}
    runs = read_runs(path)
    if runs.empty:
        raise ValueError(f"{path} holds no runs")
    rows, todo, cached = [], [], 0
    for _, r in runs.iterrows():
        base = _base(r)
        old = known.get(base["name"])
        if _reusable(old, base):
            rows.append({**old, **base})
            cached += 1
        elif base["outcome"] == FAILED:
            rows.append(base)
        else:
            todo.append((r, base))
    log.info("atlas of %s: %d runs, %d from the cache, %d to measure", path, len(runs), cached, len(todo))
    it = todo if progress is None else progress(todo, total=len(todo), desc="measuring seeds")
    for r, base in it:
        measures = _measure(r, base, batch_size)
        rows.append({**base, **measures} if measures is not None else {**base, "label": UNMEASURED})
    for row in rows:
        row["label"] = label(row)
        measured = row["label"] not in (FAILED, UNMEASURED)
        row.update(routing=labels.routing(row) if measured else row["label"],
                   code=labels.code(row, "value") if measured else row["label"],
                   key_code=labels.code(row, "query") if measured else row["label"])
    rows.sort(key=_order)
    df = pd.DataFrame(rows)
    front = [*CELL, "architecture", *RUN, *LEVELS]
    return df[front + [c for c in df.columns if c not in front]].reset_index(drop=True)


# ----------------------------------------------------------------------------- atlas.md


def cell_text(sub) -> str:
    """``k/t success, mix``: successful seeds of the seeds run, and their labels."""
    k = int((sub["outcome"] == "success").sum())
    return f"{k}/{len(sub)} " + mix(sub) if k else f"0/{len(sub)}"


def _table(sub) -> list[str]:
    ds = sorted(int(d) for d in sub["d_token"].unique())
    lines = ["| n \\ d_token | " + " | ".join(str(d) for d in ds) + " |", "|---" + "|--:" * len(ds) + "|"]
    for n, row in sub.groupby("n"):
        cells = {int(d): cell_text(c) for d, c in row.groupby("d_token")}
        lines.append(f"| {int(n)} | " + " | ".join(cells.get(d, "") for d in ds) + " |")
    return lines


def _numbers_text(numbers: dict) -> str:
    def fmt(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    return "; ".join(f"{k}: {fmt(v)}" for k, v in numbers.items())


def predictions_markdown(preds: list[dict], shown: int = 10) -> list[str]:
    """The predictions' table (verdict and numbers), then what refutes each, ``shown`` at most."""
    lines = ["| prediction | verdict | numbers |", "|---|---|---|"]
    lines += [f"| **{p['name']}** {p['claim']} | {p['verdict']} | {_numbers_text(p['numbers'])} |"
              for p in preds]
    lines += ["", "How the predictions read their declarations (`interp/inspect/atlas_predictions.py`, "
              "fixed before the first atlas run); shared by all:", ""]
    lines += [f"- {t}" for t in shared_readings()]
    lines += [""] + [f"- {p['name']}: {p['reading']}" for p in preds if p.get("reading")]
    for p in preds:
        if p["offending"]:
            more = len(p["offending"]) - shown
            lines += ["", f"{p['name']} ({p['verdict']}), against it:", ""]
            lines += [f"- {t}" for t in p["offending"][:shown]]
            lines += [f"- ... and {more} more (all in `interp atlas --json`)"] if more > 0 else []
    return lines


#: the labels :func:`summary_markdown` counts in columns of their own, in this order
SUMMARY_LABELS = ("construction", "mirror", "inverted", "mlp-lookup", "none", UNMEASURED)
#: Theorems 3.4 and 3.7 read at one head and float32's 32 bits (PREDICTIONS.md, "Where the
#: theorems sit on the map")
HEADS, BITS = 1, 32


def summary_markdown(df) -> list[str]:
    """One row per panel: cells run, cells with a successful seed, successful seeds of those run,
    the successful seeds by label, and the cells whose successful seeds are mostly the
    construction's mechanism against those with successes but no construction seed."""
    lines = ["| panel | cells | cells with a success | seeds successful | "
             + " | ".join(SUMMARY_LABELS) + " | other labels | cells mostly construction | "
             "cells with successes, none construction |",
             "|---|--:|--:|--:|" + "--:|" * len(SUMMARY_LABELS) + "--:|--:|--:|"]
    for title, sub in panels(df):
        cells = [c for _, c in sub.groupby(["n", "d_token"])]
        ok = sub[sub["outcome"] == "success"]
        counts = ok["label"].value_counts()
        won = [c[c["outcome"] == "success"]["label"] for c in cells]
        won = [w for w in won if len(w)]
        mostly = sum(int((w == "construction").sum()) * 2 > len(w) for w in won)
        never = sum(not (w == "construction").any() for w in won)
        other = int(len(ok) - sum(int(counts.get(k, 0)) for k in SUMMARY_LABELS))
        lines.append(f"| {title} | {len(cells)} | {len(won)} | {len(ok)} of {len(sub)} | "
                     + " | ".join(str(int(counts.get(k, 0))) for k in SUMMARY_LABELS)
                     + f" | {other} | {mostly} | {never} |")
    return lines


def theory_markdown(df) -> list[str]:
    """Where the theorems sit on the map, counted (PREDICTIONS.md, "Where the theorems sit on
    the map"): per panel that carries a theorem line (:func:`~interp.inspect.atlas_figures.theory_line`)
    and per n, the line's least d_token beside d_min (the smallest d_token with a successful
    seed) and the successful seeds below and at or above it; then the one-layer case-5 cells
    where Theorems 3.4 and 3.7 bind at h = 1, p = 32, with their best accuracy against Theorem
    3.7's error bound."""
    lines = ["| panel | theorem | n | least d_token | d_min | successful seeds below the line | at or above |",
             "|---|---|--:|--:|--:|--:|--:|"]
    for title, sub in panels(df):
        first = sub.iloc[0]
        line = theory_line(int(first["case"]), int(first["n_layers"]), first["architecture"])
        if line is None:
            continue
        text, least = line
        for n, row in sub.groupby("n"):
            ok = row[row["outcome"] == "success"]
            below = int((ok["d_token"] < least(int(n))).sum())
            d_min = int(ok["d_token"].min()) if len(ok) else "-"
            lines.append(f"| {title} | {text} | {int(n)} | {least(int(n))} | {d_min} | {below} | {len(ok) - below} |")
    bind = []
    for (n, d), sub in df[(df["case"] == 5) & (df["n_layers"] == 1)].groupby(["n", "d_token"]):
        bound = bounds.theorem_3_7_bound(int(n), HEADS, int(d), BITS)
        if bound["R"] > 0:
            acc = sub["accuracy"].astype(float)
            best = f"{100 * acc.max():.2f}%" if acc.notna().any() else "-"
            bind.append(f"| {int(n)} | {int(d)} | {bound['R']:.1f} | {100 * bound['bound']:.2f}% | "
                        f"{100 * (1 - bound['bound']):.2f}% | {best} | {len(sub)} |")
    lines += ["", f"Theorems 3.4 and 3.7 at h = {HEADS}, p = {BITS} bind where R = n log2 n - 3hdp > 0 (one layer, "
              "case 5; d = d_token): " + (f"{len(bind)} cell{'s' if len(bind) != 1 else ''} of this atlas. "
              "Theorem 3.7 bounds the error on its own inputs (f any function, target key 0); the accuracy "
              "here is on the training distribution, so the comparison is a guide, not a test." if bind else
              "no cell of this atlas.")]
    if bind:
        lines += ["", "| n | d_token | R | Theorem 3.7's least error | so accuracy at most | best seed | seeds |",
                  "|--:|--:|--:|--:|--:|--:|--:|", *bind]
    return lines


def markdown(df, preds: list[dict], source: str = "STORE_OR_DIR") -> str:
    """``atlas.md``: how to regenerate it, a legend, one table per panel, the predictions."""
    counts = df["outcome"].value_counts()
    cells = df.groupby(["case", "n_layers", "architecture", "function", "n", "d_token"]).ngroups
    lines = [
        "# The mechanism atlas", "",
        f"Regenerate: `interp atlas {source}` (it measures only the runs `atlas.csv` does not "
        "hold yet; `--remeasure` measures every run again). Predictions, declared before the "
        "first run: `experiments/atlas/PREDICTIONS.md`; how each is computed: "
        "`interp/inspect/atlas_predictions.py`.", "",
        f"{len(df)} seeds in {cells} cells: {int(counts.get('success', 0))} successful (accuracy "
        f">= {analysis.SUCCESS:.0%}), {int(counts.get('partial', 0))} partial, "
        f"{int(counts.get(FAILED, 0))} failed (accuracy < max(2/n, 5%), or training failed).", "",
        "Each cell: `k/t`, seeds successful of those run, then the successful seeds' mechanisms "
        "(`interp.inspect.labels.mechanism`): `c` construction, `i` inverted, `m` mirror, `l` "
        "mlp-lookup, `o` none of these, `?` not measured (no checkpoint), any other label "
        "written whole; e.g. `4/5 c3 m1`. An empty cell was not run.", "",
    ]
    lines += ["## Summary", "", "Per panel: its cells, those with a successful seed, the successful seeds "
              "by label, and the cells whose successful seeds are mostly (more than half) the construction's "
              "mechanism against those whose successful seeds include none.", "", *summary_markdown(df), ""]
    for title, sub in panels(df):
        lines += [f"## {title}", "", *_table(sub), ""]
    lines += ["## The theorems on the map", "", "The line each panel's figure carries (the width at which a "
              "theorem's construction exists; none on one-layer attention-only case 5, where Theorem 3.6 "
              "rules out hard attention at n >= 4), and which successful seeds lie on either side of it.", "",
              *theory_markdown(df), ""]
    lines += ["## Predictions", "", *predictions_markdown(preds), ""]
    return "\n".join(lines)


def write_atlas(df, out_dir, *, source: str = "STORE_OR_DIR") -> dict:
    """Write ``atlas.csv``, ``atlas.md``, ``atlas-success.png`` and ``atlas-mechanism.png`` into
    ``out_dir``, each whole or not at all; returns their paths (and the predictions under
    ``"predictions"``)."""
    from interp.training.files import save_figure, write_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    preds = predictions(df)
    paths = {"table": write_file(out / "atlas.csv", df.to_csv(index=False)),
             "report": write_file(out / "atlas.md", markdown(df, preds, source))}
    for name, fig in figures(df).items():
        paths[name] = save_figure(fig, out / f"{name}.png", dpi=100)
    return {**paths, "predictions": preds}
