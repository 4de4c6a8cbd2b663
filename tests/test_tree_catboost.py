"""TreeExplainer on CatBoost: oblivious and non-symmetric trees, missing values, one-hot categorical
splits, outputs; what cannot be read raises.

Oracles: CatBoost's own raw predictions (``RawFormulaVal``: import, efficiency) and TreeSHAP
(``get_feature_importance(type="ShapValues")``), ``shap.TreeExplainer`` on identical inputs, and
brute-force Shapley values over all coalitions from the definition: interventional from
CatBoost's predictions on hybrid rows, path-dependent from the exported JSON trees (for
non-symmetric trees, whose CatBoost ShapValues are not additive in catboost 1.2).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

cb = pytest.importorskip("catboost")
shap = pytest.importorskip("shap")
pd = pytest.importorskip("pandas")

from jaxshap._tree._reader import import_model, reader_for  # noqa: E402

M = 5
SUBSETS = [frozenset(c) for r in range(M + 1) for c in itertools.combinations(range(M), r)]


def _data(seed=0, n=300, nan=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, M))
    y = 2 * X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] + 0.3 * rng.normal(size=n)
    X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _fit(kind, nan=0.0, **params):
    """A small fitted model and its data (``kind``: reg, bin, multi, plain)."""
    X, y = _data(nan=nan)
    params = dict(dict(iterations=20, depth=4, thread_count=1, verbose=False, random_seed=0,
                       allow_writing_files=False), **params)
    if kind == "reg":
        return cb.CatBoostRegressor(**params).fit(X, y), X
    if kind == "bin":
        return cb.CatBoostClassifier(**params).fit(X, (y > 0).astype(int)), X
    if kind == "multi":
        return cb.CatBoostClassifier(loss_function="MultiClass", **params).fit(X, np.digitize(y, [-1.0, 1.0])), X
    return cb.CatBoost(dict(loss_function="Logloss", **params)).fit(X, (y > 0).astype(int)), X  # plain CatBoost


def _raw(model):
    return lambda Z: np.asarray(model.predict(Z, prediction_type="RawFormulaVal"), np.float64).reshape(len(Z), -1)


def _total(expl):
    return np.asarray(expl.values, np.float64).sum(1) + np.asarray(expl.base_values, np.float64)


def _catboost_shap(model, rows, **pool):
    """CatBoost's own TreeSHAP as ``(values [n, M] or [n, M, K], base [n] or [n, K])``."""
    out = model.get_feature_importance(data=cb.Pool(rows, **pool), type="ShapValues")
    if out.ndim == 3:  # [n, K, M + 1]
        out = out.transpose(0, 2, 1)
    return out[:, :-1], out[:, -1]


def _pair_games(raw, x, bg):
    """For each background row b: ``(phi [M, K], f(x), f(b))``, ``phi`` the Shapley values of
    S -> raw(x_S, b_-S) over all coalitions (every hybrid row predicted by CatBoost)."""
    fx = raw(x[None])[0]
    for b in bg:
        hybrids = np.repeat(b[None], len(SUBSETS), 0)
        for i, S in enumerate(SUBSETS):
            hybrids[i, sorted(S)] = x[sorted(S)]
        v = dict(zip(SUBSETS, raw(hybrids)))
        yield shapley_from_game(v.__getitem__, M), fx, v[frozenset()]


def _interventional_oracle(raw, x, bg, g=None):
    """Interventional Shapley values ``[M, K]``: the mean over b of the pair games' values; with a
    transform ``g``, each rescaled by ``(g(f(x)) - g(f(b))) / (f(x) - f(b))``."""
    total = 0.0
    for phi, fx, fb in _pair_games(raw, x, bg):
        total = total + (phi if g is None else phi * (g(fx) - g(fb)) / (fx - fb))
    return total / len(bg)


