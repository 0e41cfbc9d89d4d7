"""Theorem 3.6 as a tool: an input that a one-layer hard-attention case-5 model gets wrong.

Theorem 3.6: for n >= 4 no one-layer leftmost, rightmost or average hard-attention transformer
does function evaluation in case 5 (consecutive, permuted keys). The appendix proof is
constructive, and :func:`find_counterexample` runs it on a given model. With x, y in [4],

    l(x, y) o t = 0 x 1 y 2 2 3 3 ... (n-1) (n-1) 0     (f(0) = x: the answer is x)
    r(x, y) o t = 1 x 0 y 2 2 3 3 ... (n-1) (n-1) 0     (f(0) = y: the answer is y)

(keys 0, 1, 2, ..., n-1 with values x, y, 2, ..., n-1; the target key 0 at position 2n).
Let s(j, v) be the score of the final query (token 0 at 2n) for position j holding v; it
depends on (j, v) only. The proof's claims, checked on the model's own attention patterns in
the proof's order (the first one that fails gives the counterexample):

* ``"A"`` (for y = 0, then every y in [4]): the four inputs l(x, y) o t, x in [4], need four
  different answers and differ only at position 1, so position 2n attends to position 1 in at
  least three of them. If two of them do not attend to position 1, the two see the same attended
  positions with the same contents, and the same final residual, so they have the same logits and
  one of them is wrong.
* ``"B"`` (for x = 0, then every x): likewise, r(x, y) o t, y in [4], must attend to position 3
  in at least three cases.
* ``"C"``: if A and B hold, max_x s(1, x) = max_y s(3, y) = m and S = {x: s(1, x) = m},
  T = {y: s(3, y) = m} have >= 3 elements. Leftmost: for x in S position 1 (before 3) wins every
  r(x, y) o t, so its answer cannot follow y; rightmost: for y in T position 3 wins every
  l(x, y) o t. (This contradicts B, resp. A, so for these two modes A or B already fails.)
* ``"D"`` (average): v1 != v2 in S and T: l(v1, v2) o t and l(v2, v1) o t average the same
  positions with the two values swapped, so the attention output, and the answer, is the same.

Scores, patterns and predictions come from :func:`interp.core.forward.final_logits`, the
package's one evaluation pass (the model's own attention modes, the final query only; tested
against TransformerLens's forward). Each claimed counterexample is re-run through it and the
answer is recomputed with :func:`interp.core.tasks.evaluate`; if floating point ever broke a
claim (it cannot for A-C, which only compare the scores the model computed), every one of the
proof's 32 inputs is checked (step ``"scan"``). Models of other shapes get a ValueError saying
why the theorem does not apply: two layers (Theorem 3.8 builds an exact one), softmax (Theorem
3.5 builds an exact one), n < 4, more than one head, or a model of another case (the task is
read from the model, :func:`interp.core.tasks.of`; a model without one must be shaped for case 5).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import torch

from interp.core import attention, forward, tasks

#: The presentation Theorem 3.6 and the separability argument are about.
CASE = 5

STEPS = {
    "A": "l(x, y) o t must attend to position 1 for >= 3 of x in [4]; two inputs did not",
    "B": "r(x, y) o t must attend to position 3 for >= 3 of y in [4]; two inputs did not",
    "C": "position 1 (leftmost) / 3 (rightmost) wins for every y (x), so the answer cannot follow it",
    "D": "average attention: l(v1, v2) o t and l(v2, v1) o t average the same positions, swapped",
    "scan": "not found by the proof's steps (floating point); found by checking its 32 inputs",
    "separable": "softmax, attention only: the logit difference is separable over positions (not in the paper)",
}


@dataclass(frozen=True)
class Counterexample:
    """An input the model gets wrong, and where the proof of Theorem 3.6 found it."""

    tokens: list[int]
    predicted: int
    expected: int
    step: str  # "A", "B", "C", "D" or "scan" (see STEPS)
    family: str  # e.g. "l(2, 0) o t"
    attention: str
    n: int
    reason: str
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def l_input(n: int, x: int, y: int) -> list[int]:
    """l(x, y) o t: keys 0, 1, 2, ..., n-1 with values x, y, 2, ..., n-1; target 0."""
    return [0, x, 1, y] + [v for k in range(2, n) for v in (k, k)] + [0]


def r_input(n: int, x: int, y: int) -> list[int]:
    """r(x, y) o t: keys 1, 0, 2, ..., n-1 with values x, y, 2, ..., n-1; target 0."""
    return [1, x, 0, y] + [v for k in range(2, n) for v in (k, k)] + [0]


def check_applies(model, attention_mode: str, *, case: int | None = None, n: int | None = None) -> int:
    """n, if Theorem 3.6 applies to ``model`` under ``attention_mode``; else a ValueError."""
    cfg = model.cfg
    if attention_mode == "softmax":
        raise ValueError(
            "attention='softmax': Theorem 3.6 does not apply to softmax attention (Theorem 3.5 "
            "builds a one-layer softmax transformer that is exact in case 5); accepted: one of "
            f"{attention.HARD_MODES}. For one-layer attention-only softmax models (no MLP), "
            "find_counterexample_attention_only applies"
        )
    if attention_mode not in attention.HARD_MODES:
        raise ValueError(f"attention={attention_mode!r}; accepted: one of {attention.HARD_MODES}")
    if cfg.n_layers != 1:
        raise ValueError(
            f"the model has {cfg.n_layers} attention layers: Theorem 3.6 is about one-layer "
            "transformers (two layers can be exact in case 5: Theorem 3.8); accepted: n_layers = 1"
        )
    if cfg.n_heads != 1:
        raise ValueError(f"n_heads={cfg.n_heads}: the proof of Theorem 3.6 is for one head; accepted: 1")
    _, n = tasks.of(model, case, n, only=CASE)
    if n < 4:
        raise ValueError(f"n={n}: Theorem 3.6 needs n >= 4 (x, y range over [4]); accepted: n >= 4")
    return n


def _with_mode(model, mode: str):
    """The model itself if it already runs ``mode`` on its layer, else a copy that does."""
    if [m[:2] for m in attention.modes(model)] == [(mode, 1.0)]:
        return model
    m = copy.deepcopy(model)
    attention.set_attention(m, mode)
    return m


def _run(model, inputs: list[list[int]]):
    """Predictions, final-row patterns and scores of the proof's inputs (one forward pass)."""
    tokens = torch.tensor(inputs, dtype=torch.long)
    kept = {}

    def keep(act, hook):  # TransformerLens's hook signature
        kept[hook.name] = act

    with torch.no_grad():
        hooks = [(f"blocks.0.attn.hook_{name}", keep) for name in ("attn_scores", "pattern")]
        logits = forward.final_logits(model, tokens, fwd_hooks=hooks)
    pattern = kept["blocks.0.attn.hook_pattern"][:, 0, -1]  # [batch, key_pos] of the final query
    scores = kept["blocks.0.attn.hook_attn_scores"][:, 0, -1]  # [batch, key_pos]
    return logits.argmax(-1).tolist(), pattern, scores


