"""The two-layer fast path's custom autograd: gradients of the big tensors as rank-one factors.

Layer 0's pattern A [S, B, P, P] and (with MLPs) its hidden activations h [S, B, P, d_mlp] are
the largest tensors of a two-layer step, and the last layer reads each only through a few
matrix-vector products (:class:`LastRow`, :class:`MatVec`, :class:`VecMat`). Each use hands back
its gradient with respect to A (or h) as a rank-one pair U V^T in a shared ``box``, and
:class:`Pattern` (softmax) or :class:`Relu` forms the input's gradient from all of them in one
product, instead of autograd's dense outer product per use and their sum. Used by
:mod:`interp.training.fast_two_layers`; ``tests/training/test_fast_train.py`` checks every
gradient against TransformerLens's backward.
"""

from __future__ import annotations

import torch
from torch import Tensor


def vec_mat(w: Tensor, A: Tensor) -> Tensor:
    """w @ A for [S, B, P] x [S, B, P, P] as batched row-vector products (the fast kernel)."""
    return (w[..., None, :] @ A)[..., 0, :]


class Pattern(torch.autograd.Function):
    """A = softmax(scores) over keys, whose gradient arrives as low-rank factors.

    The pattern [S, B, P, P] is the largest tensor of a two-layer step, and the last layer uses
    it three ways: its last row, ``A @ r`` and ``a @ A``. Each use (``LastRow``, ``MatVec``,
    ``VecMat``) hands back its gradient with respect to A as a rank-one pair, dA += U V^T,
    together with ``A V`` (which each use has at hand), in ``box`` instead of a dense tensor.
    Autograd runs this backward after all of them (it depends on their results), and the
    softmax backward ``dS = A * (dA - rowsum(A * dA))`` becomes
    ``dS = A * (U V^T - sum_k U_k * (A V)_k)``: one product and two passes over [S, B, P, P].
    """

    @staticmethod
    def forward(ctx, scores, box):
        A = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(A)
        ctx.box = box
        ctx.set_materialize_grads(False)
        return A

    @staticmethod
    def backward(ctx, dA):
        (A,) = ctx.saved_tensors
        U = torch.stack([u for u, _, _ in ctx.box], -1)  # [S, B, P, k]
        Vf = torch.stack([v for _, v, _ in ctx.box], -1)  # [S, B, P, k]
        rowcorr = sum(u * av for u, _, av in ctx.box)  # rowsum(A * U V^T), [S, B, P]
        ctx.box.clear()
        M = U @ Vf.transpose(-1, -2)  # [S, B, P, P]: the uses' dA
        if dA is not None:  # A was also used directly somewhere: add its dense gradient
            M = M + dA
            rowcorr = rowcorr + (dA * A).sum(-1)
        return M.sub_(rowcorr[..., None]).mul_(A), None


class LastRow(torch.autograd.Function):
    """A[..., -1, :] (the final query's layer-0 pattern); dA = e_last g^T."""

    @staticmethod
    def forward(ctx, A, box):
        last = A[..., -1, :].clone()
        ctx.save_for_backward(last)
        ctx.box = box
        return last

    @staticmethod
    def backward(ctx, g):
        (last,) = ctx.saved_tensors
        e = torch.zeros_like(g)
        e[..., -1] = 1.0
        av = torch.zeros_like(g)
        av[..., -1] = (last * g).sum(-1)  # (A g) is needed at the last row only
        ctx.box.append((e, g, av))
        return None, None


class MatVec(torch.autograd.Function):
    """A @ r, [S, B, P]; dA = g r^T (with A r, the output), dr = A^T g."""

    @staticmethod
    def forward(ctx, A, r, box):
        out = vec_mat(r, A.transpose(-1, -2))
        ctx.save_for_backward(A, r, out)
        ctx.box = box
        return out

    @staticmethod
    def backward(ctx, g):
        A, r, out = ctx.saved_tensors
        ctx.box.append((g, r, out))
        return None, vec_mat(g, A), None


class VecMat(torch.autograd.Function):
    """w @ A, [S, B, P]; dA = w g^T (with A g), dw = A g."""

    @staticmethod
    def forward(ctx, w, A, box):
        ctx.save_for_backward(w, A)
        ctx.box = box
        return vec_mat(w, A)

    @staticmethod
    def backward(ctx, g):
        w, A = ctx.saved_tensors
        Ag = vec_mat(g, A.transpose(-1, -2))
        ctx.box.append((w, g, Ag))
        return Ag, None, None


class Relu(torch.autograd.Function):
    """h = relu(u) [S, B, P, d_mlp], whose gradient arrives as rank-one factors.

    The last layer reads layer 0's hidden activations two ways, ``h @ w`` (its scores) and
    ``a @ h`` (its mixed value), through :class:`MatVec` and :class:`VecMat`, which hand back
    dh = U V^T pairs in ``box`` as they do for :class:`Pattern`. The gradient with respect to
    u, ``(sum_k U_k V_k^T) * (u > 0)``, is then formed in one [S, B, P, d_mlp] tensor, instead
    of autograd's dense outer product per use and their sum.
    """

    @staticmethod
    def forward(ctx, u, box):
        h = torch.relu(u)
        ctx.save_for_backward(h)
        ctx.box = box
        ctx.set_materialize_grads(False)
        return h

    @staticmethod
    def backward(ctx, dh):
        (h,) = ctx.saved_tensors
        du = None if dh is None else dh.clone()
        for U, Vf, _ in ctx.box:  # U [S, B, P], Vf [S, B, d_mlp]
            if du is None:
                du = U[..., None] * Vf[..., None, :]
            else:
                du.addcmul_(U[..., None], Vf[..., None, :])
        ctx.box.clear()
        # relu's gradient: du where h > 0, else 0, in place (one pass; the out-of-place
        # threshold_backward wrote the same values at 2-6x the time, masked_fill_ at 2x)
        return torch.ops.aten.threshold_backward.grad_input(du, h, 0.0, grad_input=du), None
