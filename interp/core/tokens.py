"""A task's tokenizer, loss and input check, attached to every model the toolkit builds or loads.

:func:`attach_task` gives a model its task: ``model.task`` (a :class:`interp.core.tasks.Task`,
checked against the model's shape), the tokenizer and the task loss below. Every model of
:mod:`interp.core.models` gets it when built (``new_model(cfg, case)``); a checkpoint gets it when
loaded. A model whose case is unknown (an old checkpoint with neither a stored case nor a
TrainConfig) has ``model.task = None``, a tokenizer labelled by its vocabulary alone, and a
loss that asks for the task.

TransformerLens reads ``model.tokenizer`` for ``to_str_tokens``, ``to_string`` and
``to_tokens``; a task model has no text tokenizer, so :class:`TaskTokenizer` names the task's
token ids instead (:meth:`interp.core.tasks.Task.token_label`): pair-token models (cases 2-3)
label pair ``k*n + v`` as ``(k,v)`` and query ``n*n + i`` as ``i*=i``; the others label id t as
``t`` (a key or a value), and as ``i*=t`` at the query position of a whole input (``n_ctx``
ids: ``to_str_tokens`` and ``to_string`` of one input), so every case prints its query as
``i*=k``; the query position is the task's (:meth:`interp.core.tasks.Task.query_pos`, last in
the paper's five presentations), for the labels and for the input check alike. Strings of these labels separated by spaces go back to ids, so
``model.to_tokens("(0,2) (1,3) i*=1")`` and ``model.to_tokens("2 0 1 i*=1")`` work;
``to_tokens`` accepts what ``to_str_tokens`` prints, ``i*=k`` at the query position of a whole
input only. Positional labels (``k2``, ``v7``, ``f(3)=1``) are
:meth:`interp.core.tasks.Task.position_labels`.

These models read one whole input and answer once, at its final position
(``logits[:, -1].argmax(-1)``); the answer is one of n output classes, not an input token. So
what appends tokens is refused with one line that says so: ``model.generate`` (replaced on every
task model by :func:`refuse_generate`), and inputs longer than ``n_ctx`` (what
``transformer_lens.utils.test_prompt`` builds from prompt + answer; in cases 2-3 the answer's
label is refused first, as no input token). A task input has no BOS
token: ``prepend_bos=True`` (``to_tokens``, ``to_str_tokens``, a string given to ``forward`` or
``run_with_cache``) is refused by name; for token tensors TransformerLens ignores the flag, as
for every model.

:func:`attach_input_check` installs a forward pre-hook on ``model.embed`` (a torch hook, so
``model.reset_hooks(including_permanent=True)`` leaves it in place) that refuses token batches
the model cannot mean: not 2-D integers, ids outside the vocabulary, a length other than the
task's, or (pair models) pair tokens where the query belongs or the reverse. It costs a few
comparisons per forward; ``model.embed.input_check = False`` turns it off.

:class:`TaskLoss` replaces the model's ``loss_fn``, so ``model(tokens, return_type="loss")`` is the
task's loss (cross-entropy of the final position's logits against f(i*), read off the tokens by
the model's task, :meth:`interp.core.tasks.Task.answers`) instead of a next-token loss that
means nothing here.
"""

from __future__ import annotations

import torch

from interp.core import tasks


#: one line: how these models answer, for every refusal of what appends tokens
ANSWERS_ONCE = ("a task model reads one whole input and answers once, at its final position: "
                "logits[:, -1].argmax(-1), one of n classes, not a token to append")
#: the tokenizer's ``bos_token``: never a token; TransformerLens prepends it to a string only
#: for ``prepend_bos=True``, which :meth:`TaskTokenizer.encode` then refuses by name
BOS = "<bos>"


