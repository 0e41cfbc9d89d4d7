"""Checkpoints: a model as ``model.safetensors`` plus ``config.json``; loading never unpickles.

A checkpoint is a directory::

    <path>/model.safetensors   the state dict (tensors only, safetensors format)
    <path>/config.json         format tag, the HookedTransformerConfig fields that shape the
                               model (d_mlp only when there is an MLP), its ModelSpec (when
                               it has one: every architecture choice, restored as
                               ``model.spec``), how the embedding is tied (pair tables,
                               frozen W_pos), the attention modes,
                               the sha256 of model.safetensors, and when known the
                               TrainConfig and the run's metrics

:func:`save` writes both files into a temporary sibling directory and renames it into place,
so a killed save leaves either the old checkpoint or the new one, never half of one.
:func:`load` rebuilds the HookedTransformer from the JSON (no code is unpickled), checks the
weights' sha256, refuses weights that are not finite (NaN or inf: a diverged or edited model
whose hashes were recomputed still matches them, and every number measured on it would be
noise) and loads them.
"""

from __future__ import annotations

import hashlib
import json
import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from interp.core import tasks
from interp.training.files import replace_folder, write_synced

FORMAT = "interp-checkpoint/1"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"

#: HookedTransformerConfig fields stored in config.json (all that models.hooked_config and make_config set).
_CFG_FIELDS = (
    "n_layers", "d_model", "d_head", "n_heads", "n_ctx", "d_vocab", "d_vocab_out", "act_fn",
    "attn_only", "normalization_type", "attention_dir", "positional_embedding_type",
    "default_prepend_bos", "init_mode",
)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def identity(task) -> dict:
    """What names a registered presentation beyond its number: its case, its class,
    module-qualified, and its name (stored for a task :func:`interp.core.tasks.register` added;
    the paper's five are named by their case)."""
    return {"case": task.case, "class": f"{type(task).__module__}.{type(task).__qualname__}", "name": task.name}


def check_identity(stored, where) -> int:
    """The case of the task :func:`identity` ``stored`` names, when that task is the one
    registered under its case here; a ValueError naming ``where``, the task stored and the one
    registered (:class:`interp.core.tasks.UnknownCase`, with how to register, when none is)."""
    if not isinstance(stored, dict) or set(stored) != {"case", "class", "name"}:
        raise ValueError(f"{where}: task {stored!r}; accepted: its case, class and name")
    case, said = stored["case"], f"{stored['class']} ({stored['name']!r})"
    if isinstance(case, bool) or not isinstance(case, int) or case not in tasks.TASKS:
        raise tasks.UnknownCase(f"{where}: case {case!r} is {said}, which is not registered here; "
                                f"{tasks.REGISTER_HINT}")
    here = identity(tasks.TASKS[case])
    if here != stored:
        raise ValueError(f"{where}: case {case} is {said}, but case {case} here is {here['class']} "
                         f"({here['name']!r}); accepted: the same presentation registered as case {case}")
    return case


def _describe(model) -> dict:
    from interp.core import models

    cfg = model.cfg
    desc = {k: getattr(cfg, k) for k in _CFG_FIELDS}
    if not cfg.attn_only:  # only then: attention-only checkpoints keep their config.json
        desc["d_mlp"] = cfg.d_mlp
    desc["dtype"] = str(cfg.dtype).replace("torch.", "")
    task, spec = getattr(model, "task", None), models.spec_of(model)
    return dict(
        **({} if task is None else {"case": task.case}),  # the model's task (interp.core.tasks)
        **({"task": identity(task)} if task is not None and task.case in tasks.added() else {}),
        **({} if spec is None else {"spec": dataclasses.asdict(spec)}),  # its architecture
        hooked_config=desc,
        pair_embedding=models.has_pair_embedding(model),
        pos_embed_frozen=not model.pos_embed.W_pos.requires_grad,
        requires_grad=any(p.requires_grad for p in model.parameters()),
        attention_modes=[list(m) for m in getattr(model, "attention_modes", [])],  # as set_attention keeps them
        **_ties(model),
    )


def _ties(model) -> dict:
    """``attention_ties`` ([rtol, atol] per layer) where a hard mode has a non-default tolerance;
    nothing otherwise, so a checkpoint of default tolerances keeps its config.json."""
    from interp.core import attention

    ties = [list(m[2:]) for m in attention.modes(model)]
    return {"attention_ties": ties} if any(t != [None, None] for t in ties) else {}


