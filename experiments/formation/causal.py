"""The formation study's causal test (DESIGN.md section 5, pinned at step 0 in section 6).

    .venv/bin/python experiments/formation/causal.py          # train the arms (resumable) -> causal.csv
    .venv/bin/python experiments/formation/causal.py --report # the rule, from causal.csv (no training)

Needs the discovery set measured (``run.sh discovery``): :func:`analysis.choose` picks the
measure; a QK measure (``mass``, ``margin``, ``qk_diag``, ``key_iia``) transplants ``W_Q, W_K,
b_Q, b_K``, a read-out measure (``readout``, ``value_iia``) ``W_V, W_O, b_V, b_O``; when early loss
wins, no test runs and the report says so. For every non-successful discovery seed F:

* **transplant**: F's initial model with those parameters replaced by S's initial ones (S: its
  cell's successful seed with the highest chosen measure at step 200, the first by seed of ties);
* **sham**: the same from F', the cell's next non-successful seed (cyclically; F itself when F is
  its cell's only one: a plain retrain).

Each arm of a cell trains as one group (``trainer.train_group(models_=...)``: F's own seed, so
its own data order). ``causal.csv`` gains a cell's rows once both arms have trained.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def _analysis():
    """analysis.py beside this file, under a name of its own (``design``, ``analysis`` and
    ``causal`` are common script names: a bare import could find another folder's)."""
    import importlib.util

    if "formation_analysis" not in sys.modules:
        spec = importlib.util.spec_from_file_location("formation_analysis", HERE / "analysis.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["formation_analysis"] = module
        spec.loader.exec_module(module)
    return sys.modules["formation_analysis"]


analysis = _analysis()
OUT = analysis.CAUSAL
QK = ("mass", "margin", "qk_diag", "key_iia")
PARAMS = analysis.CAUSAL_PARAMS
FIELDS = ("cell", "seed", "arm", "donor", "params", "accuracy", "steps", "success")


def discovery() -> tuple[pd.DataFrame, dict]:
    got = analysis.load("discovery")
    if got is None:
        raise SystemExit("the discovery set is not measured yet: bash experiments/formation/run.sh discovery")
    with sqlite3.connect(HERE / "discovery" / "store-rows.sqlite") as con:
        configs = {n: json.loads(c) for n, c in con.execute("select name, config from runs")}
    return analysis.per_run(*got, "discovery"), configs


def plan(df: pd.DataFrame, chosen: str, sign: int) -> list[dict]:
    """One entry per non-successful seed F: its cell, F, S (transplant donor) and F' (sham donor)."""
    out = []
    for cell, g in df.groupby("cell"):
        ok, bad = g[g.success].sort_values("seed"), g[~g.success].sort_values("seed")
        if ok.empty:
            continue
        score = sign * ok[f"early_{chosen}"]
        donor = ok.loc[score[score == score.max()].index].seed.min()
        seeds = list(bad.seed)
        for i, f in enumerate(seeds):
            out.append(dict(cell=cell, seed=f, donor=int(donor), sham=seeds[(i + 1) % len(seeds)]))
    return out


def arm_models(configs: list, donors: list, names: tuple) -> list:
    """F's initial models with ``names`` of block 0's attention taken from each donor's initial model."""
    from interp.training.runs import init_model

    models = []
    for c, d in zip(configs, donors):
        model, donor = init_model(c), init_model(c.replace(seed=d)).state_dict()
        state = model.state_dict()
        for name in names:
            state[f"blocks.0.attn.{name}"] = donor[f"blocks.0.attn.{name}"].clone()
        model.load_state_dict(state)
        models.append(model)
    return models


def train() -> int:
    from interp.training.runs import TrainConfig
    from interp.training.trainer import train_group

    df, stored = discovery()
    chosen, signs, _ = analysis.choose(df)
    if chosen == "loss":
        print("early loss won the discovery choice: no causal test (DESIGN.md section 5)")
        return 0
    group = "qk" if chosen in QK else "ov"
    by_seed = {(tuple(r.cell), r.seed): r.run for r in df.itertuples()}
    done = pd.read_csv(OUT) if OUT.exists() else pd.DataFrame(columns=FIELDS)
    entries = plan(df, chosen, signs[chosen])
    for cell in sorted({e["cell"] for e in entries}):
        if str(cell) in set(done.cell.astype(str)):
            continue
        es = [e for e in entries if e["cell"] == cell]
        configs = [TrainConfig.from_dict(stored[by_seed[(cell, e["seed"])]]) for e in es]
        rows = []
        for arm, key in (("transplant", "donor"), ("sham", "sham")):
            donors = [e[key] for e in es]
            results = train_group(configs, models_=arm_models(configs, donors, PARAMS[group]))
            rows += [dict(cell=str(cell), seed=e["seed"], arm=arm, donor=d, params=group, accuracy=r.accuracy,
                          steps=r.steps, success=r.accuracy >= analysis.SUCCESS)
                     for e, d, r in zip(es, donors, results)]
        done = pd.concat([done, pd.DataFrame(rows)], ignore_index=True)
        tmp = OUT.with_suffix(".tmp")
        done.to_csv(tmp, index=False)
        tmp.replace(OUT)
        print(f"{cell}: {len(es)} seeds, both arms trained")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--report"]:
        print(analysis.causal_report())
        raise SystemExit(0)
    raise SystemExit(train())
