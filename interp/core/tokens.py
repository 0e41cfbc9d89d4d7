"""A task tokenizer and an input check, attached to every model the toolkit builds or loads.

TransformerLens reads ``model.tokenizer`` for ``to_str_tokens``, ``to_string`` and
``to_tokens``; a task model has no text tokenizer, so :class:`TaskTokenizer` names the task's
token ids instead. The vocabulary is told apart by the model's shape alone (a loaded checkpoint
knows no case): pair-token models (cases 2-3, ``d_vocab = n*n + n``) label pair ``k*n + v`` as
``(k,v)`` and query ``n*n + i`` as ``i*=i``; the others (cases 1, 4, 5, ``d_vocab = n``) label
id t as ``t`` (a key or a value by its position, which a tokenizer does not see). Strings of
these labels separated by spaces go back to ids, so ``model.to_tokens("(0,2) (1,3) i*=1")``
works. Positional labels (``k2``, ``v7``, ``f(3)=1``) for views are
:func:`interp.inspect.viz.token_labels`.

:func:`attach_input_check` installs a forward pre-hook on ``model.embed`` (a torch hook, so
``model.reset_hooks(including_permanent=True)`` leaves it in place) that refuses token batches
the model cannot mean: not 2-D integers, ids outside the vocabulary, a length other than the
task's, or (pair models) pair tokens where the query belongs or the reverse. It costs a few
comparisons per forward; ``model.embed.input_check = False`` turns it off.

:class:`TaskLoss` replaces the model's ``loss_fn``, so ``model(tokens, return_type="loss")`` is the
task's loss (cross-entropy of the final position's logits against f(i*), read off the tokens by
:func:`interp.core.tasks.answers`) instead of a next-token loss that means nothing here.
"""

from __future__ import annotations

import torch


class TaskTokenizer:
    """The subset of a Hugging Face tokenizer that TransformerLens's string helpers use."""

    padding_side = "right"
    bos_token = eos_token = pad_token = None
    bos_token_id = eos_token_id = pad_token_id = None

    def __init__(self, n: int, pairs: bool):
        self.n, self.pairs = n, pairs
        self.name_or_path = f"interp-task-{'pairs' if pairs else 'tokens'}-n{n}"
        self.vocab_size = n * n + n if pairs else n
        self._ids = {self.label(i): i for i in range(self.vocab_size)}

    def label(self, token_id: int) -> str:
        n = self.n
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id}; accepted: 0..{self.vocab_size - 1} ({self.name_or_path})")
        if not self.pairs:
            return str(token_id)
        return f"({token_id // n},{token_id % n})" if token_id < n * n else f"i*={token_id - n * n}"

    def decode(self, token_ids, **_) -> str:
        ids = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else token_ids
        ids = [ids] if isinstance(ids, int) else ids
        return " ".join(self.label(int(i)) for i in ids)

    def batch_decode(self, sequences, **_) -> list[str]:
        return [self.decode(s) for s in sequences]

    def convert_ids_to_tokens(self, ids):
        return [self.label(int(i)) for i in ids] if not isinstance(ids, int) else self.label(ids)

    def encode(self, text: str, **_) -> list[int]:
        try:
            return [self._ids[item] for item in text.split()]
        except KeyError as e:
            raise ValueError(f"{e.args[0]!r} is not a token of {self.name_or_path}; accepted: "
                             f"labels like {self.label(0)!r} .. {self.label(self.vocab_size - 1)!r}") from None

    def __call__(self, text, return_tensors=None, **_):
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.encode(t) for t in texts]
        if len({len(i) for i in ids}) > 1:
            raise ValueError("inputs of different lengths: a task input has a fixed length")
        input_ids = torch.tensor(ids, dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}

    def __repr__(self) -> str:
        return f"TaskTokenizer({self.name_or_path})"


def _shape(cfg) -> tuple[int, bool]:
    """(n, pair tokens?) from a model's config alone."""
    n = cfg.d_vocab_out
    return n, cfg.d_vocab == n * n + n


def attach_tokenizer(model):
    n, pairs = _shape(model.cfg)
    model.tokenizer = TaskTokenizer(n, pairs)
    model.cfg.tokenizer_prepends_bos = False  # a task input has no BOS token
    return model


def check_input(cfg, tokens) -> None:
    """Raise a ValueError naming the problem unless ``tokens`` is a batch the model of ``cfg``
    reads (a ``HookedTransformerConfig``)."""
    n, pairs = _shape(cfg)
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype.is_floating_point \
            or tokens.dtype == torch.bool:
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens of shape {shape}; accepted: an integer tensor [batch, pos]")
    if tokens.shape[1] != cfg.n_ctx:
        raise ValueError(f"inputs of length {tokens.shape[1]}; accepted: {cfg.n_ctx} "
                         f"(a whole task input for n = {n})")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= cfg.d_vocab:
        raise ValueError(f"token ids from {lo} to {hi}; accepted: 0..{cfg.d_vocab - 1}")
    if pairs and (bool((tokens[:, :-1] >= n * n).any()) or bool((tokens[:, -1] < n * n).any())):
        raise ValueError(f"a pair-token model (n = {n}) reads n pair tokens < {n * n} and then one "
                         f"query token >= {n * n}")


class TaskLoss:
    """``loss_fn`` of a task model: cross-entropy at the final position against the answer the
    tokens encode (``per_token=True``: one loss per input, [batch])."""

    def __init__(self, cfg):
        n, pairs = _shape(cfg)
        # the evaluation rule depends only on the layout: pairs (cases 2-3), values then a key
        # (case 1), key/value positions then a key (cases 4-5; case 4's keys are just in order)
        self.n, self.case = n, 3 if pairs else (1 if cfg.n_ctx == n + 1 else 5)

    def __call__(self, logits, tokens, attention_mask=None, per_token: bool = False):
        import torch.nn.functional as F

        from interp.core import tasks

        answers = tasks.answers(self.case, self.n, tokens.cpu()).to(logits.device)
        loss = F.cross_entropy(logits[:, -1], answers, reduction="none")
        return loss if per_token else loss.mean()


def attach_task_loss(model):
    model.loss_fn = TaskLoss(model.cfg)
    return model


def _check_embed_input(embed, args) -> None:
    """The forward pre-hook on ``model.embed`` (module level: models stay picklable)."""
    if getattr(embed, "input_check", True):
        check_input(embed.cfg, args[0])


def attach_input_check(model):
    """Install :func:`check_input` as a forward pre-hook on ``model.embed`` (once)."""
    if not getattr(model.embed, "_interp_checked", False):
        model.embed.register_forward_pre_hook(_check_embed_input)
        model.embed._interp_checked = True
        model.embed.input_check = True
    return model
