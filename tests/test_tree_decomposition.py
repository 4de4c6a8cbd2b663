"""TreeExplainer.decompose: the exact interventional functional decomposition (Hiabu et al. 2023).

Oracles: the definition itself (every hybrid row ``(x_T, b_-T)`` predicted by the library, the
value function Möbius-transformed here), the model's own raw output (sum of the components),
TreeExplainer's interventional SHAP values, and a partial dependence computed by a NumPy loop.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jaxshap

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
from sklearn import ensemble as sk_ensemble  # noqa: E402

M = 5
N_ROWS = 10
ATOL = 5e-5


def _data(nan: bool, seed: int = 0, m: int = M, n: int = 240):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m)).astype(np.float32)
    clean = X.copy()
    if nan:
        X[rng.random(X.shape) < 0.12] = np.nan
    y = 2 * clean[:, 0] + clean[:, 1] * clean[:, 2] + 0.5 * clean[:, 3] + clean[:, 2] * clean[:, 3] * clean[:, 4]
    return X, y


def _fit(kind: str):
    """A small fitted model, its raw-output function ``[n] -> [n, K]`` and data."""
    X, y = _data(nan=kind.startswith(("xgb", "lgb")))
    ym = np.digitize(y, [-1.0, 1.0])
    if kind == "xgb_reg":
        m = xgb.XGBRegressor(n_estimators=8, max_depth=3).fit(X, y)
        raw = lambda Z: m.predict(Z, output_margin=True)  # noqa: E731
    elif kind == "xgb_multi":
        m = xgb.XGBClassifier(n_estimators=4, max_depth=3).fit(X, ym)
        raw = lambda Z: m.predict(Z, output_margin=True)  # noqa: E731
    elif kind == "lgb_reg":
        m = lgb.LGBMRegressor(n_estimators=8, num_leaves=7, min_child_samples=5, verbose=-1).fit(X, y)
        raw = lambda Z: m.predict(Z, raw_score=True)  # noqa: E731
    elif kind == "rf_reg":
        m = sk_ensemble.RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
        raw = m.predict
    elif kind == "gb_reg":
        m = sk_ensemble.GradientBoostingRegressor(n_estimators=6, max_depth=3, random_state=0).fit(X, y)
        raw = m.predict
    elif kind == "gb_multi":
        m = sk_ensemble.GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, ym)
        raw = m.decision_function
    else:  # pragma: no cover
        raise KeyError(kind)
    return m, (lambda Z: np.asarray(raw(Z), np.float64).reshape(Z.shape[0], -1)), X


KINDS = ["xgb_reg", "xgb_multi", "lgb_reg", "rf_reg", "gb_reg", "gb_multi"]


@pytest.fixture(scope="module")
def fitted():
    cache = {}

    def get(kind):
        if kind not in cache:
            model, raw, X = _fit(kind)
            bg, rows = X[100:130], X[:N_ROWS]
            ex = jaxshap.TreeExplainer(model, bg)
            cache[kind] = model, raw, X, bg, rows, ex, ex.decompose(rows)
        return cache[kind]

    return get


def _oracle(raw, x, bg):
    """``{S: m_S(x) [K]}`` from the definition: v(T) = mean_b raw(x_T, b_-T), Möbius-transformed."""
    v = {}
    for r in range(M + 1):
        for T in itertools.combinations(range(M), r):
            hybrid = bg.copy()
            hybrid[:, list(T)] = x[list(T)]
            v[T] = raw(hybrid).mean(0)
    return {S: sum((-1) ** (len(S) - len(T)) * v[T] for r in range(len(S) + 1) for T in itertools.combinations(S, r))
            for S in v}


def _k(a, n):
    return np.asarray(a, np.float64).reshape(n, -1)


@pytest.mark.parametrize("kind", KINDS)
def test_components_equal_brute_force(fitted, kind):
    model, raw, X, bg, rows, ex, dec = fitted(kind)
    comps = dec.components
    for i in range(4):
        truth = _oracle(raw, rows[i], bg)
        np.testing.assert_allclose(_k(dec.intercept, 1)[0], truth[()], atol=ATOL)
        for S, value in truth.items():
            if not S:
                continue
            got = _k(comps[S], N_ROWS)[i] if S in comps else np.zeros_like(value)
            np.testing.assert_allclose(got, value, atol=ATOL, err_msg=f"component {S}")


@pytest.mark.parametrize("kind", KINDS)
def test_sum_is_prediction_and_shap_values(fitted, kind):
    model, raw, X, bg, rows, ex, dec = fitted(kind)
    total = _k(dec.intercept, 1) + sum(_k(c, N_ROWS) for c in dec.components.values())
    np.testing.assert_allclose(total, raw(rows), atol=ATOL)
    np.testing.assert_allclose(_k(dec.predict(), N_ROWS), raw(rows), atol=ATOL)
    np.testing.assert_allclose(_k(dec.intercept, 1)[0], raw(bg).mean(0), atol=ATOL)
    np.testing.assert_allclose(np.asarray(dec.shap_values()), np.asarray(ex(rows).values), atol=ATOL)
    assert np.all(np.asarray(dec.remainder) == 0)


@pytest.mark.parametrize("kind", ["xgb_reg", "gb_multi"])
def test_main_effect_is_partial_dependence(fitted, kind):
    model, raw, X, bg, rows, ex, dec = fitted(kind)
    comps = dec.components
    for j in range(M):
        hybrid = np.repeat(bg[None], N_ROWS, axis=0)  # [n, B, M]
        hybrid[:, :, j] = rows[:, j][:, None]
        pd = raw(hybrid.reshape(-1, M)).reshape(N_ROWS, bg.shape[0], -1).mean(1)
        main = _k(comps[(j,)], N_ROWS) if (j,) in comps else 0.0
        np.testing.assert_allclose(main + _k(dec.intercept, 1), pd, atol=ATOL)


def test_absent_sets_are_the_sets_no_path_uses():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = X[:, 0] * X[:, 1] + X[:, 2] + X[:, 3] * X[:, 4]  # feature 5 unused
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2).fit(X, y)
    ex = jaxshap.TreeExplainer(model, X[:20])
    dec = ex.decompose(X[20:25])
    paths = ex._paths
    allowed = set()
    for f, u in zip(paths.feature, paths.length):
        fs = tuple(sorted(f[:u]))
        allowed.update(c for r in range(1, u + 1) for c in itertools.combinations(fs, r))
    assert set(dec.components) == allowed
    assert all(len(S) <= 2 for S in dec.components)
    assert not any(5 in S for S in dec.components)
    assert list(dec.components) == sorted(dec.components, key=lambda s: (len(s), s))


@pytest.mark.parametrize("kind", ["xgb_reg", "gb_multi"])
def test_max_order_truncation_and_remainder(fitted, kind):
    model, raw, X, bg, rows, ex, full = fitted(kind)
    dec = ex.decompose(rows, max_order=1)
    assert all(len(S) == 1 for S in dec.components)
    for S, v in dec.components.items():
        np.testing.assert_allclose(v, full.components[S], atol=1e-6)
    dropped = sum(_k(v, N_ROWS) for S, v in full.components.items() if len(S) > 1)
    np.testing.assert_allclose(_k(dec.remainder, N_ROWS), dropped, atol=ATOL)
    np.testing.assert_allclose(_k(dec.predict(), N_ROWS), raw(rows), atol=ATOL)
    two = ex.decompose(rows, max_order=2)
    assert {S for S in full.components if len(S) <= 2} == set(two.components)
    with pytest.raises(ValueError, match="max_order"):
        dec.without([0])
    assert not np.any(np.asarray(ex.decompose(rows, max_order=50).remainder))


def test_without_removes_every_component_touching_the_features(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("xgb_reg")
    comps = dec.components
    for drop in ([0], [2, 4], ["Feature 1"]):
        ids = {int(d.split()[-1]) if isinstance(d, str) else d for d in drop}
        expected = dec.intercept + sum(v for S, v in comps.items() if not ids.intersection(S))
        np.testing.assert_allclose(dec.without(drop), expected, atol=1e-6)
    np.testing.assert_allclose(dec.without(3), dec.without([3]))
    np.testing.assert_allclose(dec.without([]), dec.predict(), atol=1e-6)
    with pytest.raises(ValueError, match="features"):
        dec.without(["nope"])
    with pytest.raises(ValueError, match="features"):
        dec.without([M])


@pytest.mark.parametrize("kind", ["xgb_reg", "xgb_multi"])
def test_importance(fitted, kind):
    model, raw, X, bg, rows, ex, dec = fitted(kind)
    imp = dec.importance()
    assert set(imp.by_component) == set(dec.components)
    for S, v in dec.components.items():
        np.testing.assert_allclose(imp.by_component[S], np.abs(v).mean(0), rtol=1e-6)
    for order in {len(S) for S in dec.components}:
        total = sum(np.abs(v).mean(0) for S, v in dec.components.items() if len(S) == order)
        np.testing.assert_allclose(imp.by_order[order], total, rtol=1e-5)


def test_multi_output_shapes(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("xgb_multi")
    assert all(v.shape == (N_ROWS, 3) for v in dec.components.values())
    assert np.shape(dec.intercept) == (3,)
    assert dec.shap_values().shape == (N_ROWS, M, 3)
    assert dec.remainder.shape == (N_ROWS, 3)


def test_missing_values_route_as_the_model(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("xgb_reg")
    nan_rows = X[np.isnan(X).any(1)][:6]
    assert nan_rows.shape[0] == 6
    d = ex.decompose(nan_rows)
    np.testing.assert_allclose(_k(d.predict(), 6), raw(nan_rows), atol=ATOL)
    truth = _oracle(raw, nan_rows[0], bg)
    for S, v in d.components.items():
        np.testing.assert_allclose(_k(v, 6)[0], truth[S], atol=ATOL)


def test_small_memory_budget_agrees(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("lgb_reg")
    small = jaxshap.TreeExplainer(model, bg, memory_budget=2**16).decompose(rows)
    assert small.sets == dec.sets
    for S in dec.components:
        np.testing.assert_allclose(small.components[S], dec.components[S], atol=1e-6)


def test_names_repr_and_dataframe():
    pd = pytest.importorskip("pandas")
    X, y = _data(False)
    frame = pd.DataFrame(X, columns=list("abcde"))
    model = xgb.XGBRegressor(n_estimators=4, max_depth=2).fit(frame, y)
    dec = jaxshap.TreeExplainer(model, frame.iloc[:20]).decompose(frame.iloc[20:24])
    assert dec.feature_names == tuple("abcde")
    np.testing.assert_allclose(dec.without("a"), dec.without([0]))
    assert "Decomposition(rows: 4" in repr(dec)
    assert isinstance(dec, jaxshap.Decomposition)


def test_errors(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("xgb_reg")
    with pytest.raises(ValueError, match="data"):
        jaxshap.TreeExplainer(model).decompose(rows)
    clf = fitted("xgb_multi")[0]
    with pytest.raises(ValueError, match="model_output"):
        jaxshap.TreeExplainer(clf, bg, model_output="probability").decompose(rows)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="max_order"):
            ex.decompose(rows, max_order=bad)
    with pytest.raises(ValueError, match="features"):
        ex.decompose(rows[:, :3])


@pytest.mark.parametrize("kind", ["lgb", "xgb"])
def test_categorical_splits(kind):
    """Set-membership splits (more than 32 categories: two words of bits), against the definition."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 400
    c, d = rng.integers(0, 40, size=n), rng.integers(0, 5, size=n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    y = np.sin(np.arange(40) * 1.7)[c] * 2 + np.asarray([1.0, -1.0, 0.5, 0.0, 2.0])[d] * a + b
    df = pd.DataFrame({"c": pd.Categorical(c, categories=range(40)), "a": a,
                       "d": pd.Categorical(d, categories=range(5)), "b": b})
    if kind == "lgb":
        model = lgb.LGBMRegressor(n_estimators=5, num_leaves=8, min_data_per_group=5, cat_smooth=1.0,
                                  max_cat_threshold=32, verbose=-1).fit(df, y)
        raw = lambda Z: np.asarray(model.predict(Z, raw_score=True), np.float64)  # noqa: E731
    else:
        model = xgb.XGBRegressor(n_estimators=5, max_depth=3, enable_categorical=True, tree_method="hist",
                                 max_cat_to_onehot=1).fit(df, y)
        raw = lambda Z: np.asarray(model.predict(Z, output_margin=True), np.float64)  # noqa: E731
    rows, bg = df.iloc[:3], df.iloc[200:225]
    dec = jaxshap.TreeExplainer(model, bg).decompose(rows)
    np.testing.assert_allclose(dec.predict(), raw(rows), atol=ATOL)
    for i in range(3):
        v = {}
        for r in range(5):
            for T in itertools.combinations(range(4), r):
                hybrid = bg.copy()
                for j in T:
                    hybrid.iloc[:, j] = rows.iloc[i, j]
                v[T] = raw(hybrid).mean()
        for S, comp in dec.components.items():
            truth = sum((-1) ** (len(S) - len(T)) * v[T] for r in range(len(S) + 1) for T in itertools.combinations(S, r))
            np.testing.assert_allclose(comp[i], truth, atol=ATOL, err_msg=f"component {S}")
        assert not any(abs(sum((-1) ** (len(S) - len(T)) * v[T] for r in range(len(S) + 1)
                               for T in itertools.combinations(S, r))) > ATOL
                       for S in v if S and S not in dec.components)


@pytest.mark.parametrize("params", [{"zero_as_missing": True}, {"use_missing": False}])
def test_lightgbm_zero_and_none_missing_types(params):
    """LightGBM's Zero missing type (zeros and NaN go the default way) and None type (NaN read as 0):
    the main-effect and pair tables route them as the paths do; against the definition."""
    X, y = _data(False)
    rng = np.random.default_rng(1)
    Xz = np.where(rng.random(X.shape) < 0.25, 0.0, X).astype(np.float32)
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=7, verbose=-1, **params).fit(Xz, y)
    raw = lambda Z: np.asarray(model.predict(Z, raw_score=True), np.float64).reshape(Z.shape[0], -1)  # noqa: E731
    Xt = np.where(rng.random(X.shape) < 0.15, np.nan, Xz).astype(np.float32)
    rows, bg = Xt[:4], Xt[100:130]
    dec = jaxshap.TreeExplainer(model, bg).decompose(rows)
    np.testing.assert_allclose(_k(dec.predict(), 4), raw(rows), atol=ATOL)
    for i in range(4):
        truth = _oracle(raw, rows[i], bg)
        for S, value in truth.items():
            if S:
                got = _k(dec.components[S], 4)[i] if S in dec.components else np.zeros_like(value)
                np.testing.assert_allclose(got, value, atol=ATOL, err_msg=f"component {S}")


