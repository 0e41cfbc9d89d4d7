"""HookedTransformer models for the five presentations (the paper's Section 4 architecture).

Every model here, trained or analytic, is a ``transformer_lens.HookedTransformer`` (of the
subclass :class:`interp.core.cache.TaskTransformer`, whose caches decompose right): one head per layer, bidirectional (no mask), no LayerNorm, residual stream on, ``d_head =
d_model`` unless a construction asks for the paper's smaller d_hid. By default attention-only
(no MLP); ``d_mlp > 0`` gives every block (``mlp="last"``: the last only) a ReLU MLP of that
width after its attention (the paper's Section 2 "k-layer transformer": k attention layers,
any number of MLP layers), i.e. TransformerLens's ``attn_only=False, act_fn="relu"``, still
without LayerNorm.

Every architectural choice is a field of :class:`ModelSpec`, declared with its facts,
validated once there; :func:`from_spec` builds the model and attaches the spec
(``model.spec``), which the evaluator (:mod:`interp.core.forward`), the fast engine, checkpoints
and run names read. What TransformerLens has no switch for is done here: fixed tensors
(no positional embedding, no biases, W_O = I, no MLP before the last block) are frozen
parameters holding their value, the residual form "embed" is a permanent hook, and the pair
tokens of cases 2 and 3 are a parametrized W_E (:mod:`interp.core.pairs`, re-exported here).

This module, :mod:`interp.core.pairs`, :mod:`interp.core.inits`, :mod:`interp.core.residual` and
:mod:`interp.core.attention` are the only places that touch TransformerLens internals, so a
move to ``TransformerBridge`` stays local.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import KW_ONLY, dataclass

import torch

from interp.core import embed_scale, fields, pe_combine, residual, tasks
from interp.core.cache import TaskTransformer
from interp.core.cache import outside_the_weights as _outside_the_weights
from interp.core.fields import declare
from interp.core.pairs import (  # noqa: F401 - re-exported: models.pair_tables etc.
    PairEmbedding, ReadOnlyWeightError, has_pair_embedding, pair_tables, tie_pair_embedding,
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
    from transformer_lens import HookedTransformer, HookedTransformerConfig

POS_EMBEDS = ("learned", "none")
MLPS = ("every", "last")
W_OS = ("free", "identity")
RESIDUALS = ("stream", "embed")
POS_INITS = ("drawn", "zero")
EMBED_SCALES = ("1", "sqrt_d_model")
#: initialisation families (``ModelSpec.init``; :mod:`interp.core.inits`)
INITS = ("gpt2", "pytorch", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "mha")


def _quiet(fn, *args, **kwargs):
    """Call fn with only TransformerLens's own HookedTransformer deprecation warning silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*HookedTransformer is deprecated.*")
        return fn(*args, **kwargs)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class ModelSpec:
    """Every architectural choice of a task model, each declared, with its facts, once below.

    A field's declaration (:func:`interp.core.fields.declare`) says the values it accepts, the
    HookedTransformerConfig fields it sets (:func:`hooked_config`) or how the model gets it
    otherwise, the engines that compute only some of its values, whether it tells readings
    apart in the atlas and its ``interp train`` flag; validation, the TransformerLens config
    (building and loading a checkpoint), the memory estimate, engine refusals, the atlas and
    the CLI read it there (:mod:`interp.core.fields`). ``case``, ``n`` and ``d_token`` are
    required; everything after ``pos_embed`` is keyword-only.

    ``mlp="last"`` needs d_mlp > 0. "stream" is x_{l+1} = x_l + attn_l(x_l) (+ MLP); "embed" is
    the paper's literal "sum of the input embedding and the attention layer's output" in every
    layer. With one layer, mlp="last" is "every" and "embed" is "stream" (same model, own name).
    "identity" is the paper's single value matrix. pos_init="zero" starts a learned W_pos at
    zero (trainable); it needs pos_embed="learned". embed_scale="sqrt_d_model" multiplies the
    token embedding (``hook_embed``, before W_pos is added) by sqrt(d_model), as Vaswani et al.
    (2017, Section 3.4) do, by a permanent hook (:mod:`interp.core.embed_scale`).
    pe_combine="concat" (case 1, learned PE only) concatenates the value's embedding with the
    position's, d_model = 2 d_token (:mod:`interp.core.pe_combine`). Init families
    (:mod:`interp.core.inits`): "gpt2", "xavier_*", "kaiming_*" are TransformerLens's;
    "pytorch" is what ``nn.Embedding`` / ``nn.Linear`` give; "mha" is
    ``nn.MultiheadAttention``'s.

    Fixed tensors are frozen parameters holding their value (:func:`fixed_weights`), so
    TransformerLens's own forward computes every variant; residual="embed" is a permanent hook
    on ``blocks.{l}.hook_resid_mid`` (``hook_resid_post`` without MLPs), l >= 1
    (:mod:`interp.core.residual`). A new field: its declaration here with today's behaviour as
    default, and its math in ``interp.training.fast_math`` (or ``engines={"fast": (default,)}``
    in its declaration: the fast engine then refuses the other values by name, before anything
    is built); run names hash it only when it is off its default (``TrainConfig.name``).
    """

    case: int = declare(check=tasks.check_case, hooked=lambda s: dict(
        n_ctx=tasks.seq_len(s.case, s.n), d_vocab=tasks.d_vocab(s.case, s.n)),
        flag="--case", help="input presentation (interp.core.tasks)")
    n: int = declare(check=tasks.check_n, hooked=lambda s: dict(d_vocab_out=s.n),
                     flag="--n", help="table size n (f: [n] -> [n])")
    d_token: int = declare(accepted=lambda v: _is_int(v) and v >= 1, words="an integer >= 1",
                           hooked=lambda s: dict(d_model=s.d_model, d_head=s.d_model),
                           flag="--d-token", help="token embedding width (d_model = 2 d_token in cases 2-3)")
    n_layers: int = declare(1, accepted=(1, 2), words="1 or 2", hooked=lambda s: dict(n_layers=s.n_layers),
                            flag="--layers", help="attention layers, one head each")
    pos_embed: str = declare("learned", accepted=POS_EMBEDS, built="none: W_pos zero and frozen",
                             flag="--pe", help="positional embedding")
    _: KW_ONLY
    d_mlp: int = declare(0, accepted=lambda v: _is_int(v) and v >= 0,
                         words="an integer >= 0 (0: attention-only, no MLP)",
                         hooked=lambda s: dict(attn_only=True) if not s.d_mlp else dict(attn_only=False, d_mlp=s.d_mlp),
                         flag="--d-mlp", help="ReLU MLP width per block")
    mlp: str = declare("every", accepted=MLPS, built="last: the other blocks' MLPs zero and frozen",
                       acts=lambda case, n_layers, pe: n_layers > 1,
                       flag="--mlp", help="MLPs after every attention layer, or after the last only")
    attn_bias: bool = declare(True, accepted=(True, False), built="False: b_Q, b_K, b_V, b_O zero and frozen",
                              reading=True, flag="--attn-bias", help="attention biases")
    unembed_bias: bool = declare(True, accepted=(True, False), built="False: b_U zero and frozen",
                                 reading=True, flag="--unembed-bias", help="the unembedding bias b_U")
    W_O: str = declare("free", accepted=W_OS, built="identity: W_O = I, frozen", reading=True,
                       flag="--w-o", help="identity: W_O = I (the paper's single value matrix)")
    residual: str = declare("stream", accepted=RESIDUALS, built="embed: a hook per layer l >= 1",
                            reading=True, acts=lambda case, n_layers, pe: n_layers > 1,
                            flag="--residual", help="embed: resid_mid_l = x_0 + attn_l(x_l)")
    init: str = declare("gpt2", accepted=INITS, built="drawn again by interp.core.inits", reading=True,
                        flag="--init", help="initialisation family")
    pos_init: str = declare("drawn", accepted=POS_INITS, built="zero: W_pos zeroed after the draw",
                            reading=True, acts=lambda case, n_layers, pe: pe in (None, "learned"),
                            flag="--pos-init", help="a learned W_pos drawn by init, or zero")
    embed_scale: str = declare("1", accepted=EMBED_SCALES, built="sqrt_d_model: a hook on hook_embed",
                               reading=True, flag="--embed-scale", help="the token embedding times 1 or sqrt(d_model)")
    pe_combine: str = declare("add", accepted=pe_combine.PE_COMBINES, built="concat: zero blocks and two mask hooks",
                              acts=lambda case, n_layers, pe: case == 1 and pe in (None, "learned"),
                              flag="--pe-combine", help="case 1: W_pos added (d_model = d_token) or "
                              "concatenated (d_model = 2 d_token)")

    def __post_init__(self):
        fields.check(self, ModelSpec)  # the fields in their order: the first bad one is named
        if self.mlp == "last" and self.d_mlp == 0:
            raise ValueError("mlp='last' with d_mlp=0: there is no MLP to place; accepted: "
                             "d_mlp > 0, or mlp='every' (the default) for an attention-only model")
        if self.pos_init == "zero" and self.pos_embed == "none":
            raise ValueError("pos_init='zero' with pos_embed='none': there is no position embedding to "
                             "initialise; accepted: pos_embed='learned', or pos_init='drawn' (the default)")
        if self.pe_combine == "concat" and (self.case, self.pos_embed) != (1, "learned"):
            raise ValueError(f"pe_combine='concat' with case={self.case}, pos_embed={self.pos_embed!r}: the paper's "
                             "text fixes every other case's width; accepted: case=1 with pos_embed='learned', "
                             "or pe_combine='add' (the default)")

    @property
    def d_model(self) -> int:
        if self.pe_combine == "concat":
            return 2 * self.d_token
        return tasks.get(self.case).d_model(self.d_token)

    def has_mlp(self, layer: int) -> bool:
        """Whether block ``layer`` has an MLP (d_mlp > 0, and every block or the last)."""
        return self.d_mlp > 0 and (self.mlp == "every" or layer == self.n_layers - 1)


