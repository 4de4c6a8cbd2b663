r"""An order of rows (or features) that keeps similar ones together: ``Explanation.hclust``.

The order is the leaf order of a complete-linkage hierarchical clustering (Lance & Williams, 1967)
of the rows under a distance (squared Euclidean by default), with the children of merges flipped
by the optimal-leaf-ordering costs of Bar-Joseph, Gifford & Jaakkola (2001), "Fast optimal leaf
ordering for hierarchical clustering". For a merge ``v`` of clusters ``a`` (placed left) and
``b``, the cheapest ordering of ``v`` that runs from leaf ``u`` of ``a`` to leaf ``w`` of ``b``
costs the summed distance between neighbours

.. math::

    M(u, w) = \min_{m, k} \; M(u, m) + D(m, k) + M(k, w),

over ``m`` in the other child of ``a`` than ``u``'s (``m = u`` for a single leaf) and ``k`` likewise
in ``b``. How the flips follow from ``M`` is SciPy's rule (see :func:`optimal_leaf_order`), so the
order is the one ``shap.Explanation.hclust`` returns whenever no two distances tie (ties may be
broken differently). NumPy only: no SciPy at run time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._coalitions._hierarchy import linkage

METRICS = ("sqeuclidean", "euclidean", "cityblock", "chebyshev", "cosine", "correlation")
_BLOCK = 1 << 22  # elements per min-plus block


def pairwise_distances(X: np.ndarray, metric: str = "sqeuclidean") -> np.ndarray:
    """``[n, n]`` distances between the rows of ``X [n, p]``, as ``scipy.spatial.distance.pdist``.

    Sums run over the columns in order. ``cosine`` is ``1 - u.v / (|u| |v|)``; ``correlation`` is
    the cosine distance of the rows less their means.
    """
    if metric not in METRICS:
        raise ValueError(f"`metric` must be one of {METRICS}; got {metric!r}.")
    X = np.asarray(X, np.float64)
    if metric in ("cosine", "correlation"):
        Z = X - X.mean(axis=1, keepdims=True) if metric == "correlation" else X
        norms = np.sqrt((Z * Z).sum(axis=1))
        D = 1.0 - (Z @ Z.T) / np.outer(norms, norms)
        np.fill_diagonal(D, 0.0)
        return np.maximum(D, 0.0)
    D = np.zeros((X.shape[0], X.shape[0]))
    for j in range(X.shape[1]):
        diff = np.abs(X[:, None, j] - X[None, :, j])
        if metric == "chebyshev":
            np.maximum(D, diff, out=D)
        else:
            D += diff if metric == "cityblock" else diff * diff
    return np.sqrt(D) if metric == "euclidean" else D


def _min_plus(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``C[i, j] = min_k A[i, k] + B[k, j]``, in blocks of rows of bounded size."""
    rows = max(1, _BLOCK // max(A.shape[1] * B.shape[1], 1))
    C = np.empty((A.shape[0], B.shape[1]))
    for i in range(0, A.shape[0], rows):
        C[i : i + rows] = (A[i : i + rows, :, None] + B[None, :, :]).min(axis=1)
    return C


def _inner_costs(M: np.ndarray, leaves: np.ndarray, split: int) -> np.ndarray:
    """``M`` among a cluster's leaves, keeping only pairs that lie in different children.

    ``leaves[:split]`` are the first child's leaves. A single leaf gives ``[[0]]`` (it is its own
    inner end).
    """
    if leaves.size == 1:
        return np.zeros((1, 1))
    cost = M[np.ix_(leaves, leaves)].copy()
    cost[:split, :split] = np.inf
    cost[split:, split:] = np.inf
    return cost


def optimal_leaf_order(Z: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The leaf order of the linkage ``Z`` (SciPy's format) with SciPy's optimal-leaf-ordering flips.

    Every merge ``v = (a, b)`` takes the ends ``(u, w)`` with the least ``M(u, w)`` (the first in
    ``a``'s and then ``b``'s leaf order on ties) and flips ``a`` when ``u`` lies in ``a``'s second
    child, ``b`` when ``w`` lies in ``b``'s first; a flip mirrors the whole subtree. This is what
    ``scipy.cluster.hierarchy.optimal_leaf_ordering`` returns (and so ``shap.Explanation.hclust``):
    each merge is oriented by its own best ordering, which is the least total neighbour distance
    in most cases but not in all.

    Args:
      Z: ``[n - 1, 4]`` linkage matrix; row ``t`` merges clusters ``Z[t, 0]`` and ``Z[t, 1]``.
      D: ``[n, n]`` distances between the leaves.

    Returns:
      ``[n]`` leaf indices, left to right.
    """
    n = D.shape[0]
    M = np.full((n, n), np.inf)
    members = {i: np.array([i]) for i in range(n)}
    splits = {i: 1 for i in range(n)}
    flip = np.zeros(2 * n - 1, bool)
    for t in range(n - 1):
        a, b = int(Z[t, 0]), int(Z[t, 1])
        la, lb = members[a], members[b]
        through = _min_plus(_inner_costs(M, la, splits[a]), D[np.ix_(la, lb)])  # [u, k]
        cost = _min_plus(through, _inner_costs(M, lb, splits[b]))  # [u, w]
        ui, wi = np.ix_(la, lb)
        M[ui, wi] = cost
        M[wi.T, ui.T] = cost.T
        u, w = np.unravel_index(np.argmin(cost), cost.shape)
        flip[a] = la.size > 1 and u >= splits[a]
        flip[b] = lb.size > 1 and w < splits[b]
        members[n + t], splits[n + t] = np.concatenate([la, lb]), la.size
    return _leaves(Z, flip, n)


def _leaves(Z: np.ndarray, flip: np.ndarray, n: int) -> np.ndarray:
    """Leaves left to right, each node's children swapped when an odd number of the node and its
    ancestors are flipped."""
    order, stack = [], [(2 * n - 2, False)]
    while stack:
        node, parity = stack.pop()
        if node < n:
            order.append(node)
            continue
        parity ^= bool(flip[node])
        left, right = int(Z[node - n, 0]), int(Z[node - n, 1])
        if parity:
            left, right = right, left
        stack.append((right, parity))  # popped after the left subtree
        stack.append((left, parity))
    return np.asarray(order, np.int64)


def hclust_order(X: Any, metric: str = "sqeuclidean") -> np.ndarray:
    """Rows of ``X [n, p]`` in the optimal leaf order of their complete-linkage clustering.

    Returns:
      ``[n]`` row indices (``shap.Explanation.hclust`` returns the same order).
    """
    X = np.asarray(X, np.float64)
    D = pairwise_distances(X, metric)
    if not np.isfinite(D).all():
        raise ValueError(
            f"hclust: the {metric!r} distances between the rows are not all finite (NaN or inf values, or "
            "all-zero rows under 'cosine'/'correlation'); pick another metric or drop those rows."
        )
    if X.shape[0] < 2:
        return np.arange(X.shape[0], dtype=np.int64)
    return optimal_leaf_order(linkage(D, "complete"), D)