GROUPS = [[0, 3], [1], [2, 4]]


def _group_oracle(raw, x, bg, groups):
    """``{T: m'_T(x) [K]}``: the groups' game u(T) = mean_b raw(x_{cols(T)}, b_rest), Möbius-transformed."""
    u = {}
    for r in range(len(groups) + 1):
        for T in itertools.combinations(range(len(groups)), r):
            cols = [j for k in T for j in groups[k]]
            hybrid = bg.copy()
            hybrid[:, cols] = x[cols]
            u[T] = raw(hybrid).mean(0)
    return {T: sum((-1) ** (len(T) - len(U)) * u[U] for r in range(len(T) + 1) for U in itertools.combinations(T, r))
            for T in u}


@pytest.mark.parametrize("kind", ["xgb_reg", "gb_multi"])
def test_group_components_equal_the_group_game_brute_force(fitted, kind):
    model, raw, X, bg, rows, ex, dec = fitted(kind)
    grouped = dec.group(GROUPS)
    assert grouped.feature_names == ("Feature 0 + Feature 3", "Feature 1", "Feature 2 + Feature 4")
    assert grouped.data is None and len(grouped.sets) < len(dec.sets)
    comps = grouped.components
    for i in range(3):
        truth = _group_oracle(raw, rows[i], bg, GROUPS)
        for T, value in truth.items():
            if T:
                got = _k(comps[T], N_ROWS)[i] if T in comps else np.zeros_like(value)
                np.testing.assert_allclose(got, value, atol=ATOL, err_msg=f"group component {T}")
    np.testing.assert_allclose(_k(grouped.predict(), N_ROWS), raw(rows), atol=ATOL)
    np.testing.assert_allclose(grouped.intercept, dec.intercept)


