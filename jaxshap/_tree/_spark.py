"""The pyspark.ml reader: decision tree, random forest and gradient-boosted tree models, for
regression and classification (``DecisionTree``, ``RandomForest`` and ``GBT``
``RegressionModel`` / ``ClassificationModel``).

Each tree is read from the fitted model's JVM objects through py4j, node by node from
``rootNode`` (a node is an ``InternalNode`` with a ``split``, or a ``LeafNode``; each has a
``prediction`` and ``impurityStats``, whose ``count`` is the training weight that reached it).
That costs a few py4j round trips per node, about a millisecond on a local session, so a
model of ``10**5`` nodes takes a couple of minutes to read; it is read once per explainer.

What the trees sum to, as Spark predicts:

* a regression tree's leaf holds its ``prediction``; a forest averages its trees (weighted by
  ``treeWeights``), and gradient boosting sums them times ``treeWeights`` (the learning rate);
* a classification tree's leaf holds the class frequencies of ``impurityStats`` (Spark's
  ``probability``), and a forest averages them: the explained output is ``[K]`` class
  probabilities;
* a gradient-boosted classifier's trees are regression trees; their weighted sum is the margin
  ``m`` (the second entry of Spark's ``rawPrediction``; its ``probability`` is
  ``1 / (1 + exp(-2 m))``). That margin is explained, as ``shap.TreeExplainer`` does.

Splits: a ``ContinuousSplit`` sends ``x <= threshold`` left, in float64; a NaN fails the
comparison and goes right. A ``CategoricalSplit`` (on a feature that carries Spark's nominal
metadata, e.g. from ``VectorIndexer``) sends the codes in ``leftCategories`` left; a code
outside ``0 .. numCategories - 1``, or a NaN, goes where Spark sends a category it has not seen
(right when the left set is the smaller half, else left). Codes are whole numbers, as Spark's
indexers write them; a fractional code is read as its whole part (Spark would treat it as a
category it has not seen).

Inputs: NumPy arrays and DataFrames as for any tree model, or a Spark DataFrame, whose vector
column (the one named ``features`` when there are several) is collected to the driver; the
feature names come from that column's ML attributes when they name every feature
(``VectorAssembler`` writes them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._ensemble import (MISSING_CATEGORICAL, MISSING_NAN, Tree, TreeEnsemble, make_tree, node_category_sets,
                        stack_trees)
from ._reader import TreeReader, root_module

_SINGLE = {"DecisionTreeRegressionModel", "DecisionTreeClassificationModel"}
_FOREST = {"RandomForestRegressionModel", "RandomForestClassificationModel"}
_BOOSTED = {"GBTRegressionModel", "GBTClassificationModel"}


def _category_words(left: list[float], n_categories: int, unseen_left: bool) -> np.ndarray:
    """The bit set (uint32 words) of the codes that go left: those in ``left``, and when
    ``unseen_left`` also the codes past ``n_categories`` that the words can hold."""
    n_words = max(1, -(-n_categories // 32))
    goes_left = np.zeros(32 * n_words, bool)
    goes_left[np.asarray(left, np.int64)] = True
    goes_left[n_categories:] = unseen_left
    return np.packbits(goes_left, bitorder="little").view("<u4").astype(np.uint32)


def _read_tree(root, classification: bool, scale: float) -> Tree:
    """One Spark tree (its JVM root node) as a :class:`Tree`, in preorder; node values times
    ``scale`` (class frequencies for a classification tree)."""
    feature, threshold, left, right, default_left, missing, values, cover, words = ([] for _ in range(9))
    stack = [(root, -1, False)]  # (node, parent index, is the parent's right child)
    while stack:
        node, parent, is_right = stack.pop()
        i = len(feature)
        if parent >= 0:
            (right if is_right else left)[parent] = i
        stats = node.impurityStats()
        cover.append(float(stats.count()))
        if classification:
            counts = np.asarray(list(stats.stats()), np.float64)
            total = counts.sum()
            values.append(counts / total * scale if total > 0 else counts)
        else:
            values.append(np.array([node.prediction() * scale]))
        left.append(-1)
        right.append(-1)
        if node.getClass().getSimpleName() != "InternalNode":
            feature.append(-1), threshold.append(0.0), default_left.append(False)
            missing.append(MISSING_NAN), words.append(None)
            continue
        split = node.split()
        feature.append(int(split.featureIndex()))
        if split.getClass().getSimpleName() == "CategoricalSplit":
            codes, n_cat = list(split.leftCategories()), int(split.numCategories())
            unseen_left = len(codes) > n_cat // 2  # Spark keeps the smaller side's set
            threshold.append(0.0), default_left.append(unseen_left), missing.append(MISSING_CATEGORICAL)
            words.append(_category_words(codes, n_cat, unseen_left))
        else:
            threshold.append(float(split.threshold())), default_left.append(False)
            missing.append(MISSING_NAN), words.append(None)
        stack.append((node.rightChild(), i, True))
        stack.append((node.leftChild(), i, False))
    cat_left, cat_invalid_left = node_category_sets(words, default_left)  # unseen codes go as NaNs
    return make_tree(feature, threshold, left, right, default_left, np.stack(values), cover, missing,
                     cat_left, cat_invalid_left)


def load_spark(model) -> TreeEnsemble:
    """Read a fitted pyspark.ml tree model (see the module docstring).

    Raises:
      TypeError: for a model without its JVM object (a Spark Connect model).
    """
    name = type(model).__name__
    if getattr(model, "_java_obj", None) is None:
        raise TypeError(
            f"`model`: this {name} has no JVM object to read its trees from (a Spark Connect model?); "
            "fit it in a classic (py4j) Spark session, or explain it with jaxshap.PermutationExplainer."
        )
    classification = "Classification" in name and name not in _BOOSTED
    if name in _SINGLE:
        trees, scales = [model], [1.0]
    else:
        trees, weights = model.trees, np.asarray(model.treeWeights, np.float64)
        scales = weights / weights.sum() if name in _FOREST else weights
    read = [_read_tree(t._java_obj.rootNode(), classification, float(s)) for t, s in zip(trees, scales)]
    k = read[0].value.shape[1]
    if classification:
        transform, loss = "identity", None  # the trees already sum to class probabilities
    elif name == "GBTClassificationModel":
        transform, loss = None, None  # the margin; Spark's probability is sigmoid(2 m)
    elif name in _BOOSTED:
        transform, loss = "identity", ("squared_error" if model.getLossType() == "squared" else None)
    else:
        transform, loss = "identity", "squared_error"
    e = stack_trees(read, np.zeros(k), int(model.numFeatures), name)
    return dataclasses.replace(e, precision=np.float64, output_transform=transform, loss=loss)


def _vector_column(df) -> str:
    """The name of ``df``'s feature vector column (the one named ``features`` among several)."""
    vectors = [f.name for f in df.schema.fields if type(f.dataType).__name__ == "VectorUDT"]
    if len(vectors) == 1:
        return vectors[0]
    if "features" in vectors:
        return "features"
    raise TypeError(
        f"`X`: a Spark DataFrame is read through its one vector column; this one has {len(vectors)} "
        f"({vectors}). Select the feature column first (df.select('features')), or pass a NumPy array."
    )


