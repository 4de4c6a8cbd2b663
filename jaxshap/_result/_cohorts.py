"""Cohorts of explained rows: groups with similar SHAP values, found by a small regression tree.

``Explanation.cohorts(n)`` grows a CART regression tree (Breiman et al., 1984) best-first to
``n`` leaves: each split of a leaf on feature ``j`` at threshold ``t`` (a midpoint between two
adjacent distinct values) minimises the summed squared error of the SHAP values within the two
children, and the leaf whose best split lowers that error the most is split next (as
scikit-learn's ``DecisionTreeRegressor(max_leaf_nodes=n)``, which shap uses). Each cohort is
named by its path, ``"bmi < 0.03 & age >= 0.1"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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
