"""``interp run``: the main job, as a list of steps.

With no flags it runs a quick but real pipeline (a few minutes on 2 cores), writing under
``results/``:

1. ``verify``: every construction against the reference evaluator (:mod:`interp.core.verify`'s
   quick plan: exhaustive at n = 3, random inputs at n = 100) -> ``results/verify.md``;
2. ``train``: the small demo sweep ``experiments/demo`` (:mod:`interp.sweeps.driver`) -> the store
   ``results/store.sqlite`` and checkpoints ``results/checkpoints/``;
3. ``report``: the demo's table and violins (:mod:`interp.sweeps.report`) -> ``results/report.md``,
   ``results/violins.png``;
4. ``analyze``: for each sweep, whether the successful seeds recover the construction
   (:func:`interp.inspect.studies.analysis.pipeline_step`) -> ``results/analysis.md`` (+ ``.csv``,
   ``-violins.png``) and ``results/attention.html``: the best successful seed of each mechanism
   (construction-like, inverted, mirror), side by side and labelled;
5. ``atlas``: the small atlas sweep ``experiments/atlas/demo`` (2 cases x n in {3, 5} x d_token in
   {4, 8}, 3 seeds) trained into ``results/atlas/store.sqlite``, its mechanism atlas
   (:func:`interp.inspect.studies.atlas.write_atlas`: ``atlas.csv``, ``atlas.md``, the phase diagrams) and
   its explorer page with the atlas view -> ``results/atlas/explore/index.html``;
6. ``explore``: the sweep explorer (:mod:`interp.inspect.studies.explore`) -> ``results/explore/index.html``:
   every seed's mechanism, attention on several inputs, circuits and probes, offline.

``--full`` verifies with the full plan (n up to 1000) and trains and reports the paper's
Tables 1 and 2 (``experiments/table1``, ``experiments/table2``) into their own folders
(``experiments/tableN/results/store.sqlite``, ``experiments/tableN/report.md``,
``violins.png``), and still the demo atlas. With ``--sweep DIR`` the atlas step builds the
atlas of each sweep given instead (no extra training), and its explorer page shows it. Every
sweep resumes: a rerun trains only what is missing, and the atlas measures only new seeds.

Extending. :data:`STEPS` is the pipeline: a list of :class:`Step` (name, help, function of a
:class:`Context`). A later step (e.g. an interpretability analysis of the trained checkpoints)
is one ``Step`` inserted into ``STEPS`` (see :func:`add_step`); it reads the context's sweeps
(store paths, checkpoint folders) and what earlier steps returned in ``context.outputs``.
``results/pipeline.json`` records each step's summary and wall time.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from interp.training.files import write_file

#: The repository's ``experiments`` folder (the sweeps live there), relative to the working
#: directory (``make run`` runs in the repository root); ``--experiments DIR`` names another.
EXPERIMENTS = Path("experiments")
DEMO_NAME, FULL_NAMES = "demo", ("table1", "table2")
ATLAS_DEMO = Path("atlas") / "demo"  # under EXPERIMENTS


@dataclass(frozen=True)
class SweepJob:
    """One sweep of the pipeline: its folder, its store, where its report goes."""

    folder: Path
    store: Path
    report: Path  # folder for report.md and violins.png


@dataclass
class Context:
    """What the steps share: settings, the sweeps, and each step's output by name."""

    out: Path
    full: bool
    workers: int
    sweeps: list[SweepJob]
    progress: bool = True
    atlas: list[SweepJob] = field(default_factory=list)  # sweeps whose mechanism atlas is built
    outputs: dict[str, dict] = field(default_factory=dict)

    def say(self, text: str) -> None:
        if self.progress:
            print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Step:
    name: str
    help: str
    fn: Callable[[Context], dict]


# --------------------------------------------------------------------------- the steps