def _verify(model, n: int, toks: list[int]) -> tuple[int, int]:
    """(the model's own prediction, tasks.evaluate's answer) for one input."""
    predicted = int(forward.predictions(model, torch.tensor([toks]))[0])
    return predicted, tasks.evaluate(CASE, n, toks)


@tasks.reads_task
def find_counterexample(model, attention: str = "leftmost", *, case: int | None = None,
                        n: int | None = None) -> Counterexample:
    """An input on which ``model`` (one layer, case 5, n >= 4) with hard ``attention`` is wrong.

    The model is not changed: if its attention mode differs, a copy runs ``attention``.
    ``case=`` / ``n=`` are checked against the model's.
    """
    mode = attention
    n = check_applies(model, mode, case=case, n=n)
    m = _with_mode(model, mode)
    was_training = m.training
    m.eval()
    try:
        return _search(m, n, mode)
    finally:
        m.train(was_training)


def _search(m, n: int, mode: str) -> Counterexample:
    xs = range(4)
    L = {(x, y): l_input(n, x, y) for x in xs for y in xs}
    R = {(x, y): r_input(n, x, y) for x in xs for y in xs}
    keys = [("l", k) for k in L] + [("r", k) for k in R]
    preds, pattern, scores = _run(m, [L[k] if f == "l" else R[k] for f, k in keys])
    row = {key: i for i, key in enumerate(keys)}
    attends = lambda fam, k, pos: bool(pattern[row[(fam, k)], pos] > 0)  # noqa: E731
    s1 = [float(scores[row[("l", (x, 0))], 1]) for x in xs]  # s(1, x)
    s3 = [float(scores[row[("l", (0, y))], 3]) for y in xs]  # s(3, y)
    details = dict(s1=s1, s3=s3)
    name = lambda fam, x, y: f"{fam}({x}, {y}) o t"  # noqa: E731

    def wrong_among(fam, pairs, step, reason):
        for x, y in pairs:
            toks = L[(x, y)] if fam == "l" else R[(x, y)]
            predicted, expected = _verify(m, n, toks)
            if predicted != expected:
                return Counterexample(toks, predicted, expected, step, name(fam, x, y), mode, n, reason, details)
        return None

    # A: for y = 0 first (the proof's first family), then every y.
    for y in xs:
        missing = [x for x in xs if not attends("l", (x, y), 1)]
        if len(missing) >= 2:
            found = wrong_among("l", [(x, y) for x in missing[:2]], "A",
                                f"l(x, {y}) o t for x in {missing[:2]} does not attend to position 1: "
                                "same attended positions and contents, same answer")
            if found:
                return found
    # B: for x = 0 first, then every x.
    for x in xs:
        missing = [y for y in xs if not attends("r", (x, y), 3)]
        if len(missing) >= 2:
            found = wrong_among("r", [(x, y) for y in missing[:2]], "B",
                                f"r({x}, y) o t for y in {missing[:2]} does not attend to position 3: "
                                "same attended positions and contents, same answer")
            if found:
                return found
    m1, m2 = max(s1), max(s3)
    S = [x for x in xs if s1[x] == m1]
    T = [y for y in xs if s3[y] == m2]
    details.update(m1=m1, m2=m2, S=S, T=T)
    # C: leftmost / rightmost.
    if mode == "leftmost":
        for x in S:
            found = wrong_among("r", [(x, y) for y in xs], "C",
                                f"x={x} in S: s(1, {x}) = m >= s(3, y) for every y, and leftmost prefers "
                                "position 1, so r(x, y) o t cannot answer y")
            if found:
                return found
    if mode == "rightmost":
        for y in T:
            found = wrong_among("l", [(x, y) for x in xs], "C",
                                f"y={y} in T: s(3, {y}) = m >= s(1, x) for every x, and rightmost prefers "
                                "position 3, so l(x, y) o t cannot answer x")
            if found:
                return found
    # D: average.
    if mode == "average":
        both = [v for v in S if v in T]
        for i, v1 in enumerate(both):
            for v2 in both[i + 1 :]:
                found = wrong_among("l", [(v1, v2), (v2, v1)], "D",
                                    f"{v1}, {v2} in S and T: l({v1}, {v2}) o t and l({v2}, {v1}) o t "
                                    "average the same positions with positions 1 and 3 swapped")
                if found:
                    return found
    for fam, k in keys:  # floating point broke a claim: check every input of the proof
        found = wrong_among(fam, [k], "scan", STEPS["scan"])
        if found:
            return found
    raise RuntimeError(  # pragma: no cover - Theorem 3.6 says this cannot happen
        f"the model answers all 32 inputs of Theorem 3.6's proof correctly under {mode} attention "
        f"(n={n}); s(1, x) = {s1}, s(3, y) = {s3}"
    )


