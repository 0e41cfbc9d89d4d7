"""Write run_names.json: TrainConfig.name() of every run the repository declares, as the code
named them when this file was written (issue 25: the architecture spec must not change them).

Collected: CONFIGS of every experiments/**/configs.py, readings.configs() of every reading, and
hand-made configs covering every init, d_mlp 0 and > 0, both positional embeddings, one and two
layers and every TrainConfig field off its default. Stored as a table: ``fields`` (the
TrainConfig fields, then ``name``) and one row per run. It was run once, on the code before the architecture spec (commit 3032839), from the repository
root: ``.venv/bin/python tests/training/data/make_run_names.py``. Do not run it again to make
a failing tests/training/test_run_names.py pass: the file is the record of the old names.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from interp.training.runs import INITS, TrainConfig  # noqa: E402


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_configs_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def collected() -> dict[str, TrainConfig]:
    """name -> config of every declared run (sources in the module docstring)."""
    configs = []
    for path in sorted((ROOT / "experiments").rglob("configs.py")):
        configs += list(_load(path).CONFIGS)
    readings = _load(ROOT / "experiments" / "readings" / "readings.py")
    for reading in readings.READINGS:
        configs += readings.configs(reading)
    for init in INITS:
        for case in (1, 2, 3, 4, 5):
            for pe in ("learned", "none"):
                for layers, d_mlp in ((1, 0), (2, 0), (1, 24), (2, 16)):
                    configs.append(TrainConfig(case=case, n=7, d_token=6, n_layers=layers,
                                               pos_embed=pe, d_mlp=d_mlp, init=init, seed=3))
    base = TrainConfig(case=3, n=10, d_token=32)
    configs += [base, TrainConfig(case=1, n=2, d_token=1)]
    off_default = dict(seed=2**40, lr=3e-4, batch_size=64, max_steps=123, stop_loss=0.0,
                       eval_batches=7, curve_every=1, function="any", init="xavier_normal",
                       d_mlp=128, n_layers=2, pos_embed="none")
    configs += [base.replace(**{k: v}) for k, v in off_default.items()]
    configs.append(base.replace(**off_default))
    return {c.name(): c for c in configs}


if __name__ == "__main__":
    runs = sorted(collected().items())
    fields = sorted(runs[0][1].to_dict())
    lines = [json.dumps([c.to_dict()[f] for f in fields] + [name]) for name, c in runs]
    out = Path(__file__).with_name("run_names.json")
    out.write_text('{"fields": %s,\n "runs": [\n%s\n]}\n' % (json.dumps(fields + ["name"]), ",\n".join(lines)))
    print(f"{len(runs)} run names written to {out.relative_to(ROOT)}")
