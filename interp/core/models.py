"""HookedTransformer models for the five presentations (the paper's Section 4 architecture).

Every model here, trained or analytic, is a plain ``transformer_lens.HookedTransformer``:
one head per layer, bidirectional (no mask), no LayerNorm, residual stream on, ``d_head =
d_model`` unless a construction asks for the paper's smaller d_hid. By default attention-only
(no MLP); ``d_mlp > 0`` gives every block a ReLU MLP of that width after its attention (the
paper's Section 2 "k-layer transformer": k attention layers, any number of MLP layers), i.e.
TransformerLens's ``attn_only=False, act_fn="relu"``, still without LayerNorm.

Two things TransformerLens has no switch for are done here, and only here:

* **No positional embedding**: ``W_pos`` is zeroed and frozen (``requires_grad=False``).
* **Pair tokens (cases 2 and 3)**: the paper embeds a (key, value) pair as the concatenation
  ``[key_table[k], value_table[v]]`` (d_model = 2 d_token). We keep two small learned tables,
  ``embed.parametrizations.W_E.original0`` (key table, [n, d_token]) and ``...original1``
  (value table, [n, d_token]), and expose their concatenation as ``embed.W_E`` through
  ``torch.nn.utils.parametrize``; ``hook_embed``, caches and ``model.W_E`` work as usual.
  The query token ``n*n + i*`` embeds as ``[key_table[i*], 0]``: it carries the target key
  in the key half and nothing in the value half, as in Theorem 3.1's x_n = [cs(i*), 0].
  ``model.W_E`` is computed from the tables on every read, so a write into it could change
  nothing: it raises :class:`ReadOnlyWeightError` instead (``W_E[:] = 0``, ``W_E.data[:] = 0``,
  ``W_E.zero_()``, ``nn.init.*_``). Assigning a whole matrix, ``model.embed.W_E = M``, writes
  through to the tables when ``M`` has the pair structure and raises otherwise. Edit
  :func:`pair_tables`, or take :func:`to_vanilla` (a materialised, plain W_E).

This module and :mod:`interp.core.attention` are the only places that touch TransformerLens
internals, so a move to ``TransformerBridge`` stays local.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils import parametrize

from interp.core import tasks

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
    from transformer_lens import HookedTransformer, HookedTransformerConfig

POS_EMBEDS = ("learned", "none")


def _quiet(fn, *args, **kwargs):
    """Call fn with only TransformerLens's own HookedTransformer deprecation warning silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
        return fn(*args, **kwargs)


class ReadOnlyWeightError(RuntimeError):
    """A write into a weight that is computed on every read (a pair-token model's W_E)."""


_NOT_WRITES = ("requires_grad_", "retain_grad", "share_memory_")


