"""Training the paper's experiments (Strobl, Angluin & Frank, Section 4).

Protocol, as the paper states it: Adam with learning rate 1e-3; every step draws a fresh batch
of 256 random inputs (f a uniformly random permutation of [n] per input, the target key
uniform; :func:`interp.tasks.sample`); cross-entropy on the final position's logits over the n
outputs; at most 10,000 steps; a run stops as soon as its training-batch loss is below 0.01;
test accuracy over 100 fresh batches. The model is the HookedTransformer of
:func:`interp.models.build_model` (one head, d_head = d_model, residual stream, no LayerNorm,
no dropout, attention-only unless ``d_mlp > 0``), and its own parameters are the ones trained.

Where the paper is silent we choose, and every choice is a :class:`TrainConfig` field or a
documented constant (see ``experiments/README.md``, "Training choices"):

* initialisation: TransformerLens's own (``init="gpt2"``: weights N(0, (0.8/sqrt(d_model))^2),
  biases 0), seeded by ``seed``; ``init="pytorch"`` gives what a model built from
  ``nn.Embedding``/``nn.Linear`` gets (embeddings N(0, 1), projections U(+-1/sqrt(fan_in)));
* Adam's other constants are PyTorch's defaults (betas 0.9/0.999, eps 1e-8, no weight decay);
* a step is "forward, backward, update"; the run stops after the update of the first step whose
  training-batch loss is below ``stop_loss`` (``steps`` counts updates);
* three independent random streams per seed: initialisation, training data, test data
  (:func:`stream_seed`), so the test inputs never depend on how long training ran;
* one intra-op thread per run (:func:`one_thread`); more cores means more processes.

Two engines compute the same function and gradients: ``"fast"`` (:mod:`interp.fast_train`,
only the final position, regrouped, with seed ensembles) and ``"reference"`` (the plain
TransformerLens loop: ``model(tokens)[:, -1]``, cross-entropy, Adam), kept as the ground truth
for tests and the benchmark.

``d_mlp > 0`` gives every block a ReLU MLP after attention (the paper's Section 2 allows any
number of MLP layers beside the k attention layers; a one-layer attention-only softmax model
cannot learn case 5 even at n = 2, :func:`interp.counterexample.find_counterexample_attention_only`).
The fast engine computes one-layer MLP models exactly (the MLP at the final position only);
two-layer MLP models go to the reference loop (:func:`fast_covers`), seed by seed, with the
same data and test streams, stop rule, curve, non-finite handling and RunResult. The fast engine leaves out ``b_K``, which shifts every score of a
query equally and so cancels in the softmax (its exact gradient is 0); it stays at its init.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import random
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp import forward, models, tasks

log = logging.getLogger(__name__)

#: TransformerLens initialisation schemes accepted by ``TrainConfig.init``.
INITS = ("gpt2", "pytorch", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal")
ENGINES = ("fast", "reference")


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
        if not _is_int(self.case) or self.case not in tasks.CASES:
            raise ValueError(f"case={self.case!r}; accepted: one of {tasks.CASES}")
        if not _is_int(self.n) or self.n < 2:
            raise ValueError(f"n={self.n!r}; accepted: an integer >= 2")
        if not _is_int(self.d_token) or self.d_token < 1:
            raise ValueError(f"d_token={self.d_token!r}; accepted: an integer >= 1")
        if not _is_int(self.n_layers) or self.n_layers not in (1, 2):
            raise ValueError(f"n_layers={self.n_layers!r}; accepted: 1 or 2")
        if self.pos_embed not in models.POS_EMBEDS:
            raise ValueError(f"pos_embed={self.pos_embed!r}; accepted: one of {models.POS_EMBEDS}")
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


@dataclass
class RunResult:
    """What a run produced. ``status`` is ``"ok"`` or ``"failed: <reason>"``."""

    config: TrainConfig
    model: object  # HookedTransformer
    accuracy: float
    steps: int
    final_loss: float
    seconds: float
    curve: list[tuple[int, float]] = field(default_factory=list)
    status: str = "ok"

    def metrics(self) -> dict:
        """The JSON-serialisable part (everything but the model)."""
        return dict(
            name=self.config.name(),
            config=self.config.to_dict(),
            accuracy=self.accuracy,
            steps=self.steps,
            final_loss=self.final_loss,
            seconds=self.seconds,
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


def final_logits_reference(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch n"]:
    """TransformerLens's own forward pass, final position: ``model(tokens)[:, -1]`` (the plain
    loop's training loss; evaluation uses :func:`interp.forward.predictions`)."""
    return model(tokens)[:, -1]


