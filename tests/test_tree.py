"""TreeExplainer: model import, path-dependent and interventional TreeSHAP.

Oracles: the libraries' own raw predictions (import), brute-force Shapley values over all
coalitions computed here from the definition (both value functions), ``shap.TreeExplainer``
on identical inputs, and ``jaxshap.ExactExplainer`` with the same background.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jaxshap
from oracle import path_dependent_shapley, shapley_from_game

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
shap = pytest.importorskip("shap")
from sklearn import ensemble as sk_ensemble  # noqa: E402
from sklearn import tree as sk_tree  # noqa: E402

from jaxshap._explainers import _tree_build as tree_explainer_module  # noqa: E402
from jaxshap._tree._reader import import_model  # noqa: E402

M = 5


def _data(nan: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(240, M)).astype(np.float32)
    clean = X.copy()
    if nan:
        X[rng.random(X.shape) < 0.12] = np.nan
    y = 2 * clean[:, 0] + clean[:, 1] * clean[:, 2] + 0.5 * clean[:, 3]
    return X, y


def _fit(kind: str):
    """A small fitted model, its raw-output function and data (with NaN where supported)."""
    nan = kind.startswith(("xgb", "lgb", "hgb", "dt"))
    X, y = _data(nan)
    yb = (y > 0).astype(int)
    ym = np.digitize(y, [-1.0, 1.0])
    if kind == "xgb_reg":
        m = xgb.XGBRegressor(n_estimators=8, max_depth=3).fit(X, y)
    elif kind == "xgb_bin":
        m = xgb.XGBClassifier(n_estimators=8, max_depth=3).fit(X, yb)
    elif kind == "xgb_multi":
        m = xgb.XGBClassifier(n_estimators=4, max_depth=3).fit(X, ym)
    elif kind == "xgb_booster":
        m = xgb.train({"max_depth": 3, "objective": "binary:logistic"}, xgb.DMatrix(X, label=yb), 6)
        return m, (lambda Z: m.predict(xgb.DMatrix(Z), output_margin=True)), X
    elif kind == "lgb_reg":
        m = lgb.LGBMRegressor(n_estimators=8, num_leaves=7, min_child_samples=5, verbose=-1).fit(X, y)
    elif kind == "lgb_bin":
        m = lgb.LGBMClassifier(n_estimators=8, num_leaves=7, min_child_samples=5, verbose=-1).fit(X, yb)
    elif kind == "lgb_multi":
        m = lgb.LGBMClassifier(n_estimators=4, num_leaves=7, min_child_samples=5, verbose=-1).fit(X, ym)
    elif kind == "lgb_booster":
        m = lgb.train({"num_leaves": 7, "verbose": -1, "min_data_in_leaf": 5}, lgb.Dataset(X, y), 6)
        return m, (lambda Z: m.predict(Z, raw_score=True)), X
    elif kind == "dt_clf":
        m = sk_tree.DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, ym)
        return m, m.predict_proba, X
    elif kind == "rf_reg":
        m = sk_ensemble.RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    elif kind == "rf_clf":
        m = sk_ensemble.RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, yb)
        return m, m.predict_proba, X
    elif kind == "et_reg":
        m = sk_ensemble.ExtraTreesRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    elif kind == "gb_multi":
        m = sk_ensemble.GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, ym)
        return m, m.decision_function, X
    elif kind == "hgb_reg":
        m = sk_ensemble.HistGradientBoostingRegressor(max_iter=6, max_leaf_nodes=7).fit(X, y)
    else:  # pragma: no cover
        raise KeyError(kind)
    if kind.startswith("xgb"):
        return m, (lambda Z: m.predict(Z, output_margin=True)), X
    if kind.startswith("lgb"):
        return m, (lambda Z: m.predict(Z, raw_score=True)), X
    return m, m.predict, X


KINDS = ["xgb_reg", "xgb_bin", "xgb_multi", "xgb_booster", "lgb_reg", "lgb_bin", "lgb_multi", "lgb_booster",
         "dt_clf", "rf_reg", "rf_clf", "et_reg", "gb_multi", "hgb_reg"]
SHAP_KINDS = ["xgb_reg", "xgb_bin", "xgb_multi", "lgb_reg", "lgb_multi", "rf_reg", "rf_clf", "dt_clf", "hgb_reg"]


N_ROWS = 12


@pytest.fixture(scope="module")
def models():
    return {k: _fit(k) for k in KINDS}


@pytest.fixture(scope="module")
def explained(models):
    """Per model kind: (path-dependent, interventional) explanations of the first rows, built
    lazily once; the background is rows 100-129."""
    cache = {}

    def get(kind):
        if kind not in cache:
            model, raw, X = models[kind]
            rows, bg = X[:N_ROWS], X[100:130]
            cache[kind] = (jaxshap.TreeExplainer(model)(rows), jaxshap.TreeExplainer(model, bg)(rows))
        return cache[kind]

    return get


def _as3(a, n):
    """Values [n, M] or [n, M, K] -> [n, M, K]; raw outputs [n] or [n, K] -> [n, 1, K]."""
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(n, M, -1) if a.size % M == 0 and a.ndim >= 2 and a.shape[1] == M else a.reshape(n, 1, -1)


# --- model import ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_import_matches_library_raw_output(models, kind):
    model, raw, X = models[kind]
    ensemble = import_model(model)
    expected = np.asarray(raw(X), dtype=np.float64).reshape(X.shape[0], -1)
    np.testing.assert_allclose(ensemble.predict(X), expected, rtol=1e-5, atol=1e-5)


def test_lightgbm_zero_as_missing_and_nan_as_zero_routing():
    X, y = _data(False)
    rng = np.random.default_rng(1)
    Xz = np.where(rng.random(X.shape) < 0.25, 0.0, X).astype(np.float32)
    for params in ({"zero_as_missing": True}, {"use_missing": False}):
        m = lgb.LGBMRegressor(n_estimators=6, num_leaves=7, verbose=-1, **params).fit(Xz, y)
        Xt = np.where(rng.random(X.shape) < 0.15, np.nan, Xz).astype(np.float32)
        np.testing.assert_allclose(import_model(m).predict(Xt)[:, 0], m.predict(Xt, raw_score=True), rtol=1e-6, atol=1e-6)
        expl = jaxshap.TreeExplainer(m)(Xt[:10])
        np.testing.assert_allclose(
            np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), m.predict(Xt[:10], raw_score=True), atol=1e-5
        )


# --- agreement with shap ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", SHAP_KINDS)
def test_path_dependent_matches_shap(models, explained, kind):
    model, raw, X = models[kind]
    Xe = X[:N_ROWS]
    ours = explained(kind)[0]
    ref = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")(Xe)
    n = Xe.shape[0]
    np.testing.assert_allclose(_as3(ours.values, n), _as3(ref.values, n), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.base_values).reshape(n, -1), np.asarray(ref.base_values).reshape(n, -1), atol=2e-5)


@pytest.mark.parametrize("kind", SHAP_KINDS)
def test_interventional_matches_shap(models, explained, kind):
    model, raw, X = models[kind]
    Xe, bg = X[:N_ROWS], X[100:130]
    ours = explained(kind)[1]
    ref = shap.TreeExplainer(model, bg, feature_perturbation="interventional")(Xe)
    n = Xe.shape[0]
    np.testing.assert_allclose(_as3(ours.values, n), _as3(ref.values, n), rtol=1e-4, atol=2e-5)
    # The base value is compared with its definition, the mean raw output over the background:
    # shap 0.51's interventional base_values for multi-class XGBoost miss the per-class
    # intercept (its values + base_values do not add up to the margin there).
    mean_raw = np.asarray(raw(bg), np.float64).reshape(bg.shape[0], -1).mean(0)
    np.testing.assert_allclose(np.asarray(ours.base_values).reshape(n, -1), np.broadcast_to(mean_raw, (n, mean_raw.size)), atol=2e-5)


# --- brute-force oracles from the definitions --------------------------------------------------------
def _all_subsets(m):
    return [frozenset(c) for r in range(m + 1) for c in itertools.combinations(range(m), r)]


def _interventional_oracle(raw, x, bg):
    """v(S) = mean_b raw(x_S, b_-S), by building every hybrid row and calling the library."""
    v = {}
    for S in _all_subsets(M):
        hybrid = bg.copy()
        idx = sorted(S)
        hybrid[:, idx] = x[idx]
        v[S] = np.asarray(raw(hybrid), dtype=np.float64).reshape(bg.shape[0], -1).mean(0)
    return shapley_from_game(v.__getitem__, M), v[frozenset()]


@pytest.mark.parametrize("kind", ["xgb_multi", "lgb_booster", "hgb_reg"])
def test_path_dependent_matches_brute_force(models, explained, kind):
    model, raw, X = models[kind]
    e = import_model(model)
    rows = X[:4]
    expl = explained(kind)[0][:4]
    for i, x in enumerate(rows):
        phi, base = path_dependent_shapley(e, x)
        np.testing.assert_allclose(_as3(expl.values, 4)[i], phi, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(np.asarray(expl.base_values).reshape(4, -1)[i], base, atol=2e-5)


@pytest.mark.parametrize("kind", ["xgb_booster", "xgb_multi", "lgb_multi", "dt_clf", "et_reg"])
def test_interventional_matches_brute_force(models, explained, kind):
    model, raw, X = models[kind]
    bg = X[100:130]
    rows = X[:2]
    expl = explained(kind)[1][:2]
    for i, x in enumerate(rows):
        phi, base = _interventional_oracle(raw, x, bg)
        np.testing.assert_allclose(_as3(expl.values, 2)[i], phi, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(np.asarray(expl.base_values).reshape(2, -1)[i], base, atol=2e-5)


def test_interventional_equals_exact_explainer(models):
    model, raw, X = models["xgb_reg"]
    X = np.nan_to_num(X)  # ExactExplainer rejects NaN
    bg, rows = X[100:116], X[:6]
    ours = jaxshap.TreeExplainer(model, bg, feature_perturbation="interventional")(rows)
    exact = jaxshap.ExactExplainer(lambda Z: np.asarray(raw(np.asarray(Z)), np.float32), bg)(rows)
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(exact.values), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.base_values), np.asarray(exact.base_values), atol=2e-5)


@pytest.mark.parametrize("max_table_slots", [0, 2])
def test_pair_kernel_equals_pattern_tables(models, explained, monkeypatch, max_table_slots):
    """Interventional: every path against the background in chunks (0), or short paths from the
    background's pattern tables and longer ones in chunks (2), equal the default build."""
    model, raw, X = models["xgb_multi"]
    tabled = explained("xgb_multi")[1]
    monkeypatch.setattr(tree_explainer_module, "MAX_TABLE_SLOTS", max_table_slots)
    monkeypatch.setattr(tree_explainer_module, "BACKGROUND_CHUNK", 7)  # 30 rows: chunks of 7, the last padded
    direct = jaxshap.TreeExplainer(model, X[100:130])
    kinds = ["table" in g["blocks"] for g in direct._default.groups]
    assert any(kinds) == (max_table_slots > 0) and not all(kinds)
    np.testing.assert_allclose(np.asarray(direct(X[:N_ROWS]).values), np.asarray(tabled.values), rtol=1e-5, atol=1e-6)