@pytest.mark.parametrize("kind", ["reg", "bin", "multi", "plain"])
def test_path_dependent_matches_catboost_and_shap(kind):
    model, X = _fit(kind)
    rows = X[:40]
    ours = jaxshap.TreeExplainer(model)(rows)
    np.testing.assert_allclose(_total(ours).reshape(len(rows), -1), _raw(model)(rows), rtol=0, atol=1e-9)
    values, base = _catboost_shap(model, rows)
    np.testing.assert_allclose(np.asarray(ours.values), values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.asarray(ours.base_values), base, rtol=1e-6, atol=1e-9)
    if kind != "plain":
        np.testing.assert_allclose(np.asarray(ours.values), shap.TreeExplainer(model).shap_values(rows), rtol=1e-6,
                                   atol=1e-9)


@pytest.mark.parametrize("kind", ["reg", "multi"])
def test_interventional_matches_oracle_and_shap(kind):
    model, X = _fit(kind)
    bg, rows = X[100:112], X[:3]
    ours = jaxshap.TreeExplainer(model, bg)(rows)
    np.testing.assert_allclose(_total(ours).reshape(len(rows), -1), _raw(model)(rows), rtol=0, atol=1e-9)
    values = np.asarray(ours.values).reshape(len(rows), M, -1)
    for i in range(len(rows)):
        np.testing.assert_allclose(values[i], _interventional_oracle(_raw(model), rows[i], bg), rtol=1e-7, atol=1e-9)
    if kind == "reg":  # shap computes in float32 (and crashes on a multi-class CatBoost model, shap 0.51)
        ref = shap.TreeExplainer(model, bg, feature_perturbation="interventional")(rows)
        np.testing.assert_allclose(np.asarray(ours.values), ref.values, rtol=1e-4, atol=1e-6)


def test_probability_binary_matches_oracle_and_shap():
    model, X = _fit("bin")
    bg, rows = X[100:112], X[:3]
    ex = jaxshap.TreeExplainer(model, bg, model_output="probability")
    ours = ex(rows)
    np.testing.assert_allclose(_total(ours), model.predict_proba(rows)[:, 1], rtol=0, atol=1e-9)
    sigmoid = lambda m: 1 / (1 + np.exp(-m))  # noqa: E731
    for i in range(len(rows)):
        expected = _interventional_oracle(_raw(model), rows[i], bg, sigmoid)[:, 0]
        np.testing.assert_allclose(np.asarray(ours.values)[i], expected, rtol=1e-7, atol=1e-9)
    ref = shap.TreeExplainer(model, bg, feature_perturbation="interventional", model_output="probability")
    np.testing.assert_allclose(np.asarray(ours.values), ref(rows).values, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(ex.expected_value), ref.expected_value, atol=1e-6)


def test_multiclass_shapes_names_and_probability():
    model, X = _fit("multi", iterations=8, depth=3)
    bg, rows = X[100:106], X[:6]
    ex = jaxshap.TreeExplainer(model)
    expl = ex(rows)
    assert expl.values.shape == (6, M, 3) and expl.base_values.shape == (6, 3)
    assert np.asarray(ex.shap_values(rows)).shape == (6, M, 3) and np.shape(ex.expected_value) == (3,)
    assert list(expl.output_names) == [str(c) for c in model.classes_]
    proba = jaxshap.TreeExplainer(model, bg, model_output="probability")(rows)
    np.testing.assert_allclose(_total(proba), model.predict_proba(rows), rtol=0, atol=1e-9)


@pytest.mark.parametrize("nan_mode", ["Min", "Max"])
def test_missing_values_follow_nan_mode(nan_mode):
    model, X = _fit("reg", nan=0.12, nan_mode=nan_mode)
    rows = X[:40]
    assert np.isnan(rows).any()
    np.testing.assert_allclose(import_model(model).predict(rows), _raw(model)(rows), rtol=0, atol=1e-12)
    ours = jaxshap.TreeExplainer(model)(rows)
    values, base = _catboost_shap(model, rows)
    np.testing.assert_allclose(np.asarray(ours.values), values, rtol=1e-6, atol=1e-9)
    # a NaN is routed as -inf (Min) or +inf (Max) at every split: CatBoost puts a border at the
    # most negative (positive) float32 that separates it from the finite values
    extreme = np.where(np.isnan(rows), -np.inf if nan_mode == "Min" else np.inf, rows)
    np.testing.assert_allclose(_raw(model)(extreme), _raw(model)(rows), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jaxshap.TreeExplainer(model)(extreme).values), np.asarray(ours.values),
                               rtol=0, atol=1e-12)
    bg = X[100:110]
    iv = jaxshap.TreeExplainer(model, bg)(rows[:2])
    for i in range(2):
        np.testing.assert_allclose(np.asarray(iv.values)[i], _interventional_oracle(_raw(model), rows[i], bg)[:, 0],
                                   rtol=1e-7, atol=1e-9)


