"""QK and OV circuits over keys and values, for any task model of ours.

The constructions of the paper are one matching step and one copying step:

* **QK** (matching). ``QK[a, b]`` is the attention score, in the last layer, from the final
  position when the target is ``a`` to the position carrying the slot whose key is ``b``
  (:mod:`interp.inspect.tools.hooks` lists these positions per case). It is computed from the cached
  ``hook_q`` / ``hook_k`` vectors averaged per key (:func:`key_query_vectors`):
  ``QK = q_bar k_bar^T / attn_scale``. Scores are bilinear in q and k, so for a one-layer model
  this is exactly the mean score over the sampled inputs (values and other slots averaged out,
  biases and positional terms included). In the constructions ``QK[a, b] =
  cos(theta_N(a) - theta_N(b)) / sqrt(d_head)``: every row peaks on its diagonal, with margin
  ``(1 - cos(2 pi / N)) / sqrt(d_head)``.
* **OV** (copying). ``OV[v, u]`` is the direct-path logit of output ``u`` when the last layer
  attends fully to the value token ``v``: ``E_v W_V W_O W_U`` (the standard OV circuit of
  Elhage et al.; biases left out). ``E_v`` is the token-embedding row of v (cases 1, 4, 5) or the
  pair embedding's value half ``[0, value_table[v]]`` (cases 2, 3). In the constructions
  ``OV[v, u] = cos(theta_N(v) - theta_N(u))``: it copies, with margin ``1 - cos(2 pi / N)``.
* **Positional QK** (cases 1 and 4, where only positions can say which key a slot holds):
  ``QK_pos[a, b] = q_bar[a] . (W_pos[slot_pos[b]] W_K) / attn_scale``, the direct path from the
  positional embedding into the keys. Diagonal iff the positional embedding carries the key.

"Peaks on the diagonal" and margins are read off by :class:`CircuitMatrix`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.core import models, tasks
from interp.inspect.tools import hooks


@dataclass(frozen=True)
class CircuitMatrix:
    """A square [n, n] circuit matrix whose rows should peak on the diagonal."""

    name: str
    matrix: Float[Tensor, "row col"]

    def _gap(self) -> Tensor:
        m = self.matrix.double()
        off = m.clone()
        off.fill_diagonal_(-math.inf)
        return m.diagonal() - off.max(dim=1).values  # [row]

    @property
    def diag_frac(self) -> float:
        """Fraction of rows whose (strict) maximum is on the diagonal."""
        return float((self._gap() > 0).double().mean())

    @property
    def anti_frac(self) -> float:
        """Fraction of rows whose (strict) minimum is on the diagonal: an inverted circuit
        (attend away from the match, or write minus the value)."""
        m = self.matrix.double()
        off = m.clone()
        off.fill_diagonal_(math.inf)
        return float((m.diagonal() < off.min(dim=1).values).double().mean())

    @property
    def margin(self) -> float:
        """min over rows of (diagonal - largest off-diagonal); > 0 iff every row peaks on it."""
        return float(self._gap().min())

    @property
    def mean_margin(self) -> float:
        return float(self._gap().mean())

    @property
    def rel_margin(self) -> float:
        """:attr:`margin` over the matrix's range (max - min): scale-free, at most 1."""
        spread = float(self.matrix.max() - self.matrix.min())
        return self.margin / spread if spread > 0 else math.nan

    def summary(self) -> dict:
        return dict(
            diag_frac=self.diag_frac,
            anti_frac=self.anti_frac,
            margin=self.margin,
            mean_margin=self.mean_margin,
            rel_margin=self.rel_margin,
        )


@dataclass(frozen=True)
class KeyQueryVectors:
    """Mean last-layer query per target and mean key per stored key (cached activations)."""

    layer: int
    queries: Float[Tensor, "n d_head"]  # q at the final position, averaged per target a
    keys: Float[Tensor, "n d_head"]  # k at the slot holding key b, averaged per b
    attn_scale: float