def verify_step(ctx: Context) -> dict:
    """Check every construction against the reference evaluator (interp.core.verify)."""
    import torch
    from tqdm import tqdm

    from interp.cli.verify import format_table
    from interp.core import verify
    from interp.core.limits import with_construction

    skipped = with_construction()[1]  # presentations without a construction: one line each
    for line in skipped:
        ctx.say(f"verify: {line}")
    plan = verify.default_plan(quick=not ctx.full)
    rows = []
    with tqdm(total=len(plan), desc="verify", unit="row", disable=not ctx.progress,
              file=sys.stderr, dynamic_ncols=True) as bar:
        for spec in plan:
            bar.set_postfix_str(f"case {spec['case']} n={spec['n']} {spec['plan']}")
            rows.append(verify.verify(**spec, dtype=torch.float32, attention="leftmost"))
            bar.update()
    wrong = [r for r in rows if r.correct != r.inputs]
    path = ctx.out / "verify.md"
    write_file(
        path,
        "# Constructions vs the reference evaluator\n\n"
        f"{len(rows) - len(wrong)} of {len(rows)} checks exact "
        f"(`interp verify{'' if ctx.full else ' --quick'}`).\n\n"
        + "".join(f"{line}.\n" for line in skipped) + ("\n" if skipped else "")
        + "```\n" + format_table(rows) + "\n```\n"
    )
    if wrong:
        raise RuntimeError(
            "constructions disagree with the reference: "
            + "; ".join(f"case {r.case} n={r.n} {r.plan}: {r.correct}/{r.inputs}" for r in wrong)
        )
    return dict(checks=len(rows), exact=len(rows) - len(wrong), file=str(path))


def _train(ctx: Context, job: SweepJob) -> tuple[str, dict]:
    """Train one sweep into its store (resumes); its name and summary."""
    from interp.cli.sweep import format_summary, progress_callbacks
    from interp.sweeps import store as store_mod
    from interp.sweeps import driver as sweeps

    sweep = sweeps.load(job.folder)
    with store_mod.Store(job.store) as db:
        todo = sum(len(g) for g in sweeps.plan(sweep.configs, db.statuses()))
    bar, on_start, on_run = progress_callbacks(todo, f"train {sweep.name}", disable=not ctx.progress)
    with bar:
        summary = sweeps.run_sweep(sweep, store=job.store, workers=ctx.workers,
                                   on_start=on_start, on_run=on_run)
    ctx.say(format_summary(summary))
    return sweep.name, summary.to_dict()


def train_step(ctx: Context) -> dict:
    """Train every sweep of the context (resumes: finished runs are skipped)."""
    return dict(_train(ctx, job) for job in ctx.sweeps)


def report_step(ctx: Context) -> dict:
    """Render each sweep's table (Markdown), violins and loss curves (PNG)."""
    from interp.inspect.tools.curves import report_curves
    from interp.sweeps import report, driver as sweeps

    out = {}
    for job in ctx.sweeps:
        w = report.write(sweeps.load(job.folder), store=job.store, out=job.report, curves=report_curves)
        ctx.say(f"report: {w.markdown} and {w.violins} ({w.runs} of {w.declared} runs)")
        out[job.folder.name] = dict(markdown=str(w.markdown), violins=str(w.violins),
                                    runs=w.runs, declared=w.declared)
    return out


def analyze_step(ctx: Context) -> dict:
    """Bimodal seeds and attention of the trained checkpoints (:mod:`interp.inspect.studies.analysis`)."""
    from interp.inspect.studies import analysis

    return analysis.pipeline_step(ctx)


