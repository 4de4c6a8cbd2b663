"""``jaxshap.kmeans``: a background summarised by weighted k-means centres, as ``shap.kmeans``.

The centres minimise the within-cluster sum of squares (Lloyd's algorithm from greedy k-means++
seeds, the best of ``n_init`` starts: Lloyd, 1982, "Least squares quantization in PCM"; Arthur &
Vassilvitskii, 2007, "k-means++: the advantages of careful seeding"). As in ``shap.kmeans``,
missing values are first replaced by their column's mean, each centre's value of each feature is
then replaced by the nearest value that feature takes in the data (so a binary or integer feature
keeps a valid value), and each centre is weighted by the share of rows in its cluster. NumPy only
(no scikit-learn), deterministic given ``seed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._core._inputs import _frame_to_numpy, as_rows, column_names, is_sparse
from .._core._validate import flag, integer

N_INIT = 10
"""Starts of the k-means++ seeding and Lloyd's iterations; the lowest inertia wins (as shap's)."""

MAX_ITER = 300
"""Lloyd iterations per start (scikit-learn's default, which shap uses)."""

TOL = 1e-4
"""Convergence: the centres' total squared shift below this times the mean feature variance."""


class Summary:
    """Weighted background rows: what :func:`kmeans` returns, taken by every explainer and masker
    wherever background rows are (``data=`` / ``masker=``), with its weights.

    Attributes:
      data: ``[k, M]`` float64 centres.
      weights: ``[k]`` shares of the rows in each cluster (summing to 1).
      group_names: the feature names (a DataFrame's columns), or ``None``; shap's name for them.
    """

    def __init__(self, data: np.ndarray, weights: np.ndarray, group_names: list[str] | None):
        self.data = data
        self.weights = weights
        self.group_names = group_names

    def __repr__(self) -> str:
        return f"Summary(centres={self.data.shape[0]}, features={self.data.shape[1]}, weighted)"


def is_summary(data: Any) -> bool:
    """A weighted summary: ``.data`` rows and their ``.weights`` (a :class:`Summary`, or shap's
    ``DenseData`` from ``shap.kmeans``), not an array or a masker."""
    return hasattr(data, "weights") and hasattr(data, "data") and not hasattr(data, "shape") and not hasattr(
        data, "coalition_values")


def summary_moments(summary: Any, need_cov: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``(mean, cov)`` of a weighted summary's rows in float64: ``mu = sum_c w_c x_c`` and, when
    asked for, ``Sigma = sum_c w_c (x_c - mu)(x_c - mu)^T`` (the covariance of the distribution
    the summary stands for; ``None`` otherwise).

    Raises:
      ValueError: for weights that do not match the rows, are negative or sum to zero.
    """
    rows = np.asarray(summary.data, np.float64)
    w = np.asarray(summary.weights, np.float64).reshape(-1)
    if rows.ndim != 2 or w.shape[0] != rows.shape[0] or (w < 0).any() or not w.sum() > 0:
        raise ValueError("a weighted summary needs one non-negative weight per row, not all zero.")
    w = w / w.sum()
    mean = w @ rows
    if not need_cov:
        return mean, None
    centred = rows - mean
    return mean, (centred * w[:, None]).T @ centred


def _square_distances(X: np.ndarray, centres: np.ndarray, x_sq: np.ndarray) -> np.ndarray:
    """``[n, k]`` squared Euclidean distances (``|x|^2 - 2 x.c + |c|^2``, floored at 0)."""
    d = x_sq[:, None] - 2.0 * (X @ centres.T) + np.einsum("kj,kj->k", centres, centres)[None, :]
    return np.maximum(d, 0.0)


def _seed_centres(X: np.ndarray, k: int, x_sq: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Greedy k-means++: each new centre is the best (least total squared distance) of
    ``2 + log k`` candidates drawn with probability proportional to the squared distance to the
    centres so far."""
    n = X.shape[0]
    trials = 2 + int(np.log(k))
    centres = np.empty((k, X.shape[1]))
    centres[0] = X[rng.integers(n)]
    closest = _square_distances(X, centres[:1], x_sq)[:, 0]
    for c in range(1, k):
        total = closest.sum()
        if total <= 0:  # fewer distinct rows than centres: repeat a row
            centres[c] = X[rng.integers(n)]
            continue
        picks = np.searchsorted(np.cumsum(closest), rng.uniform(size=trials) * total)
        picks = np.minimum(picks, n - 1)
        candidates = np.minimum(closest[None, :], _square_distances(X, X[picks], x_sq).T)
        best = int(np.argmin(candidates.sum(axis=1)))
        centres[c], closest = X[picks[best]], candidates[best]
    return centres


def _lloyd(X: np.ndarray, centres: np.ndarray, x_sq: np.ndarray, tol: float, max_iter: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Lloyd's iterations from ``centres``: ``(centres, labels, inertia)``. An emptied cluster is
    moved to the row farthest from its centre."""
    k = centres.shape[0]
    labels = None
    for _ in range(max_iter):
        d = _square_distances(X, centres, x_sq)
        new_labels = np.argmin(d, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, X)
        moved = centres.copy()
        filled = counts > 0
        moved[filled] = sums[filled] / counts[filled, None]
        far = np.argsort(-d[np.arange(X.shape[0]), labels], kind="stable")
        for i, c in enumerate(np.flatnonzero(~filled)):
            moved[c] = X[far[i]]
        shift = float(((moved - centres) ** 2).sum())
        centres = moved
        if shift <= tol:
            break
    d = _square_distances(X, centres, x_sq)
    labels = np.argmin(d, axis=1)
    return centres, labels, float(d[np.arange(X.shape[0]), labels].sum())


def _nearest_values(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Each centre's value of each feature replaced by the value of that feature nearest to it in
    ``X`` (ties: the value met first in ``X``'s row order, as ``np.argmin`` over the rows)."""
    out = centres.copy()
    for j in range(X.shape[1]):
        values, first = np.unique(X[:, j], return_index=True)
        pos = np.clip(np.searchsorted(values, centres[:, j]), 1, max(len(values) - 1, 1))
        lo, hi = values[pos - 1], values[np.minimum(pos, len(values) - 1)]
        d_lo, d_hi = np.abs(lo - centres[:, j]), np.abs(hi - centres[:, j])
        take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (first[np.minimum(pos, len(values) - 1)] < first[pos - 1]))
        out[:, j] = np.where(take_hi, hi, lo)
    return out


def _host_rows(X: Any) -> tuple[np.ndarray, list[str] | None]:
    names = column_names(X)
    if names is not None:
        rows = _frame_to_numpy(X, "X")
    elif is_sparse(X):
        rows = X.toarray()
    else:
        rows = np.asarray(X)
    if not (np.issubdtype(rows.dtype, np.number) or rows.dtype == bool) or np.iscomplexobj(rows):
        raise TypeError(f"`X` must hold real numbers to be clustered; got dtype {rows.dtype}.")
    return as_rows(np.asarray(rows, np.float64), "X"), names


def kmeans(X: Any, k: int, round_values: bool = True, *, seed: int = 0, n_init: int = N_INIT,
           max_iter: int = MAX_ITER) -> Summary:
    """Summarise ``X`` by ``k`` centres weighted by their clusters' sizes: ``shap.kmeans(X, k)``.

    The centres minimise :math:`\\sum_i \\min_c \\lVert x_i - \\mu_c \\rVert^2` (Lloyd's algorithm
    from greedy k-means++ seeds, best of ``n_init`` starts); missing values count as their
    column's mean. With ``round_values`` each centre's value of feature ``j`` becomes the value
    of ``X[:, j]`` nearest to it, as shap does. Where the clusters are well separated the centres
    are shap's (found with scikit-learn's ``KMeans``), in another order. Pass the result as the
    background of any explainer or masker: coalition values then average the centres with these
    weights, ``v_x(S) = sum_c w_c f(x_S, mu_c,-S)``.

    Args:
      X: rows ``[n, M]`` (array, DataFrame, ``scipy.sparse`` matrix); a DataFrame's columns name
        the features.
      k: number of centres, from 1 to the number of rows.
      round_values: replace each centre's values by the nearest values in the data.
      seed: seed of the k-means++ draws (the result is a function of ``X``, ``k`` and ``seed``).
      n_init: starts, the best (least within-cluster sum of squares) kept.
      max_iter: Lloyd iterations per start.

    Returns:
      A :class:`Summary`: ``data`` ``[k, M]`` float64 centres, ``weights`` ``[k]`` (summing to
      1) and ``group_names``.

    Raises:
      ValueError: for a ``k`` outside ``1..n``, or a column that is missing in every row.
      TypeError: for values that are not real numbers.
    """
    rows, names = _host_rows(X)
    n = rows.shape[0]
    k = integer(k, "k", least=1, most=n, rule=f"a number of centres from 1 to the number of rows ({n})")
    round_values = flag(round_values, "round_values")
    n_init = integer(n_init, "n_init", least=1)
    max_iter = integer(max_iter, "max_iter", least=1)
    missing = np.isnan(rows)
    if missing.any():
        if missing.all(axis=0).any():
            col = int(np.flatnonzero(missing.all(axis=0))[0])
            raise ValueError(f"`X` column {names[col] if names else col} is missing (NaN) in every row; drop it.")
        rows = np.where(missing, np.nanmean(rows, axis=0)[None, :], rows)
    if not np.isfinite(rows).all():
        raise ValueError("`X` holds inf; replace it by a finite value before summarising.")
    x_sq = np.einsum("ij,ij->i", rows, rows)
    tol = TOL * float(np.mean(np.var(rows, axis=0)))
    rng = np.random.default_rng(integer(seed, "seed", least=0))
    best = None
    for _ in range(n_init):
        start = _seed_centres(rows, k, x_sq, rng)
        found = _lloyd(rows, start, x_sq, tol, max_iter)
        if best is None or found[2] < best[2]:
            best = found
    centres, labels, _ = best
    if round_values:
        centres = _nearest_values(rows, centres)
    weights = np.bincount(labels, minlength=k).astype(np.float64)
    return Summary(centres, weights / weights.sum(), names)
