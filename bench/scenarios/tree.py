"""TreeExplainer against shap.TreeExplainer (C++), XGBoost 500 trees of depth 6, both modes."""

from __future__ import annotations

import time

import numpy as np

import jaxshap

from ..harness import time_host, timed

TITLE = "TreeExplainer vs shap.TreeExplainer (C++), XGBoost regressor, 500 trees of depth 6, M=20"


def _problem(quick: bool):
    import xgboost

    m, n_train = 20, (2000 if quick else 10000)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_train, m)).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = np.nan  # some missing values, routed by the trees' defaults
    Z = np.nan_to_num(X)
    y = 2 * Z[:, 0] + np.sin(3 * Z[:, 1]) + Z[:, 2] * Z[:, 3] + 0.5 * Z[:, 4:8].sum(1) + 0.1 * rng.normal(size=n_train)
    n_trees, depth = (20, 3) if quick else (500, 6)
    model = xgboost.XGBRegressor(n_estimators=n_trees, max_depth=depth, n_jobs=2, random_state=0).fit(X, y)
    return model, X, n_trees, depth


def run(quick: bool = False) -> dict:
    import shap

    model, X, n_trees, depth = _problem(quick)
    n_rows = 200 if quick else 10000
    n_bg = 20 if quick else 100
    X_explain, background = X[:n_rows], X[-n_bg:]
    margin = model.predict(X_explain, output_margin=True)
    rows = []
    for mode in ("tree_path_dependent", "interventional"):
        data = background if mode == "interventional" else None
        t0 = time.perf_counter()
        explainer = jaxshap.TreeExplainer(model, data, feature_perturbation=mode)
        build = time.perf_counter() - t0
        first, warm = timed(lambda: explainer(X_explain).values, repeat=2)
        ours = explainer(X_explain)
        reference = shap.TreeExplainer(model, data, feature_perturbation=mode)
        # shap's interventional C++ is slow: time it on a subset and report its rate.
        n_shap = n_rows if (mode == "tree_path_dependent" or quick) else 1000
        theirs = reference(X_explain[:n_shap])
        shap_s = time_host(lambda: reference(X_explain[:n_shap]))
        values = np.asarray(ours.values)
        rows.append(
            {
                "mode": mode,
                "rows": n_rows,
                "background": n_bg if data is not None else 0,
                "build s": build,
                "compile+first s": first,
                "jaxshap s (warm)": warm,
                "jaxshap rows/s": n_rows / warm,
                "shap rows timed": n_shap,
                "shap s": shap_s,
                "shap rows/s": n_shap / shap_s,
                "jaxshap / shap speed": (n_rows / warm) / (n_shap / shap_s),
                "max |jaxshap - shap|": float(np.abs(values[:n_shap] - theirs.values).max()),
                "efficiency err": float(np.abs(values.sum(1) + np.asarray(ours.base_values) - margin).max()),
            }
        )
    notes = [
        f"XGBoost {n_trees} trees of depth {depth}; 2% of inputs NaN; float32; shap {shap.__version__}.",
        "build s: importing the model, cutting it into paths and tabulating every path's values per "
        "pattern of followed features (for interventional, after histogramming the background's patterns).",
        "jaxshap s: warm call, compilation excluded (reported as compile+first).",
    ]
    return {"title": TITLE, "tables": {"timing": rows}, "notes": notes}