def save(result_or_model, path, config=None) -> Path:
    """Write a checkpoint of a RunResult or a HookedTransformer to directory ``path``.

    ``config`` (a TrainConfig) is stored with it; for a RunResult it defaults to the result's
    config, and the result's metrics are stored too. An existing checkpoint at ``path`` is
    replaced atomically. Returns ``path``.
    """
    from interp.training.runs import RunResult, TrainConfig

    metrics = None
    if isinstance(result_or_model, RunResult):
        model = result_or_model.model
        config = config or result_or_model.config
        metrics = {k: v for k, v in result_or_model.metrics().items() if k != "config"}
    else:
        model = result_or_model
    if not hasattr(model, "cfg") or not hasattr(model, "state_dict"):
        raise ValueError(
            f"save got a {type(result_or_model).__name__}; accepted: a RunResult or a "
            "HookedTransformer"
        )
    if config is not None and not isinstance(config, TrainConfig):
        raise ValueError(f"config is a {type(config).__name__}; accepted: a TrainConfig or None")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS))
        meta = dict(
            format=FORMAT,
            sha256=_sha256(tmp / WEIGHTS),
            model=_describe(model),
            train_config=config.to_dict() if config is not None else None,
            result=metrics,
        )
        write_synced(tmp / CONFIG, json.dumps(meta, indent=1).encode())
        replace_folder(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


#: What a checkpoint's config.json may hold (checked before anything is allocated): integer
#: fields within these ranges, the others among these values.
CONFIG_LIMITS = {
    "n_layers": (1, 16), "d_model": (1, 2**14), "d_head": (1, 2**14), "n_heads": (1, 64),
    "n_ctx": (1, 2**21), "d_vocab": (1, 2**27), "d_vocab_out": (1, 2**21), "d_mlp": (1, 2**16),
}
CONFIG_CHOICES = {
    "dtype": ("float32", "float64"), "act_fn": ("relu",), "attn_only": (True, False),
    "normalization_type": (None,), "attention_dir": ("bidirectional",),
    "positional_embedding_type": ("standard",), "default_prepend_bos": (True, False),
    "init_mode": ("gpt2", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal"),
}


def check_config(hc: dict, where, *, spec: bool = False) -> None:
    """Raise a ValueError naming ``where`` and the field unless ``hc`` (a checkpoint's
    ``hooked_config``) is within :data:`CONFIG_LIMITS` / :data:`CONFIG_CHOICES` and its weights
    fit in half of this machine's memory. ``spec``: it stores its ModelSpec, whose declarations say
    what the config may be (:func:`load` holds it to the spec's), so only sizes and dtype are checked."""
    for key, value in hc.items():
        if key in CONFIG_LIMITS:
            lo, hi = CONFIG_LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{where}: {key}={value!r}; accepted: an integer in {lo}..{hi}")
        elif key in CONFIG_CHOICES:
            if spec and key != "dtype":
                continue
            if not any(value is c or (type(value) is type(c) and value == c) for c in CONFIG_CHOICES[key]):
                raise ValueError(f"{where}: {key}={value!r}; accepted: one of {CONFIG_CHOICES[key]}")
        else:
            raise ValueError(f"{where}: unknown field {key!r} in hooked_config")
    d, h, dh = hc.get("d_model", 1), hc.get("n_heads", 1), hc.get("d_head", 1)
    count = (hc.get("d_vocab", 1) + hc.get("n_ctx", 1) + hc.get("d_vocab_out", 1)) * d
    count += hc.get("n_layers", 1) * (4 * d * h * dh + 2 * d * hc.get("d_mlp", 0))
    need = count * (8 if hc.get("dtype") == "float64" else 4)
    from interp.core.limits import memory_bytes

    have = memory_bytes()
    if have and need > have // 2:
        raise ValueError(f"{where}: the model it describes needs {need / 2**30:.1f} GiB; accepted: at "
                         f"most half of this machine's {have / 2**30:.1f} GiB")


def check_finite(state: dict, where, constants: dict | None = None) -> None:
    """Raise a ValueError naming ``where`` and the first tensor of ``state`` (in name order)
    that holds NaN or inf, with how many of each. ``constants``: buffers a fresh model holds
    (TransformerLens's attention mask value ``IGNORE`` is -inf); a tensor equal to its
    constant is not a weight and passes."""
    constants = constants or {}
    for name in sorted(state):
        t = state[name]
        if not t.is_floating_point() or bool(torch.isfinite(t).all()):
            continue
        fresh = constants.get(name)
        if fresh is not None and fresh.shape == t.shape and torch.equal(fresh.to(t.dtype), t):
            continue
        nan = int(torch.isnan(t).sum())
        inf = t.numel() - nan - int(torch.isfinite(t).sum())
        counts = ", ".join(f"{k} {what}" for k, what in ((nan, "NaN"), (inf, "inf")) if k)
        raise ValueError(f"{where}: tensor {name} has non-finite values ({counts}); the model "
                         "diverged or the file was altered; retrain it instead of analysing it")


def read_meta(path) -> dict:
    """The parsed config.json of a checkpoint (ValueError naming the path if unreadable)."""
    path = Path(path)
    cfg_path = path / CONFIG
    if not cfg_path.is_file() or not (path / WEIGHTS).is_file():
        raise ValueError(f"{path} is not a checkpoint: it needs {CONFIG} and {WEIGHTS}")
    try:
        meta = json.loads(cfg_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{cfg_path} is truncated or corrupt: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{cfg_path} is not an {FORMAT} file")
    return meta


def load(path):
    """The HookedTransformer stored at ``path`` (never unpickles; verifies the sha256)."""
    return _load(path)[0]


def _load(path):
    """(model, parsed config.json) of the checkpoint at ``path``."""
    from transformer_lens import HookedTransformerConfig

    from interp.core import attention, models

    path = Path(path)
    meta = read_meta(path)
    if _sha256(path / WEIGHTS) != meta.get("sha256"):
        raise ValueError(
            f"{path / WEIGHTS} does not match the sha256 in {path / CONFIG}: truncated or corrupt"
        )
    try:
        state = load_file(str(path / WEIGHTS))
        desc = meta["model"]
        case = _case(desc, meta.get("train_config"), path / CONFIG)  # the task first, by name
        hc = dict(desc["hooked_config"])
        check_config(hc, path / CONFIG, spec="spec" in desc)
        hc["dtype"] = {"float32": torch.float32, "float64": torch.float64}[hc["dtype"]]
        spec = _spec(desc, meta.get("train_config"), hc, path / CONFIG)
        # a spec's config is the one building makes (models.hooked_config); others as stored
        cfg = (models._quiet(models.hooked_config, spec, dtype=hc["dtype"]) if spec is not None
               else models._quiet(HookedTransformerConfig, device="cpu", **hc))
        cfg.init_mode = hc.get("init_mode", cfg.init_mode)  # how its weights were drawn, as saved
    except (SafetensorError, KeyError, TypeError, AttributeError, OSError) as e:
        raise ValueError(f"{path} is truncated or corrupt: {e}") from None
    try:
        model = models.new_model(cfg, case)
    except ValueError as e:
        raise ValueError(f"{path / CONFIG}: {e}") from None
    if desc["pair_embedding"]:
        models.tie_pair_embedding(model, cfg.d_vocab_out)
    if desc["pos_embed_frozen"]:
        models.disable_pos_embed(model)
    if spec is not None:
        models.attach_spec(model, spec)  # its fixed tensors frozen, its residual hooks
    check_finite(state, path / WEIGHTS, constants=dict(model.named_buffers()))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path / WEIGHTS} does not fit the model in {path / CONFIG}: {e}") from None
    try:
        models.check_spec(model)
    except ValueError as e:
        if "spec" in desc:
            raise ValueError(f"{path / WEIGHTS} does not fit the spec in {path / CONFIG}: {e}") from None
        del model.spec  # from before specs were stored, and its TrainConfig does not describe it
    if not desc.get("requires_grad", True):
        for p in model.parameters():
            p.requires_grad_(False)
    modes = desc.get("attention_modes") or []
    ties = desc.get("attention_ties") or [[None, None]] * len(modes)
    try:
        for layer, ((mode, beta), (rtol, atol)) in enumerate(zip(modes, ties, strict=True)):
            if (mode, beta) != ("softmax", 1.0):
                attention.set_attention(model, mode, beta=beta, layers=[layer], tie_rtol=rtol, tie_atol=atol)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path / CONFIG}: attention modes {modes!r} (ties {ties!r}): {e}") from None
    model.eval()
    return model, meta


def _spec(desc: dict, train_config, hc: dict, where):
    """The checkpoint's ModelSpec: stored with the model (a field stored before it existed takes
    its default), else (checkpoints from before specs were stored) its TrainConfig's when that
    describes the stored hooked_config ``hc``, else None (a construction or a bare model)."""
    from interp.core import models
    from interp.training.runs import TrainConfig

    stored = desc.get("spec")
    if stored is None and isinstance(train_config, dict):
        try:
            spec = TrainConfig.from_dict(train_config).spec
        except (TypeError, ValueError):
            return None  # load_run names a bad train_config
        return spec if _describes(spec, hc) else None
    if stored is None:
        return None
    if not isinstance(stored, dict):
        raise ValueError(f"{where}: spec {stored!r}; accepted: a ModelSpec's fields")
    known = [f.name for f in dataclasses.fields(models.ModelSpec)]
    if unknown := sorted(set(stored) - set(known)):
        raise ValueError(f"{where}: spec field(s) {unknown} (= {[stored[k] for k in unknown]}): this version of "
                         f"interp cannot build them (a checkpoint of another version, or of a field added "
                         f"elsewhere); accepted: the fields {known}")
    try:
        spec = models.ModelSpec(**stored)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: spec {stored!r}: {e}") from None
    if (differs := _differs(spec, hc)) is not None:
        raise ValueError(f"{where}: spec {stored!r} does not describe its hooked_config: {differs}")
    return spec


def _describes(spec, hc: dict) -> bool:
    """Whether the config building ``spec`` makes (:func:`interp.core.models.hooked_config`)
    holds every field of the stored hooked_config ``hc``."""
    return _differs(spec, hc) is None


def _differs(spec, hc: dict) -> str | None:
    """The first field of ``hc`` that the config building ``spec`` does not hold, in words."""
    from interp.core import models

    want = models._quiet(models.hooked_config, spec, dtype=hc["dtype"])
    for k, v in hc.items():
        built = _init_mode(spec, want) if k == "init_mode" else getattr(want, k)
        if built != v:
            return f"{k}={v!r} (its spec builds {k}={built!r})"
    return None


def _init_mode(spec, cfg) -> str:
    """A model of ``spec``'s ``init_mode``: its init family if TransformerLens's (inits sets it)."""
    return spec.init if spec.init in CONFIG_CHOICES["init_mode"] else cfg.init_mode


def _case(desc: dict, train_config, where) -> int | None:
    """The case of a checkpoint: its registered task's identity (:func:`check_identity`), else the
    case stored with the model, else (checkpoints from before the task object) its TrainConfig's,
    else None (a bare model of unknown task)."""
    if "task" in desc:
        return check_identity(desc["task"], where)
    case = desc.get("case")
    if case is None and isinstance(train_config, dict):
        case = train_config.get("case")
    try:
        return None if case is None else tasks.check_case(case)
    except tasks.UnknownCase as e:
        raise tasks.UnknownCase(f"{where}: {e}") from None


@dataclass(frozen=True)
class Run:
    """A trained run as :func:`load_run` gives it: the model and what it was trained as."""

    model: object  # the HookedTransformer
    config: object | None  # its TrainConfig (None for a checkpoint of a bare model)
    case: int | None
    n: int
    metrics: dict  # accuracy, steps, final_loss, seconds, curve, status (empty for a bare model)
    path: Path


def load_run(path) -> Run:
    """The model at checkpoint ``path`` with its ``TrainConfig``, case, n and metrics (the same
    checks as :func:`load`; a corrupt ``train_config`` is refused naming the file)."""
    from interp.training.runs import TrainConfig

    path = Path(path)
    model, meta = _load(path)
    config = None
    if meta.get("train_config") is not None:
        try:
            config = TrainConfig.from_dict(meta["train_config"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path / CONFIG}: train_config: {e}") from None
    return Run(model=model, config=config, case=None if model.task is None else model.task.case,
               n=model.cfg.d_vocab_out, metrics=dict(meta.get("result") or {}), path=path)
