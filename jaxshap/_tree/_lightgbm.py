"""The LightGBM reader (``Booster``, ``LGBMRegressor``, ``LGBMClassifier``, ...).

The model is read from its text serialisation (``model_to_string``), whose per-tree node arrays
(thresholds printed with 17 significant digits, so exactly) parse into NumPy arrays without
visiting nodes one by one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._ensemble import MISSING_AS_ZERO, MISSING_CATEGORICAL, MISSING_NAN, MISSING_ZERO, TreeEnsemble, make_tree, one_hot_values, stack_trees
from ._reader import TreeReader, require_fitted, root_module

# LightGBM's decision_type bit field: bit 0 categorical, bit 1 default left, bits 2-3 missing type
_MISSING_CODES = np.asarray([MISSING_AS_ZERO, MISSING_ZERO, MISSING_NAN, MISSING_NAN], dtype=np.int8)


def _blocks(text: str) -> tuple[dict, list[dict]]:
    """The header's ``key=value`` lines and one dictionary per ``Tree=`` block."""
    header, trees, current = {}, [], None
    for line in text.split("\n"):
        if line.startswith("Tree="):
            current = {}
            trees.append(current)
            continue
        if line.startswith("end of trees"):
            break
        if not line:
            continue
        key, _, value = line.partition("=")
        (header if current is None else current)[key] = value if _ else True
    return header, trees


def _array(block: dict, key: str, dtype, default=None) -> np.ndarray:
    if key not in block:
        return np.asarray([] if default is None else default, dtype=dtype)
    return np.asarray(block[key].split(), dtype=np.float64 if dtype is np.float64 else None).astype(dtype)


def _tree(block: dict, k: int, n_outputs: int, scale: float):
    """One tree in this package's node layout: internal nodes first, then the leaves."""
    n_leaves = int(block["num_leaves"])
    leaf_value = _array(block, "leaf_value", np.float64) * scale
    leaf_count = _array(block, "leaf_count", np.float64, [0.0] * n_leaves)
    if block.get("is_linear", "0") not in ("0", False):
        raise TypeError("TreeExplainer does not support LightGBM linear trees (linear_tree=True).")
    if n_leaves == 1:
        return make_tree([-1], [0.0], [-1], [-1], [True], one_hot_values(leaf_value[:1], k, n_outputs), leaf_count[:1])
    n_inner = n_leaves - 1
    decision = _array(block, "decision_type", np.int64)
    is_cat = (decision & 1) != 0
    threshold = _array(block, "threshold", np.float64)
    cat_left = cat_invalid_left = None
    if is_cat.any():
        # the categories whose bits are set go left; NaN, negative and other codes go right
        bounds = _array(block, "cat_boundaries", np.int64)
        words = _array(block, "cat_threshold", np.int64).astype(np.uint32)
        n_words = int(np.diff(bounds).max())
        cat_left = np.zeros((n_inner + n_leaves, n_words), np.uint32)
        for node in np.flatnonzero(is_cat):  # one row of words per categorical split
            idx = int(threshold[node])
            seg = words[bounds[idx] : bounds[idx + 1]]
            cat_left[node, : seg.size] = seg
        cat_invalid_left = np.zeros(n_inner + n_leaves, bool)
        threshold = np.where(is_cat, 0.0, threshold)

    def child(c):
        c = _array(block, c, np.int64)
        return np.where(c >= 0, c, n_inner + ~c)

    pad = lambda a, fill: np.concatenate([a, np.full(n_leaves, fill, a.dtype)])  # noqa: E731
    value = np.concatenate([np.zeros(n_inner), leaf_value])
    cover = np.concatenate([_array(block, "internal_count", np.float64), leaf_count])
    missing = np.where(is_cat, MISSING_CATEGORICAL, _MISSING_CODES[(decision >> 2) & 3]).astype(np.int8)
    return make_tree(
        pad(_array(block, "split_feature", np.int64), -1),
        pad(threshold, 0.0),
        pad(child("left_child"), -1),
        pad(child("right_child"), -1),
        pad(((decision & 2) != 0) & ~is_cat, True),
        one_hot_values(value, k, n_outputs),
        cover,
        pad(missing, MISSING_NAN),
        cat_left,
        cat_invalid_left,
    )


def _output_transform(objective: str) -> tuple[str | None, str | None, float]:
    """(output transform, loss, sigmoid scale) from the objective line, e.g. ``binary sigmoid:1``."""
    parts = objective.split()
    name = parts[0] if parts else ""
    sigmoid = 1.0
    for p in parts[1:]:
        if p.startswith("sigmoid:"):
            sigmoid = float(p.split(":")[1])
    if name in ("regression", "regression_l2", "l2", "mean_squared_error", "mse"):
        return "identity", "squared_error", 1.0
    if name in ("binary", "cross_entropy", "xentropy"):
        return ("sigmoid", "binary_crossentropy", sigmoid) if sigmoid == 1.0 else (None, None, sigmoid)
    if name in ("multiclass", "softmax"):
        return "softmax", "multiclass_crossentropy", 1.0
    return None, None, 1.0


def load_lightgbm(model) -> TreeEnsemble:
    """Read a LightGBM model.

    LightGBM folds the initial score into the first tree and stores leaf values already
    multiplied by the learning rate, so the raw score is the plain sum of the trees (divided by
    the number of iterations for random-forest mode, ``average_output``). Thresholds are
    compared in float64, as LightGBM's ``predict`` does. ``predict`` uses the best iteration
    after early stopping, so that is what is explained by default. Categorical splits send the
    codes in their bit set left (NaN and other codes right). Linear trees are not supported.
    """
    booster = _booster(model)
    header, blocks = _blocks(booster.model_to_string(num_iteration=-1))
    n_outputs = int(header.get("num_tree_per_iteration", 1))
    n_features = int(header["max_feature_idx"]) + 1
    scale = 1.0
    if "average_output" in header:
        scale = 1.0 / max(len(blocks) // n_outputs, 1)
    trees = [_tree(b, i % n_outputs, n_outputs, scale) for i, b in enumerate(blocks)]
    best = int(getattr(booster, "best_iteration", -1) or -1)
    output_transform, loss, _ = _output_transform(str(header.get("objective", "")))
    return stack_trees(
        trees, np.zeros(n_outputs), n_features, "LightGBM", precision=np.float64,
        tree_round=np.arange(len(trees)) // n_outputs, default_rounds=best if best > 0 else None,
        output_transform=output_transform, loss=loss,
    )


def _booster(model):
    return model.booster_ if hasattr(model, "booster_") else model


class LightGBMReader(TreeReader):
    """LightGBM's ``Booster`` and its scikit-learn wrappers; the raw output comes from
    ``predict(raw_score=True)``."""

    formats = "LightGBM: Booster, LGBMRegressor, LGBMClassifier"
    modules = ("lightgbm",)

    def recognises(self, model: Any) -> bool:
        cls = type(model)
        return root_module(model) == "lightgbm" and (cls.__name__ == "Booster" or hasattr(cls, "booster_"))

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model)
        return load_lightgbm(model)

    def raw_output(self, model: Any, ensemble: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        try:
            out = _booster(model).predict(X, raw_score=True, num_iteration=ensemble.n_rounds)
            return np.asarray(out, np.float64).reshape(X.shape[0], -1)
        except (TypeError, ValueError):  # the library refused the rows as given (or there are none)
            return ensemble.predict(X)
