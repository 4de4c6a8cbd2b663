"""Host models fitted on DataFrames are called with the frame they were fitted on.

A scikit-learn pipeline that selects columns by name and one-hot encodes pandas categories cannot
take a matrix of codes; a model fitted on another column order would read one column as another.
The oracle is the definition: interventional Shapley values over all coalitions, with every hybrid
row handed to the model as the frame a user would build by hand (``tests/oracle.py``).
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxshap
from jaxshap._core._categorical import FrameModel

from oracle import interventional_shapley

pd = pytest.importorskip("pandas")
sk_compose = pytest.importorskip("sklearn.compose")
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder  # noqa: E402

CATS = ["species", "island", "sex"]


@pytest.fixture(scope="module")
def penguins():
    X, y, names = jaxshap.datasets.load_penguins(as_frame=True)
    codes, _, _ = jaxshap.datasets.load_penguins()
    return X, y, names, codes


def _pipeline(X, y, estimator=None):
    encode = sk_compose.make_column_transformer((OneHotEncoder(), CATS), remainder="passthrough")
    return make_pipeline(encode, estimator if estimator is not None else Ridge()).fit(X, y)


def _by_hand(model, names, columns=None):
    """What a user writes without jaxshap's help: rebuild the frame from codes, call the model."""
    cats = jaxshap.datasets.PENGUIN_CATEGORIES

    def f(rows):
        rows = np.asarray(rows, np.float64)
        frame = pd.DataFrame({n: (pd.Categorical.from_codes(rows[:, j].astype(int), list(cats[n])) if n in cats
                                  else rows[:, j]) for j, n in enumerate(names)})
        return model(frame if columns is None else frame[columns])

    return f


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the 100-row background sample
        return fn()


def test_pipeline_on_category_frame_equals_the_definition(penguins):
    X, y, names, codes = penguins
    pipe = _pipeline(X, y)
    bg, rows = X.iloc[:40], X.iloc[200:206]
    ex = jaxshap.ExactExplainer(pipe.predict, jaxshap.maskers.Independent(bg))
    assert isinstance(ex.model.model, FrameModel)
    expl = ex(rows)
    truth = interventional_shapley(_by_hand(pipe.predict, names), codes[200:206], codes[:40])
    np.testing.assert_allclose(np.asarray(expl.values, np.float64), truth, atol=2e-3 * np.abs(truth).max())
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), pipe.predict(rows),
                               rtol=1e-5)
    assert list(expl.feature_names) == names


def test_model_fitted_on_another_column_order(penguins):
    """The frame follows the model's columns; the explanation keeps the background's."""
    X, y, names, codes = penguins
    order = ["bill_depth_mm", "sex", "flipper_length_mm", "species", "bill_length_mm", "island"]
    pipe = _pipeline(X[order], y)
    bg, rows = X.iloc[:30], X.iloc[100:104]  # the background in the data's own order, not the model's
    expl = jaxshap.ExactExplainer(pipe.predict, jaxshap.maskers.Independent(bg))(rows)
    truth = interventional_shapley(_by_hand(pipe.predict, names, order), codes[100:104], codes[:30])
    np.testing.assert_allclose(np.asarray(expl.values, np.float64), truth, atol=2e-3 * np.abs(truth).max())
    # the same model explained on frames in its own order: the same values, permuted
    same = jaxshap.ExactExplainer(pipe.predict, jaxshap.maskers.Independent(bg[order]))(rows[order])
    perm = [order.index(n) for n in names]
    np.testing.assert_allclose(np.asarray(same.values)[:, perm], np.asarray(expl.values), atol=1e-3)


def test_numeric_frame_model_gets_frames_and_keeps_classes(penguins):
    X, y, names, codes = penguins
    numeric = X[names[3:]]
    clf = LogisticRegression(max_iter=2000).fit(numeric, X["species"])
    ex = _quiet(lambda: jaxshap.KernelExplainer(clf.predict_proba, numeric.iloc[:20]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn warns when a model fitted on names gets a matrix
        expl = ex(numeric.iloc[:3], key=0)
    assert list(expl.output_names) == ["Adelie", "Chinstrap", "Gentoo"]
    np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values),
                               clf.predict_proba(numeric.iloc[:3]), atol=1e-4)


def test_models_that_take_numbers_are_not_wrapped(penguins):
    X, y, names, codes = penguins
    masker = _quiet(lambda: jaxshap.maskers.Independent(X))
    host = lambda a: np.asarray(a)[:, 3] * 2.0 + np.asarray(a)[:, 0]  # codes are numbers to it
    jax_model = lambda a: a[:, 3] * 2.0 + a[:, 0]
    for model in (host, jax_model):
        ex = jaxshap.ExactExplainer(model, masker)
        assert ex.model.model is model
    a = jaxshap.ExactExplainer(host, masker)(X.iloc[:4])
    b = jaxshap.ExactExplainer(jax_model, masker)(jnp.asarray(codes[:4], jnp.float32))
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), atol=1e-4)
    # a model fitted on frames whose names differ from the background's keeps getting numbers
    other = Ridge().fit(pd.DataFrame(codes, columns=[f"c{j}" for j in range(6)]), y)
    ex = jaxshap.ExactExplainer(other.predict, masker)
    assert not isinstance(ex.model.model, FrameModel)
