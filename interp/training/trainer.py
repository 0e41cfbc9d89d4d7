"""Training the paper's experiments (Strobl, Angluin & Frank, Section 4).

Protocol, as the paper states it: Adam with learning rate 1e-3; every step draws a fresh batch
of 256 random inputs (f a uniformly random permutation of [n] per input, the target key
uniform; :func:`interp.core.tasks.sample`); cross-entropy on the final position's logits over the n
outputs; at most 10,000 steps; a run stops as soon as its training-batch loss is below 0.01;
test accuracy over 100 fresh batches. The model is the HookedTransformer of
:func:`interp.core.models.build_model` (one head, d_head = d_model, residual stream, no LayerNorm,
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

Two engines compute the same function and gradients: ``"fast"`` (:mod:`interp.training.fast_train`,
only the final position, regrouped, with seed ensembles) and ``"reference"`` (the plain
TransformerLens loop: ``model(tokens)[:, -1]``, cross-entropy, Adam), kept as the ground truth
for tests and the benchmark.

``d_mlp > 0`` gives every block a ReLU MLP after attention (the paper's Section 2 allows any
number of MLP layers beside the k attention layers; a one-layer attention-only softmax model
cannot learn case 5 even at n = 2, :func:`interp.theory.counterexample.find_counterexample_attention_only`).
The fast engine computes every model a TrainConfig describes (one or two layers, with or
without MLPs) exactly; nothing falls back to the reference loop. It leaves out ``b_K``, which
shifts every score of a query equally and so cancels in the softmax (its exact gradient is 0);
it stays at its init.

Device. ``device`` (``"cpu"``, the default, or ``"cuda"``/``"cuda:N"``) says where both engines
train: a run option, not a TrainConfig field, since it changes no result in exact arithmetic
(run names, hence stores and checkpoints, are the same on every device;
:func:`interp.training.runs.check_device`). Data and the initial model are made on the CPU as
always and moved; the trained model comes back to the CPU before its test accuracy is taken
and before it is checkpointed. Results on CUDA equal the CPU's to float rounding. On CUDA the
fast engine captures its whole step once and replays it (:mod:`interp.training.fast_graph`:
no per-step read-back; the host checks the stopping flags every few steps).

Watching a run. :func:`train` and :func:`train_group` take ``progress`` (a bar factory such as
``tqdm.auto.tqdm``; ``interp.train(..., progress=True)`` passes the package's,
:mod:`interp.cli.bars`, since only the CLI stage writes to the terminal) and ``callback``
(called after every step with its training-batch loss). Both engines' loops call one hook per
step (``on_step``); without a bar or a callback nothing is called.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor

from interp.core import fields, limits, tasks
from interp.training import fast_train
from interp.training.runs import (  # noqa: F401 - TrainConfig, RunResult, ... stay importable from here
    DEVICES, ENGINES, INITS, RunResult, TrainConfig, check_device, check_sampler, evaluate_accuracy, generator,
    init_model,
    stream_seed, trainable,
)

log = logging.getLogger(__name__)


def final_logits_reference(model, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch n"]:
    """TransformerLens's own forward pass, final position: ``model(tokens)[:, -1]`` (the plain
    loop's training loss; evaluation uses :func:`interp.core.forward.predictions`)."""
    return model(tokens)[:, -1]


def _should_record(step: int, config: TrainConfig) -> bool:
    return step == 1 or step % config.curve_every == 0


