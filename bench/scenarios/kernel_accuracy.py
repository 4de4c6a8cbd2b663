"""KernelSHAP accuracy against exact Shapley values, jaxshap (paired, leverage) vs shap."""

from __future__ import annotations

import warnings

import jax
import numpy as np

import jaxshap

from ._common import mlp_problem

TITLE = "KernelSHAP squared error vs exact values at equal budget: jaxshap paired / leverage vs shap"


def _shap_values(shap, numpy_model, background, X, budget, l1_reg, seed):
    np.random.seed(seed)  # shap samples with NumPy's global generator
    explainer = shap.KernelExplainer(numpy_model, background)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(explainer.shap_values(X, nsamples=budget, l1_reg=l1_reg, silent=True))


def run(quick: bool = False) -> dict:
    import shap

    sizes = (12,) if quick else (12, 14, 16)
    budgets = (150, 600) if quick else (150, 300, 600, 1200, 2400)
    seeds = (0,) if quick else (0, 1, 2)
    n_bg, n_rows = (10, 2) if quick else (20, 5)
    rows = []
    for m in sizes:
        for seed in seeds:
            model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows, seed=seed)
            exact = np.asarray(jaxshap.ExactExplainer(model, background)(X).values, np.float64)
            for budget in budgets:
                err = {}
                for sampler in ("paired", "leverage"):
                    ex = jaxshap.KernelExplainer(model, background, budget, sampler=sampler)
                    values = np.asarray(ex(X, key=jax.random.key(seed)).values, np.float64)
                    err[f"jaxshap {sampler}"] = float(((values - exact) ** 2).mean())
                for l1 in (False, "auto"):
                    values = _shap_values(shap, numpy_model, background, X, budget, l1, seed)
                    err[f"shap l1_reg={l1}"] = float(((values - exact) ** 2).mean())
                rows.append({"M": m, "budget": budget, "seed": seed, **err})
    table = []
    for m in sizes:
        for budget in budgets:
            sel = [r for r in rows if r["M"] == m and r["budget"] == budget]
            mean = {k: float(np.mean([r[k] for r in sel])) for k in sel[0] if k not in ("M", "budget", "seed")}
            table.append(
                {
                    "M": m,
                    "budget": budget,
                    "mse paired": mean["jaxshap paired"],
                    "mse leverage": mean["jaxshap leverage"],
                    "mse shap": mean["shap l1_reg=False"],
                    "mse shap l1 auto": mean["shap l1_reg=auto"],
                    "shap / paired": mean["shap l1_reg=False"] / mean["jaxshap paired"],
                    "shap / leverage": mean["shap l1_reg=False"] / mean["jaxshap leverage"],
                    "shap l1 / paired": mean["shap l1_reg=auto"] / mean["jaxshap paired"],
                }
            )
    notes = [
        f"Mean squared error over {n_rows} rows x {len(seeds)} seeds (model, data and sampling seed) x M features; "
        f"MLP(64), {n_bg} background rows; exact values from ExactExplainer.",
        "Budget = coalitions besides the empty and full ones (shap's nsamples); shap's default l1_reg is 'auto'.",
    ]
    return {"title": TITLE, "tables": {"mse": table}, "notes": notes}
