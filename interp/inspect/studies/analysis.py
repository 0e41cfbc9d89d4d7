"""Do trained seeds recover the paper's constructions? A sweep's seeds measured and answered.

:func:`analyze_sweep` reads a sweep's results store (:func:`interp.sweeps.store.read`), groups the runs
by config without the seed, classifies every seed as ``success`` (accuracy >= 0.99), ``failed``
(near chance: accuracy < max(2/n, 5%)) or ``partial``, measures the checkpoints of the groups
asked for and writes, from those numbers, a per-group answer: do successful seeds recover the construction
functionally (attention, QK, OV, patching) and geometrically (circle), and what do failed seeds
look like, in the words of :func:`interp.inspect.mechanism.labels.answer`.
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

from interp.inspect.mechanism.labels import (  # noqa: F401 - mechanism re-exported (analysis.mechanism)
    MECHANISMS, answer, labels_of, mechanism, r2_text, sort_by_group)
from interp.inspect.mechanism.measure import measure  # noqa: F401 - re-exported (analysis.measure)

log = logging.getLogger(__name__)

SUCCESS = 0.99
#: A group is bimodal when some seed succeeds and some seed ends below this accuracy (failed or
#: partial). Chosen after a fresh `make run` analysed nothing: its demo group (case 3, d_token 8)
#: has seeds at 100, 100, 92.8, 100 and 33.1 %, and the 33.1 % seed is partial, not failed.
WELL_BELOW = 0.5
#: config fields that name a group (TrainConfig fields other than the seed)
GROUP_FIELDS = ("case", "n", "d_token", "n_layers", "pos_embed")


def find_store(path) -> Path:
    """The store file ``path`` names: itself, a sweep folder's ``results/store.sqlite`` or a
    folder's ``store.sqlite`` (:func:`interp.sweeps.frame.find_store`, the one resolver every
    command uses); ValueError naming where it looked."""
    from interp.sweeps.frame import find_store as resolve

    return resolve(path)


def sweep_name(df, store_path) -> str:
    """The name of the sweep a store's runs (``df``, :func:`interp.sweeps.store.read`) belong
    to, whatever path reached the store (relative, ``results/store.sqlite``, a trailing slash):
    the ``sweep`` its runs recorded (``interp sweep``: the folder's name; ``interp train``: the
    run folder's), several joined by ", "; else the folder the store sits in."""
    names = [str(s) for s in dict.fromkeys(df["sweep"]) if isinstance(s, str) and s] if "sweep" in df else []
    if names:
        return ", ".join(names)
    p = Path(store_path).resolve()
    return p.parent.parent.name if p.parent.name == "results" else p.parent.name


def classify(acc: float, n: int, success: float = SUCCESS, fail_below: float | None = None) -> str:
    """``success`` (acc >= success), ``failed`` (acc < fail_below, default max(2/n, 5%): near
    chance 1/n) or ``partial``."""
    fail_below = max(2.0 / n, 0.05) if fail_below is None else fail_below
    if acc >= success:
        return "success"
    return "failed" if acc < fail_below else "partial"


def bimodal_groups(df, *, success: float = SUCCESS, well_below: float = WELL_BELOW) -> list[str]:
    """The groups (``df.group``, one row per seed with ``accuracy``) where some seed reaches
    ``success`` and some seed stays below ``well_below``, in the order they first appear."""
    if not 0 < well_below <= success:
        raise ValueError(f"well_below={well_below!r}; accepted: a number in (0, success={success}]")
    found = []
    for group, sub in df.groupby("group", sort=False):
        if (sub.accuracy >= success).any() and (sub.accuracy < well_below).any():
            found.append(group)
    return found


def group_label(row) -> str:
    """``case 3, n=10, d_token=16, 1 layer, PE none``; a run with an MLP adds ``, d_mlp=64``
    (and ``, MLP last`` for mlp="last"), so one store's architectures stay apart."""
    label = (f"case {int(row['case'])}, n={int(row['n'])}, d_token={int(row['d_token'])}, "
             f"{int(row['n_layers'])} layer{'s' if int(row['n_layers']) > 1 else ''}, "
             f"PE {row['pos_embed']}")
    d_mlp = row.get("d_mlp", 0)
    if isinstance(d_mlp, numbers.Real) and not math.isnan(d_mlp) and d_mlp > 0:
        label += f", d_mlp={int(d_mlp)}" + (", MLP last" if row.get("mlp") == "last" else "")
    return label


@dataclass
class SweepAnalysis:
    """Per-seed measures (``table``) and per-group written answers (``answers``)."""

    store: Path
    table: object  # pandas DataFrame, one row per analysed seed
    groups: object  # pandas DataFrame, one row per group: counts of success/failed/partial
    answers: dict = field(default_factory=dict)  # group label -> markdown paragraph
    bimodal: list = field(default_factory=list)  # labels of the bimodal groups
    name: str = ""  # the sweep's name (:func:`sweep_name`)
    skipped: dict = field(default_factory=dict)  # run name -> why it was not measured (issue 55)

    def markdown(self, title: str = "") -> str:
        lines = [f"# {title or 'Bimodal seeds: do successful seeds recover the construction?'}", ""]
        lines += [
            f"Sweep `{self.name or self.store.parent.name}` (store `{self.store.name}`); success = accuracy >= {SUCCESS:.0%}, failed = "
            "accuracy < max(2/n, 5%) (near chance 1/n), partial otherwise; a group is bimodal "
            f"when some seed succeeds and some seed stays below {WELL_BELOW:.0%}. Measures (see "
            "`interp/inspect/studies/analysis.py`): attention mass/argmax-hit/entropy at the construction's "
            "position, QK and OV rows peaking on the diagonal and their relative margins, "
            "held-out cos/sin probe R^2 of the embedding tables, the circle test of the key "
            "vectors, the embedding's participation-ratio rank, and activation patching.", "",
            "## Groups", "", _md_table(self.groups), "",
        ]
        if self.skipped:
            lines += ["## Skipped runs", "", f"{len(self.skipped)} run(s) not measured: their checkpoint "
                      "cannot be used.", "", *(f"- run `{k}`: {v}" for k, v in self.skipped.items()), ""]
        for label, text in self.answers.items():
            sub = self.table[self.table.group == label]
            lines += [f"## {label}", "", text, "", _md_table(_display(sub)), ""]
        return "\n".join(lines)


def _display(df):
    """The per-seed columns worth showing: no group fields, no column empty for this group."""
    drop = [c for c in ("group", "case", "n", "d_token", "n_layers", "pos_embed") if c in df]
    return df.drop(columns=drop).dropna(axis=1, how="all")


def _md_table(df) -> str:

    def fmt(c, v):
        if isinstance(v, float) and c.startswith("r2_") and not math.isnan(v):
            return r2_text(v, ".3g")  # a floored R^2 says so
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.3g}"
        return str(v)

    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(fmt(c, r[c]) for c in cols) + " |")
    return "\n".join(out) if len(df) else "(none)"