#: the accepted values of ModelSpec's fields that take one of a few values (from their declarations)
CHOICES = {name: info.accepted for name, info in fields.infos(ModelSpec).items()
           if isinstance(info.accepted, tuple) and info.accepted and name != "n_layers"}
#: what every task model's HookedTransformerConfig holds whatever its spec
_CONSTANT = dict(n_heads=1, act_fn="relu", attn_only=True, normalization_type=None,
                 attention_dir="bidirectional", positional_embedding_type="standard", device="cpu",
                 default_prepend_bos=False)


def hooked_config(spec: ModelSpec, *, seed: int | None = None,
                  dtype: torch.dtype = torch.float32) -> HookedTransformerConfig:
    """The HookedTransformerConfig of ``spec``: what every task model holds, and what each of
    its fields sets (:func:`interp.core.fields.hooked`). Building (:func:`from_spec`) and
    loading a checkpoint both call it."""
    return HookedTransformerConfig(**{**_CONSTANT, **fields.hooked(spec)}, seed=seed, dtype=dtype)


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
    return HookedTransformerConfig(**{**_CONSTANT, **mlp}, n_layers=n_layers, d_model=d_model,
                                   d_head=d_head or d_model, n_ctx=tasks.seq_len(case, n),
                                   d_vocab=tasks.d_vocab(case, n), d_vocab_out=n, seed=seed, dtype=dtype)


