"""One model reduced to its measures: the flat dict every label reads (routing, code, mechanism).

:func:`measure` reduces one model to a flat dict of the measures of :mod:`interp.inspect.tools.hooks`,
:mod:`interp.inspect.tools.circuits`, :mod:`interp.inspect.tools.probes`, :mod:`interp.inspect.tools.geometry` and
:mod:`interp.inspect.tools.interventions` (the case and n are the model's own):

=================== ============================================================================
column              meaning (ideal value in the constructions)
=================== ============================================================================
acc                 accuracy on :func:`interp.inspect.tools.hooks.sample_inputs` (1), through
                    :func:`interp.core.forward.final_logits` like every evaluation
acc_any             accuracy when f is any function [n] -> [n], not a permutation as in
                    training (1: the constructions work for every f)
mass, hit, entropy  last layer, final query: mean weight on the construction's position (1),
                    fraction whose argmax is there (1), entropy / log(seq_len) (0; 1 = uniform)
self_mass           last layer: the final position's weight on itself (0)
mass_keypos         cases 4, 5: last layer's weight on the matching slot's key position 2j (0)
mass_L0, hit_L0     case 5, two layers: layer 0, every query to its key 2 (p // 2) (1, 1)
qk_diag, qk_margin  QK rows peaking on the diagonal (1) and min margin over the range (> 0)
ov_diag, ov_margin  OV rows peaking on the diagonal (1) and min margin over the range (> 0)
qk_anti, ov_anti    rows whose *minimum* is on the diagonal (0): an inverted circuit
qkpos_diag          cases 1 and 4: positional-embedding QK rows peaking on the diagonal (1)
r2_<src>, m_<src>,  best held-out cos/sin probe R^2 of each embedding table, its frequency and
N_<src>             number of angles (1, 1, n or n + 1); ``resid``: the last layer's
                    hook_resid_post at the final position, labelled f(i*) (1, 1, N)
keys_top2,          (secondary) PCA circle of the last layer's mean key vectors: top-2 variance (1),
keys_rcv, keys_gap, radius std/mean (0), smallest gap / even gap (~1), cyclic order kept
keys_in_order
emb_rank            participation ratio of the token (or value) table's singular values squared:
                    a collapsed embedding has rank ~1
at                  where QK, the circle test and patching are measured: ``value`` (the slot's
                    value position, the construction's) or ``key`` (two-layer cases 4-5 whose
                    last layer weighs the key position 2j more: the mirror mechanism)
qk_circle, qk_fit,  :mod:`interp.inspect.tools.geometry`'s order-free circle test of the QK (and OV)
qk_top2, qk_rcv,    score matrix: the verdict (True), fit to c cos(theta_a - theta_b) (1), top-2
qk_spacing, ...,    energy (1), radius cv (0), angular evenness, inverted (False); thresholds
ov_circle, ov_fit   from a null of random and shuffled models (None at n < 4)
follow, keep        activation patching at the last layer's resid_pre: patched attended position
                    -> corrupted answer (1); other slots patched -> clean answer kept (1)
acc_mean_mlp,       what the MLPs contribute (:mod:`interp.inspect.mechanism.mlp_measures`, which defines
acc_zero_mlp,       them): accuracy with every MLP's ``hook_mlp_out`` replaced by its mean over
attn_entropy,       the test inputs or zeroed; the last layer's final-position attention entropy
attn_picks_slot,    (1 = uniform) and how often its argmax is on the matching slot's key or
mlp_role            value position; the MLP's role: ``passes`` / ``helps`` / ``needed``.
                    Attention-only models: NaN and ``none`` (one schema for mixed tables)
value_*, query_*    the code level of the value and the target key (:mod:`interp.inspect.mechanism.codes`)
n                   the table size (the labels' tests depend on it)
=================== ============================================================================

Every model :func:`interp.core.models.build_model` makes is measured (MLPs after every block or
the last, one or two layers, W_O="identity", embed_scale, ...). With MLPs the columns above
``acc_mean_mlp`` mean what they mean without: ``ov_*`` is the direct path E W_V W_O W_U (no MLP
on it), ``r2_resid`` reads hook_resid_post (MLP output included).
"""

from __future__ import annotations

import torch

from interp.core import tasks
from interp.inspect.mechanism import codes, mlp_measures
from interp.inspect.tools import circuits, geometry, hooks, interventions, probes


def _rank(table: torch.Tensor) -> float:
    X = table.detach().double()
    X = X - X.mean(0, keepdim=True)
    s2 = torch.linalg.svdvals(X).pow(2)
    return float(s2.sum() ** 2 / s2.pow(2).sum()) if s2.sum() > 0 else 0.0


