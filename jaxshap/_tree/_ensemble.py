"""The one array form every imported tree ensemble takes.

A model is a sum of ``T`` binary trees plus a constant: ``f(x) = base + sum_t tree_t(x)``, with
outputs of width ``K`` (one per class for multi-class models). Each tree is stored in flat
node arrays padded to a common node count ``N``, so the trees stack into ``[T, N]`` arrays.

Split semantics are unified when importing: an internal node sends ``x`` to its left child
when ``x <= threshold`` (XGBoost's strict ``x < t`` is rewritten with the next smaller float32
threshold, which routes every float32 input identically). Missing values follow
``missing``:

* ``MISSING_NAN`` (0): a NaN goes to the default child (XGBoost, scikit-learn, LightGBM's
  ``NaN`` missing type);
* ``MISSING_AS_ZERO`` (1): a NaN is read as ``0.0`` and compared (LightGBM's ``None`` type);
* ``MISSING_ZERO`` (2): a NaN or a zero (``|x| <= 1e-35``) goes to the default child
  (LightGBM's ``Zero`` type).
"""

from __future__ import annotations

import dataclasses

import numpy as np

MISSING_NAN, MISSING_AS_ZERO, MISSING_ZERO = 0, 1, 2
ZERO_THRESHOLD = 1e-35  # LightGBM's kZeroThreshold


@dataclasses.dataclass(frozen=True)
class TreeEnsemble:
    """A tree ensemble as stacked NumPy arrays (host side, float64 thresholds and values).

    Attributes:
      feature: ``[T, N]`` int32 split feature, ``-1`` at leaves (and at padding).
      threshold: ``[T, N]`` float64; ``x <= threshold`` goes left.
      left, right: ``[T, N]`` int32 child indices, ``-1`` at leaves.
      default_left: ``[T, N]`` bool, where a missing value goes.
      missing: ``[T, N]`` int8 missing-value rule (``MISSING_*``).
      value: ``[T, N, K]`` float64 node values; only leaves' values are used. Scaled so that
        ``base + sum_t value[t, leaf_t(x)]`` is the model's raw output (margin).
      cover: ``[T, N]`` float64 training cover (hessian sum or sample count) of each node.
      base: ``[K]`` float64 constant added to the trees' sum.
      n_features: ``M``.
      source: a short description of the imported model.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    value: np.ndarray
    cover: np.ndarray
    base: np.ndarray
    n_features: int
    source: str = ""

    @property
    def n_trees(self) -> int:
        return self.feature.shape[0]

    @property
    def n_outputs(self) -> int:
        return self.value.shape[-1]

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Raw output ``[n, K]`` by walking every tree (a NumPy reference, for tests)."""
        X = np.asarray(X, dtype=np.float64)
        out = np.tile(self.base, (X.shape[0], 1))
        rows = np.arange(X.shape[0])
        for t in range(self.n_trees):
            node = np.zeros(X.shape[0], dtype=np.int64)
            for _ in range(self.feature.shape[1]):
                f = self.feature[t, node]
                inner = f >= 0
                if not inner.any():
                    break
                x = X[rows, np.maximum(f, 0)]
                left = go_left(x, self.threshold[t, node], self.default_left[t, node], self.missing[t, node])
                nxt = np.where(left, self.left[t, node], self.right[t, node])
                node = np.where(inner, nxt, node)
            out += self.value[t, node]
        return out


def go_left(x, threshold, default_left, missing):
    """Whether values ``x`` go to the left child of nodes with these split parameters (NumPy)."""
    nan = np.isnan(x)
    xv = np.where(nan, 0.0, x)
    is_missing = np.where(missing == MISSING_NAN, nan, (missing == MISSING_ZERO) & (np.abs(xv) <= ZERO_THRESHOLD))
    return np.where(is_missing, default_left, xv <= threshold)


@dataclasses.dataclass
class Tree:
    """One tree in flat node arrays, as a loader builds it (before padding and stacking)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    missing: np.ndarray
    value: np.ndarray  # [N, K]
    cover: np.ndarray


def make_tree(feature, threshold, left, right, default_left, value, cover, missing=None) -> Tree:
    """Build a :class:`Tree`, normalising dtypes and marking leaves with ``feature = -1``."""
    left = np.asarray(left, dtype=np.int32)
    right = np.asarray(right, dtype=np.int32)
    leaf = left < 0
    feature = np.where(leaf, -1, np.asarray(feature)).astype(np.int32)
    n = feature.shape[0]
    value = np.asarray(value, dtype=np.float64).reshape(n, -1)
    if missing is None:
        missing = np.zeros(n, dtype=np.int8)
    return Tree(
        feature,
        np.where(leaf, 0.0, np.asarray(threshold, dtype=np.float64)),
        np.where(leaf, -1, left).astype(np.int32),
        np.where(leaf, -1, right).astype(np.int32),
        np.asarray(default_left, dtype=bool),
        np.asarray(missing, dtype=np.int8),
        value,
        np.asarray(cover, dtype=np.float64),
    )


def stack_trees(trees: list[Tree], base, n_features: int, source: str) -> TreeEnsemble:
    """Pad trees to a common node count (padding nodes are unreachable leaves) and stack them."""
    if not trees:
        raise ValueError(f"The {source} model has no trees; fit it before explaining it.")
    n = max(t.feature.shape[0] for t in trees)
    k = max(t.value.shape[1] for t in trees)

    def pad(a, fill):
        width = [(0, n - a.shape[0])] + [(0, 0)] * (a.ndim - 1)
        return np.pad(a, width, constant_values=fill)

    for t in trees:
        if t.value.shape[1] != k:
            raise ValueError("Every tree must have the same number of outputs.")
    base = np.broadcast_to(np.asarray(base, dtype=np.float64).reshape(-1), (k,)).copy()
    return TreeEnsemble(
        feature=np.stack([pad(t.feature, -1) for t in trees]),
        threshold=np.stack([pad(t.threshold, 0.0) for t in trees]),
        left=np.stack([pad(t.left, -1) for t in trees]),
        right=np.stack([pad(t.right, -1) for t in trees]),
        default_left=np.stack([pad(t.default_left, True) for t in trees]),
        missing=np.stack([pad(t.missing, 0) for t in trees]).astype(np.int8),
        value=np.stack([pad(t.value, 0.0) for t in trees]),
        cover=np.stack([pad(t.cover, 0.0) for t in trees]),
        base=base,
        n_features=int(n_features),
        source=source,
    )


def one_hot_values(leaf_values: np.ndarray, k: int, n_outputs: int) -> np.ndarray:
    """Place a tree's scalar node values ``[N]`` in output column ``k`` of ``[N, n_outputs]``."""
    out = np.zeros((leaf_values.shape[0], n_outputs), dtype=np.float64)
    out[:, k] = leaf_values
    return out
