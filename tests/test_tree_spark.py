"""TreeExplainer on pyspark.ml tree models (slow tier: a local Spark session and Spark's fits).

Oracles: Spark's own ``transform`` (the read trees must predict what Spark predicts, on rows
with unseen categories and NaNs too), ``shap.TreeExplainer`` on the same model (which reads
Spark's continuous splits), and where shap cannot read the model (categorical splits) the
brute-force path-dependent game (``oracle.path_dependent_shapley``) and the brute-force
interventional game of Spark's own predictions (``oracle.interventional_shapley``).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import jaxshap
from oracle import interventional_shapley, path_dependent_shapley

pytest.importorskip("pyspark")
shap = pytest.importorskip("shap")
if shutil.which("java") is None:
    pytest.skip("pyspark needs a Java runtime (`java` is not on PATH)", allow_module_level=True)

from pyspark.ml import classification, regression  # noqa: E402
from pyspark.ml.feature import VectorAssembler, VectorIndexer  # noqa: E402
from pyspark.ml.linalg import Vectors  # noqa: E402

from jaxshap._tree._reader import import_model  # noqa: E402

M = 4


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("jaxshap-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, M))
    X[:, 3] = rng.integers(0, 4, size=n)  # a small integer feature (categorical where indexed)
    y = X[:, 0] + X[:, 1] * X[:, 2] + np.where(X[:, 3] == 2, 1.5, 0.0) + 0.1 * rng.normal(size=n)
    return X, y


def _frame(spark, X, y):
    rows = [(Vectors.dense(x), float(v), float(v > 0), float(np.digitize(v, [-1.0, 1.0]))) for x, v in zip(X, y)]
    return spark.createDataFrame(rows, ["features", "label", "binary", "multi"])


def _spark_output(model, spark, X, column):
    """``[n, K]`` what Spark's ``transform`` gives in ``column`` for rows ``X``."""
    out = model.transform(spark.createDataFrame([(Vectors.dense(x),) for x in X], ["features"]))
    cells = [r[0] for r in out.select(column).collect()]
    if column == "rawPrediction":  # a GBT classifier's (-m, m): the margin m
        return np.array([c[1] for c in cells])[:, None]
    return np.array([c.toArray() if hasattr(c, "toArray") else [c] for c in cells], np.float64)