def test_group_shap_values_equal_the_explainers_group_values(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("gb_reg")  # no missing values: the masker refuses NaN
    groups = {"a": ["Feature 0", "Feature 3"], "b": [1], "c": [2, 4]}
    grouped = dec.group(groups)
    assert grouped.feature_names == ("a", "b", "c")
    masker = jaxshap.maskers.Independent(bg, max_samples=None)
    expl = jaxshap.ExactExplainer(lambda Z: raw(Z)[:, 0], masker, groups=[[0, 3], [1], [2, 4]])(rows)
    np.testing.assert_allclose(grouped.shap_values(), np.asarray(expl.values), atol=ATOL)
    # a group of one feature keeps that feature's components; the split factor's own
    # "interaction" (0, 3) folds into the group's main effect
    np.testing.assert_allclose(grouped.components[(1,)], dec.components[(1,)], atol=1e-6)
    own = sum(v for S, v in dec.components.items() if set(S) <= {0, 3})
    np.testing.assert_allclose(grouped.components[(0,)], own, atol=1e-6)
    np.testing.assert_allclose(grouped.without("b"), dec.without([1]), atol=1e-5)


def test_group_refuses_bad_groups(fitted):
    model, raw, X, bg, rows, ex, dec = fitted("xgb_reg")
    with pytest.raises(ValueError, match="leaves out"):
        dec.group([[0, 1], [2]])
    with pytest.raises(ValueError, match="twice"):
        dec.group([[0, 1], [1, 2, 3, 4]])
    with pytest.raises(ValueError, match="not a feature"):
        dec.group([["nope"], [0, 1, 2, 3, 4]])
    with pytest.raises(ValueError, match="names"):
        dec.group(GROUPS, names=["x", "y"])


def test_component_plot_draws_the_component_against_its_features(fitted):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    model, raw, X, bg, rows, ex, dec = fitted("gb_reg")
    line = jaxshap.plots.component(dec, "Feature 2").lines[0]
    order = np.argsort(rows[:, 2], kind="stable")
    np.testing.assert_allclose(line.get_xdata(), rows[order, 2])
    np.testing.assert_allclose(line.get_ydata(), np.asarray(dec.components[(2,)])[order], rtol=1e-6)
    pair = next(S for S in dec.components if len(S) == 2)
    ax = jaxshap.plots.component(dec, [pair[1], pair[0]])  # in the order asked for
    points = ax.collections[0]
    np.testing.assert_allclose(points.get_offsets(), rows[:, [pair[1], pair[0]]])
    np.testing.assert_allclose(points.get_array(), dec.components[pair], rtol=1e-6)
    with pytest.raises(ValueError, match="one feature .* or two"):
        jaxshap.plots.component(dec, [0, 1, 2])
    with pytest.raises(ValueError, match="no rows"):
        jaxshap.plots.component(dec.group(GROUPS), 0)
