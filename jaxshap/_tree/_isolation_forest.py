"""The scikit-learn ``IsolationForest`` reader: the forest's mean path length as a tree ensemble."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._ensemble import TreeEnsemble, stack_trees
from ._reader import TreeReader, require_fitted, root_module
from ._sklearn import sklearn_tree


def _average_path_length(n: np.ndarray) -> np.ndarray:
    """``c(n)``: the mean path length of an unsuccessful search in a binary search tree of ``n``
    points (Liu et al. 2008, "Isolation forest"): ``2 (ln(n-1) + gamma) - 2 (n-1)/n``, with
    ``c(1) = 0`` and ``c(2) = 1``."""
    n = np.asarray(n, dtype=np.float64)
    safe = np.maximum(n, 3.0)
    c = 2.0 * (np.log(safe - 1.0) + np.euler_gamma) - 2.0 * (safe - 1.0) / safe
    return np.where(n <= 1, 0.0, np.where(n == 2, 1.0, c))


def _node_depths(tree) -> np.ndarray:
    """Depth of every node (root 0), level by level."""
    depth = np.zeros(tree.node_count, dtype=np.int64)
    left, right = tree.children_left, tree.children_right
    frontier = np.asarray([0])
    d = 0
    while frontier.size:
        depth[frontier] = d
        inner = frontier[left[frontier] >= 0]
        frontier = np.concatenate([left[inner], right[inner]])
        d += 1
    return depth


def load_isolation_forest(model) -> TreeEnsemble:
    """An isolation forest explains its mean path length ``E[h(x)]`` over the trees, the
    quantity its anomaly score ``score_samples = -2 ** (-E[h(x)] / c(max_samples))`` is a
    monotone function of (as shap does): a leaf at depth ``d`` holding ``n`` training points
    has path length ``d + c(n)``. Each tree's features are mapped back through
    ``estimators_features_``."""
    n_features = int(model.n_features_in_)
    trees = []
    n_trees = len(model.estimators_)
    for est, feats in zip(model.estimators_, model.estimators_features_):
        tr = est.tree_
        h = _node_depths(tr) + _average_path_length(tr.n_node_samples)
        leaf = tr.children_left < 0
        values = np.where(leaf, h, 0.0)[:, None] / n_trees
        t = sklearn_tree(tr, values)
        t.feature = np.where(t.feature >= 0, np.asarray(feats)[np.maximum(t.feature, 0)], -1).astype(np.int32)
        trees.append(t)
    return stack_trees(trees, np.zeros(1), n_features, "IsolationForest", precision=np.float32)


class IsolationForestReader(TreeReader):
    """scikit-learn's ``IsolationForest``, explained through its mean path length ``E[h(x)]``."""

    formats = "scikit-learn: IsolationForest"

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "sklearn" and type(model).__name__ == "IsolationForest"

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model, hasattr(model, "n_features_in_"))
        return load_isolation_forest(model)
