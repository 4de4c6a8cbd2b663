"""Import XGBoost models (``Booster``, ``XGBRegressor``, ``XGBClassifier``, ...)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from ._ensemble import MISSING_CATEGORICAL, MISSING_NAN, TreeEnsemble, make_tree, one_hot_values, stack_trees


def _category_sets(tj: dict, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Bit sets of the categories that go left at each node: XGBoost sends the categories
    listed for a node right and every other code (unlisted, negative or past the list) left."""
    nodes = np.asarray(tj["categories_nodes"], dtype=np.int64)
    sizes = np.asarray(tj["categories_sizes"], dtype=np.int64)
    cats = np.asarray(tj["categories"], dtype=np.int64)
    n_words = max(1, (int(cats.max()) + 1 + 31) // 32) if cats.size else 1
    right = np.zeros((n_nodes, n_words), np.uint32)
    owner = np.repeat(nodes, sizes)
    np.bitwise_or.at(right, (owner, cats // 32), (np.uint32(1) << (cats % 32).astype(np.uint32)))
    return ~right, np.ones(n_nodes, bool)


def _booster(model):
    return model.get_booster() if hasattr(model, "get_booster") else model


def _strict_to_le(threshold: np.ndarray) -> np.ndarray:
    """XGBoost sends ``x < t`` left (float32 compare); ``x <= nextafter(t, -inf)`` is the same."""
    t = np.asarray(threshold, dtype=np.float32)
    return np.nextafter(t, np.float32(-np.inf)).astype(np.float64)


def load_xgboost(model) -> TreeEnsemble:
    """Read an XGBoost tree model from its JSON serialisation.

    Leaf values are stored already multiplied by the learning rate. The constant term
    (``base_score`` mapped to the margin by the objective's link) is read back from the booster
    itself: it is the margin the booster predicts for one probe row minus the trees' sum there,
    which is exact for every objective and version.
    """
    import xgboost

    booster = _booster(model)
    raw = booster.save_raw(raw_format="json")
    learner = json.loads(bytes(raw).decode("utf-8"))["learner"]
    gb = learner["gradient_booster"]
    name = gb.get("name")
    if name == "gbtree":
        tree_model = gb["model"]
        weights = np.ones(len(tree_model["trees"]))
    elif name == "dart":
        tree_model = gb["gbtree"]["model"]
        weights = np.asarray(gb.get("weight_drop", [1.0] * len(tree_model["trees"])), dtype=np.float64)
    else:
        raise TypeError(f"TreeExplainer supports XGBoost tree boosters (gbtree, dart); got booster {name!r}.")
    trees_json, info = tree_model["trees"], tree_model["tree_info"]
    indptr = np.asarray(tree_model.get("iteration_indptr", []), dtype=np.int64)
    if indptr.size >= 2 and indptr[-1] == len(trees_json):
        tree_round = np.searchsorted(indptr, np.arange(len(trees_json)), side="right") - 1
    else:  # older serialisations: equal numbers of trees per round
        per_round = max(1, len(trees_json) // max(1, booster.num_boosted_rounds()))
        tree_round = np.arange(len(trees_json)) // per_round
    params = learner["learner_model_param"]
    n_features = int(params["num_feature"])
    n_outputs = max(int(params.get("num_class", "0")), int(params.get("num_target", "1")), 1)
    trees = []
    for tj, k, w in zip(trees_json, info, weights):
        if int(tj["tree_param"].get("size_leaf_vector", "1")) > 1:
            raise TypeError("TreeExplainer does not support XGBoost vector-leaf trees (multi_strategy='multi_output_tree').")
        left = np.asarray(tj["left_children"])
        split_type = np.asarray(tj["split_type"], dtype=np.int64)
        missing = cat_left = cat_invalid_left = None
        if np.any(split_type != 0):
            missing = np.where(split_type != 0, MISSING_CATEGORICAL, MISSING_NAN).astype(np.int8)
            cat_left, cat_invalid_left = _category_sets(tj, left.size)
        cond = np.asarray(tj["split_conditions"], dtype=np.float32)
        leaf = left < 0
        value = np.where(leaf, cond.astype(np.float64) * w, 0.0)
        trees.append(
            make_tree(
                tj["split_indices"],
                _strict_to_le(cond),
                left,
                tj["right_children"],
                np.asarray(tj["default_left"], dtype=bool),
                one_hot_values(value, int(k), n_outputs),
                tj["sum_hessian"],
                missing,
                cat_left,
                cat_invalid_left,
            )
        )
    ensemble = stack_trees(trees, np.zeros(n_outputs), n_features, "XGBoost")
    probe = np.full((1, n_features), np.nan, dtype=np.float32)
    dmatrix = xgboost.DMatrix(probe, feature_names=booster.feature_names, feature_types=booster.feature_types,
                              enable_categorical=True)
    margin = np.asarray(booster.predict(dmatrix, output_margin=True), dtype=np.float64)
    base = margin.reshape(-1) - ensemble.predict(probe).reshape(-1)
    # The scikit-learn wrappers predict with the best iteration after early stopping; a Booster
    # predicts with all its trees.
    default_rounds = None
    if booster is not model:
        try:
            default_rounds = int(model.best_iteration) + 1
        except (AttributeError, TypeError, ValueError):
            default_rounds = None
    missing = getattr(model, "missing", np.nan) if booster is not model else np.nan
    missing = np.nan if missing is None else float(missing)
    objective = learner.get("objective", {}).get("name", "")
    link, loss = _OBJECTIVES.get(objective, (None, None))
    return dataclasses.replace(
        stack_trees(trees, base, n_features, "XGBoost"),
        precision=np.float32, missing_value=missing, sparse_missing=True, tree_round=tree_round.astype(np.int64),
        default_rounds=default_rounds, link=link, loss=loss,
    )


# objective -> (link from the margin to predict's output, training loss)
_OBJECTIVES = {
    "reg:squarederror": ("identity", "squared_error"),
    "reg:linear": ("identity", "squared_error"),
    "reg:logistic": ("logistic", "binary_crossentropy"),
    "binary:logistic": ("logistic", "binary_crossentropy"),
    "binary:logitraw": ("logistic", "binary_crossentropy"),
    "multi:softprob": ("softmax", "multiclass_crossentropy"),
    "multi:softmax": ("softmax", "multiclass_crossentropy"),
}
