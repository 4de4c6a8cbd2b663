"""TreeExplainer on categorical splits: XGBoost (enable_categorical) and LightGBM
(categorical_feature), both modes.

Oracles: the library's own predictions (efficiency), its own TreeSHAP (``pred_contribs`` /
``pred_contrib``) for the path-dependent mode, and a brute-force interventional oracle built from
the library's raw predictions on hybrid rows.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import jaxshap
from oracle import shapley_from_game

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
pd = pytest.importorskip("pandas")


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 40, size=n)  # more than 32 categories: two words of bits
    d = rng.integers(0, 5, size=n)
    a = rng.normal(size=n)
    b = rng.normal(size=n)
    effect = np.sin(np.arange(40) * 1.7) * 2
    y = effect[c] + np.asarray([1.0, -1.0, 0.5, 0.0, 2.0])[d] * a + b
    df = pd.DataFrame({"c": pd.Categorical(c, categories=range(40)), "a": a,
                       "d": pd.Categorical(d, categories=range(5)), "b": b})
    df.loc[rng.random(n) < 0.05, "c"] = np.nan
    return df, y


def _model(kind):
    df, y = _frame()
    if kind == "xgb":
        model = xgb.XGBRegressor(n_estimators=6, max_depth=4, enable_categorical=True, tree_method="hist",
                                 max_cat_to_onehot=1).fit(df, y)
        raw = lambda Z: model.predict(Z, output_margin=True)  # noqa: E731
    else:
        model = lgb.LGBMRegressor(n_estimators=6, num_leaves=10, min_data_per_group=5, cat_smooth=1.0,
                                  max_cat_threshold=32, verbose=-1).fit(df, y)
        raw = lambda Z: model.predict(Z, raw_score=True)  # noqa: E731
    return model, raw, df


def _interventional_oracle(raw, x, bg):
    m = x.shape[1]
    subsets = [frozenset(c) for r in range(m + 1) for c in itertools.combinations(range(m), r)]
    v = {}
    for S in subsets:
        hybrid = bg.copy()
        for j in S:
            hybrid.iloc[:, j] = x.iloc[0, j]
        v[S] = np.asarray(raw(hybrid), np.float64).mean()
    return shapley_from_game(lambda S: np.asarray([v[S]]), m)[:, 0]


@pytest.mark.parametrize("kind", ["xgb", "lgb"])
def test_categorical_splits_both_modes(kind):
    model, raw, df = _model(kind)
    rows, bg = df.iloc[:20], df.iloc[200:230]
    expected = raw(rows)
    pd_expl = jaxshap.TreeExplainer(model)(rows)
    np.testing.assert_allclose(np.asarray(pd_expl.values).sum(1) + np.asarray(pd_expl.base_values), expected,
                               rtol=0, atol=3e-5)
    if kind == "xgb":
        contribs = model.get_booster().predict(xgb.DMatrix(rows, enable_categorical=True), pred_contribs=True)
    else:
        contribs = model.predict(rows, pred_contrib=True)
    np.testing.assert_allclose(np.asarray(pd_expl.values), contribs[:, :-1], rtol=1e-4, atol=3e-5)
    iv = jaxshap.TreeExplainer(model, bg)(rows)
    np.testing.assert_allclose(np.asarray(iv.values).sum(1) + np.asarray(iv.base_values), expected, rtol=0, atol=3e-5)
    for i in (0, 1):
        phi = _interventional_oracle(raw, rows.iloc[i : i + 1], bg)
        np.testing.assert_allclose(np.asarray(iv.values)[i], phi, rtol=1e-4, atol=3e-5)


@pytest.mark.parametrize("kind", ["xgb", "lgb"])
def test_categorical_codes_as_numbers_and_unseen_codes(kind):
    model, raw, df = _model(kind)
    codes = np.stack([df["c"].cat.codes.to_numpy(np.float64), df["a"].to_numpy(),
                      df["d"].cat.codes.to_numpy(np.float64), df["b"].to_numpy()], 1)[:12]
    codes[:, 0] = np.where(codes[:, 0] < 0, np.nan, codes[:, 0])
    codes[0, 0], codes[1, 0], codes[2, 2] = 45.0, 70.0, 6.0  # codes the model never saw
    if kind == "xgb":
        booster = model.get_booster()
        dm = xgb.DMatrix(codes, feature_names=booster.feature_names, feature_types=booster.feature_types,
                         enable_categorical=True)
        expected = booster.predict(dm, output_margin=True)
    else:
        expected = model.predict(codes, raw_score=True)
    for data in (None, df.iloc[200:220]):
        expl = jaxshap.TreeExplainer(model, data)(codes)
        np.testing.assert_allclose(np.asarray(expl.values).sum(1) + np.asarray(expl.base_values), expected,
                                   rtol=0, atol=3e-5)