def _json_path_dependent(spec, x):
    """Path-dependent Shapley values ``[M]`` of one row from the model's JSON export (non-symmetric
    trees): v(S) descends following x at splits on S (NaN meets no condition) and averages both
    children by their leaf weights elsewhere."""
    floats = spec["features_info"]["float_features"]
    scale, bias = spec["scale_and_bias"]

    def walk(node, S):
        if "split" not in node:
            return node["value"], node["weight"]
        s = node["split"]
        f = floats[s["float_feature_index"]]["flat_feature_index"]
        (vl, wl), (vr, wr) = walk(node["left"], S), walk(node["right"], S)
        if f in S:
            return (vr, wl + wr) if x[f] > s["border"] else (vl, wl + wr)
        return (vl * wl + vr * wr) / max(wl + wr, 1e-300), wl + wr

    def v(S):
        return np.asarray([bias[0] + scale * sum(walk(t, S)[0] for t in spec["trees"])])

    return shapley_from_game(v, M)[:, 0]


@pytest.mark.parametrize("grow_policy", ["Depthwise", "Lossguide"])
def test_non_symmetric_trees(grow_policy, tmp_path):
    model, X = _fit("reg", nan=0.05, grow_policy=grow_policy, iterations=10)
    rows = X[:30]
    ours = jaxshap.TreeExplainer(model)(rows)
    np.testing.assert_allclose(_total(ours), _raw(model)(rows)[:, 0], rtol=0, atol=1e-9)
    model.save_model(str(tmp_path / "model.json"), format="json")
    spec = json.loads((tmp_path / "model.json").read_text())
    for i in range(3):
        np.testing.assert_allclose(np.asarray(ours.values)[i], _json_path_dependent(spec, rows[i]), rtol=1e-7,
                                   atol=1e-9)
    bg = X[100:110]
    iv = jaxshap.TreeExplainer(model, bg)(rows[:2])
    for i in range(2):
        np.testing.assert_allclose(np.asarray(iv.values)[i], _interventional_oracle(_raw(model), rows[i], bg)[:, 0],
                                   rtol=1e-7, atol=1e-9)


def _categorical_frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 5, n)
    d = rng.integers(0, 40, n)  # more than 32 categories: two words of bits
    a, b = rng.normal(size=n), rng.normal(size=n)
    y = np.asarray([0.0, 1.0, -1.0, 2.0, 0.5])[c] * a + np.sin(d) + b
    return pd.DataFrame({"a": a, "c": c, "b": b, "d": d}), y


