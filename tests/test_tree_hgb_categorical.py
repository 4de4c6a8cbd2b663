"""TreeExplainer on scikit-learn HistGradientBoosting models with categorical splits.

shap 0.51 reads these models as if their categorical splits were numeric (its values miss the
prediction by tenths), and refuses string categories, so the oracles are written here:

* routing: ``model._raw_predict`` on rows with unseen, negative, non-integer and missing
  categories;
* interventional: Shapley values over all coalitions of ``v(S) = mean_b f(x_S, b_-S)`` with
  ``f`` the model's own raw prediction on the hybrid rows;
* path-dependent: Shapley values over all coalitions of the cover-weighted expectation, by a
  recursion over scikit-learn's predictor nodes with scikit-learn's own routing rules applied
  to the rows its encoder produces.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from jaxshap._tree._reader import import_model  # noqa: E402

KINDS = ["reg", "bin", "multi"]


@pytest.fixture(autouse=True)
def one_openmp_thread():
    """scikit-learn's OpenMP threads spin-wait; on a busy 2-core machine a 5-iteration fit took
    0.03 s or 3 s at random. One thread keeps these small fits and predictions fast."""
    with threadpool_limits(1, "openmp"):
        yield
LEVELS = np.asarray([0, 3, 5, 7, 12, 40, 41, 60], np.float64)  # gaps, and more than 32 values: two words


def _data(n=400, seed=0):
    """Four features, categorical at positions 1 and 3 (so the encoder's reordering shows)."""
    rng = np.random.default_rng(seed)
    c1 = rng.choice(LEVELS, n)
    c3 = rng.integers(0, 5, n).astype(np.float64)
    x0, x2 = rng.normal(size=n), rng.normal(size=n)
    X = np.stack([x0, c1, x2, c3], 1)
    X[rng.random(n) < 0.05, 1] = np.nan
    y = 2 * np.sin(1.3 * c1) + np.asarray([1.0, -1.0, 0.5, 0.0, 2.0])[c3.astype(int)] * x0 + x2
    return X, y


@functools.lru_cache(maxsize=None)
def _fit(kind, max_iter=5):
    X, y = _data()
    if kind == "reg":
        model = HistGradientBoostingRegressor(max_iter=max_iter, max_leaf_nodes=8, categorical_features=[1, 3])
        return model.fit(X, y), X
    target = (y > 0).astype(int) if kind == "bin" else np.digitize(y, [-1.0, 1.0])
    model = HistGradientBoostingClassifier(max_iter=max_iter, max_leaf_nodes=8, categorical_features=[1, 3])
    return model.fit(X, target), X


def _odd_rows(X, seed=1):
    """Rows with categories the model never saw, negative, non-integer, huge and missing ones."""
    rng = np.random.default_rng(seed)
    R = X[:40].copy()
    R[:20, 1] = rng.choice([1.0, 2.0, 100.0, -1.0, 2.5, 3.0, np.nan, 1e9, 41.0, 40.5], 20)
    R[20:32, 3] = rng.choice([5.0, 6.0, -3.0, 0.5, np.nan, 4.0], 12)
    return R


def _raw(model, X):
    return np.asarray(model._raw_predict(X), np.float64)


def _total(expl):
    v, b = np.asarray(expl.values), np.asarray(expl.base_values)
    return v.sum(1) + b


@pytest.mark.parametrize("kind", KINDS)
def test_routing_equals_raw_predict(kind):
    model, X = _fit(kind)
    R = _odd_rows(X)
    e = import_model(model)
    assert e.cat_left is not None and e.cat_left.shape[-1] == 2  # values up to 60: two words
    np.testing.assert_array_equal(e.predict(R), _raw(model, R))
    if kind == "multi":  # tree_limit counts iterations (K trees each)
        staged = list(model._staged_raw_predict(R))
        np.testing.assert_array_equal(e.first_rounds(2).predict(R), staged[1])


@pytest.mark.parametrize("kind", KINDS)
def test_interventional_equals_brute_force(kind):
    model, X = _fit(kind)
    R, bg = _odd_rows(X), X[200:212]
    expl = jaxshap.TreeExplainer(model, bg)(R)  # efficiency is checked against the ensemble's walk
    raw = _raw(model, R)
    np.testing.assert_allclose(_total(expl), raw[:, 0] if kind != "multi" else raw, rtol=0, atol=1e-9)
    for i in (0, 25):  # an odd category in feature 1; in feature 3
        x = R[i]

        def v(S, x=x):
            hybrid = bg.copy()
            hybrid[:, sorted(S)] = x[sorted(S)]
            return _raw(model, hybrid).mean(0)

        phi = shapley_from_game(v, X.shape[1])  # [M, K]
        want = phi[:, 0] if kind != "multi" else phi
        np.testing.assert_allclose(np.asarray(expl.values)[i], want, rtol=0, atol=1e-9)


def _bit(words, code):
    return (int(words[code // 32]) >> (code % 32)) & 1 == 1


def _path_dependent_oracle(model, x):
    """Shapley values of the cover-weighted game, from scikit-learn's nodes and routing rules."""
    is_cat = np.asarray(model.is_categorical_)
    tree_cols = np.concatenate([np.flatnonzero(is_cat), np.flatnonzero(~is_cat)])  # the encoder's layout
    z = model._preprocessor.transform(x[None])[0]  # categories as codes, unseen ones NaN
    known, f_map = model._bin_mapper.make_known_categories_bitsets()

    def left(pred, node, value):
        if np.isnan(value):
            return bool(node["missing_go_to_left"])
        if node["is_categorical"]:
            code = int(value)
            if value < 0 or not (_bit(pred.raw_left_cat_bitsets[node["bitset_idx"]], code)
                                 or _bit(known[f_map[node["feature_idx"]]], code)):
                return bool(node["missing_go_to_left"])
            return _bit(pred.raw_left_cat_bitsets[node["bitset_idx"]], code)
        return value <= node["num_threshold"]

    def expect(pred, i, S):
        node = pred.nodes[i]
        if node["is_leaf"]:
            return node["value"]
        f = node["feature_idx"]
        if tree_cols[f] in S:
            return expect(pred, node["left"] if left(pred, node, z[f]) else node["right"], S)
        l, r = pred.nodes[node["left"]], pred.nodes[node["right"]]
        return (l["count"] * expect(pred, node["left"], S) + r["count"] * expect(pred, node["right"], S)) / node["count"]

    def v(S):
        out = np.asarray(model._baseline_prediction, np.float64).reshape(-1).copy()
        for preds in model._predictors:
            for k, pred in enumerate(preds):
                out[k] += expect(pred, 0, S)
        return out

    return shapley_from_game(v, x.size)


@pytest.mark.parametrize("kind", KINDS)
def test_path_dependent_equals_recursion_oracle(kind):
    model, X = _fit(kind, max_iter=3)
    R = _odd_rows(X)
    expl = jaxshap.TreeExplainer(model)(R)
    raw = _raw(model, R)
    np.testing.assert_allclose(_total(expl), raw[:, 0] if kind != "multi" else raw, rtol=0, atol=1e-9)
    for i in (1, 22):  # an odd category in feature 1; in feature 3
        x = R[i]
        phi = _path_dependent_oracle(model, x)
        want = phi[:, 0] if kind != "multi" else phi
        np.testing.assert_allclose(np.asarray(expl.values)[i], want, rtol=0, atol=1e-9)


def test_pandas_category_columns_from_dtype():
    """String and integer categories from pandas columns whose own category order differs from
    the sorted order the model encodes in, with unused categories; rows whose columns order
    their categories differently again, with labels the model never saw."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 400
    s, k, x = rng.choice(["z", "a", "m", "q"], n), rng.choice([3, 7, 100], n), rng.normal(size=n)
    df = pd.DataFrame({"x": x, "s": pd.Categorical(s, categories=["z", "m", "a", "q", "never"]),
                       "k": pd.Categorical(k, categories=[100, 7, 3, 55])})
    df.loc[rng.random(n) < 0.05, "s"] = np.nan
    y = 2.0 * (s == "m") + (k == 7) * x + x
    model = HistGradientBoostingRegressor(max_iter=5, max_leaf_nodes=8).fit(df, y)
    assert list(model.is_categorical_) == [False, True, True]
    rows = df.iloc[:12].copy()
    labels = rows["s"].astype(object).where(np.arange(12) % 4 != 0, "new")
    rows["s"] = pd.Categorical(labels, categories=["new", "q", "a", "m", "z"])
    rows["k"] = pd.Categorical(rows["k"].astype(int).where(np.arange(12) % 5 != 1, 55), categories=[55, 3, 7, 100])
    bg = df.iloc[200:210]
    expected = _raw(model, rows)[:, 0]
    expl = jaxshap.TreeExplainer(model, bg)(rows)
    assert list(expl.feature_names) == ["x", "s", "k"]
    np.testing.assert_allclose(_total(expl), expected, rtol=0, atol=1e-9)
    for i in (0, 1):
        def v(S, i=i):
            hybrid = bg.copy()
            for j in S:
                hybrid.isetitem(j, pd.Series([rows.iloc[i, j]] * len(bg), index=bg.index, dtype=object))
            return _raw(model, hybrid).mean(0)

        np.testing.assert_allclose(np.asarray(expl.values)[i], shapley_from_game(v, 3)[:, 0], rtol=0, atol=1e-9)


@pytest.mark.parametrize("levels", [[0, 1, 2000], [-1, 0, 1], [0.5, 1.0, 2.0]])
def test_numeric_categories_outside_the_codes_raise(levels):
    rng = np.random.default_rng(3)
    X = np.stack([rng.normal(size=200), rng.choice(levels, 200)], 1)
    model = HistGradientBoostingRegressor(max_iter=2, categorical_features=[1]).fit(X, X[:, 0] + (X[:, 1] == levels[1]))
    with pytest.raises(TypeError, match="feature 1 .*integers 0 to 1023|integers 0 to 1023.*feature 1"):
        jaxshap.TreeExplainer(model)
