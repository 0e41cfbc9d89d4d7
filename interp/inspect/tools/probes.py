"""Is an integer k stored as a point on a circle? cos/sin probes, Fourier spectra, circle test.

The paper's constructions store an integer k in [n] as ``cs_N(k) = [cos 2 pi k/N, sin 2 pi k/N]``
(N = n for cases 2-4, N = n + 1 for cases 1 and 5, whose query position needs an extra angle).
A trained model may do the same up to a linear map, with another frequency m (the point
``cs_N(m k)``), or with the keys on a circle in some other order. Three tests, from strict
to order-free:

* **cos/sin probe** (:func:`probe_table`, :func:`probe_resid`): a linear regression
  (scikit-learn ``LinearRegression``'s least squares, :func:`heldout_predictions`) from rows
  X[k] to ``[cos 2 pi m k/N, sin 2 pi m k/N]``, scored by held-out R^2 (out-of-fold
  predictions of a K-fold split, averaged over the two targets, floored at -1) for every m in
  1..(N - 1) // 2 and N in {n, n + 1} unless N is given; the best (N, m) is reported. m and
  N - m give the same points mirrored, so larger m add nothing (and m = N / 2 is the
  degenerate [(-1)^k, 0]). A table that *is* ``A cs_N(k) + b`` scores R^2 = 1 at that (N, m).
* **Fourier power spectrum** (:func:`fourier_spectrum`), as in Nanda et al.'s grokking analysis:
  the DFT of the centred table along its rows, power summed over the model dimensions.
* **Circle test** (:func:`circle_test`), blind to the order of the points: the fraction of the
  variance in the top-2 principal plane, the spread of the radii about the best-fitting circle
  in that plane (std / mean; the centre is fitted, since n points of ``cs_{n+1}`` are not centred
  on their mean), and the smallest angular gap over the even gap 2 pi / n.

Sources probed by :func:`probe_model` per case (rows, label):

====== =============================================== ===========================
case   token embedding                                 positional embedding
====== =============================================== ===========================
1      ``token``: W_E[v], v                            ``pos``: W_pos[j], j < n
2, 3   ``token_key`` / ``token_value``: the pair
       tables ``original0`` / ``original1``, k / v     (none: no PE)
4, 5   ``token``: W_E[x], x                            ``pos_key``: W_pos[2k], k;
                                                       ``pos_value``: W_pos[2k+1], k
====== =============================================== ===========================

An all-zero positional table (no PE) is skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core import models, tasks
from interp.inspect.tools import circuits, geometry, hooks
from interp.training.machine import one_thread


#: R^2 below this is reported as this: any value < 0 already means "worse than the mean", and
#: an underdetermined fit on a near-degenerate table can reach -10^4, which only hurts tables.
R2_FLOOR = -1.0


def cs_targets(labels, N: int, m: int = 1) -> np.ndarray:
    """[rows, 2] targets ``[cos 2 pi m k/N, sin 2 pi m k/N]`` for integer labels k."""
    theta = 2 * np.pi * m * np.asarray(labels, dtype=np.float64) / N
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


#: the relative cutoff below which a fold's singular values count as zero: scikit-learn's
#: ``LinearRegression(tol=1e-6)``, which hands it to ``scipy.linalg.lstsq`` as ``cond``
LSTSQ_COND = 1e-6

def heldout_predictions(X, Y, *, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions of a linear regression X -> Y (every column of Y at once).

    What scikit-learn's ``cross_val_predict(LinearRegression(), X, Y, cv=KFold(...))`` returns,
    computed directly: a shuffled ``KFold`` (``folds``, at most one fold per row; scikit-learn's
    own splitter, so the folds are the same), and on each training fold the centred
    least-squares fit ``LinearRegression`` makes: X and Y centred on the fold's means,
    ``scipy.linalg.lstsq`` (LAPACK gelsd; singular values below :data:`LSTSQ_COND` times the
    largest count as zero, and a fold with fewer rows than columns, or rank-deficient, gets the
    minimum-norm solution), and the intercept ``y_mean - x_mean @ coef``. Every prediction
    comes from a fit that did not see the row. Least squares fits each column of Y
    independently, so stacking targets changes no prediction; it only saves fits.

    The same arithmetic without scikit-learn's per-fit input checks, which cost more than the
    fits, on one BLAS thread: the probes' least-squares problems are small (at most a few hundred
    rows and columns), and on cores shared with other work a second OpenBLAS thread spins
    (:func:`interp.training.machine.one_thread`); ``tests/inspect/tools/test_probes_heldout.py``
    holds it to ``cross_val_predict`` within 1e-9.
    """
    from scipy import linalg
    from sklearn.model_selection import KFold

    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or len(X) != len(Y) or not X.shape[1] or not Y.shape[1]:
        raise ValueError(f"X has shape {X.shape}, Y {Y.shape}; accepted: [rows, d] and [rows, k], "
                         "d and k >= 1")
    if len(X) < 3:
        raise ValueError(f"{len(X)} rows; accepted: at least 3 to score a held-out probe")
    if not (np.isfinite(X).all() and np.isfinite(Y).all()):  # scikit-learn refused them too
        raise ValueError("X or Y holds NaN or infinity; accepted: finite values")
    cv = KFold(n_splits=min(folds, len(X)), shuffle=True, random_state=seed)
    pred = np.empty_like(Y)
    with one_thread():
        for train, test in cv.split(X):
            x_mean, y_mean = X[train].mean(0), Y[train].mean(0)
            coef = linalg.lstsq(X[train] - x_mean, Y[train] - y_mean, cond=LSTSQ_COND)[0]  # [d, k]
            pred[test] = X[test] @ coef + (y_mean - x_mean @ coef)
    return pred


