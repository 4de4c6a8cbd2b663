"""The scikit-learn readers: decision trees, forests, gradient boosting (classic and histogram),
and ``IsolationForest``, explained through the forest's mean path length ``E[h(x)]`` as a tree
ensemble.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._ensemble import Tree, TreeEnsemble, make_tree, one_hot_values, stack_trees
from ._hist_gradient_boosting import load_hist_gradient_boosting
from ._reader import TreeReader, require_fitted, root_module


_CLASSES = {
    "DecisionTreeRegressor", "DecisionTreeClassifier", "ExtraTreeRegressor", "ExtraTreeClassifier",
    "RandomForestRegressor", "RandomForestClassifier", "ExtraTreesRegressor", "ExtraTreesClassifier",
    "GradientBoostingRegressor", "GradientBoostingClassifier",
    "HistGradientBoostingRegressor", "HistGradientBoostingClassifier",
}


def sklearn_tree(tree, values: np.ndarray) -> Tree:
    """One fitted ``sklearn.tree._tree.Tree`` with the given node values ``[N, K]``."""
    n = tree.node_count
    missing_left = getattr(tree, "missing_go_to_left", None)
    default_left = np.zeros(n, dtype=bool) if missing_left is None else np.asarray(missing_left, dtype=bool)
    return make_tree(
        tree.feature,
        tree.threshold,
        tree.children_left,
        tree.children_right,
        default_left,
        values,
        tree.weighted_n_node_samples,
    )


def _regression_values(tree) -> np.ndarray:
    return np.asarray(tree.value, dtype=np.float64)[:, :, 0]  # [N, n_outputs]


def _class_values(tree) -> np.ndarray:
    v = np.asarray(tree.value, dtype=np.float64)
    if v.shape[1] != 1:
        raise TypeError("TreeExplainer does not support multi-output scikit-learn classifiers.")
    v = v[:, 0, :]
    total = v.sum(axis=1, keepdims=True)
    return np.where(total > 0, v / np.where(total > 0, total, 1.0), 0.0)  # class probabilities


def _is_classifier(model) -> bool:
    return hasattr(model, "classes_")


def load_sklearn(model) -> TreeEnsemble:
    """Read a fitted scikit-learn tree model, with the precision and output transform it predicts with.

    Classic trees (decision trees, forests, gradient boosting) compare float32 inputs with
    float64 thresholds; histogram gradient boosting compares float64 inputs.
    """
    e = _load(model)
    name = type(model).__name__
    precision = np.float64 if name.startswith("HistGradientBoosting") else np.float32
    transform = loss = None
    if name.startswith(("GradientBoosting", "HistGradientBoosting")):
        if _is_classifier(model):
            transform = "sigmoid" if e.n_outputs == 1 else "softmax"
            loss = "binary_crossentropy" if e.n_outputs == 1 else "multiclass_crossentropy"
        elif getattr(model, "loss", None) in ("squared_error", "ls"):
            transform, loss = "identity", "squared_error"
    elif _is_classifier(model):
        transform = "identity"  # trees and forests already output class probabilities
    elif getattr(model, "criterion", None) == "squared_error":
        transform, loss = "identity", "squared_error"
    return dataclasses.replace(e, precision=precision, output_transform=transform, loss=loss)


def _load(model) -> TreeEnsemble:
    """Read a fitted scikit-learn tree model.

    Decision trees and forests explain what ``predict`` (regressors) or ``predict_proba``
    (classifiers) returns; a forest is the mean of its trees. Gradient boosting explains the raw
    margin (``decision_function``): the init estimator's constant plus ``learning_rate`` times
    the trees. Histogram gradient boosting likewise (its leaf values already hold the
    learning rate; categorical splits too, see :mod:`._hist_gradient_boosting`).
    """
    name = type(model).__name__
    n_features = int(getattr(model, "n_features_in_", 0))
    if name in ("DecisionTreeRegressor", "ExtraTreeRegressor", "DecisionTreeClassifier", "ExtraTreeClassifier"):
        values = _class_values(model.tree_) if _is_classifier(model) else _regression_values(model.tree_)
        k = values.shape[1]
        return stack_trees([sklearn_tree(model.tree_, values)], np.zeros(k), n_features, name)
    if name in ("RandomForestRegressor", "RandomForestClassifier", "ExtraTreesRegressor", "ExtraTreesClassifier"):
        ests = model.estimators_
        get = _class_values if _is_classifier(model) else _regression_values
        trees = [sklearn_tree(e.tree_, get(e.tree_) / len(ests)) for e in ests]
        return stack_trees(trees, np.zeros(trees[0].value.shape[1]), n_features, name)
    if name in ("GradientBoostingRegressor", "GradientBoostingClassifier"):
        init = model.init_
        if init != "zero" and type(init).__name__ not in ("DummyRegressor", "DummyClassifier"):
            raise TypeError(
                f"TreeExplainer supports {name} with a constant init estimator only; got init={init!r}."
            )
        base = np.asarray(model._raw_predict_init(np.zeros((1, n_features), dtype=np.float32)), dtype=np.float64)[0]
        stages = model.estimators_
        k = stages.shape[1]
        trees = []
        for stage in stages:
            for j, est in enumerate(stage):
                v = np.asarray(est.tree_.value, dtype=np.float64)[:, 0, 0] * model.learning_rate
                trees.append(sklearn_tree(est.tree_, one_hot_values(v, j, k)))
        return stack_trees(trees, base, n_features, name)
    if name in ("HistGradientBoostingRegressor", "HistGradientBoostingClassifier"):
        return load_hist_gradient_boosting(model)
    raise TypeError(f"Unsupported scikit-learn model {name}.")


class SklearnReader(TreeReader):
    """scikit-learn's tree models (see ``formats``); the raw output is the ensemble's own walk,
    which routes exactly as scikit-learn does."""

    formats = (
        "scikit-learn: DecisionTree/ExtraTree Regressor/Classifier, RandomForest Regressor/Classifier, "
        "ExtraTrees Regressor/Classifier, GradientBoosting Regressor/Classifier, "
        "HistGradientBoosting Regressor/Classifier"
    )
    modules = ("sklearn",)

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "sklearn" and type(model).__name__ in _CLASSES

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model, hasattr(model, "n_features_in_"))
        return load_sklearn(model)


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
    modules = ("sklearn",)

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "sklearn" and type(model).__name__ == "IsolationForest"

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model, hasattr(model, "n_features_in_"))
        return load_isolation_forest(model)
