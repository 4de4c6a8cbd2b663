"""KernelExplainer against shap.KernelExplainer (l1_reg=False) at the same budget and background."""

from __future__ import annotations

import numpy as np

import jaxshap

from ..harness import model_floor, speed_columns, time_host, timed
from ._common import mlp_problem

TITLE = "KernelExplainer vs shap.KernelExplainer(l1_reg=False), M=20, MLP(64), 100 background rows, 2048 coalitions"


def run(quick: bool = False) -> dict:
    m, n_bg, n_rows, budget = 20, (20 if quick else 100), (4 if quick else 50), (256 if quick else 2048)
    model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows)

    explainer = jaxshap.KernelExplainer(model, background, budget)
    first, warm = timed(lambda: explainer(X).values)
    ours = explainer(X)

    import shap

    reference = shap.KernelExplainer(numpy_model, background)
    run_shap = lambda rows: reference.shap_values(rows, nsamples=budget, l1_reg=False, silent=True)
    run_shap(X[:1])  # warm
    shap_rows = X if not quick else X[:2]
    shap_s = time_host(lambda: run_shap(shap_rows)) * n_rows / len(shap_rows)
    theirs = np.asarray(run_shap(shap_rows))

    evals = n_rows * (budget + 2) * n_bg
    floor = model_floor(model, evals, m)
    fx = numpy_model(X)
    values = np.asarray(ours.values)
    row = {
        "rows": n_rows,
        "coalitions/row": budget,
        "model evals": evals,
        **speed_columns(warm, first, shap_s, floor),
        "rms |jaxshap - shap|": float(np.sqrt(((values[: len(shap_rows)] - theirs) ** 2).mean())),
        "rms jaxshap stderr": float(np.sqrt((np.asarray(ours.stderr) ** 2).mean())),
        "efficiency err": float(np.abs(values.sum(1) + np.asarray(ours.base_values) - fx).max()),
    }
    notes = [
        "Both explainers evaluate the empty and full coalitions besides the budget; shap is timed on "
        + ("all rows" if not quick else f"{len(shap_rows)} rows and scaled") + ", after a warm-up call.",
        "The floor is the bare jitted model on the same number of rows (rows x (budget + 2) x background).",
    ]
    return {"title": TITLE, "tables": {"timing": [row]}, "notes": notes}
