"""Import scikit-learn tree models (decision trees, forests, gradient boosting)."""

from __future__ import annotations

import numpy as np

from ._ensemble import Tree, TreeEnsemble, make_tree, one_hot_values, stack_trees


def _round_down_threshold(t: np.ndarray) -> np.ndarray:
    """scikit-learn compares float32 inputs with float64 thresholds; rounding the threshold
    down to float32 keeps ``x <= t`` identical for every float32 ``x``."""
    t = np.asarray(t, dtype=np.float64)
    t32 = t.astype(np.float32)
    t32 = np.where(t32.astype(np.float64) > t, np.nextafter(t32, np.float32(-np.inf)), t32)
    return t32.astype(np.float64)


def _sk_tree(tree, values: np.ndarray) -> Tree:
    """One fitted ``sklearn.tree._tree.Tree`` with the given node values ``[N, K]``."""
    n = tree.node_count
    missing_left = getattr(tree, "missing_go_to_left", None)
    default_left = np.zeros(n, dtype=bool) if missing_left is None else np.asarray(missing_left, dtype=bool)
    return make_tree(
        tree.feature,
        _round_down_threshold(tree.threshold),
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
    """Read a fitted scikit-learn tree model.

    Decision trees and forests explain what ``predict`` (regressors) or ``predict_proba``
    (classifiers) returns; a forest is the mean of its trees. Gradient boosting explains the raw
    margin (``decision_function``): the init estimator's constant plus ``learning_rate`` times
    the trees. Histogram gradient boosting likewise (its leaf values already hold the
    learning rate).
    """
    name = type(model).__name__
    n_features = int(getattr(model, "n_features_in_", 0))
    if name in ("DecisionTreeRegressor", "ExtraTreeRegressor", "DecisionTreeClassifier", "ExtraTreeClassifier"):
        values = _class_values(model.tree_) if _is_classifier(model) else _regression_values(model.tree_)
        k = values.shape[1]
        return stack_trees([_sk_tree(model.tree_, values)], np.zeros(k), n_features, name)
    if name in ("RandomForestRegressor", "RandomForestClassifier", "ExtraTreesRegressor", "ExtraTreesClassifier"):
        ests = model.estimators_
        get = _class_values if _is_classifier(model) else _regression_values
        trees = [_sk_tree(e.tree_, get(e.tree_) / len(ests)) for e in ests]
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
                trees.append(_sk_tree(est.tree_, one_hot_values(v, j, k)))
        return stack_trees(trees, base, n_features, name)
    if name in ("HistGradientBoostingRegressor", "HistGradientBoostingClassifier"):
        cat = getattr(model, "is_categorical_", None)
        if cat is not None and np.any(cat):
            raise TypeError("TreeExplainer does not support categorical features in HistGradientBoosting models.")
        base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
        k = base.shape[0]
        trees = []
        for predictors in model._predictors:
            for j, pred in enumerate(predictors):
                nd = pred.nodes
                leaf = nd["is_leaf"].astype(bool)
                left = np.where(leaf, -1, nd["left"]).astype(np.int64)
                right = np.where(leaf, -1, nd["right"]).astype(np.int64)
                v = np.where(leaf, nd["value"], 0.0)
                trees.append(
                    make_tree(
                        nd["feature_idx"], _round_down_threshold(nd["num_threshold"]), left, right,
                        nd["missing_go_to_left"].astype(bool), one_hot_values(v, j, k), nd["count"],
                    )
                )
        return stack_trees(trees, base, n_features, name)
    raise TypeError(f"Unsupported scikit-learn model {name}.")
