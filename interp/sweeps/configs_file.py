"""What a sweep folder's ``configs.py`` must declare, and the checks on it: :func:`read_configs`
executes the file and checks ``CONFIGS`` (TrainConfigs, at most :data:`MAX_RUNS`, no repeats)
and ``LAYOUT`` (a :class:`~interp.sweeps.folders.TableLayout` naming TrainConfig fields);
:func:`check_sizes` checks each group's training step against this machine's memory.

:func:`read_configs` runs ``configs.py`` in the calling process: :func:`interp.sweeps.loader.load`
calls it only in a guarded child process (:mod:`interp.sweeps.loader`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Iterable, Sequence

from interp.sweeps.folders import CONFIGS_FILE, TableLayout, group_key

#: The most runs one sweep folder may declare. Every stage holds a sweep's configs whole
#: (planning names each run and reads its row, the report lays them all out; 10**6 runs took
#: 224 s and 0.9 GB just to plan), and 10**5 runs of the paper's protocol are already months of
#: CPU time, so a larger sweep is refused rather than streamed: split it into several sweep
#: folders (one per case, per d_token...), each with its own store and report. It is counted
#: while CONFIGS is iterated, so an endless generator stops here too.
MAX_RUNS = 100_000


def _moved(e: Exception) -> str:
    """A hint for a configs.py written before the sweep machinery left ``interp.training``."""
    if isinstance(e, ModuleNotFoundError) and (e.name or "").startswith("interp.training."):
        return " (the sweep machinery moved to interp.sweeps: write `from interp.sweeps import TableLayout`)"
    return ""


def read_configs(path: Path, max_runs: int) -> tuple[tuple, TableLayout]:
    """Execute ``path`` here and check what it declares (the body of
    :func:`interp.sweeps.loader.load`, run in the loading child), in the order a reader of the
    errors meets them: the file runs, CONFIGS (:func:`_configs`), LAYOUT."""
    from interp.training.trainer import TrainConfig

    module = _execute(path)
    for attr in ("CONFIGS", "LAYOUT"):
        if not hasattr(module, attr):
            raise ValueError(f"{path} defines no {attr}")
    configs = _configs(path, module.CONFIGS, max_runs, TrainConfig)
    layout = module.LAYOUT
    if not isinstance(layout, TableLayout):
        raise ValueError(f"{path}: LAYOUT is a {type(layout).__name__}; accepted: interp.sweeps.driver.TableLayout")
    fields = set(configs[0].to_dict())
    missing = [f for f in (*layout.rows, layout.column) if f not in fields]
    if missing:
        raise ValueError(f"{path}: LAYOUT names {missing}, not TrainConfig fields ({sorted(fields)})")
    # what crosses to the driver is TrainConfig and TableLayout themselves, not subclasses defined in
    # configs.py (which the driver could not unpickle)
    fields = [f.name for f in dataclasses.fields(TrainConfig)]
    configs = tuple(c if type(c) is TrainConfig else TrainConfig(**{f: getattr(c, f) for f in fields})
                    for c in configs)
    if type(layout) is not TableLayout:
        layout = TableLayout(rows=layout.rows, column=layout.column, paper=dict(layout.paper), title=layout.title)
    return configs, layout


def _execute(path: Path):
    """``path`` run as a module; whatever stops it is one ValueError naming the file."""
    module_name = f"_interp_sweep_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error: {e.msg}") from e
    except Exception as e:  # a TrainConfig or TableLayout that refuses its values, a NameError...
        raise ValueError(f"{path}: {type(e).__name__}: {e}{_moved(e)}") from e
    except SystemExit as e:  # configs.py is executed as Python: an exit is a broken sweep, not success
        raise ValueError(f"{path} called sys.exit({e.code!r}) while being loaded; a {CONFIGS_FILE} "
                         "must only define CONFIGS and LAYOUT") from None
    return module


def _configs(path: Path, declared, max_runs: int, config_type: type) -> list:
    """CONFIGS as a list: TrainConfigs only, at most ``max_runs`` (counted as it is iterated,
    so an endless generator stops at the cap), at least one, none repeated."""
    if isinstance(declared, (str, bytes)) or not isinstance(declared, Iterable):
        raise ValueError(f"{path}: CONFIGS is a {type(declared).__name__}; accepted: a list of TrainConfig")
    split = (f"accepted: at most {max_runs} per sweep folder (interp.sweeps.driver.MAX_RUNS); "
             "split the sweep into several folders (e.g. one per case or d_token), each with its "
             "own store")
    count = len(declared) if isinstance(declared, (list, tuple)) else None
    if count is not None and count > max_runs:
        raise ValueError(f"{path}: CONFIGS declares {count} runs; {split}")
    configs = []
    try:
        for c in declared:
            if not isinstance(c, config_type):
                raise ValueError(f"{path}: CONFIGS[{len(configs)}] is a {type(c).__name__}; accepted: TrainConfig")
            configs.append(c)
            if len(configs) > max_runs:
                raise ValueError(f"{path}: CONFIGS yields more than {max_runs} runs (stopped at "
                                 f"run {len(configs)}: an endless generator?); {split}")
    except (ValueError, KeyboardInterrupt):
        raise
    except Exception as e:  # raised by a generator while it yields
        raise ValueError(f"{path}: {type(e).__name__} while iterating CONFIGS: {e}") from e
    if not configs:
        raise ValueError(f"{path}: CONFIGS is empty")
    names: dict[str, int] = {}
    for i, c in enumerate(configs):
        if c.name() in names:
            raise ValueError(f"{path}: CONFIGS[{i}] repeats CONFIGS[{names[c.name()]}] ({c})")
        names[c.name()] = i
    return configs


def check_sizes(path: Path, configs: Sequence) -> None:
    """Each group's training step (its seeds stacked) against this machine's memory, and each
    config against the engine sweeps train with (the fast one: a field value it does not compute
    is named with the engine that does), so a sweep refuses a config too big or not computable
    before any run starts (and before the store opens)."""
    from interp.core import fields, limits

    groups: dict = {}  # group key -> [index of its first config, seeds]
    for i, c in enumerate(configs):
        groups.setdefault(group_key(c), [i, 0])[1] += 1
    for i, seeds in groups.values():
        try:
            refused = fields.refusal(configs[i], "fast")
            if refused:
                raise ValueError(f"{refused}; sweeps train with the fast engine, interp train --engine reference with the other")
            limits.check_trainable(configs[i], seeds)
        except ValueError as e:
            raise ValueError(f"{path}: CONFIGS[{i}]: {e}") from None