def atlas_step(ctx: Context) -> dict:
    """Each atlas sweep: trained unless it is one of the context's sweeps (those are trained
    already), its atlas written beside its report (:func:`interp.inspect.studies.atlas.write_atlas`,
    reusing the rows of an earlier ``atlas.csv``), and, for a sweep of its own, its explorer
    page with the atlas view (the explore step writes the other sweeps' pages, which find it)."""
    from functools import partial

    from tqdm import tqdm

    from interp.inspect.studies import atlas, explore

    out = {}
    for job in ctx.atlas:
        own = job not in ctx.sweeps
        trained = _train(ctx, job)[1]["trained"] if own else 0
        if not Path(job.store).is_file():
            continue
        ctx.say(f"atlas: {job.folder}")
        bar = partial(tqdm, file=sys.stderr, dynamic_ncols=True) if ctx.progress else None
        df = atlas.build_atlas(job.store, cache=Path(job.report) / "atlas.csv", progress=bar)
        written = atlas.write_atlas(df, job.report, source=str(job.store))
        page = Path(job.report) / "explore" / explore.INDEX
        if own:
            page = explore.write_explorer(job.store, page.parent, atlas=written["table"])
        cells = df.groupby(["case", "n_layers", "architecture", "function", "n", "d_token"]).ngroups
        out[str(job.folder)] = dict(trained=trained, seeds=len(df), cells=cells, page=str(page),
                                    table=str(written["table"]), report=str(written["report"]))
    return out


def explore_step(ctx: Context) -> dict:
    """The sweep explorer of each sweep (:func:`interp.inspect.studies.explore.write_explorer`)."""
    from interp.inspect.studies import explore

    out = {}
    for job in ctx.sweeps:
        if Path(job.store).is_file():
            ctx.say(f"explore: {job.folder.name}")
            out[job.folder.name] = str(explore.write_explorer(job.store, Path(job.report) / "explore"))
    return out


def timeline_step(ctx: Context) -> dict:
    """One timeline (issue 46): the first sweep's most accurate run trained again with
    snapshots (bit for bit the stored one) and every snapshot labelled
    (:func:`interp.inspect.studies.timeline_report.write_timeline`), into ``<its report>/timeline``."""
    from interp.inspect.studies.timeline_report import write_timeline
    from interp.sweeps import store

    for job in ctx.sweeps:
        if not Path(job.store).is_file():
            continue
        runs = store.read(job.store)
        runs = runs[(runs.status == "ok") & runs.checkpoint.notna()]
        if runs.empty:
            continue
        best = runs.sort_values(["accuracy", "name"], ascending=[False, True]).iloc[0]
        ctx.say(f"timeline: {job.folder.name}, run {best['name']}")
        written = write_timeline(Path(best["checkpoint"]), Path(job.report) / "timeline", batch_size=128)
        return {job.folder.name: dict(run=str(best["name"]), markdown=str(written["markdown"]))}
    return {}


#: The pipeline, in order. Insert steps with :func:`add_step`.
STEPS: list[Step] = [
    Step("verify", "check the constructions against the reference evaluator", verify_step),
    Step("train", "train the sweeps (resumable)", train_step),
    Step("report", "render tables and violins", report_step),
    Step("analyze", "do successful seeds recover the construction? (probes, attention)", analyze_step),
    Step("atlas", "the mechanism atlas of a small grid (or of --sweep's) and its explorer page",
         atlas_step),
    Step("explore", "write the sweep explorer page (every seed's mechanism and views)", explore_step),
    Step("timeline", "one run's mechanism timeline: its labels through training", timeline_step),
]


def add_step(step: Step, *, after: str | None = None) -> None:
    """Insert ``step`` after the step named ``after`` (default: at the end)."""
    names = [s.name for s in STEPS]
    if step.name in names:
        raise ValueError(f"a step named {step.name!r} exists already; steps: {names}")
    if after is None:
        STEPS.append(step)
    elif after not in names:
        raise ValueError(f"after={after!r}; accepted: one of {names}")
    else:
        STEPS.insert(names.index(after) + 1, step)


def default_jobs(full: bool, out: Path, folders: list[Path] | None = None,
                 experiments: Path = EXPERIMENTS) -> list[SweepJob]:
    """The sweeps: the demo under ``out`` by default; the paper's tables in place with --full;
    or the given folders (each with its own default store and report location)."""
    if folders:
        return [SweepJob(Path(f), Path(f) / "results" / "store.sqlite", Path(f)) for f in folders]
    if full:
        return [SweepJob(f, f / "results" / "store.sqlite", f) for f in (experiments / n for n in FULL_NAMES)]
    return [SweepJob(experiments / DEMO_NAME, out / "store.sqlite", out)]