MODELS = {
    "dt_multi": (lambda: classification.DecisionTreeClassifier(maxDepth=4, labelCol="multi"), "probability"),
    "rf_multi": (lambda: classification.RandomForestClassifier(numTrees=6, maxDepth=3, labelCol="multi", seed=1),
                 "probability"),
    "gbt_binary": (lambda: classification.GBTClassifier(maxIter=6, maxDepth=3, labelCol="binary", seed=1),
                   "rawPrediction"),
    "dt_reg": (lambda: regression.DecisionTreeRegressor(maxDepth=5), "prediction"),
    "rf_reg": (lambda: regression.RandomForestRegressor(numTrees=6, maxDepth=4, seed=1), "prediction"),
    "gbt_reg": (lambda: regression.GBTRegressor(maxIter=6, maxDepth=3, stepSize=0.3, seed=1), "prediction"),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_values_equal_shap_and_sum_to_what_spark_predicts(spark, kind):
    X, y = _data()
    make, column = MODELS[kind]
    model = make().fit(_frame(spark, X, y))
    rows = np.vstack([X[:25], [[np.nan, 0.3, -0.2, 1.0]]])  # a NaN goes right, as in Spark
    spark_out = _spark_output(model, spark, rows, column)
    np.testing.assert_allclose(import_model(model).predict(rows), spark_out, rtol=0, atol=1e-12)

    ex = jaxshap.TreeExplainer(model)
    expl = ex(rows)
    values = np.asarray(expl.values, np.float64).reshape(len(rows), M, -1)
    total = values.sum(1) + np.asarray(expl.base_values, np.float64).reshape(len(rows), -1)
    np.testing.assert_allclose(total, spark_out, rtol=0, atol=1e-10)  # efficiency against Spark

    expected = np.asarray(shap.TreeExplainer(model).shap_values(X[:25], check_additivity=False), np.float64)
    np.testing.assert_allclose(values[:25], expected.reshape(25, M, -1), rtol=0, atol=1e-10)


def test_categorical_splits_route_and_explain_as_spark(spark):
    X, y = _data(seed=3)
    frame = _frame(spark, X, y)
    indexer = VectorIndexer(inputCol="features", outputCol="indexed", maxCategories=4).fit(frame)
    indexed = indexer.transform(frame)
    assert indexer.categoryMaps.keys() == {3}
    model = regression.GBTRegressor(featuresCol="indexed", maxIter=5, maxDepth=3, seed=2).fit(indexed)
    e = import_model(model)
    assert e.cat_left is not None and (e.missing == 3).any(), "the fit made no categorical split"
    # Codes 0..3 as the indexer maps them (3 keeps the identity map on 0..3), an unseen code and a NaN.
    rows = np.vstack([X[:12], [[0.1, 0.2, 0.3, 7.0], [0.1, 0.2, 0.3, np.nan], [0.1, 0.2, 0.3, -1.0]]])
    out = model.transform(spark.createDataFrame([(Vectors.dense(x),) for x in rows], ["indexed"]))
    spark_out = np.array([r[0] for r in out.select("prediction").collect()])[:, None]
    np.testing.assert_allclose(e.predict(rows), spark_out, rtol=0, atol=1e-12)

    values = np.asarray(jaxshap.TreeExplainer(model)(rows).values, np.float64)
    for i in (0, 5, 12, 13):
        expected, _ = path_dependent_shapley(e, rows[i])
        np.testing.assert_allclose(values[i], expected[:, 0], rtol=0, atol=1e-10)

    # Interventional (which shap does not offer for Spark): the game of Spark's own predictions.
    background = X[20:40]
    explained = rows[[0, 12, 13]]
    spark_predict = lambda Z: _spark_output(model.setFeaturesCol("features"), spark, Z, "prediction")  # noqa: E731
    expected = interventional_shapley(spark_predict, explained, background)
    values = np.asarray(jaxshap.TreeExplainer(model, data=background)(explained).values, np.float64)
    np.testing.assert_allclose(values, expected.reshape(values.shape), rtol=0, atol=1e-10)


def test_unseen_codes_past_a_small_sets_words_go_as_spark_sends_them(spark):
    # One tree splits on a 4-category and a 40-category feature: its bit sets are two words wide,
    # and a code of 35 on the small feature is as unseen to Spark as 7 is.
    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=600), rng.integers(0, 4, 600), rng.integers(0, 40, 600)].astype(float)
    y = np.where(X[:, 1] == 2, 2.0, 0.0) + np.where(X[:, 2] % 3 == 0, 1.0, 0.0) + 0.1 * X[:, 0]
    frame = spark.createDataFrame([(Vectors.dense(x), float(v)) for x, v in zip(X, y)], ["features", "label"])
    indexed = VectorIndexer(inputCol="features", outputCol="indexed", maxCategories=40).fit(frame).transform(frame)
    model = regression.DecisionTreeRegressor(featuresCol="indexed", maxDepth=4, maxBins=64).fit(indexed)
    e = import_model(model)
    assert e.cat_left is not None and e.cat_left.shape[-1] == 2
    rows = np.array([[0.0, a, b] for a in (0, 2, 5, 35, 50) for b in (0, 3, 1, 45, 70)])
    out = model.transform(spark.createDataFrame([(Vectors.dense(x),) for x in rows], ["indexed"]))
    spark_out = np.array([r[0] for r in out.select("prediction").collect()])[:, None]
    np.testing.assert_allclose(e.predict(rows), spark_out, rtol=0, atol=1e-12)


def test_a_spark_frame_is_read_with_the_assembler_names(spark):
    X, y = _data(n=120, seed=5)
    names = ["age", "income", "rate", "grade"]
    raw = spark.createDataFrame([tuple(map(float, x)) + (float(v),) for x, v in zip(X, y)], names + ["label"])
    frame = VectorAssembler(inputCols=names, outputCol="features").transform(raw)
    model = regression.RandomForestRegressor(numTrees=4, maxDepth=3, seed=3).fit(frame)
    ex = jaxshap.TreeExplainer(model)
    from_frame = ex(frame.limit(10))
    assert from_frame.feature_names == names
    np.testing.assert_allclose(np.asarray(from_frame.values), np.asarray(ex(X[:10]).values), rtol=0, atol=0)

    with pytest.raises(TypeError, match="vector column"):
        ex(raw)


def test_explainer_picks_trees_and_the_boosted_classifiers_margin_has_no_probability(spark):
    X, y = _data(n=120, seed=6)
    model = classification.GBTClassifier(maxIter=3, maxDepth=2, labelCol="binary").fit(_frame(spark, X, y))
    assert isinstance(jaxshap.Explainer(model), jaxshap.TreeExplainer)
    with pytest.raises(ValueError, match="model_output"):
        jaxshap.TreeExplainer(model, model_output="probability")
