"""KernelExplainer against shap.KernelExplainer (l1_reg=False) at the same budget and background,
and the default (shared coalitions, third-order controls) against plain paired KernelSHAP."""

from __future__ import annotations

import time

import numpy as np

import jaxshap

from ..harness import model_floor, speed_columns, time_host, timed, timed_together
from ._common import mlp_problem
from .runtime import _cold

TITLE = (
    "KernelExplainer (defaults) vs shap.KernelExplainer(l1_reg=False) and vs third_order=False, "
    "M=16/20/30, MLP(64), 100 background rows, default budget 2M+2048; and the default at budgets "
    "where it takes a per-row prior (the leading-terms one), with prior='isotropic' and 'hierarchical' beside it"
)


def _one(m: int, quick: bool) -> dict:
    n_bg, n_rows = (20, 4) if quick else (100, 40)
    model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows)
    budget = 256 if quick else None  # None: the default, 2M + 2048
    explainer = jaxshap.KernelExplainer(model, background, budget)  # every other option at its default
    budget = explainer.n_coalitions
    first, warm = timed(lambda: explainer(X).values)
    ours = explainer(X)
    plain = jaxshap.KernelExplainer(model, background, budget, third_order=False)
    _, plain_warm = timed(lambda: plain(X).values)
    keys = iter(range(1000, 2000))  # a new key every call
    _, new_key = timed(lambda: explainer(X, key=next(keys)).values)
    _, plain_new_key = timed(lambda: plain(X, key=next(keys)).values)

    import shap

    reference = shap.KernelExplainer(numpy_model, background)
    run_shap = lambda rows: reference.shap_values(rows, nsamples=budget, l1_reg=False, silent=True)
    run_shap(X[:1])  # warm
    shap_rows = X if not quick else X[:1]
    shap_s = time_host(lambda: run_shap(shap_rows)) * n_rows / len(shap_rows)
    theirs = np.asarray(run_shap(shap_rows))

    evals = n_rows * (budget + 2) * n_bg
    floor = model_floor(model, evals, m)
    fx = numpy_model(X)
    values = np.asarray(ours.values)
    return {
        "M": m,
        "rows": n_rows,
        "coalitions/row": budget,
        "third_order": explainer.third_order,
        **speed_columns(warm, first, shap_s, floor),
        "plain paired s (warm)": plain_warm,
        "default / plain": warm / plain_warm,
        "default s, new key each call": new_key,
        "default / plain, new key each call": new_key / plain_new_key,
        "rms |jaxshap - shap|": float(np.sqrt(((values[: len(shap_rows)] - theirs) ** 2).mean())),
        "rms jaxshap stderr": float(np.sqrt((np.asarray(ours.stderr) ** 2).mean())),
        "efficiency err": float(np.abs(values.sum(1) + np.asarray(ours.base_values) - fx).max()),
    }


def _prior_cell(m: int, budget: int, quick: bool) -> dict:
    """The default at a budget where it takes a per-row prior (the leading-terms one, a low-rank
    update per row), ``prior="isotropic"`` (one shared solve) and ``prior="hierarchical"`` (a solve
    per row) against plain paired KernelSHAP, in wall and in process CPU seconds."""
    n_bg, n_rows = (20, 4) if quick else (100, 40)
    model, _, background, X = mlp_problem(m, n_bg, n_rows)
    explainers = {
        "default": jaxshap.KernelExplainer(model, background, budget),
        "isotropic": jaxshap.KernelExplainer(model, background, budget, prior="isotropic"),
        "hierarchical": jaxshap.KernelExplainer(model, background, budget, prior="hierarchical"),
        "plain": jaxshap.KernelExplainer(model, background, budget, third_order=False),
    }
    calls = {k: (lambda e=e: e(X).values) for k, e in explainers.items()}
    first, warm = timed_together(calls)
    _, cpu = timed_together(calls, clock=time.process_time)
    # the ratio within each round (the explainers called in turn), whose median a slow spell moves less
    rounds = [timed_together(calls, repeat=1)[1] for _ in range(1 if quick else 5)]
    return {
        "M": m,
        "coalitions/row": budget,
        "prior": explainers["default"].prior,
        **{f"{k} s (warm)": v for k, v in warm.items()},
        "default / plain": warm["default"] / warm["plain"],
        "isotropic / plain": warm["isotropic"] / warm["plain"],
        "hierarchical / plain": warm["hierarchical"] / warm["plain"],
        "default / plain (CPU s)": cpu["default"] / cpu["plain"],
        "default / plain (median of rounds)": float(np.median([r["default"] / r["plain"] for r in rounds])),
        "default s (first call)": first["default"],
        "plain s (first call)": first["plain"],
    }


