r"""Groups and orders of explained rows: cohorts with similar SHAP values, found by a small
regression tree, and an order that keeps similar rows (or features) together.

``Explanation.cohorts(n)`` grows a CART regression tree (Breiman et al., 1984) best-first to
``n`` leaves: each split of a leaf on feature ``j`` at threshold ``t`` (a midpoint between two
adjacent distinct values) minimises the summed squared error of the SHAP values within the two
children, and the leaf whose best split lowers that error the most is split next (as
scikit-learn's ``DecisionTreeRegressor(max_leaf_nodes=n)``, which shap uses). Each cohort is
named by its path, ``"bmi < 0.03 & age >= 0.1"``.

``Explanation.hclust`` (:func:`hclust_order`): the order is the leaf order of a
complete-linkage hierarchical clustering (Lance & Williams, 1967) of the rows under a distance
(squared Euclidean by default), with the children of merges flipped by the optimal-leaf-ordering
costs of Bar-Joseph, Gifford & Jaakkola (2001), "Fast optimal leaf ordering for hierarchical
clustering". For a merge ``v`` of clusters ``a`` (placed left) and ``b``, the cheapest ordering
of ``v`` that runs from leaf ``u`` of ``a`` to leaf ``w`` of ``b`` costs the summed distance
between neighbours

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


def _best_split(X: np.ndarray, Y: np.ndarray, rows: np.ndarray) -> tuple[float, int, float] | None:
    """``(gain, feature, threshold)`` of the best split of ``rows``, or ``None`` when none exists.

    The squared error of a group is ``sum ||y||^2 - ||sum y||^2 / n``; the gain is the parent's
    minus the two children's, computed for every threshold from cumulative sums.
    """
    y = Y[rows]
    n = rows.size
    if n < 2:
        return None
    total = y.sum(axis=0)
    parent = -(total @ total) / n
    best = None
    for j in range(X.shape[1]):
        x = X[rows, j]
        order = np.argsort(x, kind="stable")
        xs = x[order]
        valid = np.flatnonzero(xs[1:] > xs[:-1])  # split after position i (left = first i + 1 rows)
        if valid.size == 0:
            continue
        left = np.cumsum(y[order], axis=0)[valid]
        n_left = (valid + 1).astype(np.float64)
        right = total - left
        n_right = n - n_left
        children = -(np.einsum("ik,ik->i", left, left) / n_left) - np.einsum("ik,ik->i", right, right) / n_right
        gain = parent - children
        i = int(np.argmax(gain))
        if best is None or gain[i] > best[0] + 1e-12 * abs(best[0]):
            best = (float(gain[i]), j, float(xs[valid[i]] / 2 + xs[valid[i] + 1] / 2))
    return best


def _path_names(data: np.ndarray, rows: np.ndarray, path: list[tuple[int, float]], names: list[str]) -> np.ndarray:
    """Each row's name: its path's conditions, the operator read from the row's own value."""
    out = np.empty(rows.size, dtype=object)
    for i, r in enumerate(rows):
        out[i] = " & ".join(f"{names[j]} {'<' if data[r, j] < t else '>='} {t}" for j, t in path)
    return out


def auto_cohorts(data: Any, values: Any, feature_names: list[str], n_cohorts: int) -> dict[str, np.ndarray]:
    """Split rows into at most ``n_cohorts`` groups with similar values, named by their paths.

    As scikit-learn's tree (which shap fits), the splits are searched on the data rounded to
    float32 and a threshold is the float64 midpoint of two adjacent float32 values; a row goes
    left when its float32 value is below it. As shap, each condition in a row's name compares the
    row's own value with the threshold (``"bmi < 0.03"`` or ``"bmi >= 0.03"``), and rows are
    grouped by name.

    Args:
      data: ``[n, M]`` feature values of the rows.
      values: ``[n, M]`` SHAP values (the regression target).
      feature_names: ``M`` names.
      n_cohorts: the most leaves the tree may have (at least 1).

    Returns:
      ``{name: row indices}`` in the order of the names, as ``np.unique`` sorts them.
    """
    exact = np.asarray(data, np.float64)
    X = exact.astype(np.float32).astype(np.float64)
    Y = np.asarray(values, np.float64).reshape(X.shape[0], -1)
    leaves = [(np.arange(X.shape[0]), [])]
    while len(leaves) < n_cohorts:
        candidates = [(_best_split(X, Y, rows), k) for k, (rows, _) in enumerate(leaves)]
        candidates = [(s, k) for s, k in candidates if s is not None and s[0] > 0]
        if not candidates:
            break
        (gain, j, t), k = max(candidates, key=lambda c: c[0][0])
        rows, path = leaves.pop(k)
        below = X[rows, j] < t
        leaves.append((rows[below], path + [(j, t)]))
        leaves.append((rows[~below], path + [(j, t)]))
    groups: dict[str, list[np.ndarray]] = {}
    for rows, path in leaves:
        labels = _path_names(exact, rows, path, feature_names)
        for name in np.unique(labels):
            groups.setdefault(str(name), []).append(rows[labels == name])
    return {name: np.sort(np.concatenate(groups[name])) for name in sorted(groups)}


class Cohorts:
    """Named groups of one :class:`~jaxshap.Explanation`, as ``shap.Cohorts``.

    Attribute access and calls apply to every cohort (``cohorts.abs.mean(0)``), as in shap;
    :meth:`to_shap` gives a ``shap.Cohorts`` for ``shap.plots.bar``.
    """

    def __init__(self, cohorts: dict[str, Any]):
        self.cohorts = dict(cohorts)

    def __getitem__(self, item: Any) -> "Cohorts":
        return Cohorts({name: e[item] for name, e in self.cohorts.items()})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "cohorts":
            raise AttributeError(name)
        parts = {k: getattr(e, name) for k, e in self.cohorts.items()}
        if all(callable(p) for p in parts.values()):
            return lambda *a, **kw: Cohorts({k: p(*a, **kw) for k, p in parts.items()})
        return Cohorts(parts)

    def __len__(self) -> int:
        return len(self.cohorts)

    def __repr__(self) -> str:
        return f"Cohorts({len(self.cohorts)}: {', '.join(repr(k) for k in self.cohorts)})"

    def to_shap(self):
        """A ``shap.Cohorts`` of the cohorts' ``to_shap()`` conversions."""
        import shap

        return shap.Cohorts(**{name: e.to_shap() for name, e in self.cohorts.items()})


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
