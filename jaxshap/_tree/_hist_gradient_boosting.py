"""scikit-learn's HistGradientBoosting models, numeric and categorical splits.

A fitted ``HistGradientBoostingRegressor`` / ``HistGradientBoostingClassifier`` predicts with
``_predictors[i][k]`` (iteration ``i``, output ``k``), trees whose ``nodes`` record array holds
float64 thresholds (``x <= num_threshold`` goes left, a NaN where ``missing_go_to_left`` says)
and, at categorical splits, an index into ``raw_left_cat_bitsets``: 256-bit sets (eight uint32
words) of the category *codes* that go left.

With categorical features the model first encodes its input (a ``ColumnTransformer`` with an
``OrdinalEncoder``): a category's code is its position among the sorted categories seen in
fitting, and a value it did not see becomes NaN. The encoded columns come first, so the trees'
feature indices count the categorical features first. scikit-learn then routes a code

* in the node's left set to the left;
* known to the model (``_bin_mapper``'s known categories) but not in the set to the right;
* NaN, negative or unknown where missing values go (``missing_go_to_left``).

This reader undoes the reordering and sets, at each categorical split, the bits of the codes
that go left (those of the left set, and those of codes the bin mapper does not know when
missing values go left). Rows carry, per categorical feature:

* numeric categories (the usual case: a NumPy array or numeric column): the category *values*,
  which must be integers in ``[0, MAX_CATEGORY]``; the bits are set at the values;
* other categories (strings, from a pandas ``category`` column): the codes, positions among the
  sorted categories; a DataFrame's ``category`` column is read by its labels
  (:func:`jaxshap._tree._rows.host_rows`), so its own category order does not matter.

The ensemble's ``categories`` lists each feature's known values, so that an unseen value (or a
non-integer one) is read as missing, as scikit-learn's encoder does.
"""

from __future__ import annotations

import numpy as np

from ._ensemble import MISSING_CATEGORICAL, MISSING_NAN, TreeEnsemble, make_tree, one_hot_values, stack_trees

MAX_CATEGORY = 1023
"""The largest numeric category value read (bit sets of 32 words); larger ones raise TypeError."""


def _column_order(model) -> np.ndarray:
    """``[M]`` the original feature index of each column the trees see (encoded ones first)."""
    pre = model._preprocessor
    order = np.full(model.n_features_in_, -1, np.int64)
    for name, _, columns in pre.transformers_:
        cols = np.asarray(columns)
        idx = np.flatnonzero(cols) if cols.dtype == bool else cols.astype(np.int64)
        out = pre.output_indices_[name]
        if idx.size:
            order[out] = idx
    if np.sort(order).tolist() != list(range(order.size)):
        raise TypeError(
            f"TreeExplainer cannot read the column layout of this {type(model).__name__}'s categorical encoder "
            "(scikit-learn's private layout changed); explain it with jaxshap.PermutationExplainer."
        )
    return order


def _numbers(model, j: int, labels: np.ndarray) -> np.ndarray:
    """The numbers rows carry for the categories ``labels`` of original feature ``j``."""
    try:
        values = np.asarray(labels, dtype=np.float64)
    except (TypeError, ValueError):
        return np.arange(labels.size, dtype=np.float64)  # labelled categories: rows carry their codes
    if values.size and (np.any(values != np.round(values)) or values.min() < 0 or values.max() > MAX_CATEGORY):
        name = model.feature_names_in_[j] if hasattr(model, "feature_names_in_") else j
        raise TypeError(
            f"TreeExplainer reads the numeric categories of a HistGradientBoosting model as integers 0 to "
            f"{MAX_CATEGORY}; feature {name!r} has categories from {values.min():g} to {values.max():g}"
            f"{' (not all integers)' if np.any(values != np.round(values)) else ''}. Refit with the categories "
            "coded as integers 0, 1, 2, ... (or labelled by strings, in a pandas 'category' column), or use "
            "jaxshap.PermutationExplainer."
        )
    return values


def _is_missing(label) -> bool:
    return label is None or (isinstance(label, (float, np.floating)) and label != label)