# --- efficiency, chunking, shapes, errors -----------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_efficiency_both_modes(models, explained, kind):
    model, raw, X = models[kind]
    expected = np.asarray(raw(X[:N_ROWS]), dtype=np.float64).reshape(N_ROWS, -1)
    for expl in explained(kind):
        total = _as3(expl.values, N_ROWS).sum(1) + np.asarray(expl.base_values).reshape(N_ROWS, -1)
        np.testing.assert_allclose(total, expected, rtol=1e-5, atol=3e-5)


def test_small_memory_budget_chunks_rows_and_agrees(models, explained):
    model, raw, X = models["lgb_multi"]
    for mode, expl in zip(("tree_path_dependent", "interventional"), explained("lgb_multi")):
        bg = X[100:130] if mode == "interventional" else None
        ex = jaxshap.TreeExplainer(model, bg, mode, memory_budget=1 << 12)
        assert ex._rows_per_chunk(N_ROWS) < N_ROWS
        np.testing.assert_allclose(np.asarray(ex(X[:N_ROWS]).values), np.asarray(expl.values), rtol=1e-6, atol=1e-6)


def test_shapes_names_and_single_row(models, explained):
    model, raw, X = models["xgb_multi"]
    ex = jaxshap.TreeExplainer(model, feature_names=list("abcde"))
    expl = ex(X[:N_ROWS])
    assert expl.values.shape == (N_ROWS, M, 3) and expl.base_values.shape == (N_ROWS, 3)
    assert expl.feature_names == list("abcde") and expl.output_names == ["0", "1", "2"]  # the classes_
    assert expl.stderr is None
    single = ex(X[0])
    assert single.values.shape == (1, M, 3)
    np.testing.assert_allclose(np.asarray(single.values[0]), np.asarray(expl.values[0]), rtol=1e-6, atol=1e-7)
    reg = explained("xgb_reg")[0]
    assert reg.values.shape == (N_ROWS, M) and reg.base_values.shape == (N_ROWS,) and reg.output_names is None