@tasks.reads_task
def measure(model, *, case: int | None = None, n: int | None = None, batch_size: int = 512,
            seed: int = 0, code: bool = True) -> dict:
    """Every measure of the module docstring, a flat dict; ``code=False``: no code level."""
    with hooks.checked(model, case=case, n=n) as (task, n):  # validated once, not per measure
        return _measure(model, task, n, batch_size=batch_size, seed=seed, code=code)


def _measure(model, task, n: int, *, batch_size: int, seed: int, code: bool) -> dict:
    own = dict(case=task.case, n=n)  # handed on, so a model without .task works with case=
    batch_size = max(batch_size, n)
    tokens = hooks.sample_inputs(task.case, n, batch_size, seed=seed)
    view = hooks.read(task.case, n, tokens)
    L = model.cfg.n_layers - 1
    resid = f"blocks.{L}.hook_resid_post"
    wanted = {f"blocks.{L}.attn.hook_q", f"blocks.{L}.attn.hook_k", resid,
              *mlp_measures.cache_names(model)}  # hook_mlp_out: none without an MLP
    with torch.no_grad():  # one TransformerLens pass for attention and the key/query vectors
        _, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name in wanted or name.endswith("hook_pattern"))
    # accuracy through the package's one evaluation pass; trained on permutations only, the
    # constructions work for any f (the theorems)
    out: dict = {"acc": hooks.accuracy(model, tokens, **own), "acc_any": hooks.accuracy(
        model, hooks.sample_inputs(task.case, n, batch_size, seed=seed + 1, function="any"), **own)}
    att = hooks.AttentionReport(task.case, n, hooks.patterns_from_cache(cache, L + 1),
                                hooks.construction_targets(task.case, n, L + 1, tokens))
    out.update(mass=att.mass(-1), self_mass=att.self_mass(-1), hit=att.hit_rate(-1),
               entropy=att.entropy(-1))
    if task.consecutive:  # the matching slot's key position 2j, which a model with two layers
        # could read instead of the value position 2j + 1
        key_pos = task.key_positions(n)[view.slot_of_target]
        out["mass_keypos"] = float(att.final[-1][torch.arange(len(key_pos)), key_pos].mean())
    if hooks.moves_keys_first(task, model.cfg.n_layers):
        out.update(mass_L0=att.mass(0), hit_L0=att.hit_rate(0))
    # measured where the model attends: a two-layer consecutive model that puts more of its
    # last layer's weight on the key position 2j than on the value position is read there
    at = "key" if model.cfg.n_layers == 2 and out.get("mass_keypos", 0.0) > out["mass"] else "value"
    out["at"] = at
    kq = circuits.vectors_from_cache(model, cache, view, at=at)
    qk, ov = circuits.qk_from_vectors(kq), circuits.ov_matrix(model, **own)
    out.update(qk_diag=qk.diag_frac, qk_margin=qk.rel_margin, qk_anti=qk.anti_frac,
               ov_diag=ov.diag_frac, ov_margin=ov.rel_margin, ov_anti=ov.anti_frac)
    out.update(geometry.summary(model, qk=qk, seed=seed, **own))
    if task.keys_by_position:
        out["qkpos_diag"] = circuits.positional_qk_from_vectors(model, kq, **own).diag_frac
    for p in probes.probe_model(model, seed=seed, **own):
        out.update({f"r2_{p.source}": p.r2, f"m_{p.source}": p.m, f"N_{p.source}": p.N})
    answer_probe = probes.probe_table(cache[resid][:, -1], view.answer, n=n, seed=seed)
    out.update(r2_resid=answer_probe.r2, m_resid=answer_probe.m, N_resid=answer_probe.N)
    fit = probes.circle_test(kq.keys)
    out.update(keys_top2=fit.top2_var, keys_rcv=fit.radius_cv, keys_gap=fit.gap_ratio,
               keys_in_order=fit.in_order)
    tables = probes.embedding_tables(model, **own)
    out["emb_rank"] = _rank((tables.get("token") or tables["token_value"])[0])
    pt = interventions.patch_attended(model, tokens[: min(512, len(tokens))], seed=seed, at=at, **own)
    out.update(follow=pt.follow, keep=pt.control_keep)
    out.update(mlp_measures.summary(model, tokens, acc=out["acc"], cache=cache, **own))
    if code:  # the code level (issue 42): interchange interventions, a second or so per seed
        out.update(codes.summary(model, batch_size=min(batch_size, 256), seed=seed, at=at, **own))
    return {**out, "n": n}