# --------------------------------------------------------------------------------------------
# one-layer attention-only softmax models: a separability argument (not in the paper)


def separable_inputs(n: int) -> list[tuple[list[int], int]]:
    """The four inputs of :func:`find_counterexample_attention_only` and their answers.

    Keys (k0, 1 - k0, 2, ..., n-1) with values (v0, 1 - v0, 2, ..., n-1) for k0, v0 in {0, 1},
    target key 0 (f is a permutation): the answer is k0 XOR v0.
    """
    out = []
    for k0 in (0, 1):
        for v0 in (0, 1):
            toks = [k0, v0, 1 - k0, 1 - v0] + [v for k in range(2, n) for v in (k, k)] + [0]
            out.append((toks, k0 ^ v0))
    return out


@tasks.reads_task
def find_counterexample_attention_only(model, *, case: int | None = None, n: int | None = None) -> Counterexample:
    """An input a one-layer, one-head *attention-only* softmax model (case 5, n >= 2) gets wrong.

    Theorem 3.6 leaves softmax open, and Theorem 3.5 shows one layer with an MLP suffices; but
    with no MLP nothing non-linear follows the attention. At the final position,
    logit_1 - logit_0 = sum_j exp(s_j) h_j / sum_j exp(s_j), where s_j and h_j depend only on
    position j and its token (the query is fixed by the target key 0), so its sign is the sign
    of sum_j exp(s_j) h_j = A(k0) + B(v0) + C on the four :func:`separable_inputs` (positions 0
    and 2 hold k0 and 1 - k0, positions 1 and 3 hold v0 and 1 - v0). Being right on all four
    needs S(0, 1) > 0, S(1, 0) > 0 (answer 1; a tie predicts 0), S(0, 0) <= 0, S(1, 1) <= 0,
    but S(0, 1) + S(1, 0) = S(0, 0) + S(1, 1). So one of the four is wrong, for every width,
    precision and temperature. (This is why one-layer attention-only models trained on case 5
    stay at chance even at n = 2.) The argument needs ONE head: with h heads the logit
    difference is a sum of h such ratios, whose sign is no longer that of one additive
    A + B + C (two-head one-layer attention-only models can be right on all four); a model
    with more heads is refused. The same argument over every pair of slots gives the
    accuracy bound :data:`ATTENTION_ONLY_BOUND` (75%) at every n (:func:`check_bound`).
    """
    cfg = model.cfg
    if cfg.n_heads != 1:
        raise ValueError(
            f"n_heads={cfg.n_heads}: the separability argument covers one head only (with several, "
            "the logit difference is a sum of softmax ratios and all four inputs can be right); "
            "accepted: n_heads = 1"
        )
    if cfg.n_layers != 1 or not cfg.attn_only or cfg.normalization_type is not None:
        raise ValueError(
            "the separability argument needs one attention layer and nothing non-linear after it "
            f"(attn_only, no LayerNorm); got n_layers={cfg.n_layers}, attn_only={cfg.attn_only}, "
            f"normalization_type={cfg.normalization_type!r} (an MLP can decode: Theorem 3.5)"
        )
    mode = attention.modes(model)[0].mode
    if mode != "softmax":
        raise ValueError(f"attention={mode!r}: use find_counterexample for hard attention")
    _, n = tasks.of(model, case, n, only=CASE)
    if n < 2:
        raise ValueError(f"n={n}: the argument needs two slots; accepted: n >= 2")
    for toks, _ in separable_inputs(n):
        predicted, expected = _verify(model, n, toks)
        if predicted != expected:
            family = f"k0={toks[0]}, v0={toks[1]}"
            return Counterexample(toks, predicted, expected, "separable", family, "softmax", n,
                                  "logit_1 - logit_0 has the sign of A(k0) + B(v0) + C, which cannot be k0 XOR v0")
    raise RuntimeError(  # pragma: no cover - impossible in exact arithmetic
        f"all four separable inputs answered correctly (n={n}): floating point broke the argument"
    )