def new_model(cfg: HookedTransformerConfig, case: int | None) -> HookedTransformer:
    """A HookedTransformer for cfg (TransformerLens's own initialisation) that carries its task
    (``model.task = tasks.get(case)``, checked against cfg; None: unknown), with the task
    tokenizer, the input check and the task loss of :mod:`interp.core.tokens` attached. Its class
    is :class:`interp.core.cache.TaskTransformer`: TransformerLens's, with caches whose residual
    decompositions hold on every spec (residual="embed" included)."""
    from interp.core import tokens

    model = _quiet(TaskTransformer, cfg, move_to_device=False)
    return tokens.attach_task(tokens.attach_input_check(model), case)


def disable_pos_embed(model: HookedTransformer) -> HookedTransformer:
    """No positional embedding: zero W_pos and freeze it."""
    with torch.no_grad():
        model.pos_embed.W_pos.zero_()
    model.pos_embed.W_pos.requires_grad_(False)
    return model


def to_vanilla(model: HookedTransformer, *, max_rows: int = 2**20) -> HookedTransformer:
    """A plain copy of ``model`` whose ``embed.W_E`` is an ordinary parameter: a pair-token
    model's (n*n + n)-row W_E is materialised (refused past ``max_rows`` rows), so writes to
    ``W_E`` take effect and ``HookedTransformer(cfg).load_state_dict(vanilla.state_dict())``
    loads. The copy keeps the spec, attention modes, tokenizer, input check and task loss; it no
    longer ties pair rows to the key and value tables (training it trains every row on its own).

    A state dict holds weights only: a plain HookedTransformer that loads it loses what lives
    beside them (hooks: hard or tempered attention, residual="embed"; the task's tokenizer, input
    check and loss), so this warns, naming it, when that changes the logits;
    :func:`interp.core.roundtrip.from_state_dict` with ``roundtrip.extras(model)`` gives it all back.
    """
    from interp.core import attention

    if lost := _outside_the_weights(model):
        warnings.warn(f"to_vanilla: a plain HookedTransformer that loads this state_dict loses {lost}, so its "
                      "logits differ; rebuild it with interp.core.roundtrip.from_state_dict(cfg, state, "
                      "**roundtrip.extras(model)), or save it with interp.save", stacklevel=2)
    if not has_pair_embedding(model):
        return copy.deepcopy(model)
    rows = model.cfg.d_vocab
    if rows > max_rows:
        raise ValueError(f"W_E would have {rows} rows; accepted: at most max_rows={max_rows} "
                         "(edit the tables of pair_tables(model) instead)")
    task = getattr(model, "task", None)
    vanilla = new_model(copy.deepcopy(model.cfg), None if task is None else task.case)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()
             if not k.startswith("embed.parametrizations.")}
    state["embed.W_E"] = model.embed.W_E.detach().clone()
    vanilla.load_state_dict(state, strict=True)
    for name, p in model.named_parameters():  # frozen W_pos stays frozen, etc.
        if not name.startswith("embed.parametrizations."):
            vanilla.get_parameter(name).requires_grad_(p.requires_grad)
    if spec_of(model) is not None:
        attach_spec(vanilla, spec_of(model), fix=False)
    for layer, m in enumerate(attention.modes(model)):
        if m[:2] != ("softmax", 1.0):
            attention.set_attention(vanilla, m.mode, beta=m.beta, layers=[layer],
                                    tie_rtol=m.tie_rtol, tie_atol=m.tie_atol)
    return vanilla.eval() if not model.training else vanilla