def train_reference(config: TrainConfig, model=None, *, device: str = "cpu", on_step=None) -> RunResult:
    """The plain TransformerLens loop (ground truth for tests and the benchmark).

    ``model`` (optional) is trained in place instead of a fresh ``init_model(config)``, on
    ``device``; the result's model is on the CPU. ``on_step(step, loss)`` (optional) is called
    once per step with its training-batch loss; an exception it raises stops training.
    """
    device = check_device(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    model = init_model(config) if model is None else model
    model.to(device, print_details=False)
    opt = torch.optim.Adam(trainable(model), lr=config.lr)
    g = generator(config.seed, "train")
    curve: list[tuple[int, float]] = []
    status, loss_value, step = "ok", float("nan"), 0
    for step in range(1, config.max_steps + 1):
        tokens, answers = tasks.sample(
            config.case, config.n, config.batch_size, generator=g, function=config.function, key_order=config.key_order
        )
        tokens, answers = tokens.to(device), answers.to(device)
        loss = F.cross_entropy(final_logits_reference(model, tokens), answers)
        loss_value = loss.item()
        if on_step is not None:
            on_step(step, loss_value)
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
    model.to("cpu", print_details=False)  # evaluated and checkpointed on the CPU
    accuracy = evaluate_accuracy(model, config)
    return RunResult(
        config=config, model=model, accuracy=accuracy, steps=step, final_loss=loss_value,
        seconds=time.perf_counter() - start, curve=curve, status=status,
        cpu_seconds=time.process_time() - cpu_start,
    )


@contextlib.contextmanager
def one_thread():
    """:func:`interp.training.machine.one_thread` (torch and BLAS on one thread, restored
    afterwards) with autograd on, so training works even when called under no_grad.

    Training uses one thread: the matrices are small, a second thread buys little and costs
    a lot when cores are shared, and a run's bits then do not depend on the caller's thread
    setting. More cores are used by training several groups in processes (``interp sweep
    --workers``); ``experiments/bench`` measures both.
    """
    from interp.training import machine

    with machine.one_thread(), torch.enable_grad():
        yield


def train(config: TrainConfig, *, engine: str = "fast", device: str = "cpu", progress=None,
          callback=None) -> RunResult:
    """Train one run with the paper's protocol; returns the trained model (on the CPU) and its
    metrics. ``device``: where it trains (see the module docstring).

    ``progress``: a bar factory called once as ``progress(total=max_steps, desc=label,
    unit="step")`` that returns a tqdm-like bar (``update``, ``set_postfix_str``, ``close``):
    ``tqdm.auto.tqdm`` itself, or ``interp.cli.bars.step_bar``, which ``interp.train(...,
    progress=True)`` passes (only :mod:`interp.cli` writes to the terminal). It shows the steps
    and the training-batch loss (the engines measure no accuracy per step), then the test
    accuracy. ``callback(step, loss)``: called after every step with its training-batch loss;
    an exception it raises stops training and is raised here (nothing is returned or written).
    """
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config is a {type(config).__name__}; accepted: a TrainConfig")
    return _train([config], engine, device, _Watch([config], progress, callback, engine))[0]


def train_group(
    configs: list[TrainConfig], *, engine: str = "fast", device: str = "cpu",
    progress=None, callback=None, state_file=None, every: float = 600.0, models_=None,
) -> list[RunResult]:
    """Train runs that differ only in ``seed`` (e.g. the 5 seeds of a table cell).

    ``progress``: a bar factory as for :func:`train` (one bar for the group, the live seeds'
    losses beside it). ``callback(step, losses)``: after every step, ``losses`` maps the seed of
    each run that trained in that step to its training-batch loss. ``state_file`` (a file path;
    fast engine only): resume from it and save there every ``every`` seconds
    (:mod:`interp.training.progress`; called ``progress`` before the bar took that name).
    ``models_`` (fast engine only): the initial models, one per config, trained in place
    (default: ``init_model`` of each; :func:`interp.training.snapshots.train_with_snapshots`
    passes its own, to copy their parameters as they train).

    The result for each seed is the one :func:`train` gives for that seed alone, bit for bit
    on the CPU (to float rounding on CUDA, where the seeds are always stacked).
    The seeds share one loop (:class:`interp.training.fast_train.Ensemble`) and each stops on its own;
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
    if state_file is not None and engine != "fast":
        raise ValueError(f"state_file needs engine='fast'; got engine={engine!r}")
    if models_ is not None and (engine != "fast" or len(models_) != len(configs)):
        raise ValueError(f"models_ holds {len(models_)} models for {len(configs)} configs with "
                         f"engine={engine!r}; accepted: one model per config, engine='fast'")
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= 0:
        raise ValueError(f"every={every!r}; accepted: seconds >= 0")
    watch = _Watch(configs, progress, callback, engine, group=True)
    return _train(configs, engine, device, watch, state_file=state_file, every=every, models_=models_)


def _train(configs, engine, device, watch: "_Watch", *, state_file=None, every=600.0,
           models_=None) -> list[RunResult]:
    """Train checked configs of one group, showing and reporting each step through ``watch``."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}; accepted: one of {ENGINES}")
    device = check_device(device)
    refused = fields.refusal(configs[0], engine)  # a field this engine does not compute, by name
    if refused:
        raise ValueError(refused)
    limits.check_trainable(configs[0], seeds=len(configs))  # before any tensor is allocated
    check_sampler(configs[0])  # the task's own sampler draws what every engine reads
    results = None
    try:
        watch.open()
        with one_thread():
            if engine == "reference":
                results = [train_reference(c, device=device, on_step=watch.hook(i))
                           for i, c in enumerate(configs)]
            else:
                results = fast_train.train_ensemble(configs, models_=models_, device=device,
                                                    progress=state_file, every=every,
                                                    on_step=watch.hook())
    finally:
        watch.close(results)
    return results


