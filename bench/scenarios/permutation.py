"""PermutationExplainer against shap.PermutationExplainer (M=20, MLP with 64 hidden units)."""

from __future__ import annotations

import jax
import numpy as np

import jaxshap

from ..harness import model_floor, speed_columns, time_host, timed
from ._common import mlp_problem

TITLE = "PermutationExplainer vs shap.PermutationExplainer, MLP(64), 100 background rows, equal budgets"


def run(quick: bool = False) -> dict:
    m, n_bg, n_rows, n_exact = (8, 20, 5, 2) if quick else (20, 100, 50, 2)
    walks = 20  # 10 antithetic pairs; shap's max_evals for the same pairs is pairs * (2M + 1)
    model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows, seed=1)

    explainer = jaxshap.PermutationExplainer(model, background, n_permutations=walks)
    first, warm = timed(lambda: explainer(X).values)
    ours = explainer(X)

    import shap

    masker = shap.maskers.Independent(background, max_samples=n_bg)
    reference = shap.PermutationExplainer(numpy_model, masker, seed=0)
    max_evals = walks // 2 * (2 * m + 1)
    reference(X[:2], max_evals=max_evals, silent=True)
    shap_s = time_host(lambda: reference(X, max_evals=max_evals, silent=True))
    theirs = reference(X, max_evals=max_evals, silent=True)

    evals = n_rows * (walks * (m - 1) + 2) * n_bg
    floor = model_floor(model, evals, m)
    timing = {
        "M": m,
        "rows": n_rows,
        "walks/row": walks,
        "model evals": evals,
        **speed_columns(warm, first, shap_s, floor),
    }

    exact = np.asarray(jaxshap.ExactExplainer(model, background)(X[:n_exact]).values)
    rmse = lambda v: float(np.sqrt(np.mean((np.asarray(v)[:n_exact] - exact) ** 2)))
    accuracy = {
        "rows vs exact": n_exact,
        "jaxshap RMSE": rmse(ours.values),
        "shap RMSE": rmse(theirs.values),
        "mean jaxshap stderr": float(np.asarray(ours.stderr)[:n_exact].mean()),
    }
    controls = _controls_table(model, background, X[:n_exact], exact, quick)
    model_fx = numpy_model(X)
    efficiency = float(np.abs(np.asarray(ours.values).sum(1) + np.asarray(ours.base_values) - model_fx).max())
    checks = {
        "efficiency error below 1e-5 of max |f(x)|": efficiency < 1e-5 * float(np.abs(model_fx).max()),
        "RMSE against exact at most 2x shap's at the same budget": accuracy["jaxshap RMSE"] <= 2 * accuracy["shap RMSE"],
    }
    checks["third-order controls lower the squared error at every walk count"] = all(
        row["MSE ratio plain / controls"] > 1.0 for row in controls
    )
    tables = {"timing": [timing], "accuracy against exact": [accuracy], "control variates (same walks)": controls}
    return {"title": TITLE, "tables": tables, "checks": checks}


def _controls_table(model, background, X, exact, quick):
    """Squared error and time with and without the third-order controls, at equal walks.

    Both runs use the same keys, so the same walks; the difference is only the adjustment.
    """
    rows = []
    seeds = range(2 if quick else 3)
    for walks in (16, 32) if quick else (16, 32, 64, 128):
        errors, seconds = {}, {}
        for on in (False, True):
            explainer = jaxshap.PermutationExplainer(model, background, n_permutations=walks, control_variates=on)
            jax.block_until_ready(explainer(X, key=0).values)  # compile
            sq, spent = [], 0.0
            for seed in seeds:
                _, t = timed(lambda: explainer(X, key=seed + 1).values)
                spent += t
                sq.append(np.mean((np.asarray(explainer(X, key=seed + 1).values) - exact) ** 2))
            errors[on], seconds[on] = float(np.mean(sq)), spent / len(seeds)
        rows.append({
            "walks/row": walks,
            "MSE plain": errors[False],
            "MSE controls": errors[True],
            "MSE ratio plain / controls": errors[False] / errors[True],
            "time controls / plain": seconds[True] / seconds[False],
        })
    return rows