def test_errors(models):
    model, raw, X = models["xgb_reg"]
    with pytest.raises(TypeError, match="Supported models"):
        jaxshap.TreeExplainer(object())
    with pytest.raises(TypeError, match="XGBoost"):
        jaxshap.TreeExplainer(sk_ensemble.AdaBoostRegressor())
    with pytest.raises(ValueError, match="needs background rows"):
        jaxshap.TreeExplainer(model, feature_perturbation="interventional")
    with pytest.raises(ValueError, match="feature_perturbation"):
        jaxshap.TreeExplainer(model, feature_perturbation="observational")
    with pytest.raises(ValueError, match="features"):
        jaxshap.TreeExplainer(model, X[:10, :3])
    with pytest.raises(ValueError, match="features"):
        jaxshap.TreeExplainer(model)(X[:2, :4])
    with pytest.raises(ValueError, match="not fitted"):
        jaxshap.TreeExplainer(sk_ensemble.RandomForestRegressor())


def test_unsupported_model_features_raise_type_error():
    X, y = _data(False)
    linear = lgb.LGBMRegressor(n_estimators=2, linear_tree=True, verbose=-1).fit(X, y)
    with pytest.raises(TypeError, match="linear trees"):
        jaxshap.TreeExplainer(linear)


def test_dataframe_trained_xgboost_keeps_names_and_efficiency():
    pd = pytest.importorskip("pandas")
    X, y = _data(True)
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(M)])
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3).fit(df, y)
    expl = jaxshap.TreeExplainer(model)(df.iloc[:5])
    assert expl.feature_names == [f"f{j}" for j in range(M)]
    total = np.asarray(expl.values).sum(1) + np.asarray(expl.base_values)
    np.testing.assert_allclose(total, model.predict(df.iloc[:5], output_margin=True), rtol=1e-5, atol=1e-5)


