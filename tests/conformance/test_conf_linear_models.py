"""shap's ``notebooks/tabular_examples/linear_models``."""

import numpy as np
import pytest

import jaxshap
from conformance_data import assert_exact, california

shap = pytest.importorskip("shap")
sklearn = pytest.importorskip("sklearn")
pd = pytest.importorskip("pandas")


def test_Explaining_a_model_that_uses_standardized_features_1():
    """notebooks/tabular_examples/linear_models/Explaining a model that uses standardized
    features.ipynb: ``shap.LinearExplainer(model, X_std)(X_std)`` on a ``LinearRegression`` over
    ``StandardScaler().set_output(transform="pandas")`` columns (interventional over shap's
    100-row sample), and the notebook's additivity check against ``model.predict``."""
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import StandardScaler

    X, y = california(400)
    X_std = StandardScaler().set_output(transform="pandas").fit_transform(X)
    model = LinearRegression().fit(X_std, y)

    def example(shap):
        explainer = shap.LinearExplainer(model, X_std)
        return explainer(X_std.iloc[:200])

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)
    assert_exact(got.base_values, want.base_values, what="base_values")
    predicted_value = model.predict(X_std.iloc[:200])
    np.testing.assert_allclose(np.asarray(got.base_values) + np.asarray(got.values).sum(1), predicted_value, rtol=1e-5, atol=1e-5)


def test_Sentiment_Analysis_with_Logistic_Regression_1():
    """notebooks/tabular_examples/linear_models/Sentiment Analysis with Logistic
    Regression.ipynb: ``shap.Explainer(model, X_train,
    feature_names=vectorizer.get_feature_names_out())(X_test)`` on a ``LogisticRegression``
    (shap picks its linear explainer). The notebook's IMDB TF-IDF matrix is replaced by a sparse
    non-negative 300-column matrix with word-like names."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(101)
    X = rng.random((400, 300)) * (rng.random((400, 300)) < 0.05)
    y = X[:, :20].sum(1) > np.median(X[:, :20].sum(1))
    X_train, X_test, y_train = X[:300], X[300:360], y[:300]
    names = np.array([f"word{i}" for i in range(300)], dtype=object)
    model = LogisticRegression(penalty="l2", C=0.1).fit(X_train, y_train)

    def example(shap):
        explainer = shap.Explainer(model, X_train, feature_names=names)
        return explainer(X_test)

    want, got = example(shap), example(jaxshap)
    assert_exact(got.values, want.values)
    assert list(got.feature_names) == list(want.feature_names)