def test_one_hot_categorical_splits():
    df, y = _categorical_frame()
    model = cb.CatBoostRegressor(iterations=20, depth=4, thread_count=1, verbose=False, random_seed=0,
                                 allow_writing_files=False, one_hot_max_size=64, cat_features=["c", "d"]).fit(df, y)
    assert import_model(model).cat_left is not None
    rows = df.iloc[:30]
    ours = jaxshap.TreeExplainer(model)(rows)
    values, base = _catboost_shap(model, rows, cat_features=["c", "d"])
    np.testing.assert_allclose(np.asarray(ours.values), values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.asarray(ours.values), shap.TreeExplainer(model).shap_values(rows), rtol=1e-6,
                               atol=1e-9)
    # codes as numbers, with categories CatBoost never saw (also negative ones): no condition met
    codes = rows.to_numpy(np.float64)[:8]
    codes[:4, 1], codes[4:8, 3] = [7, 100, 3000, -1], [41, 50, 999, -3]
    as_frame = pd.DataFrame(codes, columns=df.columns).astype({"c": int, "d": int})
    bg = df.iloc[200:210]
    iv = jaxshap.TreeExplainer(model, bg)(codes)
    np.testing.assert_allclose(_total(iv), model.predict(as_frame, prediction_type="RawFormulaVal"), rtol=0, atol=1e-9)

    def raw(Z):  # hybrid rows of codes, sent to CatBoost with their integer categories
        frame = pd.DataFrame(Z, columns=df.columns).astype({"c": int, "d": int})
        return np.asarray(model.predict(frame, prediction_type="RawFormulaVal"), np.float64).reshape(len(Z), -1)

    bg_codes = bg.to_numpy(np.float64)
    for i in (0, 5):
        expected = shapley_from_game(_hybrid_game(raw, codes[i], bg_codes), 4)[:, 0]
        np.testing.assert_allclose(np.asarray(iv.values)[i], expected, rtol=1e-7, atol=1e-9)

    # a pandas 'category' column is read by its values (what CatBoost trained on), not its codes
    shifted = rows.assign(c=pd.Categorical(rows["c"], categories=[4, 3, 2, 1, 0]))
    np.testing.assert_allclose(np.asarray(jaxshap.TreeExplainer(model)(shifted).values), values, rtol=1e-6, atol=1e-9)
    with pytest.raises(TypeError, match="'c'.*not numbers"):
        jaxshap.TreeExplainer(model)(rows.assign(c=pd.Categorical(np.asarray(["x", "y"])[rows["c"] % 2])))


def _hybrid_game(raw, x, bg):
    """``v(S) = mean_b raw(x_S, b_-S)`` as a function of frozensets (any number of features)."""

    def v(S):
        hybrid = bg.copy()
        hybrid[:, sorted(S)] = x[sorted(S)]
        return raw(hybrid).mean(0)

    return v


def test_ctr_and_string_categories_raise_naming_the_features():
    rng = np.random.default_rng(0)
    n = 300
    c, a = rng.integers(0, 8, n), rng.normal(size=n)
    frame = pd.DataFrame({"a": a, "colour": c})
    model = cb.CatBoostRegressor(iterations=5, depth=3, thread_count=1, verbose=False, allow_writing_files=False,
                                 cat_features=["colour"]).fit(frame, np.sin(c) + a)  # 8 > one_hot_max_size: CTRs
    with pytest.raises(TypeError, match=r"CTRs.*'colour'.*one_hot_max_size"):
        jaxshap.TreeExplainer(model)
    with pytest.raises(TypeError, match="CTRs"):
        jaxshap.Explainer(model, frame.iloc[:10])
    words = pd.DataFrame({"a": a, "shade": np.asarray(["red", "green"])[c % 2]})
    model = cb.CatBoostRegressor(iterations=5, depth=3, thread_count=1, verbose=False, allow_writing_files=False,
                                 cat_features=["shade"]).fit(words, c % 2 + a)
    with pytest.raises(TypeError, match="'shade'.*integer"):
        jaxshap.TreeExplainer(model)


def test_recognised_by_type_and_read_through_the_library_api():
    CatBoost = type("CatBoost", (), {"__module__": "catboost.core"})
    assert reader_for(type("CatBoostRegressor", (CatBoost,), {"__module__": "catboost.core"})()) is not None
    assert reader_for(type("CatBoost", (), {"__module__": "mylib"})()) is None
    with pytest.raises(ValueError, match="not fitted"):
        jaxshap.TreeExplainer(cb.CatBoostRegressor())
    model, X = _fit("bin", iterations=8, depth=3)
    ex = jaxshap.Explainer(model)
    assert isinstance(ex, jaxshap.TreeExplainer)
    rows = X[:5]
    np.testing.assert_allclose(np.asarray(ex(cb.Pool(rows)).values), np.asarray(ex(rows).values), rtol=0, atol=0)
    limited = ex(rows, tree_limit=7)
    np.testing.assert_allclose(_total(limited), model.predict(rows, prediction_type="RawFormulaVal", ntree_end=7),
                               rtol=0, atol=1e-9)
    model.set_scale_and_bias(2.5, [0.7])
    np.testing.assert_allclose(_total(jaxshap.TreeExplainer(model)(rows)), _raw(model)(rows)[:, 0], rtol=0, atol=1e-9)