# --- large and weighted backgrounds -----------------------------------------------------------------
def test_a_large_background_is_met_in_chunks(models, monkeypatch):
    """``maskers.Independent(rows, max_samples=None)`` keeps every background row; the pair kernel
    meets them in chunks (64 here, the last one padded) and equals the pattern tables and the
    brute-force interventional values."""
    from oracle import interventional_shapley

    model, raw, X = models["xgb_reg"]
    background = jaxshap.maskers.Independent(np.nan_to_num(X[:230]), max_samples=None)
    tabled = jaxshap.TreeExplainer(model, background)
    assert tabled._background_rows.shape[0] == 230
    monkeypatch.setattr(tree_explainer_module, "MAX_TABLE_SLOTS", 0)
    monkeypatch.setattr(tree_explainer_module, "BACKGROUND_CHUNK", 64)
    chunked = jaxshap.TreeExplainer(model, background)
    assert not any("table" in g["blocks"] for g in chunked._default.groups)
    rows = X[230:233]
    ours = np.asarray(chunked(rows).values)
    np.testing.assert_allclose(ours, np.asarray(tabled(rows).values), rtol=1e-5, atol=1e-6)
    expected = interventional_shapley(lambda Z: raw(np.asarray(Z, np.float32)), rows, np.nan_to_num(X[:230]))
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("kind, output", [("xgb_reg", "raw"), ("xgb_bin", "probability"), ("lgb_multi", "raw")])
def test_weighted_background_equals_repeated_rows(models, monkeypatch, kind, output):
    """A weighted background (k-means centres and weights) is the background with each row
    repeated as often as its weight: SHAP values, base values and pair interactions, through the
    pattern tables and through the chunked pair kernel."""
    model, raw, X = models[kind]
    rows, bg = X[:5], np.nan_to_num(X[100:110])
    counts = np.array([1, 3, 2, 4, 1, 1, 2, 5, 1, 3])
    weighted = jaxshap.maskers.Independent(bg, weights=counts, max_samples=None)
    repeated = jaxshap.maskers.Independent(np.repeat(bg, counts, axis=0), max_samples=None)
    for tables in (10, 0):
        monkeypatch.setattr(tree_explainer_module, "MAX_TABLE_SLOTS", tables)
        a = jaxshap.TreeExplainer(model, weighted, model_output=output)
        b = jaxshap.TreeExplainer(model, repeated, model_output=output)
        ea, eb = a(rows), b(rows)
        np.testing.assert_allclose(np.asarray(ea.values), np.asarray(eb.values), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(ea.base_values), np.asarray(eb.base_values), rtol=1e-6, atol=1e-6)
        if output == "raw":
            np.testing.assert_allclose(np.asarray(a(rows, interactions=2).values), np.asarray(b(rows, interactions=2).values),
                                       rtol=1e-5, atol=1e-6)
    path_a = jaxshap.TreeExplainer(model, weighted, feature_perturbation="tree_path_dependent")(rows)
    path_b = jaxshap.TreeExplainer(model, repeated, feature_perturbation="tree_path_dependent")(rows)
    np.testing.assert_allclose(np.asarray(path_a.values), np.asarray(path_b.values), rtol=1e-5, atol=1e-6)