def atlas_jobs(out: Path, folders: list[Path] | None = None,
               experiments: Path = EXPERIMENTS) -> list[SweepJob]:
    """The sweeps the atlas step maps: the given folders (trained by the train step), else the
    small atlas demo, trained into ``out/atlas``."""
    if folders:
        return default_jobs(False, out, folders, experiments)
    return [SweepJob(experiments / ATLAS_DEMO, out / "atlas" / "store.sqlite", out / "atlas")]


def run_pipeline(ctx: Context, steps: list[str] | None = None) -> dict:
    """Run the chosen steps (default: all of :data:`STEPS`) and return their outputs."""
    names = [s.name for s in STEPS]
    chosen = names if not steps else steps
    bad = [s for s in chosen if s not in names]
    if bad:
        raise ValueError(f"--steps {bad[0]!r}; accepted: {names}")
    for job in [*ctx.sweeps, *(ctx.atlas if "atlas" in chosen else ())]:  # all load before any work
        from interp.sweeps import driver as sweeps

        sweeps.load(job.folder)
    record = {}
    todo = [s for s in STEPS if s.name in chosen]
    for i, step in enumerate(todo, 1):
        ctx.say(f"[{i}/{len(todo)}] {step.name}: {step.help}")
        start = time.perf_counter()
        ctx.outputs[step.name] = step.fn(ctx)
        record[step.name] = dict(seconds=round(time.perf_counter() - start, 1),
                                 output=ctx.outputs[step.name])
    write_file(ctx.out / "pipeline.json", json.dumps(record, indent=1, default=str) + "\n")
    return record


# --------------------------------------------------------------------------- CLI


def add_arguments(p) -> None:
    p.add_argument("--full", action="store_true",
                   help="the paper's Tables 1 and 2 (experiments/table1, table2) instead of the demo")
    p.add_argument("--out", default="results",
                   help="folder for the demo's store and report and the pipeline record (default results)")
    p.add_argument("--workers", type=int, default=2, help="training processes (default 2)")
    p.add_argument("--sweep", action="append", metavar="DIR",
                   help="train and report this sweep folder instead (repeatable)")
    p.add_argument("--experiments", default=str(EXPERIMENTS), metavar="DIR",
                   help="the repository's experiments folder holding demo/, atlas/demo/, table1/, "
                        "table2/ (default: ./experiments)")
    p.add_argument("--steps", nargs="+", metavar="STEP",
                   help="run only these steps (default: all, in order)")
    p.add_argument("--json", action="store_true", help="print the step record as JSON")


def run(args) -> int:
    if args.workers < 1:
        raise ValueError(f"--workers {args.workers}; accepted: an integer >= 1")
    out = Path(args.out)
    experiments = Path(args.experiments)
    demo = experiments / DEMO_NAME
    if not args.sweep and not (demo / "configs.py").is_file():
        raise ValueError(f"{demo} is missing: `interp run` needs the repository's experiments folder "
                         "(run it in the repository root, or pass --experiments DIR)")
    ctx = Context(out=out, full=args.full, workers=args.workers,
                  sweeps=default_jobs(args.full, out, args.sweep, experiments),
                  atlas=atlas_jobs(out, args.sweep, experiments))
    start = time.perf_counter()
    try:
        record = run_pipeline(ctx, args.steps)
    except KeyboardInterrupt:
        print("interrupted: finished runs are in the store; rerun the same command to resume",
              file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(record, indent=1, default=str))
        return 0
    print(f"pipeline done in {time.perf_counter() - start:.0f} s:")
    for name, r in record.items():
        print(f"  {name:<8} {r['seconds']:>7.1f} s")
    for name, r in record.get("report", {}).get("output", {}).items():
        print(f"  {name}: {r['runs']}/{r['declared']} runs -> {r['markdown']}, {r['violins']}")
    for name, r in record.get("atlas", {}).get("output", {}).items():
        print(f"  atlas of {name}: {r['seeds']} seeds in {r['cells']} cells -> {r['report']}; "
              f"open {r['page']} for the atlas view")
    return 0