def heldout_r2(X, Y, *, folds: int = 5, seed: int = 0) -> float:
    """Out-of-fold R^2 of a linear regression X -> Y (mean over Y's columns)."""
    from sklearn.metrics import r2_score

    pred = heldout_predictions(X, Y, folds=folds, seed=seed)
    return float(r2_score(np.asarray(Y, dtype=np.float64), pred, multioutput="uniform_average"))


@dataclass(frozen=True)
class ProbeResult:
    """Best cos/sin probe of one source, and the score of every (N, m) tried."""

    source: str
    rows: int
    N: int  # best number of angles
    m: int  # best frequency
    r2: float  # held-out R^2 at (N, m)
    scores: "object"  # pandas DataFrame: N, m, r2

    def r2_at(self, N: int, m: int = 1) -> float:
        s = self.scores
        hit = s[(s.N == N) & (s.m == m)]
        return float(hit.r2.iloc[0]) if len(hit) else math.nan

    def summary(self) -> dict:
        return dict(source=self.source, rows=self.rows, N=self.N, m=self.m, r2=self.r2)


def _angles(n: int, N: int | None) -> tuple[int, ...]:
    if N is None:
        return (n, n + 1)
    if isinstance(N, bool) or not isinstance(N, int) or N < 2:
        raise ValueError(f"N={N!r}; accepted: an integer >= 2 (number of angles), or None")
    return (N,)


