"""What each field of a task model (and of a run) is, said once, beside the field's declaration.

A field of :class:`interp.core.models.ModelSpec` (or of ``TrainConfig``) is declared with
:func:`declare`, which keeps its :class:`Info` in the dataclass field's metadata: the values it
accepts, the HookedTransformerConfig fields it sets (or how the model gets it otherwise), the
engines that compute only some of its values, whether it tells readings apart in the atlas (and
in which cells it acts), and its CLI flag. Every fact about a field is read from there:

* validation: :func:`check` (``ModelSpec.__post_init__``);
* the TransformerLens config: :func:`hooked` (``models.hooked_config``, used by building a model
  and by loading a checkpoint) and the memory estimate (``limits.train_step_bytes`` reads its
  shapes);
* engine refusals: :func:`refusal`, before anything is built or stored (``trainer``, the sweep
  loader), naming the engine that computes the value;
* the atlas's reading fields: :func:`reading_fields` and :func:`acting`;
* the CLI's flags (``interp train``) and the hostile-input test's table: :func:`infos`.

Named readings (:data:`READINGS`) are presets of the MLP and the reading fields;
:data:`CHOSEN` (f14, issue 28's screen) is the default of ``TrainConfig.paper`` and
``interp train``. Adding a field is its declaration (here the Info) plus the math it needs: the
fast engine's (``interp.training.fast_math``, or an ``engines`` limit that refuses other values by
name), and wherever the new architecture changes what a reader computes: the evaluation pass
(:mod:`interp.core.forward`), the residual hooks, the slot attribution and the measures, each of
which refuses by name what it does not handle (several heads: the measures;
``W_O="identity"``: one head's W_O). ``tests/core/test_fields.py`` reads every declared value
from here and checks its meaning (TransformerLens's logits by the evaluation pass and the fast
engine, a checkpoint round trip, the attribution adding up); ``docs/tasks-and-models.md`` adds a
field as a worked example. ``docs/cli.md`` is generated (``python -m interp.cli.reference``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

KEY = "interp"
#: the trainers (``interp.training.trainer.train``'s ``engine``)
ENGINES = ("fast", "reference")


@dataclass(frozen=True)
class Info:
    """A field's facts. ``accepted``: its values (a tuple, compared by type and value) or a
    predicate, said by ``words``; ``check``: a checker that raises its own ValueError instead
    (case, n: the task registry's words). ``hooked(spec)``: the HookedTransformerConfig fields it
    sets; ``built``: how the model gets it otherwise. ``engines``: engine -> the only values it
    computes (an engine not named computes every value). ``reading``: it tells readings apart in
    the atlas; ``acts(case, n_layers, pos_embed)``: whether it can change the model in that
    cell. ``flag``, ``help``: its ``interp train`` flag ('' for none)."""

    accepted: tuple | Callable[[Any], bool] = ()
    words: str = ""
    check: Callable[[Any], Any] | None = None
    hooked: Callable[[Any], dict] | None = None
    built: str = ""
    engines: Mapping[str, tuple] = field(default_factory=dict)
    reading: bool = False
    acts: Callable[[int, int, str | None], bool] | None = None
    flag: str = ""
    help: str = ""

    def accepts(self, value) -> bool:
        if self.check is not None:
            try:
                self.check(value)
            except ValueError:
                return False
            return True
        if callable(self.accepted):
            return bool(self.accepted(value))
        return any(value is a or (type(value) is type(a) and value == a) for a in self.accepted)

    def refusal(self, name: str, value) -> str:
        """Why ``value`` is refused, as ``check`` words it."""
        if self.check is not None:
            try:
                self.check(value)
            except ValueError as e:
                return str(e)
        said = self.words or f"one of {self.accepted}"
        return f"{name}={value!r}; accepted: {said}"


def declare(default=dataclasses.MISSING, **info) -> Any:
    """A dataclass field with ``default`` whose :class:`Info` is ``Info(**info)``."""
    return field(default=default, metadata={KEY: Info(**info)})


def infos(cls) -> dict[str, Info]:
    """Name -> Info of every declared field of the dataclass ``cls`` (or of an instance's
    class), in declaration order."""
    cls = cls if isinstance(cls, type) else type(cls)
    return {f.name: f.metadata[KEY] for f in dataclasses.fields(cls) if KEY in f.metadata}


def check(obj, cls=None, names=None) -> None:
    """A ValueError naming the first field of ``cls`` (default: ``obj``'s class; ``names``: only
    these) whose value ``obj`` holds is not accepted, in declaration order."""
    for name, info in infos(cls or obj).items():
        if names is not None and name not in names:
            continue
        value = getattr(obj, name)
        if not info.accepts(value):
            raise ValueError(info.refusal(name, value))


def hooked(spec, cls=None) -> dict:
    """The HookedTransformerConfig fields ``spec``'s fields (those of ``cls``, default its
    class) set: each field's ``hooked``."""
    out: dict = {}
    for info in infos(cls or spec).values():
        if info.hooked is not None:
            out.update(info.hooked(spec))
    return out