def _group_mean(x: Tensor, labels: Tensor, n: int) -> Tensor:
    """Mean of rows of x [m, d] per label in 0..n-1 (NaN for a label never seen)."""
    sums = torch.zeros(n, x.shape[1], dtype=torch.float64).index_add_(0, labels, x.double())
    counts = torch.bincount(labels, minlength=n).double()
    return sums / counts[:, None]


def _head(model, head: int | None, reader: str) -> int:
    """``head``, checked against the model's heads; None: the one head (a model with several must
    name it: :func:`interp.inspect.tools.hooks.one_head`)."""
    head = hooks.one_head(model.cfg.n_heads, reader) if head is None else head
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < model.cfg.n_heads:
        raise ValueError(f"head={head!r}; accepted: an integer in 0..{model.cfg.n_heads - 1}")
    return head


def _layer(model, layer: int) -> int:
    L = model.cfg.n_layers
    if not -L <= layer < L:
        raise ValueError(f"layer={layer}; accepted: {-L}..{L - 1}")
    return layer % L


@tasks.reads_task
def key_query_vectors(
    model, tokens=None, *, case: int | None = None, n: int | None = None, layer: int = -1,
    head: int | None = None, batch_size: int = 1024, seed: int = 0, at: str = "value",
) -> KeyQueryVectors:
    """``hook_q`` at the final position per target and ``hook_k`` at the slots per key
    (``at``: the slots' value or key positions, :func:`vectors_from_cache`)."""
    task, n = hooks.check_model(model, case=case, n=n)
    layer = _layer(model, layer)
    tokens = hooks.sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    view = hooks.read(task.case, n, tokens)
    names = (f"blocks.{layer}.attn.hook_q", f"blocks.{layer}.attn.hook_k")
    with torch.no_grad():
        _, cache = model.run_with_cache(view.tokens, names_filter=lambda name: name in names)
    return vectors_from_cache(model, cache, view, layer=layer, head=head, at=at)


def vectors_from_cache(model, cache, view: hooks.TaskView, *, layer: int = -1,
                       head: int | None = None, at: str = "value") -> KeyQueryVectors:
    """:func:`key_query_vectors` from a cache that holds the layer's hook_q and hook_k.

    ``at``: read the keys at the slot's value position (``"value"``, where the construction
    attends) or, in the consecutive cases 4-5, at its key position 2j (``"key"``, where a
    two-layer "mirror" model attends)."""
    layer = _layer(model, layer)
    n = view.n
    pos = hooks.slot_positions_at(view.case, n, at)
    head = _head(model, head, "vectors_from_cache")
    q = cache[f"blocks.{layer}.attn.hook_q"][:, -1, head]  # [batch, d_head]
    k = cache[f"blocks.{layer}.attn.hook_k"][:, pos, head]  # [batch, n, d_head]
    queries = _group_mean(q, view.target, n)
    keys = _group_mean(k.reshape(-1, k.shape[-1]), view.keys.reshape(-1), n)
    if torch.isnan(queries).any():
        raise ValueError(f"tokens miss some targets in 0..{n - 1}; use hooks.sample_inputs")
    return KeyQueryVectors(layer, queries, keys, float(model.blocks[layer].attn.attn_scale))


def qk_from_vectors(v: KeyQueryVectors) -> CircuitMatrix:
    """``QK = q_bar k_bar^T / attn_scale`` from mean query and key vectors."""
    return CircuitMatrix("QK", (v.queries @ v.keys.T / v.attn_scale).float())


@tasks.reads_task
def qk_matrix(model, tokens=None, *, case: int | None = None, n: int | None = None,
              layer: int = -1, **kw) -> CircuitMatrix:
    """``QK[a, b]``: mean score from target a to the slot with key b (see module docstring)."""
    return qk_from_vectors(key_query_vectors(model, tokens, case=case, n=n, layer=layer, **kw))