def _categorical_setup(model) -> tuple[np.ndarray, dict, dict]:
    """``(column order, {tree column: code -> number}, ensemble categories)``."""
    if getattr(model, "_preprocessor", None) is None:
        raise TypeError(
            "TreeExplainer reads categorical HistGradientBoosting models of scikit-learn 1.4 and later "
            "(which encode categories themselves); upgrade scikit-learn, or use jaxshap.PermutationExplainer."
        )
    order = _column_order(model)
    encoder = model._preprocessor.named_transformers_["encoder"]
    encoded = np.flatnonzero(model._is_categorical_remapped)
    code_to_number, categories = {}, {}
    for col, labels in zip(encoded, encoder.categories_):
        labels = np.asarray(labels)
        if labels.size and _is_missing(labels[-1]):
            labels = labels[:-1]  # the encoder lists a missing value last; it is not a category
        j = int(order[col])
        numbers = _numbers(model, j, labels)
        code_to_number[int(col)] = numbers
        categories[j] = (labels, numbers)
    return order, code_to_number, categories


def _left_words(pred, node: np.ndarray, known: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """``[W]`` uint32 bit set, over the numbers rows carry, of the categories that go left."""
    def bits(words):  # 256 codes
        return ((np.asarray(words, np.uint32)[:, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(-1) == 1

    codes = np.arange(numbers.size)
    left = bits(pred.raw_left_cat_bitsets[node["bitset_idx"]])[codes]
    left |= ~bits(known)[codes] & bool(node["missing_go_to_left"])
    n_words = int(numbers.max()) // 32 + 1 if numbers.size else 1
    out = np.zeros(32 * n_words, bool)
    out[numbers[left].astype(np.int64)] = True
    return (out.reshape(n_words, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1).astype(np.uint32)


def _tree(pred, k: int, n_outputs: int, order, code_to_number, known_sets, f_idx_map):
    nd = pred.nodes
    leaf = nd["is_leaf"].astype(bool)
    is_cat = nd["is_categorical"].astype(bool) & ~leaf
    cat_left = cat_invalid_left = None
    if is_cat.any():
        rows = {i: _left_words(pred, nd[i], known_sets[f_idx_map[nd["feature_idx"][i]]],
                               code_to_number[int(nd["feature_idx"][i])]) for i in np.flatnonzero(is_cat)}
        cat_left = np.zeros((nd.size, max(r.size for r in rows.values())), np.uint32)
        for i, r in rows.items():
            cat_left[i, : r.size] = r
        cat_invalid_left = nd["missing_go_to_left"].astype(bool)
    return make_tree(
        order[nd["feature_idx"]], np.where(is_cat, 0.0, nd["num_threshold"]),
        np.where(leaf, -1, nd["left"]).astype(np.int64), np.where(leaf, -1, nd["right"]).astype(np.int64),
        nd["missing_go_to_left"].astype(bool), one_hot_values(np.where(leaf, nd["value"], 0.0), k, n_outputs),
        nd["count"], np.where(is_cat, MISSING_CATEGORICAL, MISSING_NAN), cat_left, cat_invalid_left,
    )


def load_hist_gradient_boosting(model) -> TreeEnsemble:
    """Read a fitted HistGradientBoosting model (see the module docstring): the raw margin,
    ``_baseline_prediction`` plus the trees' leaf values (which already hold the learning rate).

    Raises:
      TypeError: for numeric categories that are not integers 0 to :data:`MAX_CATEGORY`, or a
        categorical model from a scikit-learn before 1.4.
    """
    name = type(model).__name__
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    k = base.shape[0]
    n_features = int(model.n_features_in_)
    order, code_to_number, categories = np.arange(n_features), {}, None
    known_sets = f_idx_map = None
    is_categorical = getattr(model, "is_categorical_", None)
    if is_categorical is not None and np.any(is_categorical):
        order, code_to_number, categories = _categorical_setup(model)
        known_sets, f_idx_map = model._bin_mapper.make_known_categories_bitsets()
    trees = [_tree(pred, j, k, order, code_to_number, known_sets, f_idx_map)
             for predictors in model._predictors for j, pred in enumerate(predictors)]
    rounds = np.repeat(np.arange(len(model._predictors)), k)
    return stack_trees(trees, base, n_features, name, categories=categories, tree_round=rounds)