# the 75% bound at every n: the separable argument over XOR families

#: The most a one-layer, one-head attention-only softmax model can get right in case 5, at every
#: n >= 2, on inputs drawn uniformly (keys and f permutations, target uniform): see
#: :func:`check_bound`.
ATTENTION_ONLY_BOUND = 0.75


def xor_family(n: int, tokens, other: int) -> list[list[int]]:
    """The four inputs of one XOR family: ``tokens`` (case 5) with the keys, the values, or both
    of the target's slot j and slot ``other`` (!= j) swapped. The answer is the value of
    whichever of the two slots holds the target key: it follows (key swap) XOR (value swap)."""
    keys, values, target = tasks.decode(CASE, n, tokens)
    j = keys.index(target)
    if not (0 <= other < n) or other == j:
        raise ValueError(f"other={other!r}; accepted: a slot in 0..{n - 1} other than the target's slot {j}")
    out = []
    for swap_keys in (False, True):
        for swap_values in (False, True):
            k, v = list(keys), list(values)
            if swap_keys:
                k[j], k[other] = k[other], k[j]
            if swap_values:
                v[j], v[other] = v[other], v[j]
            out.append([t for kv in zip(k, v) for t in kv] + [target])
    return out


@dataclass(frozen=True)
class BoundCheck:
    """A model's exact accuracy on every case-5 input (f a permutation) and its XOR families."""

    n: int
    inputs: int
    accuracy: float
    families: int
    families_all_right: int  # 0 for every one-layer, one-head attention-only model