def _cold_cell(m: int, budget: int, quick: bool) -> dict:
    """What a one-off job pays at a budget where the default takes the leading-terms prior: fresh
    processes that import jaxshap, build the explainer and make its first call, the default
    against plain paired KernelSHAP, in turn (``rounds`` each, the best of them)."""
    spec = dict(m=m, background=20 if quick else 100, rows=4 if quick else 40, budget=budget, hidden=64, cache=None,
                who="jaxshap")
    runs = {"default": [], "plain": []}
    for _ in range(1 if quick else 3):
        for label, options in (("default", {}), ("plain", {"third_order": False})):
            runs[label].append(_cold({**spec, "options": options}))
    best = {k: min(r["import_s"] + r["seconds"] for r in v) for k, v in runs.items()}
    first = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    return {
        "M": m,
        "coalitions/row": budget,
        "default s (import + first call)": best["default"],
        "plain s (import + first call)": best["plain"],
        "default / plain (import + first call)": best["default"] / best["plain"],
        "default / plain (first call)": first["default"] / first["plain"],
    }


def run(quick: bool = False) -> dict:
    rows = [_one(m, quick) for m in ((16,) if quick else (16, 20, 30))]
    cells = ((16, 160),) if quick else ((16, 160), (30, 300), (30, 600), (60, 1200), (100, 2000))
    prior_rows = [_prior_cell(m, budget, quick) for m, budget in cells]
    cold_rows = [_cold_cell(m, budget, quick) for m, budget in cells]
    notes = [
        "Both explainers evaluate the empty and full coalitions besides the budget; shap is timed on "
        + ("all rows" if not quick else "1 row and scaled") + ", after a warm-up call.",
        "The floor is the bare jitted model on the same number of rows (rows x (budget + 2) x background).",
        "default / plain: the default (one shared draw of coalitions and one solve operator for all rows, "
        "third-order controls on) over third_order=False at the same budget, both warm; 'new key each "
        "call' passes a key never used before (the shared draw and its factorisation are made inside the "
        "compiled program on every call, so it should match the warm column).",
    ]
    notes.append(
        "per-row priors: budgets of at most 32 M and 2048 coalitions, where the default (prior='auto') takes the "
        "leading-terms prior (extra variance on the row's 120 largest third-order terms, at most one per "
        "5 regression rows: a low-rank update per row of one shared solve); 'isotropic' is prior='isotropic' "
        "(the same controls, one shared solve); 'hierarchical' is prior='hierarchical' (every term, a solve "
        "per row of about budget / 2 unknowns); warm, same key, best of 5 rounds that call each explainer in "
        "turn, in wall seconds and, for default / plain (CPU s), in process CPU seconds (steadier on a shared "
        "machine); default / plain (median of rounds): the median over 5 more rounds of each round's own ratio "
        "(wall); 'first call' is the first call of a new explainer (tracing and compilation included)."
    )
    notes.append(
        "per-row priors, cold jobs: a fresh Python process per run that imports jaxshap (and NumPy and JAX), "
        "builds the explainer and makes its first call (an MLP(64) as the model, "
        + ("20 background rows, 4 rows, one run each" if quick else "100 background rows, 40 rows; the best of 3 runs each, "
           "the default and plain in turn") + "); 'first call' leaves the import out."
    )
    checks = {"efficiency holds": all(r["efficiency err"] < 1e-3 for r in rows)}
    tables = {"timing": rows, "per-row priors": prior_rows, "per-row priors, cold jobs": cold_rows}
    return {"title": TITLE, "tables": tables, "notes": notes, "checks": checks}