@torch.inference_mode()
def evaluate_accuracy(model, config: TrainConfig) -> float:
    """Accuracy over ``config.eval_batches`` fresh batches from the run's test stream, by the
    package's one evaluation pass (:func:`interp.forward.predictions`), whichever trainer ran."""
    g = generator(config.seed, "test")
    correct = 0
    for _ in range(config.eval_batches):
        tokens, answers = tasks.sample(
            config.case, config.n, config.batch_size, generator=g, function=config.function
        )
        correct += int((forward.predictions(model, tokens) == answers).sum())
    return correct / (config.eval_batches * config.batch_size)


def _should_record(step: int, config: TrainConfig) -> bool:
    return step == 1 or step % config.curve_every == 0


def train_reference(config: TrainConfig, model=None) -> RunResult:
    """The plain TransformerLens loop (ground truth for tests and the benchmark).

    ``model`` (optional) is trained in place instead of a fresh ``init_model(config)``.
    """
    start = time.perf_counter()
    model = init_model(config) if model is None else model
    opt = torch.optim.Adam(trainable(model), lr=config.lr)
    g = generator(config.seed, "train")
    curve: list[tuple[int, float]] = []
    status, loss_value, step = "ok", float("nan"), 0
    for step in range(1, config.max_steps + 1):
        tokens, answers = tasks.sample(
            config.case, config.n, config.batch_size, generator=g, function=config.function
        )
        loss = F.cross_entropy(final_logits_reference(model, tokens), answers)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            status = f"failed: non-finite loss ({loss_value}) at step {step}"
            curve.append((step, loss_value))
            step -= 1
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stop = loss_value < config.stop_loss
        if _should_record(step, config) or stop or step == config.max_steps:
            curve.append((step, loss_value))
        if stop:
            break
    accuracy = evaluate_accuracy(model, config)
    return RunResult(
        config=config, model=model, accuracy=accuracy, steps=step, final_loss=loss_value,
        seconds=time.perf_counter() - start, curve=curve, status=status,
    )


@contextlib.contextmanager
def one_thread():
    """Run the body on one intra-op thread (restored afterwards), with autograd on.

    Training uses one thread: the matrices are small, a second thread buys little and costs
    a lot when cores are shared, and a run's bits then do not depend on the caller's thread
    setting. More cores are used by training several groups in processes (``interp sweep
    --workers``); ``experiments/bench`` measures both.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.enable_grad():  # training works even when called under no_grad
            yield
    finally:
        torch.set_num_threads(before)


def train(config: TrainConfig, *, engine: str = "fast") -> RunResult:
    """Train one run with the paper's protocol; returns the trained model and its metrics."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}; accepted: one of {ENGINES}")
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config is a {type(config).__name__}; accepted: a TrainConfig")
    if engine == "reference":
        with one_thread():
            return train_reference(config)
    return train_group([config])[0]


def train_group(configs: list[TrainConfig], *, engine: str = "fast") -> list[RunResult]:
    """Train runs that differ only in ``seed`` (e.g. the 5 seeds of a table cell).

    The result for each seed is the one :func:`train` gives for that seed alone, bit for bit.
    The seeds share one loop (:class:`interp.fast_train.Ensemble`) and each stops on its own;
    they are stacked into batched products when ``MKL_CBWR`` was set before the process
    started (about 2x faster for one-layer models), else computed one after the other.
    """
    configs = list(configs)
    if not configs:
        return []
    for c in configs:
        if not isinstance(c, TrainConfig):
            raise ValueError(f"configs holds a {type(c).__name__}; accepted: TrainConfig")
    base = configs[0].replace(seed=0)
    for c in configs[1:]:
        if c.replace(seed=0) != base:
            raise ValueError(
                f"train_group needs configs that differ only in seed; {c.label()} differs from "
                f"{configs[0].label()} in more"
            )
    seeds = [c.seed for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"train_group got repeated seeds {seeds}; accepted: distinct seeds")
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}; accepted: one of {ENGINES}")
    from interp import fast_train

    with one_thread():
        if engine == "reference" or not fast_covers(configs[0]):
            return [train_reference(c) for c in configs]
        return fast_train.train_ensemble(configs)


def fast_covers(config: TrainConfig) -> bool:
    """Whether the fast engine computes this config's model: every attention-only model, and
    one-layer models with an MLP (the MLP at the final position). Two layers with an MLP train
    with the plain TransformerLens loop (:func:`train_reference`), seed by seed."""
    return config.d_mlp == 0 or config.n_layers == 1
