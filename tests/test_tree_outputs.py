"""TreeExplainer's model_output: probability, predict_proba, log_loss; approximate (Saabas),
check_additivity, data in path-dependent mode, IsolationForest.

Oracles: shap.TreeExplainer on identical inputs, the models' own predict_proba / predictions
(efficiency in the output's units), and a brute-force oracle of the rescaled per-background-row
definition built from the library's raw predictions on hybrid rows.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
shap = pytest.importorskip("shap")
from sklearn import ensemble as sk_ensemble  # noqa: E402

M = 4


def _data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, M)).astype(np.float32)
    y = 2 * X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] + 0.3 * rng.normal(size=n)
    return X, y


def _sigmoid(m):
    return 1.0 / (1.0 + np.exp(-m))


def _softmax(m):
    e = np.exp(m - m.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _per_background_shapley(raw, x, bg):
    """For each background row b: ``(phi [M, K], f(x), f(b))``, ``phi`` the exact Shapley values of
    S -> raw(x_S, b_-S) (every hybrid row sent to the library)."""
    subsets = [frozenset(c) for r in range(M + 1) for c in itertools.combinations(range(M), r)]
    fx = np.asarray(raw(x[None]), np.float64).reshape(-1)
    for b in bg:
        hybrids = np.repeat(b[None], len(subsets), 0)
        for i, S in enumerate(subsets):
            hybrids[i, sorted(S)] = x[sorted(S)]
        out = np.asarray(raw(hybrids), np.float64).reshape(len(subsets), -1)
        v = dict(zip(subsets, out))
        yield shapley_from_game(v.__getitem__, M), fx, out[0]


def _rescaled_oracle(raw, g, x, bg):
    """Per background row b: exact Shapley values of S -> raw(x_S, b_-S), rescaled per output by
    (g(f(x)) - g(f(b))) / (f(x) - f(b)), averaged."""
    total = 0.0
    for phi, fx, fb in _per_background_shapley(raw, x, bg):
        total = total + phi * (g(fx) - g(fb)) / (fx - fb)
    return total / len(bg)


def _softmax_class_shapley(fx, fb):
    """psi[k, j]: Shapley value of class j's margin in T -> softmax_k(m_T), m_T taking the
    classes in T from fx and the rest from fb, by averaging over all orders of the classes."""
    k = fx.size
    psi = np.zeros((k, k))
    orders = list(itertools.permutations(range(k)))
    for order in orders:
        m = fb.copy()
        before = _softmax(m)
        for j in order:
            m[j] = fx[j]
            after = _softmax(m)
            psi[:, j] += after - before
            before = after
    return psi / len(orders)


def _softmax_oracle(raw, x, bg):
    total = 0.0
    for phi, fx, fb in _per_background_shapley(raw, x, bg):  # phi [M, K(j)]
        r = _softmax_class_shapley(fx, fb) / (fx - fb)[None, :]  # [K(k), K(j)]
        total = total + phi @ r.T
    return total / len(bg)


def _total(expl):
    return np.asarray(expl.values, np.float64).sum(1) + np.asarray(expl.base_values, np.float64)


@pytest.mark.parametrize("histogram_slots", [None, 2, 0])
def test_probability_binary_xgboost_matches_shap_and_oracle(monkeypatch, histogram_slots):
    """Every path from the rows' pattern histograms (default), the short ones only (2), or none
    (0: the rescaled pair games), over background chunks of 7 rows with the last one padded."""
    from jaxshap._explainers import _tree_build

    X, y = _data()
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3).fit(X, (y > 0).astype(int))
    bg, rows = X[100:120], X[:8]
    if histogram_slots is not None:
        monkeypatch.setattr(_tree_build, "MAX_HISTOGRAM_SLOTS", histogram_slots)
        monkeypatch.setattr(_tree_build, "BACKGROUND_CHUNK", 7)
    ex = jaxshap.TreeExplainer(model, bg, model_output="probability")
    kinds = ["S" in g for g in ex._default.groups]
    assert all(kinds) if histogram_slots is None else (any(kinds) == (histogram_slots > 0) and not all(kinds))
    ours = ex(rows)
    np.testing.assert_allclose(_total(ours), model.predict_proba(rows)[:, 1], rtol=0, atol=2e-6)
    ref = shap.TreeExplainer(model, bg, model_output="probability", feature_perturbation="interventional")
    np.testing.assert_allclose(np.asarray(ours.values), ref(rows).values, rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(float(ex.expected_value), ref.expected_value, atol=2e-6)
    raw = lambda Z: model.predict(Z, output_margin=True)  # noqa: E731
    for i in range(2):
        np.testing.assert_allclose(np.asarray(ours.values)[i], _rescaled_oracle(raw, _sigmoid, rows[i], bg)[:, 0],
                                   rtol=1e-4, atol=2e-6)


def test_probability_multiclass_is_softmax_and_efficient():
    X, y = _data(1)
    model = lgb.LGBMClassifier(n_estimators=3, num_leaves=5, verbose=-1).fit(X, np.digitize(y, [-1, 1]))
    raw = lambda Z: model.predict(Z, raw_score=True)  # noqa: E731
    rows = X[:6]
    # background rows whose margins all differ from row 0's (the oracle divides by them)
    gap = np.abs(raw(X[100:200]) - raw(rows[:1])).min(1)
    bg = X[100:200][gap > 1e-3][:10]
    ours = jaxshap.TreeExplainer(model, bg, model_output="probability")(rows)
    assert ours.values.shape == (6, M, 3)
    np.testing.assert_allclose(_total(ours), model.predict_proba(rows), rtol=0, atol=2e-6)
    expected = _softmax_oracle(raw, rows[0], bg)
    np.testing.assert_allclose(np.asarray(ours.values)[0], expected, rtol=1e-4, atol=2e-6)


def test_predict_proba_binary_gradient_boosting_matches_shap():
    X, y = _data(2)
    model = sk_ensemble.GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y > 0)
    bg, rows = X[100:120], X[:6]
    ours = jaxshap.TreeExplainer(model, bg, model_output="predict_proba")(rows)
    assert ours.values.shape == (6, M, 2)
    np.testing.assert_allclose(_total(ours), model.predict_proba(rows), rtol=0, atol=2e-6)
    # shap 0.51 has no "predict_proba" for this model; its "probability" is the second column
    ref = shap.TreeExplainer(model, bg, model_output="probability", feature_perturbation="interventional")(rows)
    np.testing.assert_allclose(np.asarray(ours.values)[..., 1], ref.values, rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(np.asarray(ours.values)[..., 0], -ref.values, rtol=1e-4, atol=2e-6)


def test_probability_of_a_forest_is_its_raw_output():
    X, y = _data(3)
    model = sk_ensemble.RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y > 0)
    bg, rows = X[100:120], X[:6]
    ours = jaxshap.TreeExplainer(model, bg, model_output="probability")(rows)
    raw = jaxshap.TreeExplainer(model, bg)(rows)
    np.testing.assert_allclose(np.asarray(ours.values), np.asarray(raw.values), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_total(ours), model.predict_proba(rows), atol=2e-6)


@pytest.mark.parametrize("kind", ["binary", "regression"])
def test_log_loss_matches_shap(kind):
    X, y = _data(4)
    if kind == "binary":
        labels = (y > 0).astype(int)
        model = xgb.XGBClassifier(n_estimators=3, max_depth=3).fit(X, labels)
        p = model.predict_proba(X[:8])[:, 1]
        loss = -(labels[:8] * np.log(p) + (1 - labels[:8]) * np.log(1 - p))
    else:
        labels = y
        model = xgb.XGBRegressor(n_estimators=3, max_depth=3).fit(X, labels)
        loss = (model.predict(X[:8]) - labels[:8]) ** 2
    bg, rows = X[100:112], X[:8]
    ours = jaxshap.TreeExplainer(model, bg, model_output="log_loss")(rows, y=labels[:8])
    np.testing.assert_allclose(_total(ours), loss, rtol=1e-5, atol=1e-5)
    ref = shap.TreeExplainer(model, bg, model_output="log_loss", feature_perturbation="interventional")
    np.testing.assert_allclose(np.asarray(ours.values), ref(rows, y=labels[:8]).values, rtol=1e-4, atol=1e-5)


def test_model_output_errors():
    X, y = _data()
    clf = xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, y > 0)
    with pytest.raises(ValueError, match="model_output"):
        jaxshap.TreeExplainer(clf, X[:10], model_output="margin")
    with pytest.raises(ValueError, match="interventionally"):
        jaxshap.TreeExplainer(clf, model_output="probability")
    with pytest.raises(ValueError, match="y="):
        jaxshap.TreeExplainer(clf, X[:10], model_output="log_loss")(X[:2])
    with pytest.raises(ValueError, match="approximate"):
        jaxshap.TreeExplainer(clf, X[:10], model_output="probability")(X[:2], approximate=True)
    reg = xgb.XGBRegressor(n_estimators=2, max_depth=2, objective="reg:absoluteerror").fit(X, y)
    with pytest.raises(ValueError, match="log_loss"):
        jaxshap.TreeExplainer(reg, X[:10], model_output="log_loss")


# --- point 7: approximate, check_additivity, data in path-dependent mode, IsolationForest -------------
def test_approximate_is_saabas_as_shap_and_xgboost():
    X, y = _data(5)
    model = xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, np.digitize(y, [-1, 1]))
    rows = X[:8]
    ours = jaxshap.TreeExplainer(model)(rows, approximate=True)
    approx = model.get_booster().predict(xgb.DMatrix(rows), pred_contribs=True, approx_contribs=True)
    np.testing.assert_allclose(np.asarray(ours.values), np.transpose(approx[:, :, :-1], (0, 2, 1)), rtol=1e-4, atol=2e-5)
    ref = shap.TreeExplainer(model).shap_values(rows, approximate=True)
    np.testing.assert_allclose(np.asarray(ours.values), ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(_total(ours), model.predict(rows, output_margin=True), atol=3e-5)
    exact = jaxshap.TreeExplainer(model)(rows)
    assert np.abs(np.asarray(exact.values) - np.asarray(ours.values)).max() > 1e-3


def test_check_additivity_catches_a_wrong_answer():
    X, y = _data(6)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3).fit(X, y)
    ex = jaxshap.TreeExplainer(model)
    ex(X[:4])  # passes
    ex._default.base = ex._default.base + 0.01  # a corrupted explainer
    with pytest.raises(RuntimeError, match="Additivity check failed"):
        ex(X[:4])
    ex(X[:4], check_additivity=False)


def test_path_dependent_with_data_recounts_covers_as_shap():
    X, y = _data(7)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3).fit(X, y)
    bg, rows = X[100:140], X[:6]
    ours = jaxshap.TreeExplainer(model, bg, feature_perturbation="tree_path_dependent")(rows)
    ref = shap.TreeExplainer(model, bg, feature_perturbation="tree_path_dependent")(rows)
    np.testing.assert_allclose(np.asarray(ours.values), ref.values, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ours.base_values), model.predict(bg, output_margin=True).mean(), atol=2e-5)
    plain = jaxshap.TreeExplainer(model)(rows)
    assert np.abs(np.asarray(plain.values) - np.asarray(ours.values)).max() > 1e-4


@pytest.mark.parametrize("mode", ["tree_path_dependent", "interventional"])
def test_isolation_forest_explains_mean_path_length_as_shap(mode):
    X, _ = _data(8)
    model = sk_ensemble.IsolationForest(n_estimators=6, max_samples=64, max_features=3, random_state=0).fit(X)
    bg = X[100:120] if mode == "interventional" else None
    rows = X[:8]
    ours = jaxshap.TreeExplainer(model, bg, mode)(rows)
    c = 2.0 * (np.log(63.0) + np.euler_gamma) - 2.0 * 63.0 / 64.0  # c(max_samples)
    mean_path = -np.log2(-model.score_samples(rows)) * c
    np.testing.assert_allclose(_total(ours), mean_path, rtol=1e-5, atol=1e-5)
    ref = shap.TreeExplainer(model, bg, feature_perturbation=mode)(rows)
    np.testing.assert_allclose(np.asarray(ours.values), ref.values, rtol=1e-4, atol=2e-5)
