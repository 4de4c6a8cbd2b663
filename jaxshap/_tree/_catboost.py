"""The CatBoost reader (``CatBoost``, ``CatBoostRegressor``, ``CatBoostClassifier``, ``CatBoostRanker``).

The model is read from its JSON export (``save_model(format="json")``). CatBoost's default trees
are oblivious (symmetric): every level of a tree of depth ``d`` splits on one condition, and leaf
``sum_i bit_i 2**i`` holds the value, where ``bit_i`` is whether the row meets the tree's
``i``-th condition (``x > border``, or ``category == value``). Each such tree is expanded into an
ordinary binary tree whose root splits on the last condition (as CatBoost's own TreeSHAP orders
the levels), with the covers summed from the leaf weights. Non-symmetric trees
(``grow_policy="Depthwise"`` or ``"Lossguide"``) are read node by node.

Inputs are rounded to float32, as CatBoost compares them. A NaN goes where the model's
``nan_mode`` sends it: with ``"Min"`` (the default) it meets no ``x > border`` condition, with
``"Max"`` every one. (Trained on missing values, CatBoost adds a border at the most negative
(positive) float32, so a NaN is routed as ``-inf`` (``+inf``), apart from every finite value.)

Categorical features: a feature one-hot encoded by CatBoost (no more categories than
``one_hot_max_size``) is read as a categorical split. CatBoost reads an integer category as its
decimal string and stores only the strings' hashes, so the reader asks CatBoost for the hashes of
the integers 0 to 65535 and maps each split's category back to its integer. ``X`` holds, in a
categorical column, that integer as a number (an int column, or a pandas ``category`` column,
read by its values, not its codes: ``TreeEnsemble.category_values``). Categories that are not
such integers, and splits on target statistics (CTRs, CatBoost's encoding of features with more
categories) or text and embedding features, raise a ``TypeError``.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np

from ._ensemble import MISSING_CATEGORICAL, MISSING_NAN, Tree, TreeEnsemble, make_tree, node_category_sets, stack_trees
from ._reader import TreeReader, require_fitted, root_module

_CODE_RANGES = (1 << 10, 1 << 16)  # integer categories looked up, first the small ones
_FEATURE_KINDS = ("float_features", "categorical_features", "text_features", "embedding_features")
# loss_function -> (output transform from the raw value to the prediction, training loss)
_LOSSES = {
    "RMSE": ("identity", "squared_error"),
    "Logloss": ("sigmoid", "binary_crossentropy"),
    "CrossEntropy": ("sigmoid", "binary_crossentropy"),
    "MultiClass": ("softmax", "multiclass_crossentropy"),
}


def _export(model, pool=None) -> dict:
    """The model's JSON export (with the category hashes of ``pool`` when one is given)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        model.save_model(path, format="json", pool=pool)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.remove(path)


def _category_codes(model, info: dict, hashes: set[int]) -> dict[int, int]:
    """``{hash: integer category}`` for the one-hot ``hashes`` (unsigned 32-bit), from the hashes
    CatBoost itself gives the integers of :data:`_CODE_RANGES` (a probe pool, no training rows)."""
    import catboost

    n = 1 + max(f["flat_feature_index"] for kind in _FEATURE_KINDS for f in info.get(kind, []))
    cats = [f["flat_feature_index"] for f in info.get("categorical_features", [])]
    found: dict[int, int] = {}
    for size in _CODE_RANGES:
        codes = np.arange(size)
        columns = [codes.astype(str) if j in cats else np.zeros(size) for j in range(n)]
        probe = catboost.Pool(np.stack(columns, axis=1).astype(object), cat_features=cats)
        table = _export(model, probe)["features_info"].get("cat_features_hash", [])
        found = {int(e["hash"]): int(e["value"]) for e in table if int(e["hash"]) in hashes}
        if len(found) == len(hashes):
            break
    return found


