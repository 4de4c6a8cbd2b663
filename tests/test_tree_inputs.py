"""TreeExplainer on users' real models: exact routing precision, XGBoost's ``missing=``, early
stopping and ``tree_limit``, DataFrames with mixed and nullable dtypes, DMatrix and sparse rows.

Oracles: each library's own ``predict`` (efficiency must reproduce it exactly, row by row),
XGBoost's own TreeSHAP (``pred_contribs=True``) and ``shap.TreeExplainer`` on identical inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import interventional_shapley

import jaxshap

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
pd = pytest.importorskip("pandas")
shap = pytest.importorskip("shap")
from sklearn import ensemble as sk_ensemble  # noqa: E402
from sklearn import tree as sk_tree  # noqa: E402

from jaxshap._tree._reader import import_model  # noqa: E402


def _total(expl) -> np.ndarray:
    values = np.asarray(expl.values, np.float64)
    return values.sum(1) + np.asarray(expl.base_values, np.float64)


def _regression(n=300, m=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m)).astype(dtype)
    y = 3 * X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    return X, y


def _at_thresholds(model, X, dtype=np.float64) -> np.ndarray:
    """Rows that put feature values exactly at, and one ``dtype`` ulp either side of, every
    split threshold of the model (read from the imported ensemble)."""
    if hasattr(model, "_predictors"):  # HistGradientBoosting: the library's own float64 thresholds
        nodes = [p.nodes for preds in model._predictors for p in preds]
        feats = np.concatenate([nd["feature_idx"][nd["is_leaf"] == 0] for nd in nodes])
        thrs = np.concatenate([nd["num_threshold"][nd["is_leaf"] == 0] for nd in nodes])
    else:
        e = import_model(model)
        inner = e.feature >= 0
        feats, thrs = e.feature[inner], e.threshold[inner]
    rows = []
    for k, (f, t) in enumerate(zip(feats, thrs)):
        for v in (np.float64(t), np.nextafter(t, np.inf), np.nextafter(t, -np.inf)):
            r = X[k % X.shape[0]].astype(np.float64).copy()
            r[f] = dtype(v) if dtype is np.float64 else v
            rows.append(r)
    return np.asarray(rows)


# --- 1. routing precision ----------------------------------------------------------------------------
def test_lightgbm_routes_float64_values_at_thresholds_as_predict():
    X, y = _regression()
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=6, verbose=-1).fit(X, y)
    Xt = _at_thresholds(model, X)
    expected = model.predict(Xt, raw_score=True)
    for data in (None, X[:20]):
        expl = jaxshap.TreeExplainer(model, data)(Xt)
        np.testing.assert_allclose(_total(expl), expected, rtol=0, atol=2e-5)
    np.testing.assert_allclose(import_model(model).predict(Xt)[:, 0], expected, rtol=0, atol=1e-9)


def test_lightgbm_near_tie_rows_differ_from_float32_routing():
    """The test above can fail: routing these rows in float32 changes the prediction."""
    X, y = _regression()
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=6, verbose=-1).fit(X, y)
    Xt = _at_thresholds(model, X)
    wrong = model.predict(Xt.astype(np.float32).astype(np.float64), raw_score=True)
    assert np.abs(wrong - model.predict(Xt, raw_score=True)).max() > 1e-3


def test_hist_gradient_boosting_routes_float64_values_at_thresholds_as_predict():
    X, y = _regression()
    X = np.round(X * 7) / 7 + 1e-9  # few distinct values: thresholds are midpoints between them
    model = sk_ensemble.HistGradientBoostingRegressor(max_iter=6, max_leaf_nodes=6).fit(X, y)
    Xt = _at_thresholds(model, X)
    expected = model.predict(Xt)
    assert np.abs(model.predict(Xt.astype(np.float32).astype(np.float64)) - expected).max() > 1e-3
    for data in (None, X[:20]):
        np.testing.assert_allclose(_total(jaxshap.TreeExplainer(model, data)(Xt)), expected, rtol=0, atol=2e-5)


@pytest.mark.parametrize("kind", ["xgb", "dt"])
def test_float32_libraries_route_near_ties_as_predict(kind):
    X, y = _regression()
    if kind == "xgb":
        model = xgb.XGBRegressor(n_estimators=6, max_depth=3).fit(X, y)
        raw = lambda Z: model.predict(Z, output_margin=True)  # noqa: E731
    else:
        model = sk_tree.DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y)
        raw = model.predict
    Xt = _at_thresholds(model, X)
    # float64 values one float64 ulp away, and one float32 ulp away, from the thresholds
    Xt32 = _at_thresholds(model, X, np.float32)
    for rows in (Xt, Xt32):
        expected = raw(rows)
        for data in (None, X[:20]):
            np.testing.assert_allclose(_total(jaxshap.TreeExplainer(model, data)(rows)), expected, rtol=0, atol=3e-5)


# --- 2. XGBoost missing= -------------------------------------------------------------------------------
def test_xgboost_custom_missing_value_goes_the_default_way():
    X, y = _regression(dtype=np.float32)
    rng = np.random.default_rng(3)
    X = np.where(rng.random(X.shape) < 0.2, np.float32(1e-8), X).astype(np.float32)
    model = xgb.XGBRegressor(n_estimators=6, max_depth=3, missing=1e-8).fit(X, y)
    rows = X[:40]
    expected = model.predict(rows, output_margin=True)
    for data in (None, X[100:130]):
        np.testing.assert_allclose(_total(jaxshap.TreeExplainer(model, data)(rows)), expected, rtol=0, atol=3e-5)
    ours = jaxshap.TreeExplainer(model)(rows)
    contribs = model.get_booster().predict(xgb.DMatrix(rows, missing=1e-8), pred_contribs=True)
    np.testing.assert_allclose(np.asarray(ours.values), contribs[:, :-1], rtol=1e-4, atol=2e-5)


# --- 3. early stopping and tree_limit --------------------------------------------------------------------
def _early_stopped(kind):
    X, y = _regression(n=400, dtype=np.float32)
    rng = np.random.default_rng(5)
    Xv = rng.normal(size=(200, X.shape[1])).astype(np.float32)
    yv = 3 * Xv[:, 0] + 4 * rng.normal(size=200)
    if kind == "xgb":
        model = xgb.XGBRegressor(n_estimators=60, max_depth=3, learning_rate=0.5, early_stopping_rounds=4)
        model.fit(X, y, eval_set=[(Xv, yv)], verbose=False)
        assert model.best_iteration + 1 < model.get_booster().num_boosted_rounds()
        return model, (lambda Z: model.predict(Z, output_margin=True)), X
    # (the sklearn wrapper keeps only the best iterations; a kept training Booster holds them all)
    params = {"num_leaves": 6, "learning_rate": 0.5, "verbose": -1}
    model = lgb.train(params, lgb.Dataset(X, y), 60, valid_sets=[lgb.Dataset(Xv, yv)],
                      callbacks=[lgb.early_stopping(4, verbose=False)], keep_training_booster=True)
    assert 0 < model.best_iteration < model.current_iteration()
    return model, (lambda Z: model.predict(Z, raw_score=True)), X


@pytest.mark.parametrize("kind", ["xgb", "lgb"])
def test_early_stopping_explains_what_predict_uses(kind):
    model, raw, X = _early_stopped(kind)
    rows = X[:20]
    for data in (None, X[100:130]):
        np.testing.assert_allclose(_total(jaxshap.TreeExplainer(model, data)(rows)), raw(rows), rtol=0, atol=3e-5)
    if kind == "xgb":
        ref = shap.TreeExplainer(model)(rows).values
    else:  # LightGBM's own TreeSHAP, which predicts with the best iteration too
        ref = model.predict(rows, pred_contrib=True)[:, :-1]
    np.testing.assert_allclose(np.asarray(jaxshap.TreeExplainer(model)(rows).values), ref, rtol=1e-4, atol=2e-5)


def test_tree_limit_explains_the_first_rounds():
    X, y = _regression(dtype=np.float32)
    model = xgb.XGBClassifier(n_estimators=8, max_depth=3).fit(X, np.digitize(y, [-1, 1]))
    booster = model.get_booster()
    rows, bg = X[:10], X[100:130]
    for limit in (1, 3):
        margin = booster.predict(xgb.DMatrix(rows), output_margin=True, iteration_range=(0, limit))
        for data in (None, bg):
            ex = jaxshap.TreeExplainer(model, data)
            expl = ex(rows, tree_limit=limit)
            total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
            np.testing.assert_allclose(total, margin, rtol=0, atol=3e-5)
        contribs = booster.predict(xgb.DMatrix(rows), pred_contribs=True, iteration_range=(0, limit))
        ours = np.asarray(jaxshap.TreeExplainer(model)(rows, tree_limit=limit).values)
        np.testing.assert_allclose(ours, np.transpose(contribs[:, :, :-1], (0, 2, 1)), rtol=1e-4, atol=2e-5)
    with pytest.raises(ValueError, match="tree_limit"):
        jaxshap.TreeExplainer(model)(rows, tree_limit=0)


# --- 4. DataFrames, DMatrix, sparse ------------------------------------------------------------------------
def _mixed_frame(n=240, seed=0, nullable=False):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = rng.integers(0, 5, size=n)
    c = rng.random(n) < 0.4
    d = rng.normal(size=n).astype(np.float32)
    y = 2 * a + b - 1.5 * c + d
    df = pd.DataFrame({"a": a, "b": b, "c": c, "d": d})
    if nullable:
        df = df.astype({"a": "Float64", "b": "Int64", "c": "boolean", "d": "Float32"})
        for col, frac in (("a", 0.1), ("b", 0.1), ("c", 0.1)):
            df.loc[rng.random(n) < frac, col] = pd.NA
    return df, y


@pytest.mark.parametrize("nullable", [False, True])
@pytest.mark.parametrize("kind", ["xgb", "lgb", "hgb"])
def test_mixed_and_nullable_dataframes(kind, nullable):
    df, y = _mixed_frame(nullable=nullable)
    if kind == "xgb":
        model = xgb.XGBRegressor(n_estimators=5, max_depth=3).fit(df, y)
        raw = lambda Z: model.predict(Z, output_margin=True)  # noqa: E731
    elif kind == "lgb":
        model = lgb.LGBMRegressor(n_estimators=5, num_leaves=6, verbose=-1).fit(df, y)
        raw = lambda Z: model.predict(Z, raw_score=True)  # noqa: E731
    else:
        model = sk_ensemble.HistGradientBoostingRegressor(max_iter=5, max_leaf_nodes=6).fit(df, y)
        raw = model.predict
    rows = df.iloc[:25]
    for data in (None, df.iloc[100:130]):
        expl = jaxshap.TreeExplainer(model, data)(rows)
        assert list(expl.feature_names) == ["a", "b", "c", "d"]
        np.testing.assert_allclose(_total(expl), raw(rows), rtol=0, atol=3e-5)
    if kind == "xgb":
        contribs = model.get_booster().predict(xgb.DMatrix(rows), pred_contribs=True)
        np.testing.assert_allclose(np.asarray(jaxshap.TreeExplainer(model)(rows).values), contribs[:, :-1], rtol=1e-4, atol=2e-5)


def test_xgboost_dmatrix_and_sparse_rows():
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _regression(dtype=np.float32)
    rng = np.random.default_rng(2)
    X[rng.random(X.shape) < 0.3] = 0.0
    model = xgb.XGBRegressor(n_estimators=6, max_depth=3).fit(sparse.csr_matrix(X), y)
    rows = X[:30]
    csr = sparse.csr_matrix(rows)
    # XGBoost reads entries absent from a sparse matrix as missing (not as zeros)
    expected = model.predict(csr, output_margin=True)
    assert np.abs(expected - model.predict(rows, output_margin=True)).max() > 1e-4
    for data in (None, X[100:130]):
        ex = jaxshap.TreeExplainer(model, data)
        np.testing.assert_allclose(_total(ex(csr)), expected, rtol=0, atol=3e-5)
        np.testing.assert_allclose(_total(ex(xgb.DMatrix(csr))), expected, rtol=0, atol=3e-5)
        np.testing.assert_allclose(_total(ex(xgb.DMatrix(rows))), model.predict(rows, output_margin=True), atol=3e-5)
    contribs = model.get_booster().predict(xgb.DMatrix(csr), pred_contribs=True)
    np.testing.assert_allclose(np.asarray(jaxshap.TreeExplainer(model)(csr).values), contribs[:, :-1], rtol=1e-4, atol=2e-5)


def test_sparse_rows_are_zeros_for_lightgbm_and_sklearn():
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _regression(dtype=np.float64)
    X[np.random.default_rng(4).random(X.shape) < 0.3] = 0.0
    lgbm = lgb.LGBMRegressor(n_estimators=5, num_leaves=6, verbose=-1).fit(X, y)
    rf = sk_ensemble.RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y)
    csr = sparse.csr_matrix(X[:30])
    np.testing.assert_allclose(_total(jaxshap.TreeExplainer(lgbm)(csr)), lgbm.predict(csr, raw_score=True), atol=3e-5)
    np.testing.assert_allclose(_total(jaxshap.TreeExplainer(rf)(csr)), rf.predict(csr), atol=3e-5)


def test_non_numeric_frame_column_is_a_clear_error():
    df, y = _mixed_frame()
    model = lgb.LGBMRegressor(n_estimators=3, verbose=-1).fit(df, y)
    bad = df.iloc[:5].astype({"a": object})
    bad.loc[bad.index[0], "a"] = "text"
    with pytest.raises(TypeError, match="column 'a'"):
        jaxshap.TreeExplainer(model)(bad)


@pytest.mark.parametrize("dtype, error", [("float16", ValueError), ("int32", ValueError), ("banana", TypeError)])
def test_dtype_is_checked(dtype, error):
    X = np.random.default_rng(0).random((40, 3))
    model = xgb.XGBRegressor(n_estimators=2, max_depth=2).fit(X, X[:, 0])
    with pytest.raises(error, match="`dtype`"):
        jaxshap.TreeExplainer(model, dtype=dtype)


@pytest.mark.parametrize("make", [lambda: lgb.LGBMRegressor(), lambda: xgb.XGBClassifier()])
def test_unfitted_model_is_named(make):
    with pytest.raises(ValueError, match="not fitted"):
        jaxshap.TreeExplainer(make())


@pytest.mark.parametrize("kind", ["rf", "lgb", "hgb"])
@pytest.mark.parametrize("mode", ["tree_path_dependent", "interventional"])
def test_float64_models_give_float64_results(kind, mode):
    """A model that computes in float64 (a forest on float64 data, LightGBM, HistGradientBoosting)
    is explained in float64 with x64 off: the values sum to its own prediction to 1e-12 (shap's,
    in C++ doubles, to 3e-13) and equal shap's; XGBoost stays float32. Without the float64
    computation the sums were off by 1e-5 to 1e-4."""
    X, y = _regression(n=400, m=5)
    y = y * 1000.0 + 1e4  # large outputs: float32 rounding would show
    if kind == "rf":
        model = sk_ensemble.RandomForestRegressor(n_estimators=30, max_depth=8, random_state=0).fit(X, y)
    elif kind == "lgb":
        model = lgb.LGBMRegressor(n_estimators=30, num_leaves=15, verbose=-1).fit(X, y)
    else:
        model = sk_ensemble.HistGradientBoostingRegressor(max_iter=30).fit(X, y)
    raw = (lambda Z: model.predict(Z, raw_score=True)) if kind == "lgb" else model.predict
    data = X[-50:] if mode == "interventional" else None
    expl = jaxshap.TreeExplainer(model, data, feature_perturbation=mode)(X[:20])
    assert np.asarray(expl.values).dtype == np.float64 and np.asarray(expl.base_values).dtype == np.float64
    np.testing.assert_allclose(_total(expl), raw(X[:20]), rtol=0, atol=1e-12 * np.abs(y).max())
    if mode == "interventional":  # brute force in float64 (shap's interventional C++ drifts by 1e-6)
        ref = interventional_shapley(raw, X[:20], data)
    elif kind != "hgb":  # shap reads HistGradientBoosting through its own dictionary export
        ref = shap.TreeExplainer(model, feature_perturbation=mode)(X[:20]).values
    else:
        ref = np.asarray(expl.values)
    np.testing.assert_allclose(np.asarray(expl.values), ref, rtol=0, atol=1e-9 * np.abs(y).max())
    xgb_model = xgb.XGBRegressor(n_estimators=5, max_depth=3).fit(X, y)
    assert np.asarray(jaxshap.TreeExplainer(xgb_model, data, feature_perturbation=mode)(X[:5]).values).dtype == np.float32
