"""TreeExplainer against shap.TreeExplainer (C++) and XGBoost's own TreeSHAP (pred_contribs).

Two XGBoost regressors, 500 trees of depth 6 and 30 trees of depth 12 (M=20), both modes;
cold = building the explainer + the first call (compilation included), warm = a later call.
"""

from __future__ import annotations

import time

import numpy as np

import jaxshap

from ..harness import time_host

TITLE = "TreeExplainer vs shap.TreeExplainer (C++) and XGBoost pred_contribs, XGBoost regressors, M=20"


def _problem(quick: bool):
    m, n_train = 20, (2000 if quick else 10000)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_train, m)).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = np.nan  # some missing values, routed by the trees' defaults
    Z = np.nan_to_num(X)
    y = 2 * Z[:, 0] + np.sin(3 * Z[:, 1]) + Z[:, 2] * Z[:, 3] + 0.5 * Z[:, 4:8].sum(1) + 0.1 * rng.normal(size=n_train)
    return X, y


def _models(quick: bool):
    return ((20, 3), (5, 6)) if quick else ((500, 6), (30, 12))


def run(quick: bool = False) -> dict:
    import shap
    import xgboost

    X, y = _problem(quick)
    n_rows = 200 if quick else 10000
    n_bg = 20 if quick else 100
    X_explain, background = X[:n_rows], X[-n_bg:]
    rows = []
    for n_trees, depth in _models(quick):
        model = xgboost.XGBRegressor(n_estimators=n_trees, max_depth=depth, n_jobs=2, random_state=0).fit(X, y)
        booster = model.get_booster()
        margin = model.predict(X_explain, output_margin=True)
        for mode in ("tree_path_dependent", "interventional"):
            data = background if mode == "interventional" else None
            t0 = time.perf_counter()
            explainer = jaxshap.TreeExplainer(model, data, feature_perturbation=mode)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            ours = explainer(X_explain)
            values = np.asarray(ours.values)
            first = time.perf_counter() - t0
            warm = time_host(lambda: np.asarray(explainer(X_explain).values), repeat=2)
            # shap's interventional C++ is slow: time it on a subset and report its rate.
            n_shap = n_rows if (mode == "tree_path_dependent" or quick) else (1000 if depth <= 6 else 200)
            t0 = time.perf_counter()
            reference = shap.TreeExplainer(model, data, feature_perturbation=mode)
            theirs = reference(X_explain[:n_shap])
            shap_cold = time.perf_counter() - t0
            shap_s = time_host(lambda: reference(X_explain[:n_shap]))
            row = {
                "model": f"{n_trees}x{depth}",
                "mode": mode,
                "rows": n_rows,
                "background": n_bg if data is not None else 0,
                "build s": build,
                "first call s": first,
                "jaxshap warm s": warm,
                "jaxshap rows/s warm": n_rows / warm,
                "jaxshap rows/s cold": n_rows / (build + first),
                "shap rows timed": n_shap,
                "shap rows/s warm": n_shap / shap_s,
                "shap rows/s cold": n_shap / shap_cold,
                "vs shap warm": (n_rows / warm) / (n_shap / shap_s),
                "vs shap cold": (n_rows / (build + first)) / (n_shap / shap_cold),
                "max |jaxshap - shap|": float(np.abs(values[:n_shap] - theirs.values).max()),
                "efficiency err": float(np.abs(values.sum(1) + np.asarray(ours.base_values) - margin).max()),
            }
            if mode == "tree_path_dependent":  # XGBoost's own C++ TreeSHAP (path-dependent only)
                dm = xgboost.DMatrix(X_explain)
                t0 = time.perf_counter()
                contribs = booster.predict(dm, pred_contribs=True)
                xgb_cold = time.perf_counter() - t0
                xgb_s = time_host(lambda: booster.predict(dm, pred_contribs=True), repeat=2)
                row.update({
                    "xgb rows/s warm": n_rows / xgb_s,
                    "vs xgb warm": xgb_s / warm,
                    "vs xgb cold": xgb_cold / (build + first),
                    "max |jaxshap - xgb|": float(np.abs(values - contribs[:, :-1]).max()),
                })
            rows.append(row)
            if quick:
                assert row["efficiency err"] < 1e-3, row
                assert row["max |jaxshap - shap|"] < 1e-3, row
    notes = [
        f"XGBoost regressors; 2% of inputs NaN; float32; shap {shap.__version__}, xgboost {xgboost.__version__} "
        "(n_jobs=2 for its pred_contribs).",
        "build s: importing the model, cutting it into paths, tabulating every path's values per pattern of "
        "followed features (interventional: from the background's pattern shares). cold = build + first call "
        "(compilation included); warm = best later call. check_additivity is on (as in shap).",
        "XGBoost has no interventional TreeSHAP, so 'vs xgb' is for the path-dependent rows only.",
    ]
    return {"title": TITLE, "tables": {"timing": rows}, "notes": notes}
