"""Theorem 3.5 made explicit: a one-layer softmax transformer for case 5, MLP included.

The paper (Section 3.2.2) builds the attention layer and asserts that "a position-wise MLP of
n^O(1) parameters can produce the correct output". Here is that MLP: one ReLU layer of 5n units,
loaded with the attention layer into a TransformerLens ``HookedTransformer`` (``attn_only=False``,
``act_fn="relu"``), one block, no LayerNorm.

Input: t_0 .. t_2n (keys t_2k, a permutation of [n]; values t_2k+1; target i* = t_2n).
D = d_model = 2n + 2, d_head = 2n + 1 (TransformerLens shares d_head between QK and OV; OV must
have rank 2n + 1), d_mlp = 5n.

Embedding (the paper's). ``W_pos[i] = e_i`` (one-hot, i in [2n + 1]; coordinate 2n + 1 is never
set), ``W_E[v] = ln(v + 1) e_{2n+1}``.

Attention (the paper's). The query is constant, ``q = b_Q = sqrt(d_head) e_0`` (the paper's
"Q x_i = [1, 0, ..., 0]"; the sqrt(d_head) undoes TransformerLens's 1/sqrt(d_head)), the key
reads the token coordinate, ``k_j[0] = ln(t_j + 1)``, so the score of position j is ln(t_j + 1)
and softmax gives alpha_j = (t_j + 1) / S, S = sum_j (t_j + 1). OV copies the one-hot
coordinates 0 .. 2n. With TransformerLens's residual, position 2n then holds

    r_j = alpha_j (j < 2n),   r_2n = 1 + alpha_2n,   r_{2n+1} = ln(i* + 1).

MLP (ours). Write a_j = (t_j + 1)/S. Keys are a permutation, so K = sum_k a_2k = n(n + 1)/(2S)
is known up to S. For each pair k in [n], with d_k = a_2k - a_2n = (t_2k - i*)/S (zero iff the
key is the target; otherwise |d_k| >= 1/S) and v_k = a_2k+1 = (f(t_2k) + 1)/S <= n/S, five units

    u1 = ReLU(v - M d), u2 = ReLU(v + M d), u3 = ReLU(M d), u4 = ReLU(-M d), u5 = ReLU(v)

give u1 + u2 - u3 - u4 - u5 = v [d = 0] exactly when M |d| >= v for d != 0 (M = 2n: a margin
of n/S). (d = 0: v + v - 0 - 0 - v; d > 0: 0 + (v + M d) - M d - 0 - v = 0; d < 0 likewise.)
Summed over k: y = (f(i*) + 1)/S. The MLP writes y into coordinate 1 and removes r_1 there
(u5 of pair 0 is ReLU(r_1) = r_1), so after it r_1 = y and the even coordinates still hold
a_2k. d_k reads r_2n - 1 for a_2n (the bias).

Unembedding (ours). logit_u = (u + 1) n (n + 1) y - (u + 1)^2 K
= K [2 (u + 1)(f + 1) - (u + 1)^2] = K [(f + 1)^2 - (u - f)^2]: the tangents of a parabola,
maximal exactly at u = f(i*) with margin K >= 1/3 (S <= n(n+1)/2 + n^2 + n).

Precision. Everything is exact in real arithmetic; in floating point the weak spot is r_2n - 1:
alpha_2n ~ 1/n^2 is added to 1 by the residual, so its absolute error is the machine epsilon, and
the unembedding amplifies y by ~n^3. float64 (the default) is exact far beyond n = 64; see
``experiments/theorem35/README.md`` for what float32 does. c-size: h d p = (2n + 2) p.
"""

from __future__ import annotations

import math

import torch

from interp.core import attention, forward, models, tasks

DTYPES = (torch.float32, torch.float64)


def make_config(n: int, dtype: torch.dtype = torch.float64):
    from transformer_lens import HookedTransformerConfig

    return HookedTransformerConfig(
        n_layers=1,
        d_model=2 * n + 2,
        d_head=2 * n + 1,
        n_heads=1,
        d_mlp=5 * n,
        n_ctx=tasks.seq_len(5, n),
        d_vocab=n,
        d_vocab_out=n,
        act_fn="relu",
        attn_only=False,
        normalization_type=None,
        attention_dir="bidirectional",
        positional_embedding_type="standard",
        dtype=dtype,
        device="cpu",
        default_prepend_bos=False,
    )