@tasks.reads_task
def check_bound(model, *, case: int | None = None, n: int | None = None, limit: int = 20_000) -> BoundCheck:
    """Every case-5 input of the model's size n (f a permutation; n <= 4 by default), answered
    by :func:`interp.core.forward.predictions`, grouped into the XOR families of :func:`xor_family`.

    The bound. Fix an input x with target key i* in slot j and another slot q. Its family (keys
    and/or values of slots j and q swapped) has four inputs that differ only at positions 2j,
    2j + 1, 2q, 2q + 1; the answers are u or w (the two slots' values, u != w as f is a
    permutation) as k0 XOR v0 (k0: the keys swapped, v0: the values swapped). With one head,
    one layer and nothing after the attention, logit_u - logit_w at the final position is
    sum_p exp(s_p) h_p / sum_p exp(s_p), where s_p, h_p depend on position p and its token
    only (the query is the fixed target token), so its sign is that of A(k0) + B(v0) + C (the
    key positions give A, the value positions B, the rest C). With argmax ties broken towards
    the smaller index, being right on all four needs S(0, 0) >= 0, S(1, 1) >= 0, S(0, 1) < 0,
    S(1, 0) < 0 (or all reversed), but S(0, 0) + S(1, 1) = S(0, 1) + S(1, 0): every family
    holds a wrong input. Each input lies in exactly n - 1 families (one per q != j), and all
    inputs are equally likely, so if W inputs are wrong, counting (input, family) pairs gives
    W (n - 1) >= #families = N (n - 1) / 4: at least a quarter of all inputs are wrong, at
    every n >= 2, width, precision and temperature. With several heads the logit difference is
    a sum of such ratios and the argument fails (two heads can get a family right).
    """
    task, n = tasks.of(model, case, n, only=CASE)
    total = task.count_inputs(n, "permutation")
    if total > limit:
        raise ValueError(f"n={n}: {total} inputs; accepted: at most limit={limit}")
    tokens, answers = task.enumerate_inputs(n, "permutation")
    right = torch.cat([forward.predictions(model, t) == a
                       for t, a in zip(tokens.split(4096), answers.split(4096))]).tolist()
    index = {tuple(t): i for i, t in enumerate(tokens.tolist())}
    families = set()
    for i, toks in enumerate(tokens.tolist()):
        keys, _, target = task.decode(n, toks)
        for q in range(n):
            if q != keys.index(target):
                families.add(frozenset(index[tuple(f)] for f in xor_family(n, toks, q)))
    all_right = sum(all(right[i] for i in fam) for fam in families)
    return BoundCheck(n, len(right), sum(right) / len(right), len(families), all_right)