def build_model(
    case: int,
    n: int,
    d_token: int,
    n_layers: int = 1,
    pos_embed: str = "learned",
    *,
    seed: int | None = None,
    dtype: torch.dtype = torch.float32,
    **choices,
) -> HookedTransformer:
    """A freshly initialised task model: :func:`from_spec` of ``ModelSpec(case, n, d_token,
    n_layers, pos_embed, **choices)`` (``choices``: d_mlp, mlp, attn_bias, unembed_bias, W_O,
    residual, init, pos_init, embed_scale, pe_combine; see :class:`ModelSpec`)."""
    return from_spec(ModelSpec(case, n, d_token, n_layers, pos_embed, **choices), seed=seed, dtype=dtype)


def from_spec(spec: ModelSpec, *, seed: int | None = None, dtype: torch.dtype = torch.float32) -> HookedTransformer:
    """The untrained HookedTransformer of ``spec``, with ``model.spec = spec``.

    TransformerLens builds it (its "gpt2" init, seeded by ``seed``; None: the global RNG);
    cases 2-3 get their pair embedding; the spec's fixed tensors are set and frozen and its
    residual and embedding-scale hooks installed (:func:`attach_spec`); then a family other
    than "gpt2" draws the trainable parameters again (after ``torch.manual_seed(seed)`` when a
    seed is given), and the fixed tensors get their values back; pos_init="zero" zeroes W_pos
    last (it stays trainable), so every other parameter draws what it draws under "drawn".
    """
    from interp.core import inits

    if not isinstance(spec, ModelSpec):
        raise ValueError(f"spec is a {type(spec).__name__}; accepted: an interp.core.models.ModelSpec")
    cfg = hooked_config(spec, seed=seed, dtype=dtype)
    model = new_model(cfg, spec.case)
    if model.task.same_position:
        tie_pair_embedding(model, spec.n)
    attach_spec(model, spec)
    if spec.init != "gpt2":
        if seed is not None:
            torch.manual_seed(seed)
        inits.initialise(model, spec)
        _set_fixed(model, spec)
    if spec.pos_init == "zero":
        with torch.no_grad():
            model.pos_embed.W_pos.zero_()
    model.eval()  # no dropout anywhere; eval() only silences train-mode branches
    return model


