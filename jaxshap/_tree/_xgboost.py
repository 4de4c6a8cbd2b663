"""The XGBoost reader (``Booster``, ``XGBRegressor``, ``XGBClassifier``, ...)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ._ensemble import MISSING_CATEGORICAL, MISSING_NAN, TreeEnsemble, make_tree, one_hot_values, stack_trees
from ._reader import TreeReader, require_fitted, root_module
from ._rows import sparse_to_numpy


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


def _tree_model(learner: dict, booster) -> tuple[list, list, np.ndarray, np.ndarray]:
    """``(trees' JSON, output of each tree, weight of each tree, round of each tree)``."""
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
    trees_json = tree_model["trees"]
    indptr = np.asarray(tree_model.get("iteration_indptr", []), dtype=np.int64)
    if indptr.size >= 2 and indptr[-1] == len(trees_json):
        tree_round = np.searchsorted(indptr, np.arange(len(trees_json)), side="right") - 1
    else:  # serialisations without iteration_indptr: equal numbers of trees per round
        per_round = max(1, len(trees_json) // max(1, booster.num_boosted_rounds()))
        tree_round = np.arange(len(trees_json)) // per_round
    return trees_json, tree_model["tree_info"], weights, tree_round.astype(np.int64)


def _read_tree(tj: dict, k: int, weight: float, n_outputs: int):
    """One tree's JSON as a :class:`Tree` writing to output ``k``, leaf values times ``weight``."""
    if int(tj["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise TypeError("TreeExplainer does not support XGBoost vector-leaf trees (multi_strategy='multi_output_tree').")
    left = np.asarray(tj["left_children"])
    split_type = np.asarray(tj["split_type"], dtype=np.int64)
    missing = cat_left = cat_invalid_left = None
    if np.any(split_type != 0):
        missing = np.where(split_type != 0, MISSING_CATEGORICAL, MISSING_NAN).astype(np.int8)
        cat_left, cat_invalid_left = _category_sets(tj, left.size)
    cond = np.asarray(tj["split_conditions"], dtype=np.float32)
    value = np.where(left < 0, cond.astype(np.float64) * weight, 0.0)
    return make_tree(tj["split_indices"], _strict_to_le(cond), left, tj["right_children"],
                     np.asarray(tj["default_left"], dtype=bool), one_hot_values(value, int(k), n_outputs),
                     tj["sum_hessian"], missing, cat_left, cat_invalid_left)


def _base_margin(booster, trees: list, n_features: int, n_outputs: int) -> np.ndarray:
    """``[K]`` the constant term: the booster's margin on an all-missing probe row minus the trees' sum there."""
    import xgboost

    probe = np.full((1, n_features), np.nan, dtype=np.float32)
    dmatrix = xgboost.DMatrix(probe, feature_names=booster.feature_names, feature_types=booster.feature_types,
                              enable_categorical=True)
    margin = np.asarray(booster.predict(dmatrix, output_margin=True), dtype=np.float64)
    trees_only = stack_trees(trees, np.zeros(n_outputs), n_features, "XGBoost")
    return margin.reshape(-1) - trees_only.predict(probe).reshape(-1)


def load_xgboost(model) -> TreeEnsemble:
    """Read an XGBoost tree model from its JSON serialisation.

    Leaf values are stored already multiplied by the learning rate. The constant term
    (``base_score`` mapped to the margin by the objective's output transform) is read back from
    the booster itself: it is the margin the booster predicts for one probe row minus the trees'
    sum there, which is exact for every objective and version. The scikit-learn wrappers
    predict with the best iteration after early stopping (``default_rounds``); a ``Booster``
    predicts with all its trees.
    """
    booster = _booster(model)
    learner = json.loads(bytes(booster.save_raw(raw_format="json")).decode("utf-8"))["learner"]
    trees_json, info, weights, tree_round = _tree_model(learner, booster)
    params = learner["learner_model_param"]
    n_features = int(params["num_feature"])
    n_outputs = max(int(params.get("num_class", "0")), int(params.get("num_target", "1")), 1)
    trees = [_read_tree(tj, k, w, n_outputs) for tj, k, w in zip(trees_json, info, weights)]
    base = _base_margin(booster, trees, n_features, n_outputs)
    default_rounds = None
    if booster is not model:
        try:
            default_rounds = int(model.best_iteration) + 1
        except (AttributeError, TypeError, ValueError):
            default_rounds = None
    missing = getattr(model, "missing", np.nan) if booster is not model else np.nan
    missing = np.nan if missing is None else float(missing)
    output_transform, loss = _OBJECTIVES.get(learner.get("objective", {}).get("name", ""), (None, None))
    return stack_trees(
        trees, base, n_features, "XGBoost", precision=np.float32, missing_value=missing, sparse_missing=True,
        tree_round=tree_round, default_rounds=default_rounds, output_transform=output_transform, loss=loss,
    )


class XGBoostReader(TreeReader):
    """XGBoost's ``Booster`` and its scikit-learn wrappers; reads ``DMatrix`` rows; the raw
    output comes from ``inplace_predict`` (margin)."""

    formats = "XGBoost: Booster, XGBRegressor, XGBClassifier (and other xgboost.sklearn tree models)"
    modules = ("xgboost",)

    def recognises(self, model: Any) -> bool:
        cls = type(model)
        return root_module(model) == "xgboost" and (cls.__name__ == "Booster" or hasattr(cls, "get_booster"))

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model)
        return load_xgboost(model)

    def raw_output(self, model: Any, ensemble: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        try:
            out = _booster(model).inplace_predict(
                X.astype(np.float32), iteration_range=(0, ensemble.n_rounds), predict_type="margin",
                missing=np.nan, validate_features=False,
            )
            return np.asarray(out, np.float64).reshape(X.shape[0], -1)
        except (TypeError, ValueError):  # the library refused the rows as given (or there are none)
            return ensemble.predict(X)

    def input_rows(self, x: Any) -> tuple[np.ndarray, list[str] | None] | None:
        """An ``xgboost.DMatrix`` (or ``QuantileDMatrix``): its stored entries, absent ones missing."""
        if root_module(x) != "xgboost" or type(x).__name__ not in ("DMatrix", "QuantileDMatrix"):
            return None
        names = None if x.feature_names is None else list(x.feature_names)
        return sparse_to_numpy(x.get_data(), np.nan), names


# objective -> (output transform from the margin to predict's output, training loss)
_OBJECTIVES = {
    "reg:squarederror": ("identity", "squared_error"),
    "reg:linear": ("identity", "squared_error"),
    "reg:logistic": ("sigmoid", "binary_crossentropy"),
    "binary:logistic": ("sigmoid", "binary_crossentropy"),
    "binary:logitraw": ("sigmoid", "binary_crossentropy"),
    "multi:softprob": ("softmax", "multiclass_crossentropy"),
    "multi:softmax": ("softmax", "multiclass_crossentropy"),
}