class TaskTokenizer:
    """The subset of a Hugging Face tokenizer that TransformerLens's string helpers use."""

    padding_side = "right"
    bos_token = BOS
    eos_token = pad_token = None
    bos_token_id = eos_token_id = pad_token_id = None

    def __init__(self, task: tasks.Task, n: int, n_ctx: int | None = None):
        self.task, self.n = task, n
        self.n_ctx = task.seq_len(n) if n_ctx is None else n_ctx  # a whole input's length
        self.query = task.query_pos(n) if n_ctx is None or n_ctx == task.seq_len(n) else self.n_ctx - 1
        self.name_or_path = f"interp-task-{'pairs' if task.same_position else 'tokens'}-n{n}"
        self.vocab_size = task.d_vocab(n)
        self._ids = {self.label(i): i for i in range(self.vocab_size)}
        queries = [int(task.query_token(n, k)) for k in range(n)]
        self._queries = {self.label(i, query=True): i for i in queries}

    def label(self, token_id: int, query: bool = False) -> str:
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id}; accepted: 0..{self.vocab_size - 1} ({self.name_or_path})")
        return self.task.token_label(self.n, token_id, query=query)

    def _labels(self, ids: list[int]) -> list[str]:
        """Labels of ids; the one at the task's query position is the query's when they are a
        whole input."""
        whole = len(ids) == self.n_ctx
        return [self.label(int(t), query=whole and p == self.query) for p, t in enumerate(ids)]

    def decode(self, token_ids, **_) -> str:
        ids = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else token_ids
        ids = [ids] if isinstance(ids, int) else ids
        return " ".join(self._labels(ids))

    def batch_decode(self, sequences, **_) -> list[str]:
        # to_str_tokens decodes one input as a list of one-id lists: one whole input, by position
        if isinstance(sequences, list) and len(sequences) == self.n_ctx \
                and all(isinstance(s, (list, tuple)) and len(s) == 1 for s in sequences):
            return self._labels([s[0] for s in sequences])
        return [self.decode(s) for s in sequences]

    def convert_ids_to_tokens(self, ids):
        return self._labels([int(i) for i in ids]) if not isinstance(ids, int) else self.label(ids)

    def encode(self, text: str, **_) -> list[int]:
        items = text.split()
        if items and items[0].startswith(BOS):
            raise ValueError(f"prepend_bos=True: a task input has no BOS token (a whole input is "
                             f"{self.n_ctx} labels, the query {self._where()}); leave prepend_bos out or pass False")
        ids = []
        for p, item in enumerate(items):
            if item in self._queries and (p != self.query or len(items) != self.n_ctx):
                raise ValueError(f"{item!r} is the query's label: accepted only as {self._where()} of a whole "
                                 f"input's {self.n_ctx} labels (n = {self.n}); here it is label "
                                 f"{p + 1} of {len(items)}")
            token = self._queries.get(item) if p == self.query else None
            token = self._ids.get(item) if token is None else token
            if token is None:
                raise ValueError(self._unknown(item))
            ids.append(token)
        return ids

    def _where(self, label: str = "") -> str:
        """Where the query's label goes in a whole input, in words (the task's query position)."""
        return f"the last{label}" if self.query == self.n_ctx - 1 else f"label {self.query + 1}"

    def _unknown(self, item: str) -> str:
        first, last = self.label(0), self.label(self.n * self.n - 1 if self.task.same_position else self.n - 1)
        why = ""
        if item.isdigit() and int(item) < self.n and self.task.same_position:
            why = " (an answer f(i*) is an output class, logits[:, -1].argmax(-1), not an input token)"
        return (f"{item!r} is not a token of {self.name_or_path}{why}; accepted: {first!r} .. {last!r}, "
                f"and 'i*=0' .. 'i*={self.n - 1}' as {self._where(' label')} of a whole input")

    def __call__(self, text, return_tensors=None, **_):
        texts = [text] if isinstance(text, str) else list(text)
        ids = [self.encode(t) for t in texts]
        if len({len(i) for i in ids}) > 1:
            raise ValueError("inputs of different lengths: a task input has a fixed length")
        input_ids = torch.tensor(ids, dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}

    def __repr__(self) -> str:
        return f"TaskTokenizer({self.name_or_path})"


def refuse_generate(*_, **__):
    """``model.generate`` of every task model: a ValueError saying how these models answer.
    Appending the answer instead would mislead: class k is not token k in cases 2-3, and an
    input with one more token is no input of the fixed-length task, so nothing could read on."""
    raise ValueError(f"generate() does not apply: {ANSWERS_ONCE} (interp.forward.predictions(model, tokens))")