def refusal(spec, engine: str) -> str | None:
    """Why ``engine`` cannot compute ``spec`` (naming the field and the engine that can), or None."""
    for name, info in infos(spec).items():
        value = getattr(spec, name)
        only = info.engines.get(engine)
        if only is None or any(value is a or (type(value) is type(a) and value == a) for a in only):
            continue
        can = [e for e in ENGINES if e != engine and (e not in info.engines or value in info.engines[e])]
        other = f"engine={can[0]!r}, which computes it" if can else "no engine computes it yet"
        return (f"{name}={value!r}: the {engine} engine computes {name} in {only} only; "
                f"accepted: {other}")
    return None


def reading_fields(cls) -> tuple[str, ...]:
    """The fields of ``cls`` that tell readings apart in the atlas, in declaration order."""
    return tuple(name for name, info in infos(cls).items() if info.reading)


def acting(cls, values: Mapping, case: int, n_layers: int, pos_embed: str | None = None) -> dict:
    """The items of ``values`` (fields of ``cls``) that can act in the cell (``acts``; a field
    without it acts everywhere; ``pos_embed`` None: assumed learned)."""
    known = infos(cls)
    return {k: v for k, v in values.items()
            if known[k].acts is None or known[k].acts(case, n_layers, pos_embed)}


@dataclass(frozen=True)
class Reading:
    """A named reading of the paper's architecture: d_mlp = ``mlp_ratio`` d_model (0: none),
    placed by ``mlp`` in two-layer models, and ``fields`` off the paper preset's values."""

    mlp_ratio: int
    mlp: str
    fields: Mapping[str, Any]
    source: str


#: the named readings (``TrainConfig.paper(..., reading=...)``, ``interp train --reading``)
READINGS = {
    "attention-only": Reading(0, "every", {}, "the model of the paper's tables as experiments/table1 "
                              "and table2 train it (issue 16)"),
    "mlp-4x": Reading(4, "every", {}, "d_mlp = 4 d_model after every attention layer (issue 16's choice)"),
    "f14": Reading(4, "last", {"unembed_bias": False, "W_O": "identity", "residual": "embed",
                               "key_order": "batch"},
                   "issue 28's screen's choice (experiments/readings/screen/scores.md): d_mlp = 4 "
                   "d_model after the last attention layer, no b_U, W_O = I, embed residual, one "
                   "key order per batch"),
}
#: the reading the screen chose: the default of ``TrainConfig.paper`` and ``interp train``
CHOSEN = "f14"


def reading_values(cls, name: str, case: int, d_token: int, n_layers: int = 1,
                   pos_embed: str = "learned", pe_combine: str = "add") -> dict:
    """The fields of reading ``name`` in one cell (those that act there), as ``cls``'s fields;
    its MLP is as wide as the cell's d_model (2 d_token under case 1's pe_combine="concat")."""
    from interp.core import tasks

    if name not in READINGS:
        raise ValueError(f"reading={name!r}; accepted: one of {tuple(READINGS)}")
    r = READINGS[name]
    mlp = {}
    if r.mlp_ratio:
        d_model = 2 * d_token if pe_combine == "concat" else tasks.get(case).d_model(d_token)
        mlp = {"d_mlp": r.mlp_ratio * d_model, "mlp": r.mlp}
    return acting(cls, {**mlp, **r.fields}, case, n_layers, pos_embed)