def _attribute_names(field, width: int) -> list[str] | None:
    """The feature names in a vector column's ML attributes, when they name all ``width`` features."""
    groups = field.metadata.get("ml_attr", {}).get("attrs", {})
    names = {a["idx"]: a["name"] for group in groups.values() for a in group if "name" in a}
    return [names[i] for i in range(width)] if width and set(names) == set(range(width)) else None


class SparkReader(TreeReader):
    """pyspark.ml's tree models, and Spark DataFrames as input (see the module docstring)."""

    formats = (
        "pyspark.ml: DecisionTree, RandomForest and GBT RegressionModel/ClassificationModel"
    )
    modules = ("pyspark",)

    def recognises(self, model: Any) -> bool:
        return root_module(model) == "pyspark" and type(model).__name__ in _SINGLE | _FOREST | _BOOSTED

    def read(self, model: Any) -> TreeEnsemble:
        return load_spark(model)

    def input_rows(self, x: Any) -> tuple[np.ndarray, list[str] | None] | None:
        if root_module(x) != "pyspark" or not hasattr(x, "schema") or not hasattr(x, "collect"):
            return None
        column = _vector_column(x)
        rows = [r[0].toArray() for r in x.select(column).collect()]
        width = len(rows[0]) if rows else 0
        field = x.schema[column]
        return np.asarray(rows, np.float64).reshape(len(rows), width), _attribute_names(field, width)