@tasks.reads_task
def value_embeddings(model, *, case: int | None = None, n: int | None = None) -> Float[Tensor, "n d_model"]:
    """The residual vector a value token v puts at its position (positional part left out)."""
    task, n = hooks.check_model(model, case=case, n=n)
    if models.has_pair_embedding(model):
        value_table = models.pair_tables(model)[1].detach()
        return torch.cat([torch.zeros_like(value_table), value_table], dim=1)
    if task.same_position:  # a pair model without the tied tables: rows 0*n + v
        raise ValueError(f"case {task.case} model has no pair embedding (interp.core.models.tie_pair_embedding)")
    return model.W_E[:n].detach()


@tasks.reads_task
def ov_matrix(model, *, case: int | None = None, n: int | None = None, layer: int = -1,
              head: int | None = None) -> CircuitMatrix:
    """``OV[v, u] = E_v W_V W_O W_U``: the logits a fully attended value token v writes.

    TransformerLens's ``(E @ model.OV[layer, head] @ model.W_U).AB`` (a FactoredMatrix),
    taken in float64 and returned in float32."""
    from transformer_lens import FactoredMatrix

    task, n = hooks.check_model(model, case=case, n=n)
    layer = _layer(model, layer)
    E = value_embeddings(model, case=task.case, n=n).double()
    OV = model.OV[layer, _head(model, head, "ov_matrix")]
    OV = FactoredMatrix(OV.A.detach().double(), OV.B.detach().double())
    return CircuitMatrix("OV", (E @ OV @ model.W_U.detach().double()).AB.float())


def _positional_task(model, case, n) -> tuple[tasks.Task, int]:
    task, n = hooks.check_model(model, case=case, n=n)
    if not task.keys_by_position:
        raise ValueError(f"the model's case is {task.case}: positional keys are defined for cases "
                         "1 and 4 only (a slot's position fixes its key)")
    return task, n


@tasks.reads_task
def positional_qk(
    model, tokens=None, *, case: int | None = None, n: int | None = None, layer: int = -1,
    head: int | None = None, **kw,
) -> CircuitMatrix:
    """``QK_pos[a, b]``: query for target a against the positional embedding of key b's slot.

    Only for cases 1 and 4, where a slot's position fixes its key (slot_pos[b] = b or 2b + 1).
    """
    task, n = _positional_task(model, case, n)
    v = key_query_vectors(model, tokens, case=task.case, n=n, layer=layer, head=head, **kw)
    return positional_qk_from_vectors(model, v, case=task.case, n=n, head=head)


@tasks.reads_task
def positional_qk_from_vectors(model, v: KeyQueryVectors, *, case: int | None = None,
                               n: int | None = None, head: int | None = None) -> CircuitMatrix:
    """:func:`positional_qk` from mean query vectors already computed."""
    task, n = _positional_task(model, case, n)
    W_pos = model.W_pos[hooks.slot_positions(task.case, n)].detach().double()
    pos_keys = W_pos @ model.W_K[v.layer, _head(model, head, "positional_qk")].detach().double()
    return CircuitMatrix("QK_pos", (v.queries @ pos_keys.T / v.attn_scale).float())


@tasks.reads_task
def circuit_summary(model, tokens=None, *, case: int | None = None, n: int | None = None, **kw) -> dict:
    """QK, OV (and for cases 1, 4 positional QK) diagonal fractions and margins, flat."""
    task, n = hooks.check_model(model, case=case, n=n)
    out = {}
    mats = [qk_matrix(model, tokens, case=task.case, n=n, **kw), ov_matrix(model, case=task.case, n=n)]
    if task.keys_by_position:
        mats.append(positional_qk(model, tokens, case=task.case, n=n, **kw))
    for mat in mats:
        out.update({f"{mat.name}_{k}": v for k, v in mat.summary().items()})
    return out