def _measured_row(store_path, r, batch_size: int) -> dict | str:
    """One stored run's row of :func:`analyze_sweep` (group, outcome, measures, labels), or why
    it is skipped, named with a warning: its checkpoint missing, corrupt, with NaN weights, not
    its store row's or not reproducing its accuracy (:func:`interp.sweeps.store.checked_model`,
    issues 43 and 55)."""
    from interp.sweeps import store

    base = {k: r[k] for k in ("group", *GROUP_FIELDS, "seed")}
    base.update(accuracy=float(r.accuracy), outcome=r.outcome)
    try:
        model = store.checked_model(store_path, r)
    except store.CheckpointMismatch as e:
        log.warning("skipped: %s", e)
        return str(e)
    # the store's case and n, checked against the checkpoint's own
    base.update(measure(model, case=int(r.case), n=int(r.n), batch_size=batch_size))
    return {**base, **labels_of(base)}  # routing, code, key_code, mechanism (issue 42)


def analyze_sweep(
    path, *, where: dict | None = None, all_groups: bool = False, success: float = SUCCESS,
    fail_below: float | None = None, batch_size: int = 512, progress=None,
    well_below: float = WELL_BELOW, with_success: bool = False,
) -> SweepAnalysis:
    """Measure the seeds of every bimodal group of a sweep's store (all groups with
    ``all_groups``), optionally only the configs matching ``where`` (field -> value strings).
    Bimodal: some seed >= ``success`` and some seed < ``well_below`` (:func:`bimodal_groups`).
    ``with_success``: also every group with a successful seed (what ``interp run`` measures).
    ``progress``: a wrapper ``progress(iterable, total=, desc=)`` such as ``tqdm.tqdm``; None: quiet."""
    import pandas as pd

    from interp.sweeps import store

    store_path = find_store(path)
    df = store.read(store_path)
    if df.empty:
        raise ValueError(f"{store_path} holds no runs")
    df = df[df.status == "ok"].copy()
    for k, v in (where or {}).items():
        if k not in df.columns:
            raise ValueError(f"where names {k!r}; accepted: one of {list(GROUP_FIELDS)}")
        df = df[df[k].astype(str) == str(v)]
    if df.empty:
        raise ValueError(f"no finished runs in {store_path} match {where}")
    df["outcome"] = [classify(a, int(n), success, fail_below) for a, n in zip(df.accuracy, df.n)]
    df["group"] = [group_label(r) for _, r in df.iterrows()]
    df = sort_by_group(df)  # groups in numeric order (d_token 8 before 16), seeds within
    counts = (df.groupby("group", sort=False).outcome.value_counts().unstack(fill_value=0)
              .reindex(columns=["success", "failed", "partial"], fill_value=0).reset_index())
    bimodal = bimodal_groups(df, success=success, well_below=well_below)
    wanted = set(counts.group) if all_groups else set(bimodal)
    if with_success:
        wanted |= set(counts[counts.success > 0].group)
    chosen = [g for g in counts.group if g in wanted]  # the groups' order
    counts["analysed"] = counts.group.isin(set(chosen))
    todo = df[df.group.isin(set(chosen))]
    it = todo.iterrows()
    if progress is not None:  # the CLI's bar: only interp.cli writes to the terminal
        it = progress(it, total=len(todo), desc="measuring seeds")
    rows, skipped = [], {}
    for _, r in it:
        row = _measured_row(store_path, r, batch_size)
        if isinstance(row, str):
            skipped[str(r["name"])] = row
        else:
            rows.append(row)
    if skipped and not rows:
        raise ValueError(f"no run of {store_path} could be measured: {len(skipped)} skipped (e.g. "
                         f"{next(iter(skipped.values()))})")
    table = pd.DataFrame(rows)
    answers = {}
    for label in chosen:
        sub = table[table.group == label] if len(table) else table
        if len(sub):
            answers[label] = answer(sub)
    return SweepAnalysis(store_path, table, counts, answers, list(bimodal), sweep_name(df, store_path), skipped)