def _shape(cfg) -> tuple[int, bool]:
    """(n, pair tokens?) from a model's config alone."""
    n = cfg.d_vocab_out
    return n, cfg.d_vocab == n * n + n


def attach_task(model, case: int | None):
    """Give ``model`` its task: ``model.task`` (checked against the model's ``n_ctx`` and
    ``d_vocab``; ``case=None``: unknown), the :class:`TaskTokenizer`, the :class:`TaskLoss` and
    :func:`refuse_generate` as ``model.generate``."""
    task = None if case is None else tasks.get(case)
    n = tasks.check_n(model.cfg.d_vocab_out) if task is None else task.check_config(model.cfg)
    model.task = task
    # unknown case: label by the vocabulary alone (the labels of cases 2-3 are one family, of
    # cases 1, 4 and 5 another); the loss then refuses, having no task to read answers with
    labels = task or tasks.get(2 if _shape(model.cfg)[1] else 1)
    model.tokenizer = TaskTokenizer(labels, n, model.cfg.n_ctx)
    model.cfg.tokenizer_prepends_bos = False  # a task input has no BOS token
    model.loss_fn = TaskLoss(task, n)
    model.generate = refuse_generate  # an instance attribute, like loss_fn (picklable: module level)
    model.embed.query_pos = model.tokenizer.query  # where the input check reads the query
    return model


def check_input(cfg, tokens, query_pos: int | None = None) -> None:
    """Raise a ValueError naming the problem unless ``tokens`` is a batch the model of ``cfg``
    reads (a ``HookedTransformerConfig``); ``query_pos``: where its task puts the query (default:
    last, as in the paper's five presentations)."""
    n, pairs = _shape(cfg)
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype.is_floating_point \
            or tokens.dtype == torch.bool:
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(f"tokens of shape {shape}; accepted: an integer tensor [batch, pos]")
    if tokens.shape[1] != cfg.n_ctx:
        longer = f"; {ANSWERS_ONCE}" if tokens.shape[1] > cfg.n_ctx else ""
        raise ValueError(f"inputs of length {tokens.shape[1]}; accepted: {cfg.n_ctx} "
                         f"(a whole task input for n = {n}){longer}")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= cfg.d_vocab:
        raise ValueError(f"token ids from {lo} to {hi}; accepted: 0..{cfg.d_vocab - 1}")
    q = cfg.n_ctx - 1 if query_pos is None else query_pos
    if pairs:
        table = torch.cat([tokens[:, :q], tokens[:, q + 1:]], dim=1)
        if bool((table >= n * n).any()) or bool((tokens[:, q] < n * n).any()):
            where = "and then one query token" if q == cfg.n_ctx - 1 else f"and one query token at position {q},"
            raise ValueError(f"a pair-token model (n = {n}) reads n pair tokens < {n * n} {where} >= {n * n}")


class TaskLoss:
    """``loss_fn`` of a task model: cross-entropy at the final position against the answer the
    tokens encode, read by the model's task (``per_token=True``: one loss per input, [batch])."""

    def __init__(self, task: tasks.Task | None, n: int):
        self.task, self.n = task, n

    def __call__(self, logits, tokens, attention_mask=None, per_token: bool = False):
        import torch.nn.functional as F

        if self.task is None:
            raise ValueError("this model carries no task (model.task is None: an old checkpoint "
                             "without its case?), so its loss has no answers; give it one with "
                             "interp.core.tokens.attach_task(model, case)")
        answers = self.task.answers(self.n, tokens.cpu()).to(logits.device)
        loss = F.cross_entropy(logits[:, -1], answers, reduction="none")
        return loss if per_token else loss.mean()


def _check_embed_input(embed, args) -> None:
    """The forward pre-hook on ``model.embed`` (module level: models stay picklable)."""
    if getattr(embed, "input_check", True):
        check_input(embed.cfg, args[0], getattr(embed, "query_pos", None))


def attach_input_check(model):
    """Install :func:`check_input` as a forward pre-hook on ``model.embed`` (once)."""
    if not getattr(model.embed, "_interp_checked", False):
        model.embed.register_forward_pre_hook(_check_embed_input)
        model.embed._interp_checked = True
        model.embed.input_check = True
    return model