class _ComputedWeight(torch.Tensor):
    """The W_E a pair-token model computes from its tables: reads behave as usual (results are
    plain tensors, autograd intact); writes raise :class:`ReadOnlyWeightError`, since the
    next read recomputes W_E and would silently drop them. ``.data`` and ``.detach()`` keep
    the guard, so ``W_E.data[:] = 0`` raises too."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        attr = getattr(getattr(func, "__self__", None), "__name__", "")
        in_place = name.endswith("_") and not name.startswith("__") and name not in _NOT_WRITES
        if (name == "__setitem__" or in_place
                or (name == "__set__" and attr == "data")):
            raise ReadOnlyWeightError(
                f"{name}{'' if name != '__set__' else ' of .data'} on W_E of a pair-token model "
                "(cases 2-3): W_E is computed from the key and value tables on every read, so "
                "the write would change nothing. Edit the tables: `key, value = "
                "interp.models.pair_tables(model)` then `with torch.no_grad(): key[3] = ...`; "
                "or assign a whole pair-structured matrix (`model.embed.W_E = M`); or take "
                "`interp.models.to_vanilla(model)`, whose W_E is a plain parameter")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if (name == "__get__" and attr == "data") or name == "detach":
            return out.as_subclass(cls)
        return out


class PairEmbedding(nn.Module):
    """W_E[k*n + v] = [key[k], value[v]] for pair tokens; W_E[n*n + i] = [key[i], 0].

    A ``torch.nn.utils.parametrize`` parametrization: the trainable tensors are the key table
    ``original0`` [n, d_token] and the value table ``original1`` [n, d_token].
    """

    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.check_structure = False  # set once registered: the first right_inverse is the init

    def forward(self, key_table: torch.Tensor, value_table: torch.Tensor) -> torch.Tensor:
        n, d = key_table.shape
        pairs = torch.cat(
            [key_table.repeat_interleave(n, dim=0), value_table.repeat(n, 1)], dim=1
        )  # [n*n, 2 d_token]: row k*n + v
        queries = torch.cat([key_table, torch.zeros_like(value_table)], dim=1)  # [n, 2 d_token]
        return torch.cat([pairs, queries], dim=0).as_subclass(_ComputedWeight)  # [d_vocab, d_model]

    def right_inverse(self, W_E: torch.Tensor):
        """``model.embed.W_E = M``: the tables read off M (rows k*n + 0 and 0*n + v); once
        registered, M must have the pair structure exactly, or nothing is written."""
        n = self.n
        d = W_E.shape[1] // 2
        key_table = W_E[: n * n : n, :d].detach().clone()  # rows k*n + 0
        value_table = W_E[:n, d:].detach().clone()  # rows 0*n + v
        if self.check_structure:
            with torch._C.DisableTorchFunctionSubclass():
                rebuilt = self.forward(key_table, value_table)
                W = torch.as_tensor(W_E).to(rebuilt.dtype)
            if W.shape != rebuilt.shape:
                raise ValueError(f"W_E of shape {tuple(W.shape)}; accepted: {tuple(rebuilt.shape)}")
            bad = (W != rebuilt).any(dim=1).nonzero()
            if len(bad):
                raise ValueError(
                    f"row {int(bad[0])} of the new W_E breaks the pair structure (row k*n + v "
                    "= [key[k], value[v]], row n*n + i = [key[i], 0]), so it cannot be written "
                    "to the key and value tables; nothing was written. Edit "
                    "interp.models.pair_tables(model), or use interp.models.to_vanilla(model)")
        return key_table, value_table


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a task model: which presentation, table size and widths."""

    case: int
    n: int
    d_token: int
    n_layers: int = 1
    pos_embed: str = "learned"
    d_mlp: int = 0

    def __post_init__(self):
        tasks.check_case(self.case)
        tasks.check_n(self.n)
        if isinstance(self.d_token, bool) or not isinstance(self.d_token, int) or self.d_token < 1:
            raise ValueError(f"d_token={self.d_token!r}; accepted: an integer >= 1")
        if isinstance(self.n_layers, bool) or not isinstance(self.n_layers, int) or self.n_layers not in (1, 2):
            raise ValueError(f"n_layers={self.n_layers!r}; accepted: 1 or 2")
        if self.pos_embed not in POS_EMBEDS:
            raise ValueError(f"pos_embed={self.pos_embed!r}; accepted: one of {POS_EMBEDS}")
        if isinstance(self.d_mlp, bool) or not isinstance(self.d_mlp, int) or self.d_mlp < 0:
            raise ValueError(f"d_mlp={self.d_mlp!r}; accepted: an integer >= 0 (0: no MLP)")

    @property
    def d_model(self) -> int:
        return 2 * self.d_token if self.case in tasks.SAME_POSITION else self.d_token


def make_config(
    case: int,
    n: int,
    d_model: int,
    n_layers: int,
    *,
    d_head: int | None = None,
    seed: int | None = None,
    dtype: torch.dtype = torch.float32,
    d_mlp: int = 0,
) -> HookedTransformerConfig:
    """The HookedTransformerConfig shared by trained models and constructions.

    ``d_mlp`` = 0: attention-only; > 0: a ReLU MLP of that width in every block.
    """
    mlp = dict(attn_only=True) if not d_mlp else dict(attn_only=False, d_mlp=d_mlp)
    return HookedTransformerConfig(
        n_layers=n_layers,
        d_model=d_model,
        d_head=d_head or d_model,
        n_heads=1,
        n_ctx=tasks.seq_len(case, n),
        d_vocab=tasks.d_vocab(case, n),
        d_vocab_out=n,
        act_fn="relu",  # used only with d_mlp > 0
        **mlp,
        normalization_type=None,
        attention_dir="bidirectional",
        positional_embedding_type="standard",
        seed=seed,
        dtype=dtype,
        device="cpu",
        default_prepend_bos=False,
    )


def new_model(cfg: HookedTransformerConfig) -> HookedTransformer:
    """A HookedTransformer for cfg (TransformerLens's own initialisation), with the task
    tokenizer, the input check and the task loss of :mod:`interp.core.tokens` attached."""
    from interp.core import tokens

    model = _quiet(HookedTransformer, cfg, move_to_device=False)
    return tokens.attach_task_loss(tokens.attach_input_check(tokens.attach_tokenizer(model)))