def probe_table(
    table, labels, *, n: int | None = None, N: int | None = None, source: str = "table",
    folds: int = 5, seed: int = 0,
) -> ProbeResult:
    """cos/sin probes from rows ``table[r]`` to labels ``labels[r]`` for every (N, m).

    ``N`` None searches N in {n, n + 1} (n defaults to max(labels) + 1). A table with fewer
    rows than columns (n = 10, d = 32) is underdetermined on each training fold; scikit-learn's
    least-squares solution is then the minimum-norm one, which leans on the table's
    high-variance directions, so a dominant circle is still found and a random table is not
    (``tests/inspect/tools/test_probes.py``).
    """
    import pandas as pd

    X = table.detach().double().cpu().numpy() if isinstance(table, Tensor) else np.asarray(table)
    labels = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    n = int(labels.max()) + 1 if n is None else n
    from sklearn.metrics import r2_score

    pairs = [(NN, m) for NN in _angles(n, N) for m in range(1, (NN - 1) // 2 + 1)]
    Y = np.concatenate([cs_targets(labels, NN, m) for NN, m in pairs], axis=1)  # [rows, 2 pairs]
    pred = heldout_predictions(X, Y, folds=folds, seed=seed)
    r2 = r2_score(Y, pred, multioutput="raw_values").reshape(len(pairs), 2).mean(1)
    rows = [dict(N=NN, m=m, r2=max(float(v), R2_FLOOR)) for (NN, m), v in zip(pairs, r2)]
    scores = pd.DataFrame(rows)
    best = scores.loc[scores.r2.idxmax()]
    return ProbeResult(source, len(X), int(best.N), int(best.m), float(best.r2), scores)


@tasks.reads_task
def embedding_tables(model, *, case: int | None = None,
                     n: int | None = None) -> dict[str, tuple[Tensor, Tensor]]:
    """The probed tables of a model: source -> (rows [r, d], labels [r])."""
    task, n = hooks.check_model(model, case=case, n=n)
    k = torch.arange(n)
    out: dict[str, tuple[Tensor, Tensor]] = {}
    if models.has_pair_embedding(model):
        key_table, value_table = models.pair_tables(model)
        out["token_key"] = (key_table.detach(), k)
        out["token_value"] = (value_table.detach(), k)
    else:
        out["token"] = (model.W_E[:n].detach(), k)
    W_pos = model.W_pos.detach()
    if bool(W_pos.abs().max() > 0):
        if task.consecutive:
            out["pos_key"] = (W_pos[task.key_positions(n)], k)
            out["pos_value"] = (W_pos[task.value_positions(n)], k)
        else:
            out["pos"] = (W_pos[task.value_positions(n)], k)
    return out


@tasks.reads_task
def probe_model(model, *, case: int | None = None, n: int | None = None, N: int | None = None,
                **kw) -> list[ProbeResult]:
    """:func:`probe_table` on every embedding table of the model (see module docstring)."""
    task, n = hooks.check_model(model, case=case, n=n)
    return [
        probe_table(rows, labels, n=n, N=N, source=name, **kw)
        for name, (rows, labels) in embedding_tables(model, case=task.case, n=n).items()
    ]


@tasks.reads_task
def probe_resid(
    model, hook_name: str, tokens=None, *, case: int | None = None, n: int | None = None,
    label: str = "answer", pos: int = -1, N: int | None = None, batch_size: int = 1024,
    seed: int = 0, **kw,
) -> ProbeResult:
    """cos/sin probe from the activation at ``hook_name``, position ``pos``, to i* or f(i*).

    ``label``: ``"answer"`` (f(i*)) or ``"target"`` (i*). E.g. ``blocks.0.hook_resid_post`` at
    the final position holds cs(f(i*)) in every construction (coordinates 2-3 for cases 2-4,
    0-1 for cases 1 and 5).
    """
    task, n = hooks.check_model(model, case=case, n=n)
    if label not in ("answer", "target"):
        raise ValueError(f"label={label!r}; accepted: 'answer' or 'target'")
    if hook_name not in model.hook_dict:
        raise ValueError(f"hook_name={hook_name!r} is not a hook of the model, e.g. "
                         f"{[h for h in model.hook_dict if 'resid' in h][:4]}")
    tokens = hooks.sample_inputs(task.case, n, batch_size, seed=seed) if tokens is None else tokens
    view = hooks.read(task.case, n, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(view.tokens, names_filter=lambda name: name == hook_name)
    act = cache[hook_name][:, pos]
    act = act.reshape(act.shape[0], -1)  # heads flattened for [batch, head, d_head] hooks
    labels = view.answer if label == "answer" else view.target
    return probe_table(act, labels, n=n, N=N, source=f"{hook_name}[{pos}]:{label}", seed=seed, **kw)


def fourier_spectrum(table: Float[Tensor, "rows d"]):
    """Power per frequency of the centred table along its rows (DataFrame: freq, power, fraction)."""
    import pandas as pd

    X = table.detach().double()
    X = X - X.mean(0, keepdim=True)
    power = torch.fft.rfft(X, dim=0).abs().pow(2).sum(1)  # [rows // 2 + 1]
    total = float(power.sum())
    frac = power / total if total > 0 else torch.zeros_like(power)
    return pd.DataFrame(dict(freq=range(len(power)), power=power.numpy(), fraction=frac.numpy()))


@dataclass(frozen=True)
class CircleFit:
    """Order-free circle test of n points (see :func:`circle_test`)."""

    top2_var: float  # fraction of the centred variance in the top-2 principal plane
    radius_cv: float  # std / mean of the radii in that plane (0: a circle)
    gap_ratio: float  # smallest angular gap / (2 pi / n) (1: evenly spaced)
    in_order: bool  # do the labels 0..n-1 go round the circle in order (either direction)?
    angles: Float[Tensor, "n"]  # angle of each point in the plane

    def summary(self) -> dict:
        return dict(top2_var=self.top2_var, radius_cv=self.radius_cv,
                    gap_ratio=self.gap_ratio, in_order=self.in_order)


def circle_plane(points: Float[Tensor, "n d"]) -> tuple[Tensor, Tensor, float, Tensor]:
    """Points in their top-2 principal plane and the circle that best fits them there.

    Returns (P [n, 2] plane coordinates of the centred points, centre [2], radius, variance per
    principal component). The circle is Kasa's algebraic fit (:func:`interp.inspect.tools.geometry.fit_circle`);
    its radius sqrt(c + a^2 + b^2) is the rms distance of the points from the centre.
    """
    X = points.detach().double()
    if X.ndim != 2 or X.shape[0] < 3 or X.shape[1] < 2:
        raise ValueError(f"points has shape {tuple(X.shape)}; accepted: [n >= 3, d >= 2]")
    X = X - X.mean(0, keepdim=True)
    _, S, Vh = torch.linalg.svd(X, full_matrices=False)
    P = X @ Vh[:2].T  # [n, 2]
    centre, radii = geometry.fit_circle(P)
    return P, centre, float(radii.pow(2).mean().sqrt()), S.pow(2)


def circle_test(points: Float[Tensor, "n d"]) -> CircleFit:
    """Do the points lie on a 2-D circle, in some order?

    In the top-2 principal plane with the fitted circle (:func:`circle_plane`): how much of the
    variance the plane holds, how equal the radii about the fitted centre are, and how evenly
    the angles are spread. ``in_order`` checks the cyclic order of the labels (row index) up to
    rotation and reflection.
    """
    P, centre, _, var = circle_plane(points)
    n = len(P)
    if float(var.sum()) == 0.0:  # all points equal: no circle at all
        return CircleFit(math.nan, math.nan, 0.0, False, torch.zeros(n))
    top2 = float(var[:2].sum() / var.sum())
    P = P - centre
    r = P.norm(dim=1)
    radius_cv = float(r.std() / r.mean()) if r.mean() > 0 else math.nan
    angles = torch.atan2(P[:, 1], P[:, 0])
    order, gaps = geometry.angle_gaps(angles)
    gap_ratio = float(gaps.min() / (2 * math.pi / n))
    step = (order.roll(-1) - order) % n
    in_order = bool((step == 1).all() or (step == n - 1).all())
    return CircleFit(top2, radius_cv, gap_ratio, in_order, angles.float())


@tasks.reads_task
def circle_report(model, tokens=None, *, case: int | None = None, n: int | None = None, **kw) -> dict:
    """:func:`circle_test` of the last layer's mean key and query vectors (flat dict)."""
    v = circuits.key_query_vectors(model, tokens, case=case, n=n, **kw)
    out = {}
    for name, pts in (("keys", v.keys), ("queries", v.queries)):
        out.update({f"{name}_{k}": val for k, val in circle_test(pts).summary().items()})
    return out


def r2_text(value, fmt: str = ".4f") -> str:
    """An R^2 as text: a value at the probes' floor (:data:`R2_FLOOR`, -1)
    reads ``<= -1 (floored)``, since the true held-out R^2 may be far below it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if float(value) <= R2_FLOOR:
        return f"<= {R2_FLOOR:g} (floored)"
    return format(float(value), fmt)