def write_report(res: SweepAnalysis, out_dir, stem: str, *, title: str = "") -> dict[str, Path]:
    """Write ``<stem>.md`` (report), ``<stem>.csv`` (per-seed table) and ``<stem>-violins.png``
    (per-seed measures by outcome) into ``out_dir``, each whole or not at all; returns them."""
    from interp.inspect.tools import viz
    from interp.training.files import save_figure, write_file

    out = Path(out_dir)
    paths = {"report": out / f"{stem}.md", "table": out / f"{stem}.csv"}
    write_file(paths["report"], res.markdown(title) + "\n")
    write_file(paths["table"], res.table.to_csv(index=False))
    if len(res.table):
        title = (f"{res.name or stem}: measures of {len(res.table)} seed(s) in "
                 f"{res.table.group.nunique()} config(s), by outcome")
        paths["violins"] = save_figure(viz.plot_seed_measures(res.table, title=title),
                                       out / f"{stem}-violins.png", dpi=100)
    return paths


def showcase(res: SweepAnalysis, df) -> list[tuple]:
    """The seeds the main job's ``attention.html`` shows side by side: the most accurate seed of
    each mechanism among the measured successful seeds (construction first), else the most
    accurate checkpoint of ``df``. Rows are ``(title, checkpoint, mechanism)``."""
    rows = []
    t = res.table
    if len(t):
        ok = t[t.outcome == "success"].sort_values("accuracy", ascending=False)
        for kind in MECHANISMS:
            d = ok[ok.mechanism == kind]
            if len(d):
                r = d.iloc[0]
                ckpt = df.loc[(df.group == r.group) & (df.seed == r.seed), "checkpoint"].iloc[0]
                rows.append((f"{r.group}, seed {int(r.seed)} (accuracy {r.accuracy:.3f}): {kind}",
                             ckpt, kind))
    if not rows:
        best = df.sort_values("accuracy", ascending=False).iloc[0]
        rows.append((f"{best.group}, seed {int(best.seed)} (accuracy {best.accuracy:.3f}); not "
                     "measured (no bimodal group)", best.checkpoint, None))
    return rows


def pipeline_step(ctx, *, batch_size: int = 512) -> dict:
    """The ``analyze`` step of ``interp run`` (:mod:`interp.cli.pipeline`): for each sweep of the
    context, the report of its bimodal groups and of every group with a successful seed beside
    the sweep's report (``analysis.md``, ``.csv``, ``-violins.png``) and ``attention.html``: the best successful seed of each mechanism found
    (e.g. a construction-like and an inverted seed), side by side and labelled."""
    from interp.inspect.tools import viz
    from interp.training import checkpoints
    from interp.sweeps import store

    done = {}
    for job in ctx.sweeps:
        if not Path(job.store).is_file():
            continue
        ctx.say(f"analyze: {job.folder.name}")
        df = store.read(job.store)
        df = df[(df.status == "ok") & df.checkpoint.notna()].copy()
        if df.empty:
            continue
        df["group"] = [group_label(r) for _, r in df.iterrows()]
        res = analyze_sweep(job.store, batch_size=batch_size, with_success=True)
        paths = write_report(res, job.report, "analysis", title=(
            f"Bimodal seeds in {job.folder.name}: do successful seeds recover the construction?"))
        views = [(title, checkpoints.load(ckpt), kind) for title, ckpt, kind in showcase(res, df)]
        paths["attention"] = viz.save_side_by_side_html(
            Path(job.report) / "attention.html", views,
            title=f"{job.folder.name}: successful seeds by mechanism")
        done[job.folder.name] = {k: str(v) for k, v in paths.items()}
        done[job.folder.name]["bimodal_groups"] = len(res.bimodal)
        done[job.folder.name]["analysed_groups"] = len(res.answers)
        done[job.folder.name]["mechanisms"] = [v[-1] for v in views]
    return done