def disable_pos_embed(model: HookedTransformer) -> HookedTransformer:
    """No positional embedding: zero W_pos and freeze it."""
    with torch.no_grad():
        model.pos_embed.W_pos.zero_()
    model.pos_embed.W_pos.requires_grad_(False)
    return model


def tie_pair_embedding(model: HookedTransformer, n: int) -> HookedTransformer:
    """Make embed.W_E the concatenation of a key table and a value table (cases 2 and 3)."""
    pair = PairEmbedding(n)
    parametrize.register_parametrization(model.embed, "W_E", pair)
    pair.check_structure = True
    return model


def to_vanilla(model: HookedTransformer, *, max_rows: int = 2**20) -> HookedTransformer:
    """A plain copy of ``model`` whose ``embed.W_E`` is an ordinary parameter: a pair-token
    model's (n*n + n)-row W_E is materialised (refused past ``max_rows`` rows), so writes to
    ``W_E`` take effect and ``HookedTransformer(cfg).load_state_dict(vanilla.state_dict())``
    works. Attention modes, the tokenizer and the input check come along; the copy no longer
    ties pair rows to the key and value tables (training it trains every row on its own)."""
    import copy

    from interp.core import attention

    if not has_pair_embedding(model):
        return copy.deepcopy(model)
    rows = model.cfg.d_vocab
    if rows > max_rows:
        raise ValueError(f"W_E would have {rows} rows; accepted: at most max_rows={max_rows} "
                         "(edit the tables of pair_tables(model) instead)")
    vanilla = new_model(copy.deepcopy(model.cfg))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()
             if not k.startswith("embed.parametrizations.")}
    state["embed.W_E"] = model.embed.W_E.detach().clone()
    vanilla.load_state_dict(state, strict=True)
    for name, p in model.named_parameters():  # frozen W_pos stays frozen, etc.
        if not name.startswith("embed.parametrizations."):
            vanilla.get_parameter(name).requires_grad_(p.requires_grad)
    for layer, m in enumerate(attention.modes(model)):
        if m[:2] != ("softmax", 1.0):
            attention.set_attention(vanilla, m.mode, beta=m.beta, layers=[layer],
                                    tie_rtol=m.tie_rtol, tie_atol=m.tie_atol)
    return vanilla.eval() if not model.training else vanilla


def has_pair_embedding(model: HookedTransformer) -> bool:
    return parametrize.is_parametrized(model.embed, "W_E")


def pair_tables(model: HookedTransformer) -> tuple[nn.Parameter, nn.Parameter]:
    """The trainable ``(key_table, value_table)`` [n, d_token] behind a pair-token model's W_E
    (cases 2-3). Edit these, not ``W_E``: W_E is computed from them on every read."""
    if not has_pair_embedding(model):
        raise ValueError("this model has no pair embedding (cases 2-3 only; see tie_pair_embedding)")
    tables = model.embed.parametrizations.W_E
    return tables.original0, tables.original1


def build_model(
    case: int,
    n: int,
    d_token: int,
    n_layers: int = 1,
    pos_embed: str = "learned",
    *,
    seed: int | None = None,
    dtype: torch.dtype = torch.float32,
    d_mlp: int = 0,
) -> HookedTransformer:
    """A freshly initialised task model with the paper's Section 4 architecture.

    d_model = 2 d_token for the same-position cases (2, 3), d_token otherwise; d_head = d_model.
    ``d_mlp`` > 0 adds a ReLU MLP of that width after the attention of every block.
    ``seed`` seeds TransformerLens's initialisation (None: the global RNG).
    """
    spec = ModelSpec(case, n, d_token, n_layers, pos_embed, d_mlp)
    cfg = make_config(case, n, spec.d_model, n_layers, seed=seed, dtype=dtype, d_mlp=d_mlp)
    model = new_model(cfg)
    if case in tasks.SAME_POSITION:
        tie_pair_embedding(model, n)
    if pos_embed == "none":
        disable_pos_embed(model)
    model.eval()  # no dropout anywhere; eval() only silences train-mode branches
    return model


def describe(model: HookedTransformer) -> dict:
    """The (case-independent) shape facts of a model, for reports."""
    cfg = model.cfg
    return dict(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        d_head=cfg.d_head,
        n_heads=cfg.n_heads,
        d_mlp=0 if cfg.attn_only else cfg.d_mlp,
        n_ctx=cfg.n_ctx,
        d_vocab=cfg.d_vocab,
        d_vocab_out=cfg.d_vocab_out,
        pair_embedding=has_pair_embedding(model),
        pos_embed_frozen=not model.pos_embed.W_pos.requires_grad,
    )
