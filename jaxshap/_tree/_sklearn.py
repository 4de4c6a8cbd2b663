"""The scikit-learn reader: decision trees, forests, gradient boosting (classic and histogram)."""

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

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "sklearn" and type(model).__name__ in _CLASSES

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model, hasattr(model, "n_features_in_"))
        return load_sklearn(model)
