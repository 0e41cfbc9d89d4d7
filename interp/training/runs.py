"""What a training run is: its config, its result, its random streams and its initial model.

:class:`TrainConfig` (the paper's protocol as defaults, one field per choice where the paper is
silent; ``experiments/README.md`` tabulates them), :class:`RunResult`, the run's independent
random streams (:func:`stream_seed`), the untrained model (:func:`init_model`, with the
initialisation family of ``TrainConfig.init``) and the test accuracy every trainer reports
(:func:`evaluate_accuracy`, by the package's one evaluation pass). Both trainers
(:mod:`interp.train.training`'s plain TransformerLens loop and :mod:`interp.train.fast_train`)
sit above this module and import from it, never from each other's internals.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import random
from dataclasses import dataclass, field

import numpy as np
import torch

from interp.core import fields, forward, inits, models, tasks

log = logging.getLogger(__name__)

#: initialisation families accepted by ``TrainConfig.init`` (:mod:`interp.core.inits`)
INITS = models.INITS
#: the initialisation of the tables' protocol (:meth:`TrainConfig.paper`)
PAPER_INIT = "pytorch"
ENGINES = fields.ENGINES
#: devices accepted by the trainers (``"cuda:N"`` names one GPU); see :func:`check_device`
DEVICES = ("cpu", "cuda")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


#: the TrainConfig fields every run name hashes; any other field (d_mlp and the architecture
#: choices added since) enters the name only when it is off its default, so the runs named
#: before it existed keep their names (tests/training/test_run_names.py)
NAMED_ALWAYS = frozenset((
    "case", "n", "d_token", "n_layers", "pos_embed", "init", "seed", "lr", "batch_size",
    "max_steps", "stop_loss", "eval_batches", "curve_every", "function",
))


#: the TrainConfig fields that are real numbers: stored as plain floats whatever number was
#: given (``TrainConfig.__post_init__``); every other number field is an integer, checked as one
FLOAT_FIELDS = ("lr", "stop_loss")


@dataclass(frozen=True, kw_only=True)
class TrainConfig(models.ModelSpec):
    """One training run: the model's architecture (every :class:`interp.core.models.ModelSpec`
    field, declared and validated there: case, n, d_token, n_layers, pos_embed, d_mlp, mlp,
    attn_bias, unembed_bias, W_O, residual, init), the seed and the protocol.

    Defaults are the paper's values. ``curve_every`` (steps between the sampled points of the
    loss curve), ``function`` (``"permutation"``, the paper's experiments, or ``"any"``, the
    theorems' arbitrary f) and ``key_order`` (permuted keys drawn fresh per input,
    ``"sequence"``, or one order per batch, ``"batch"``; training and test batches alike) are
    our choices, as are the architecture's fields the paper leaves open. The fields after ``pos_embed`` are keyword-only.
    """

    seed: int = 0
    lr: float = 1e-3
    batch_size: int = 256
    max_steps: int = 10_000
    stop_loss: float = 0.01
    eval_batches: int = 100
    curve_every: int = 50
    function: str = "permutation"
    key_order: str = fields.declare(
        "sequence", accepted=tasks.KEY_ORDERS, reading=True, acts=lambda case, n_layers, pe: tasks.get(case).permuted,
        flag="--key-order", help="permuted keys drawn per input (sequence) or one order per batch (batch)")

    def __post_init__(self):
        # the architecture is validated by ModelSpec; training needs n >= 2
        tasks.check_case(self.case)
        if not _is_int(self.n) or self.n < 2:
            raise ValueError(f"n={self.n!r}; accepted: an integer >= 2")
        super().__post_init__()
        if not _is_int(self.seed) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed={self.seed!r}; accepted: an integer in 0..2**63-1")
        if not _is_real(self.lr) or not 0 < self.lr <= 1:
            raise ValueError(f"lr={self.lr!r}; accepted: a number in (0, 1]")
        if not _is_int(self.batch_size) or self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size!r}; accepted: an integer >= 1")
        if not _is_int(self.max_steps) or self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps!r}; accepted: an integer >= 1")
        if not _is_real(self.stop_loss) or self.stop_loss < 0:
            raise ValueError(
                f"stop_loss={self.stop_loss!r}; accepted: a finite number >= 0 (0: never stop early)"
            )
        if not _is_int(self.eval_batches) or self.eval_batches < 1:
            raise ValueError(f"eval_batches={self.eval_batches!r}; accepted: an integer >= 1")
        if not _is_int(self.curve_every) or self.curve_every < 1:
            raise ValueError(f"curve_every={self.curve_every!r}; accepted: an integer >= 1")
        if self.function not in tasks.FUNCTIONS:
            raise ValueError(f"function={self.function!r}; accepted: one of {tasks.FUNCTIONS}")
        fields.check(self, names=("key_order",))
        # canonical before named: a number field holds a plain float, so 0, 0.0, -0.0 and
        # numpy.float64(0) are one config, with one name (a name hashes the JSON, where 0 and
        # 0.0 differ) and one group (which compares by ==); every stored config already holds
        # floats here, so no stored run's name changes (tests/training/test_canonical_configs.py)
        for name in FLOAT_FIELDS:
            object.__setattr__(self, name, float(getattr(self, name)) + 0.0)
        if self.key_order != "sequence" and not tasks.get(self.case).permuted:
            raise ValueError(f"key_order={self.key_order!r} with case {self.case}, whose keys are not permuted: "
                             "there is no key order to draw; accepted: key_order='sequence' (the default), "
                             "or a case with permuted keys (3, 5)")

    def __getstate__(self):
        """A presentation :func:`interp.core.tasks.register` added travels with its configs: the
        task, unpickled first in another process (the sweep loader's reply to the driver), is
        registered there (:meth:`interp.core.tasks.Task.__reduce__`)."""
        return dict(self.__dict__), tasks.added().get(self.case)

    def __setstate__(self, state):
        fields, _task = state if isinstance(state, tuple) else (state, None)
        self.__dict__.update(fields)

    @classmethod
    def paper(cls, case: int, n: int, d_token: int, *, reading: str = fields.CHOSEN, **given) -> "TrainConfig":
        """The protocol the paper's tables run (``experiments/table1``, ``table2``) under a named
        reading: this class's defaults with ``init="pytorch"``, the initialisation every table
        uses (the paper names none; TransformerLens's "gpt2" left whole cells at chance), and the
        fields of ``reading`` (:data:`interp.core.fields.READINGS`) that act in the cell.
        ``reading`` defaults to f14, issue 28's screen's choice (d_mlp = 4 d_model after the last
        attention layer, no b_U, W_O = I, the embed residual, one key order per batch:
        ``experiments/readings/screen/scores.md``); ``"attention-only"`` is the tables' own model.
        ``given``: any other field, over the reading's, e.g. the tables' rows and columns
        (``pos_embed``, ``n_layers``), ``seed``, ``max_steps``; an ``init`` other than "pytorch"
        is refused (use ``TrainConfig(...)`` for another)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"case", "n", "d_token"}
        if set(given) - known:
            raise ValueError(f"unknown TrainConfig fields {sorted(set(given) - known)}; accepted: {sorted(known)}")
        if given.get("init", PAPER_INIT) != PAPER_INIT:
            raise ValueError(f"init={given['init']!r}; TrainConfig.paper fixes init={PAPER_INIT!r} (the tables' "
                             "protocol): build TrainConfig(..., init=...) for another initialisation")
        if reading not in fields.READINGS:
            raise ValueError(f"reading={reading!r}; accepted: one of {tuple(fields.READINGS)}")
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        cell = {k: given.get(k, defaults[k]) for k in ("n_layers", "pos_embed", "pe_combine")}
        try:
            values = fields.reading_values(cls, reading, case, d_token, **cell)
        except (ValueError, TypeError):
            values = {}  # a bad case, d_token or cell: the config's own checks name it below
        return cls(case=case, n=n, d_token=d_token, **{**values, **given, "init": PAPER_INIT})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """A config from :meth:`to_dict`'s dict; a dict stored before a field existed takes
        its default."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig fields {unknown}; accepted: {sorted(known)}")
        return cls(**d)

    @property
    def spec(self) -> models.ModelSpec:
        """The model's architecture alone (a plain ModelSpec, as ``model.spec``)."""
        return models.ModelSpec(**{f.name: getattr(self, f.name) for f in dataclasses.fields(models.ModelSpec)})

    def name(self) -> str:
        """A stable 12-hex-digit hash of every field (seed included): the run's name.

        The fields of :data:`NAMED_ALWAYS` are always hashed; any other (``d_mlp``, ``mlp``,
        ``attn_bias``, ...) only when it is off its default, so every run keeps the name it had
        before the field existed, and older stores and checkpoints still match their configs.
        """
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        d = {k: v for k, v in self.to_dict().items()
             if k in NAMED_ALWAYS or not (type(v) is type(defaults[k]) and v == defaults[k])}
        text = json.dumps(d, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def label(self) -> str:
        """A short readable description, e.g. ``case3 n100 d32 L1 pe=none seed0``
        (``mlp128`` after the layers when each block has an MLP of width 128, then every other
        architecture choice off its default, e.g. ``mlp=last W_O=identity``)."""
        mlp = f" mlp{self.d_mlp}" if self.d_mlp else ""
        spec = self.spec
        default = models.ModelSpec(self.case, self.n, self.d_token)
        extra = "".join(f" {f.name}={getattr(spec, f.name)}" for f in dataclasses.fields(spec)
                        if f.name not in NAMED_ALWAYS and f.name != "d_mlp"
                        and getattr(spec, f.name) != getattr(default, f.name))
        return (
            f"case{self.case} n{self.n} d{self.d_token} L{self.n_layers}{mlp}{extra} "
            f"pe={self.pos_embed} seed{self.seed}"
        )

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def check_device(device) -> str:
    """``device`` as a string the trainers use (``"cpu"``, ``"cuda"``, ``"cuda:N"``), or a
    ValueError naming the bad value: an unknown device, or CUDA where this torch sees no GPU.

    The device is where a run trains, not what it computes: it is not a :class:`TrainConfig`
    field and does not enter :meth:`TrainConfig.name` (a run trained on a GPU is the same run,
    equal to float rounding), like the number of workers or threads.
    """
    text = str(device) if isinstance(device, (str, torch.device)) else None
    kind, _, index = (text or "").partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise ValueError(f"device={device!r}; accepted: one of {DEVICES}, or 'cuda:N' for GPU N")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            raise ValueError(
                f"device={text!r}, but CUDA is not available here (torch {torch.__version__}, "
                f"built {'with' if torch.version.cuda else 'without'} CUDA); accepted: 'cpu'"
            )
        if index and int(index) >= count:
            raise ValueError(f"device={text!r}; this machine has {count} GPU(s): cuda:0..cuda:{count - 1}")
    return text


@dataclass
class RunResult:
    """What a run produced. ``status`` is ``"ok"`` or ``"failed: <reason>"``; ``seconds`` is
    wall time, ``cpu_seconds`` the process's CPU time (user + system) for the run (for a group
    of seeds trained together, both divided among them; None where not measured)."""

    config: TrainConfig
    model: object  # HookedTransformer
    accuracy: float
    steps: int
    final_loss: float
    seconds: float
    curve: list[tuple[int, float]] = field(default_factory=list)
    status: str = "ok"
    cpu_seconds: float | None = None

    def metrics(self) -> dict:
        """The JSON-serialisable part (everything but the model)."""
        return dict(
            name=self.config.name(),
            config=self.config.to_dict(),
            accuracy=self.accuracy,
            steps=self.steps,
            final_loss=self.final_loss,
            seconds=self.seconds,
            cpu_seconds=self.cpu_seconds,
            curve=[list(p) for p in self.curve],
            status=self.status,
        )


def stream_seed(seed: int, stream: str) -> int:
    """Seed of one independent random stream (``"train"`` or ``"test"``) of a run.

    A hash of the run seed and the stream name, so the streams of one seed are unrelated and
    the test inputs are the same however many steps training took.
    """
    digest = hashlib.sha256(f"interp.training/{stream}/{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def generator(seed: int, stream: str) -> torch.Generator:
    return torch.Generator().manual_seed(stream_seed(seed, stream))


def init_model(config: TrainConfig):
    """The untrained model of a run: :func:`interp.core.models.from_spec` of its architecture,
    seeded by ``config.seed`` (the init family is ``config.init``).

    TransformerLens seeds the global RNGs (torch, numpy, random) when given a seed; they are
    restored afterwards so training leaves the caller's random state alone.
    """
    states = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        model = models.from_spec(config.spec, seed=config.seed)
    random.setstate(states[0])
    np.random.set_state(states[1])
    return model


#: the family "pytorch" for a model built by hand (older name; :func:`interp.core.inits.pytorch`)
_pytorch_init = inits.pytorch


def trainable(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def check_sample(task, n: int, batch: int, drawn) -> tuple[torch.Tensor, torch.Tensor]:
    """``drawn`` (what ``task.sample(n, batch, ...)`` returned) as ``(tokens, answers)``, or a
    one-line ValueError naming the task and what is wrong: tokens ``[batch, seq_len]`` of the
    task's vocabulary, answers ``[batch]`` integers in 0..n-1."""
    where = f"case {task.case} ({type(task).__module__}.{type(task).__qualname__}): its sample(n={n}, {batch})"
    if not isinstance(drawn, tuple) or len(drawn) != 2:
        raise ValueError(f"{where} returned a {type(drawn).__name__}; accepted: (tokens, answers)")
    tokens, answers = drawn
    L, vocab = task.seq_len(n), task.d_vocab(n)
    for name, t, shape, top in (("tokens", tokens, (batch, L), vocab), ("answers", answers, (batch,), n)):
        if not isinstance(t, torch.Tensor) or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ValueError(f"{where} returned {name} of type {getattr(t, 'dtype', type(t).__name__)}; "
                             "accepted: an integer tensor")
        if tuple(t.shape) != shape:
            raise ValueError(f"{where} returned {name} of shape {tuple(t.shape)}; accepted: {shape}")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= top):
            raise ValueError(f"{where} returned {name} from {int(t.min())} to {int(t.max())}; "
                             f"accepted: 0..{top - 1}")
    return tokens.long(), answers.long()


def check_sampler(config: TrainConfig) -> None:
    """Draw two inputs from the task's own sampler (a generator of its own: no run's stream is
    touched) and check them (:func:`check_sample`) before anything is built or trained, so a
    registered task whose answers have the wrong shape is refused in one line, not after the run."""
    task = tasks.get(config.case)
    drawn = task.sample(config.n, 2, generator=torch.Generator().manual_seed(0), function=config.function,
                        key_order=config.key_order)
    check_sample(task, config.n, 2, drawn)


@torch.inference_mode()
def evaluate_accuracy(model, config: TrainConfig) -> float:
    """Accuracy over ``config.eval_batches`` fresh batches from the run's test stream, by the
    package's one evaluation pass (:func:`interp.core.forward.predictions`), whichever trainer ran."""
    g = generator(config.seed, "test")
    correct = 0
    for _ in range(config.eval_batches):
        tokens, answers = tasks.sample(
            config.case, config.n, config.batch_size, generator=g, function=config.function, key_order=config.key_order
        )
        correct += int((forward.predictions(model, tokens) == answers).sum())
    return correct / (config.eval_batches * config.batch_size)