def build(n: int, *, dtype: torch.dtype = torch.float64):
    """Theorem 3.5's transformer for case 5 and table size n (softmax, beta = 1)."""
    tasks.check_n(n, 2)
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}; accepted: one of {DTYPES}")
    D, dh, H = 2 * n + 2, 2 * n + 1, 5 * n
    model = models.new_model(make_config(n, dtype), 5)
    f64 = dict(dtype=torch.float64)
    W_E = torch.zeros(n, D, **f64)
    W_E[:, D - 1] = torch.log(torch.arange(n, **f64) + 1)
    W_pos = torch.zeros(2 * n + 1, D, **f64)
    W_pos[:, : 2 * n + 1] = torch.eye(2 * n + 1, **f64)
    W_Q = torch.zeros(1, D, dh, **f64)
    b_Q = torch.zeros(1, dh, **f64)
    b_Q[0, 0] = math.sqrt(dh)  # constant query; cancels attn_scale = sqrt(d_head)
    W_K = torch.zeros(1, D, dh, **f64)
    W_K[0, D - 1, 0] = 1.0  # k_j[0] = ln(t_j + 1)
    W_V = torch.zeros(1, D, dh, **f64)
    W_V[0, : 2 * n + 1] = torch.eye(2 * n + 1, **f64)  # copy the one-hot coordinates
    W_O = torch.zeros(1, dh, D, **f64)
    W_O[0, :, : 2 * n + 1] = torch.eye(2 * n + 1, **f64)
    # MLP: units 5k .. 5k+4 for pair k; M = 2n.
    M = 2.0 * n
    W_in = torch.zeros(D, H, **f64)
    b_in = torch.zeros(H, **f64)
    W_out = torch.zeros(H, D, **f64)
    q = 2 * n  # residual coordinate of the target: 1 + a_2n
    for k in range(n):
        key, val, u = 2 * k, 2 * k + 1, 5 * k
        # M d = M (r_key - r_q + 1)
        for unit, sv, sd in ((u, 1, -1), (u + 1, 1, 1), (u + 2, 0, 1), (u + 3, 0, -1), (u + 4, 1, 0)):
            W_in[val, unit] = sv
            W_in[key, unit] += sd * M
            W_in[q, unit] += -sd * M
            b_in[unit] = sd * M
        W_out[u : u + 5, 1] = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0], **f64)
    W_out[4, 1] = -2.0  # u5 of pair 0 is ReLU(r_1): also remove r_1 from coordinate 1
    W_U = torch.zeros(D, n, **f64)
    u1 = torch.arange(1, n + 1, **f64)
    W_U[1] = u1 * n * (n + 1)  # (u + 1) n (n + 1) y
    W_U[0 : 2 * n : 2] = -(u1**2)  # -(u + 1)^2 K, K = sum_k r_2k
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a, mlp = model.blocks[0].attn, model.blocks[0].mlp
        for param, value in (
            (model.embed.W_E, W_E), (model.pos_embed.W_pos, W_pos), (a.W_Q, W_Q), (a.b_Q, b_Q),
            (a.W_K, W_K), (a.W_V, W_V), (a.W_O, W_O), (mlp.W_in, W_in), (mlp.b_in, b_in),
            (mlp.W_out, W_out), (model.unembed.W_U, W_U),
        ):
            param.copy_(value.to(dtype))
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    attention.remove_attention(model)  # TransformerLens's own softmax on its one layer
    model.construction = dict(case=5, n=n, layers=1, theorem="3.5", dtype=str(dtype).replace("torch.", ""))
    return model


def parameter_counts(model) -> dict:
    """Dense and non-zero parameter counts, total and in the MLP."""
    total = sum(p.numel() for p in model.parameters())
    nonzero = sum(int((p != 0).sum()) for p in model.parameters())
    mlp = [p for name, p in model.named_parameters() if ".mlp." in name]
    return dict(
        total=total, nonzero=nonzero, mlp=sum(p.numel() for p in mlp),
        mlp_nonzero=sum(int((p != 0).sum()) for p in mlp),
        d_model=model.cfg.d_model, d_head=model.cfg.d_head, d_mlp=model.cfg.d_mlp,
    )


@tasks.register_builder("theorem35", 5)
def make_theorem35(task: tasks.Task, n: int, dtype: torch.dtype = torch.float64):
    """:func:`build` as the task's ``"theorem35"`` builder."""
    return build(n, dtype=dtype)


@tasks.reads_task
def accuracy(model, *, case: int | None = None, n: int | None = None, inputs: str = "random",
             count: int = 4096, function: str = "any", seed: int = 0) -> dict:
    """Accuracy of a model on every input of its task (``inputs="exhaustive"``, small n) or on
    ``count`` random ones."""
    task, n = tasks.of(model, case, n)
    if inputs not in ("exhaustive", "random"):
        raise ValueError(f"inputs={inputs!r}; accepted: 'exhaustive' or 'random'")
    if inputs == "exhaustive":
        tokens, answers = task.enumerate_inputs(n, function)
    else:
        tokens, answers = task.sample(n, count, generator=torch.Generator().manual_seed(seed), function=function)
    correct = 0
    chunk = max(1, 2**24 // (tokens.shape[1] * model.cfg.d_model))  # ~128 MB per activation
    with torch.no_grad():
        for t, a in zip(tokens.split(chunk), answers.split(chunk)):
            correct += int((forward.predictions(model, t) == a).sum())
    return dict(inputs=len(answers), correct=correct, accuracy=correct / len(answers))
