"""ExactExplainer against shap.ExactExplainer (M=10, MLP with 64 hidden units)."""

from __future__ import annotations

import numpy as np

import jaxshap

from ..harness import model_floor, speed_columns, time_host, timed
from ._common import mlp_problem

TITLE = "ExactExplainer vs shap.ExactExplainer, M=10, MLP(64), 100 background rows"


def run(quick: bool = False) -> dict:
    m, n_bg, n_rows = 10, (20 if quick else 100), (5 if quick else 50)
    model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows)

    explainer = jaxshap.ExactExplainer(model, background)
    first, warm = timed(lambda: explainer(X).values)
    ours = explainer(X)

    import shap

    masker = shap.maskers.Independent(background, max_samples=n_bg)
    reference = shap.ExactExplainer(numpy_model, masker)
    reference(X[:2], silent=True)  # warm shap's own caches
    shap_s = time_host(lambda: reference(X, silent=True))
    theirs = reference(X, silent=True)

    evals = n_rows * 2**m * n_bg
    floor = model_floor(model, evals, m)
    model_fx = numpy_model(X)
    row = {
        "rows": n_rows,
        "model evals": evals,
        **speed_columns(warm, first, shap_s, floor),
        "max |jaxshap - shap|": float(np.abs(np.asarray(ours.values) - theirs.values).max()),
        "efficiency err": float(np.abs(np.asarray(ours.values).sum(1) + np.asarray(ours.base_values) - model_fx).max()),
    }
    scale = float(np.abs(model_fx).max())
    checks = {
        "efficiency error below 1e-5 of max |f(x)|": row["efficiency err"] < 1e-5 * scale,
        "equal to shap.ExactExplainer within 1e-4 of max |f(x)|": row["max |jaxshap - shap|"] < 1e-4 * scale,
    }
    return {"title": TITLE, "tables": {"timing": [row]}, "checks": checks}
