"""What a training run is: its config, its result, its random streams and its initial model.

:class:`TrainConfig` (the paper's protocol as defaults, one field per choice where the paper is
silent; ``experiments/README.md`` tabulates them), :class:`RunResult`, the run's independent
random streams (:func:`stream_seed`), the untrained model (:func:`init_model`, with the
initialisation schemes of ``TrainConfig.init``) and the test accuracy every trainer reports
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

from interp.core import forward, models, tasks

log = logging.getLogger(__name__)

#: TransformerLens initialisation schemes accepted by ``TrainConfig.init``.
INITS = ("gpt2", "pytorch", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal")
ENGINES = ("fast", "reference")
#: devices accepted by the trainers (``"cuda:N"`` names one GPU); see :func:`check_device`
DEVICES = ("cpu", "cuda")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class TrainConfig:
    """One training run: the task, the model shape, the seed and the protocol.

    Defaults are the paper's values. ``curve_every`` (steps between the sampled points of the
    loss curve), ``init`` (TransformerLens init scheme) and ``function`` (``"permutation"``,
    the paper's experiments, or ``"any"``, the theorems' arbitrary f) are our choices.
    ``d_mlp`` (0: attention-only, the default; > 0: a ReLU MLP of that width after the
    attention of every block) is ours too; it enters :meth:`name` only when set.
    """

    case: int
    n: int
    d_token: int
    n_layers: int = 1
    pos_embed: str = "learned"
    seed: int = 0
    lr: float = 1e-3
    batch_size: int = 256
    max_steps: int = 10_000
    stop_loss: float = 0.01
    eval_batches: int = 100
    curve_every: int = 50
    init: str = "gpt2"
    function: str = "permutation"
    d_mlp: int = 0

    def __post_init__(self):
        # the model's shape is a models.ModelSpec (its validation); training needs n >= 2
        tasks.check_case(self.case)
        if not _is_int(self.n) or self.n < 2:
            raise ValueError(f"n={self.n!r}; accepted: an integer >= 2")
        models.ModelSpec(self.case, self.n, self.d_token, self.n_layers, self.pos_embed)
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
        if self.init not in INITS:
            raise ValueError(f"init={self.init!r}; accepted: one of {INITS}")
        if self.function not in tasks.FUNCTIONS:
            raise ValueError(f"function={self.function!r}; accepted: one of {tasks.FUNCTIONS}")
        if not _is_int(self.d_mlp) or self.d_mlp < 0:
            raise ValueError(
                f"d_mlp={self.d_mlp!r}; accepted: an integer >= 0 (0: attention-only, no MLP)"
            )

    @property
    def d_model(self) -> int:
        return 2 * self.d_token if self.case in tasks.SAME_POSITION else self.d_token

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig fields {unknown}; accepted: {sorted(known)}")
        return cls(**d)

    @property
    def spec(self) -> models.ModelSpec:
        """The model's shape (case, n, d_token, n_layers, pos_embed, d_mlp)."""
        return models.ModelSpec(self.case, self.n, self.d_token, self.n_layers, self.pos_embed, self.d_mlp)

    def name(self) -> str:
        """A stable 12-hex-digit hash of every field (seed included): the run's name.

        ``d_mlp`` is hashed only when it is set (> 0): attention-only runs keep the names they
        had before the field existed, so older stores and checkpoints still match their configs.
        """
        d = self.to_dict()
        if d["d_mlp"] == 0:
            del d["d_mlp"]
        text = json.dumps(d, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def label(self) -> str:
        """A short readable description, e.g. ``case3 n100 d32 L1 pe=none seed0``
        (``mlp128`` after the layers when each block has an MLP of width 128)."""
        mlp = f" mlp{self.d_mlp}" if self.d_mlp else ""
        return (
            f"case{self.case} n{self.n} d{self.d_token} L{self.n_layers}{mlp} "
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
    """The untrained model of a run: ``build_model`` seeded by ``config.seed``.

    TransformerLens seeds the global RNGs (torch, numpy, random) when given a seed; they are
    restored afterwards so training leaves the caller's random state alone.
    """
    states = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        model = models.build_model(
            config.case, config.n, config.d_token, config.n_layers, config.pos_embed,
            seed=config.seed, d_mlp=config.d_mlp,
        )
        if config.init == "pytorch":
            torch.manual_seed(config.seed)
            _pytorch_init(model)
        elif config.init != "gpt2":
            model.cfg.init_mode = config.init
            torch.manual_seed(config.seed)
            _reinit(model)
    random.setstate(states[0])
    np.random.set_state(states[1])
    return model


def _reinit(model) -> None:
    """Re-initialise with ``model.cfg.init_mode`` (keeps W_pos zero when it is frozen)."""
    frozen = not model.pos_embed.W_pos.requires_grad
    model.init_weights()
    if frozen:
        with torch.no_grad():
            model.pos_embed.W_pos.zero_()


@torch.no_grad()
def _pytorch_init(model) -> None:
    """PyTorch's layer defaults, as a model built from ``nn.Embedding`` and ``nn.Linear`` gets.

    Embedding tables (W_E or the key/value tables, W_pos when learned) ~ N(0, 1); every
    projection ``x W + b`` with fan-in f: W and b ~ U(-1/sqrt f, 1/sqrt f) (``nn.Linear``'s
    kaiming_uniform(a=sqrt 5)): W_Q, W_K, W_V, W_U and the MLP's W_in with f = d_model, W_O
    with f = d_head, the MLP's W_out with f = d_mlp.
    """
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.startswith("embed.") or name == "pos_embed.W_pos":
            p.normal_(0.0, 1.0)
            continue
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("W_O", "b_O"):
            fan_in = model.cfg.d_head
        elif leaf in ("W_out", "b_out"):
            fan_in = model.cfg.d_mlp
        else:
            fan_in = model.cfg.d_model
        bound = 1.0 / math.sqrt(fan_in)
        p.uniform_(-bound, bound)


def trainable(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


@torch.inference_mode()
def evaluate_accuracy(model, config: TrainConfig) -> float:
    """Accuracy over ``config.eval_batches`` fresh batches from the run's test stream, by the
    package's one evaluation pass (:func:`interp.core.forward.predictions`), whichever trainer ran."""
    g = generator(config.seed, "test")
    correct = 0
    for _ in range(config.eval_batches):
        tokens, answers = tasks.sample(
            config.case, config.n, config.batch_size, generator=g, function=config.function
        )
        correct += int((forward.predictions(model, tokens) == answers).sum())
    return correct / (config.eval_batches * config.batch_size)
