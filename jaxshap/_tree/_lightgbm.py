"""Import LightGBM models (``Booster``, ``LGBMRegressor``, ``LGBMClassifier``, ...)."""

from __future__ import annotations

import numpy as np

from ._ensemble import MISSING_AS_ZERO, MISSING_NAN, MISSING_ZERO, TreeEnsemble, make_tree, one_hot_values, stack_trees

_MISSING = {"NaN": MISSING_NAN, "None": MISSING_AS_ZERO, "Zero": MISSING_ZERO}


def _flatten(root: dict) -> dict:
    """Flatten LightGBM's nested node dictionaries into node arrays (preorder)."""
    cols = {k: [] for k in ("feature", "threshold", "left", "right", "default_left", "missing", "value", "cover")}

    def visit(node) -> int:
        i = len(cols["feature"])
        for c in cols.values():
            c.append(None)
        if "leaf_value" in node:
            if "leaf_const" in node or "leaf_coeff" in node:
                raise TypeError("TreeExplainer does not support LightGBM linear trees (linear_tree=True).")
            cols["feature"][i], cols["threshold"][i], cols["left"][i], cols["right"][i] = -1, 0.0, -1, -1
            cols["default_left"][i], cols["missing"][i] = True, MISSING_NAN
            cols["value"][i], cols["cover"][i] = float(node["leaf_value"]), float(node.get("leaf_count", 0))
            return i
        if node.get("decision_type", "<=") != "<=":
            raise TypeError("TreeExplainer does not support LightGBM categorical splits; encode those features numerically.")
        cols["feature"][i] = int(node["split_feature"])
        cols["threshold"][i] = float(node["threshold"])
        cols["default_left"][i] = bool(node["default_left"])
        cols["missing"][i] = _MISSING[node.get("missing_type", "NaN")]
        cols["value"][i], cols["cover"][i] = 0.0, float(node["internal_count"])
        cols["left"][i] = visit(node["left_child"])
        cols["right"][i] = visit(node["right_child"])
        return i

    visit(root)
    return cols


def load_lightgbm(model) -> TreeEnsemble:
    """Read a LightGBM model from ``dump_model()``.

    LightGBM folds the initial score into the first tree and stores leaf values already
    multiplied by the learning rate, so the raw score is the plain sum of the trees (divided by
    the number of iterations for random-forest mode, ``average_output``). Linear trees and
    categorical splits are not supported.
    """
    booster = model.booster_ if hasattr(model, "booster_") else model
    dump = booster.dump_model()
    n_outputs = int(dump.get("num_tree_per_iteration", 1))
    n_features = int(dump["max_feature_idx"]) + 1
    infos = dump["tree_info"]
    scale = 1.0
    if dump.get("average_output", False):
        scale = 1.0 / max(len(infos) // n_outputs, 1)
    trees = []
    for i, info in enumerate(infos):
        c = _flatten(info["tree_structure"])
        value = np.asarray(c["value"], dtype=np.float64) * scale
        trees.append(
            make_tree(
                c["feature"], c["threshold"], c["left"], c["right"], c["default_left"],
                one_hot_values(value, i % n_outputs, n_outputs), c["cover"], c["missing"],
            )
        )
    return stack_trees(trees, np.zeros(n_outputs), n_features, "LightGBM")