class _Splits:
    """The model's split conditions as this package's node parameters.

    Raises:
      TypeError: when a one-hot split's category is not an integer 0 to 65535 (naming the features).
    """

    def __init__(self, model, info: dict, one_hot: list[dict]):
        self.floats = info.get("float_features", [])
        self.cats = info.get("categorical_features", [])
        hashes = {int(s["value"]) & 0xFFFFFFFF for s in one_hot}
        self.codes = _category_codes(model, info, hashes) if hashes else {}
        unknown = sorted({s["cat_feature_index"] for s in one_hot if int(s["value"]) & 0xFFFFFFFF not in self.codes})
        if unknown:
            raise TypeError(
                f"TreeExplainer reads CatBoost categorical features whose categories are the integers 0 to "
                f"{_CODE_RANGES[-1] - 1}; feature(s) {', '.join(_name(self.cats[i]) for i in unknown)} split on other "
                "categories. Train on integer category codes, or explain the model's predict with "
                "jaxshap.Explainer(f, background)."
            )
        self.n_words = 1 + max(self.codes.values(), default=0) // 32

    def __call__(self, split: dict) -> tuple[int, float, bool, int, np.ndarray | None]:
        """``(feature, threshold, default_left, missing rule, bits of the categories going left)``:
        a row that meets the condition goes right."""
        if split["split_type"] == "FloatFeature":
            f = self.floats[split["float_feature_index"]]
            nan_left = f.get("nan_value_treatment", "AsIs") != "AsTrue"
            return f["flat_feature_index"], float(split["border"]), nan_left, MISSING_NAN, None
        code = self.codes[int(split["value"]) & 0xFFFFFFFF]  # a one-hot split: category == code goes right
        bits = np.full(self.n_words, 0xFFFFFFFF, np.uint32)
        bits[code // 32] &= ~np.uint32(1 << (code % 32))
        return self.cats[split["cat_feature_index"]]["flat_feature_index"], 0.0, True, MISSING_CATEGORICAL, bits


def _name(feature: dict) -> str:
    return repr(feature.get("feature_name") or feature.get("feature_id") or f"#{feature['flat_feature_index']}")


def _ctr_error(info: dict) -> TypeError:
    cats = info.get("categorical_features", [])
    used = {e["cat_feature_index"] for c in info.get("ctrs", []) for e in c.get("elements", [])
            if "cat_feature_index" in e}
    names = ", ".join(_name(cats[i]) for i in sorted(used)) or "(unnamed)"
    return TypeError(
        f"TreeExplainer cannot read CatBoost splits on target statistics (CTRs) of categorical feature(s) {names} "
        "(CatBoost's encoding of features with more than one_hot_max_size categories and of feature combinations). "
        "Retrain with one_hot_max_size above the number of categories (each category then is a split of its own), "
        "or explain the model's predict with jaxshap.Explainer(f, background)."
    )


def _oblivious(tj: dict, splits: _Splits, k: int, scale: float) -> Tree:
    """An oblivious tree as a complete binary tree in heap layout (node ``i``'s children ``2i+1``,
    ``2i+2``), the root splitting on the last condition: leaf ``r`` in left-to-right order then
    is CatBoost's leaf ``r`` (bit ``i`` of ``r`` is condition ``i``, read at level ``d-1-i``)."""
    d = len(tj["splits"])
    levels = [splits(s) for s in reversed(tj["splits"])]
    values = np.asarray(tj["leaf_values"], np.float64).reshape(2**d, k) * scale
    weights = np.asarray(tj.get("leaf_weights") or np.ones(2**d), np.float64)
    n_inner = 2**d - 1
    at = np.repeat(np.arange(d), 2 ** np.arange(d))  # level of each internal node

    def column(i, fill):
        return [levels[ell][i] for ell in at] + [fill] * (n_inner + 1)

    cover = np.concatenate([weights.reshape(2**ell, -1).sum(1) for ell in range(d + 1)])
    left = np.concatenate([2 * np.arange(n_inner) + 1, np.full(n_inner + 1, -1)])
    right = np.where(left >= 0, left + 1, -1)
    value = np.concatenate([np.zeros((n_inner, k)), values])
    return _make(column(0, -1), column(1, 0.0), left, right, column(2, True), value, cover, column(3, MISSING_NAN),
                 column(4, None))


def _nested(tj: dict, splits: _Splits, k: int, scale: float) -> Tree:
    """A non-symmetric tree: nested nodes with ``split``, ``left`` (the condition unmet), ``right``
    and leaves with ``value`` and ``weight``, numbered depth first."""
    nodes: list[dict] = []
    pending = [tj]
    while pending:
        node = pending.pop()
        node["_id"] = len(nodes)
        nodes.append(node)
        if "split" in node:
            pending += [node["right"], node["left"]]
    inner = ["split" in n for n in nodes]
    params = [splits(n["split"]) if i else (-1, 0.0, True, MISSING_NAN, None) for n, i in zip(nodes, inner)]
    left = [n["left"]["_id"] if i else -1 for n, i in zip(nodes, inner)]
    right = [n["right"]["_id"] if i else -1 for n, i in zip(nodes, inner)]
    value = np.asarray([np.broadcast_to(np.asarray(n.get("value", 0.0), np.float64), (k,)) for n in nodes]) * scale
    cover = np.zeros(len(nodes))
    for n in reversed(nodes):  # children come after their parent
        cover[n["_id"]] = cover[n["left"]["_id"]] + cover[n["right"]["_id"]] if "split" in n else n.get("weight", 1.0)
    return _make(*[[p[i] for p in params] for i in range(2)], left, right, [p[2] for p in params], value, cover,
                 [p[3] for p in params], [p[4] for p in params])


def _make(feature, threshold, left, right, default_left, value, cover, missing, words) -> Tree:
    """:func:`make_tree`, with the categorical bit sets ``words`` (``None`` at numeric splits and leaves)."""
    cat_left, cat_invalid_left = node_category_sets(words, True)  # codes CatBoost never saw meet no condition
    return make_tree(feature, threshold, left, right, default_left, value, cover, missing, cat_left, cat_invalid_left)


def _all_splits(trees_json: list, symmetric: bool):
    for tj in trees_json:
        if symmetric:
            yield from tj["splits"]
            continue
        pending = [tj]
        while pending:
            node = pending.pop()
            if "split" in node:
                yield node["split"]
                pending += [node["left"], node["right"]]


def load_catboost(model) -> TreeEnsemble:
    """Read a fitted CatBoost model: its raw output ``RawFormulaVal`` is
    ``bias + scale * sum_t tree_t(x)`` (``scale_and_bias``), with ``K`` outputs for multi-class
    and multi-target models.

    Raises:
      TypeError: for splits on CTRs, text or embedding features, or on categories that are not
        integers 0 to 65535 (naming the features).
    """
    spec = _export(model)
    info = spec["features_info"]
    symmetric = "oblivious_trees" in spec
    trees_json = spec["oblivious_trees"] if symmetric else spec.get("trees", [])
    conditions = list(_all_splits(trees_json, symmetric))
    other = {s.get("split_type") for s in conditions} - {"FloatFeature", "OneHotFeature"}
    if "OnlineCtr" in other:
        raise _ctr_error(info)
    if other:
        raise TypeError(
            f"TreeExplainer cannot read CatBoost splits of type {sorted(other)} (text, embedding or estimated "
            "features); explain the model's predict with jaxshap.Explainer(f, background)."
        )
    splits = _Splits(model, info, [s for s in conditions if s["split_type"] == "OneHotFeature"])
    scale, bias = spec.get("scale_and_bias", [1.0, [0.0]])
    bias = np.asarray(bias, np.float64).reshape(-1)
    k = max(bias.size, 1)
    read = _oblivious if symmetric else _nested
    trees = [read(tj, splits, k, float(scale)) for tj in trees_json]
    flat = [f["flat_feature_index"] for key in _FEATURE_KINDS for f in info.get(key, [])]
    n_features = max(1 + max(flat, default=-1), len(getattr(model, "feature_names_", None) or []))
    loss_name = spec.get("model_info", {}).get("params", {}).get("loss_function", {}).get("type", "")
    output_transform, loss = _LOSSES.get(loss_name, (None, None))
    return stack_trees(trees, np.broadcast_to(bias, (k,)), n_features, "CatBoost", precision=np.float32, category_values=True,
                       output_transform=output_transform, loss=loss)


def _is_catboost(model: Any) -> bool:
    """Whether ``model``'s type is ``catboost.CatBoost`` or a subclass (without importing catboost)."""
    return any(c.__name__ == "CatBoost" and (c.__module__ or "").split(".")[0] == "catboost"
               for c in type(model).__mro__)


class CatBoostReader(TreeReader):
    """CatBoost's models (plain ``CatBoost`` and its scikit-learn-style subclasses); reads a
    ``catboost.Pool`` of numeric features as rows; the raw output comes from
    ``predict(prediction_type="RawFormulaVal")``."""

    formats = "CatBoost: CatBoost, CatBoostRegressor, CatBoostClassifier, CatBoostRanker"
    modules = ("catboost",)

    def recognises(self, model: Any) -> bool:
        return _is_catboost(model)

    def read(self, model: Any) -> TreeEnsemble:
        require_fitted(model, bool(model.is_fitted()))
        return load_catboost(model)

    def raw_output(self, model: Any, ensemble: TreeEnsemble, X: np.ndarray) -> np.ndarray:
        import catboost

        try:
            cats = list(model.get_cat_feature_indices())
            data = X
            if cats and np.isnan(X[:, cats]).any():
                raise ValueError("CatBoost takes no missing categories")
            if cats:  # categories as the integers they stand for
                data = X.astype(object)
                data[:, cats] = X[:, cats].astype(np.int64)
            pool = catboost.Pool(data, cat_features=cats or None)
            out = model.predict(pool, prediction_type="RawFormulaVal", ntree_end=ensemble.n_rounds)
            return np.asarray(out, np.float64).reshape(X.shape[0], -1)
        except (TypeError, ValueError, catboost.CatBoostError):  # refused (a missing category, or no rows)
            return ensemble.predict(X)

    def input_rows(self, x: Any) -> tuple[np.ndarray, list[str] | None] | None:
        """A ``catboost.Pool`` of numeric features (one with categorical features raises a ``TypeError``)."""
        if root_module(x) != "catboost" or type(x).__name__ != "Pool":
            return None
        if x.get_cat_feature_indices():
            raise TypeError("`X`: pass a catboost.Pool with categorical features as an array or DataFrame holding the "
                            "integer categories instead (CatBoost keeps only their hashes).")
        return np.asarray(x.get_features(), np.float64), x.get_feature_names()