class _Watch:
    """What the engines call after every step: a progress bar and the caller's callback.

    ``progress``: None or False (no bar) or a bar factory (:func:`train`); ``callback``: None or
    ``callback(step, loss)`` (one run) / ``callback(step, {seed: loss})`` (``group``). Called
    as ``watch(step, {config index: loss})`` by the fast engine's loop; :meth:`hook` gives the
    reference loop's ``on_step(step, loss)`` for one config (its seeds train one after another,
    so the bar runs over ``max_steps`` per seed).
    """

    def __init__(self, configs: list[TrainConfig], progress, callback, engine: str, *, group: bool = False):
        if progress is True:
            raise ValueError("progress=True needs tqdm's bar, which only interp.cli may show: call "
                             "interp.train / interp.train_group (the top level), or pass a bar "
                             "factory such as tqdm.auto.tqdm")
        if isinstance(progress, (str, os.PathLike)):
            raise ValueError(f"progress={str(progress)!r}: a file that saves a group's state is "
                             "state_file= now; progress= is the bar (None, False or a factory "
                             "such as tqdm.auto.tqdm)")
        if progress not in (None, False) and not callable(progress):
            raise ValueError(f"progress={progress!r}; accepted: None, False or a bar factory "
                             "such as tqdm.auto.tqdm")
        if callback is not None and not callable(callback):
            raise ValueError(f"callback={callback!r}; accepted: None or a function (step, loss)")
        self.configs, self.factory, self.callback, self.group = configs, progress or None, callback, group
        self.sequential = engine == "reference" and len(configs) > 1
        self.bar, self.offset = None, 0

    def open(self) -> None:
        if self.factory is None:
            return
        c = self.configs[0]
        desc = c.label() if not self.group else c.label().rsplit(" seed", 1)[0] + f" x{len(self.configs)} seeds"
        total = c.max_steps * (len(self.configs) if self.sequential else 1)
        self.bar = self.factory(total=total, desc=desc, unit="step")

    def __call__(self, step: int, losses: dict[int, float]) -> None:
        if self.bar is not None:
            values = list(losses.values())
            if len(self.configs) == 1:
                text = f"loss {values[0]:.4f}"
            elif self.sequential:  # the reference loop: one seed after another
                text = f"seed {self.configs[next(iter(losses))].seed}: loss {values[0]:.4f}"
            else:
                text = f"loss {min(values):.4f}-{max(values):.4f}, {len(values)}/{len(self.configs)} seeds training"
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(self.offset + step - self.bar.n)
        if self.callback is not None:
            if self.group:
                self.callback(step, {self.configs[i].seed: v for i, v in losses.items()})
            else:
                self.callback(step, next(iter(losses.values())))

    def hook(self, index: int | None = None):
        """The engines' ``on_step``: the fast loop's ``(step, {index: loss})`` (``index``
        None), or the reference loop's ``(step, loss)`` for config ``index``; None when there
        is neither a bar nor a callback."""
        if self.factory is None and self.callback is None:
            return None
        if index is None:
            return self
        if self.bar is not None:
            self.offset = self.bar.n  # this seed's steps follow the previous seeds'
        return lambda step, loss: self(step, {index: loss})

    def close(self, results: list[RunResult] | None) -> None:
        """The final losses and test accuracies beside the bar (when training finished), then close it."""
        if self.bar is None:
            return
        if results:
            acc = ", ".join(f"{100 * r.accuracy:.1f}%" for r in results)
            loss = ", ".join(f"{r.final_loss:.4f}" for r in results)
            self.bar.set_postfix_str(f"loss {loss}; test accuracy {acc}", refresh=False)
        self.bar.close()