def attach_spec(model: HookedTransformer, spec: ModelSpec, *, fix: bool = True) -> HookedTransformer:
    """Make ``model`` (built from ``spec``'s config) the spec's: its fixed tensors set and frozen
    (unless not ``fix``), the residual hooks of residual="embed" and the hook of
    embed_scale="sqrt_d_model" installed, ``model.spec = spec``."""
    if fix:
        _set_fixed(model, spec)
    if spec.residual == "embed":
        for layer in range(1, spec.n_layers):
            residual.install(model, layer)
    if spec.embed_scale != "1" and not embed_scale.installed(model):
        embed_scale.install(model, embed_scale.factor(spec))
    if spec.pe_combine == "concat" and not pe_combine.installed(model):
        pe_combine.install(model, spec)
    model.spec = spec
    return model


def spec_of(model) -> ModelSpec | None:
    """The model's :class:`ModelSpec`; None for a model built otherwise (a construction)."""
    return getattr(model, "spec", None)


def mlp_layers(model) -> list[bool]:
    """Which blocks compute an MLP: the spec's placement, or for a model without a spec every
    block unless ``cfg.attn_only``, as TransformerLens computes it."""
    spec = spec_of(model)
    if spec is None:
        return [not model.cfg.attn_only] * model.cfg.n_layers
    return [spec.has_mlp(layer) for layer in range(spec.n_layers)]


def fixed_weights(model: HookedTransformer, spec: ModelSpec) -> dict[str, tuple[torch.Tensor, str]]:
    """Parameter name -> (the value the spec fixes it at, the choice that fixes it)."""
    fixed = {}

    def put(name, why, value=None):
        p = model.get_parameter(name)
        if value is not None and value.shape != p.shape:  # e.g. W_O = I, shaped for one head
            raise ValueError(f"{why} fixes {name} at a value of shape {tuple(value.shape)}, but this model's "
                             f"is {tuple(p.shape)} (n_heads={model.cfg.n_heads}); accepted: the other choice")
        fixed[name] = (torch.zeros_like(p) if value is None else value.to(p), why)

    if spec.pos_embed == "none":
        put("pos_embed.W_pos", "pos_embed='none'")
    for layer in range(spec.n_layers):
        attn = f"blocks.{layer}.attn"
        if not spec.attn_bias:
            for b in ("b_Q", "b_K", "b_V", "b_O"):
                put(f"{attn}.{b}", "attn_bias=False")
        if spec.W_O == "identity":
            put(f"{attn}.W_O", "W_O='identity'", torch.eye(spec.d_model)[None])  # [head_index, d_head, d_model]
        if spec.d_mlp and not spec.has_mlp(layer):
            for w in ("W_in", "b_in", "W_out", "b_out"):
                put(f"blocks.{layer}.mlp.{w}", "mlp='last'")
    if not spec.unembed_bias:
        put("unembed.b_U", "unembed_bias=False")
    return fixed


@torch.no_grad()
def _set_fixed(model, spec: ModelSpec) -> None:
    for name, (value, _) in fixed_weights(model, spec).items():
        p = model.get_parameter(name)
        p.copy_(value)
        p.requires_grad_(False)
    if spec.pe_combine == "concat":
        pe_combine.zero_blocks(model, spec)


def check_spec(model, *, trainable: bool = False) -> None:
    """Raise a ValueError naming the tensor or hook when ``model`` no longer is what its spec
    says: a fixed tensor off its value (or, with ``trainable``, no longer frozen), or a
    residual="embed" hook gone. Nothing to check for a model without a spec."""
    spec = spec_of(model)
    if spec is None:
        return
    if (model.cfg.n_layers, model.cfg.d_model) != (spec.n_layers, spec.d_model):
        raise ValueError(f"the model has n_layers={model.cfg.n_layers}, d_model={model.cfg.d_model}; "
                         f"its spec says {spec.n_layers}, {spec.d_model}")
    for name, (value, why) in fixed_weights(model, spec).items():
        p = model.get_parameter(name)
        if not torch.equal(p.detach(), value):
            raise ValueError(f"{name} is not its fixed value ({why} fixes it); restore it or build the model "
                             "with the other choice")
        if trainable and p.requires_grad:
            raise ValueError(f"{name} is trainable, but {why} fixes it; freeze it (requires_grad_(False))")
    for layer in range(1, spec.n_layers if spec.residual == "embed" else 0):
        if not residual.installed(model, layer):
            raise ValueError(f"residual='embed', but blocks.{layer} has no embed-residual hook")
    if embed_scale.installed(model) != (spec.embed_scale != "1"):
        raise ValueError(f"embed_scale={spec.embed_scale!r}, but the hook_embed scale hook is "
                         f"{'installed' if embed_scale.installed(model) else 'gone'}")
    pe_combine.check(model, spec)


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
