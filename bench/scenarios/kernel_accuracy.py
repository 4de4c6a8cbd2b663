"""KernelSHAP accuracy against exact Shapley values at equal budget: jaxshap (defaults; plain
paired) vs shap's KernelExplainer and shapiq's approximators.

shapiq 1.8 (KernelSHAP, LeverageSHAP, OddSHAP, PolySHAP, ProxySHAP, RegressionMSR, permutation
sampling, SVARM) needs Python 3.12: ``bash bench/shapiq18/setup.sh`` builds its environment
(``.venv-shapiq18``) and the scenario then runs it on the same games in a subprocess
(:mod:`._shapiq18`); without it, this environment's shapiq (KernelSHAP and permutation sampling)
stands in. ``JAXSHAP_BENCH_SEEDS`` sets the number of seeds (default 6),
``JAXSHAP_BENCH_SHAPIQ18_METHODS`` a subset of shapiq 1.8's approximators.
"""

from __future__ import annotations

import os
import time
import warnings

import jax
import numpy as np

import jaxshap

from . import _shapiq18 as _shapiq18_bridge
from ._common import mlp_problem

TITLE = (
    "KernelSHAP squared error vs exact values at equal budget (2M+2 to 20M coalitions): jaxshap defaults "
    "(shared coalitions, third-order controls when the budget allows, the leading-terms prior at small budgets), "
    "prior='isotropic' and plain "
    "paired vs shap and shapiq "
    "(1.8's approximators when bench/shapiq18/setup.sh has built their environment); "
    "MLP at M=12-16, XGBoost at M=30-100"
)


def xgboost_problem(m: int, n_background: int, n_rows: int, seed: int = 0, trees: int = 100, depth: int = 4):
    """An XGBoost regressor on a synthetic target with main effects and 2- and 3-way interactions.

    Returns ``(model, predict, background, X, exact)``; ``exact`` are the interventional Shapley
    values from jaxshap's TreeExplainer on the same background (the ground truth at any M).
    """
    import xgboost

    rng = np.random.default_rng(seed)
    n = 2000
    data = rng.normal(size=(n, m)).astype(np.float32)
    beta = rng.normal(size=m) * (rng.random(m) < 0.5)
    y = (
        data @ beta
        + np.sin(2 * data[:, 0]) * data[:, 1]
        + data[:, 2] * data[:, 3] * data[:, 4]
        + (data[:, 5] > 0) * data[:, 6]
        + 0.1 * rng.normal(size=n)
    )
    model = xgboost.XGBRegressor(n_estimators=trees, max_depth=depth, learning_rate=0.1, n_jobs=1).fit(data, y)
    background = data[:n_background]
    X = rng.normal(size=(n_rows, m)).astype(np.float32)
    exact = np.asarray(
        jaxshap.TreeExplainer(model, background, feature_perturbation="interventional")(X).values, np.float64
    )
    predict = lambda z: np.asarray(model.predict(np.asarray(z, np.float32)), np.float32)
    return model, predict, background, X, exact


def _game(numpy_model, background, x):
    m = x.shape[0]

    def game(coalitions):
        c = np.atleast_2d(np.asarray(coalitions, bool))  # shapiq's permutation sampler passes one coalition
        z = np.where(c[:, None, :], x, background).reshape(-1, m)
        return np.asarray(numpy_model(z), np.float64).reshape(len(c), -1).mean(1)

    return game


def _shapiq_values(kind, numpy_model, background, X, budget, seed):
    """shapiq's approximator on the same interventional game, row by row (budget + 2 evaluations:
    shapiq counts the empty and full coalitions in its budget)."""
    from shapiq.approximator import KernelSHAP, PermutationSamplingSV

    m = X.shape[1]
    out = []
    for i, x in enumerate(X):
        rs = 1000 * seed + i
        approx = KernelSHAP(n=m, pairing_trick=True, random_state=rs) if kind == "kernel" else PermutationSamplingSV(n=m, random_state=rs)
        values = approx.approximate(budget=budget + 2, game=_game(numpy_model, background, x))
        out.append(np.asarray(values.get_n_order_values(1)))
    return np.stack(out)


def _shap_values(numpy_model, background, X, budget, seed):
    import shap

    np.random.seed(seed)  # shap samples with NumPy's global generator
    explainer = shap.KernelExplainer(numpy_model, background)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(explainer.shap_values(X, nsamples=budget, l1_reg=False, silent=True))


def _table(numpy_model, background, X) -> np.ndarray:
    """Every row's game at every coalition, ``[rows, 2**M]``, indexed by the coalition's bits."""
    m = X.shape[1]
    codes = np.arange(2**m)
    masks = (codes[:, None] >> np.arange(m)) & 1 == 1
    return np.stack([np.concatenate([_game(numpy_model, background, x)(c) for c in np.array_split(masks, 64)]) for x in X])


def _shapiq18(kind, model, numpy_model, background, X, budgets, seed, quick) -> dict:
    """shapiq 1.8's estimates on the same games (empty when its environment is absent)."""
    if _shapiq18_bridge.python() is None:
        return {}
    game = (
        {"kind": "table", "table": _table(numpy_model, background, X)}
        if kind == "MLP"
        else {"kind": "xgboost", "model": model, "background": background, "X": X}
    )
    own = lambda r, c: _game(numpy_model, background, X[r])(c)
    chosen = os.environ.get(METHODS_VARIABLE)
    methods = tuple(chosen.split(",")) if chosen else QUICK_METHODS if quick else _shapiq18_bridge.METHODS
    out = _shapiq18_bridge.approximate(game, budgets, seed, own, methods=methods)
    return out


def _jaxshap(model, background, X, budget, seed, m):
    """jaxshap's defaults, plain paired, the defaults' controls with paired/leverage sizes and with
    ``prior="isotropic"`` (one shared solve): squared errors are taken by the caller; returns
    ``(values by label, warm seconds by label, controls, the prior the default took)``."""
    values, secs, controls, prior = {}, {}, None, None
    # "sizes": the defaults' controls with the paired or leverage sizes, to show what the design gives
    sizes = {"sampler": "leverage" if budget >= 10 * m else "paired"}
    variants = (("default", {}), ("plain", {"third_order": False}), ("sizes", sizes), ("isotropic", {"prior": "isotropic"}))
    for label, kwargs in variants:
        ex = jaxshap.KernelExplainer(model, background, budget, **kwargs)
        controls = ex.third_order if controls is None else controls
        prior = ex.prior if label == "default" else prior
        np.asarray(ex(X, key=jax.random.key(seed)).values)  # compile and draw the plan
        t0 = time.perf_counter()
        values[label] = np.asarray(ex(X, key=jax.random.key(seed)).values, np.float64)
        secs[label] = time.perf_counter() - t0
    return values, secs, controls, prior


def _cells(kind, m, budgets, seeds, n_bg, n_rows, quick):
    rows = []
    for seed in seeds:
        if kind == "MLP":
            model, numpy_model, background, X = mlp_problem(m, n_bg, n_rows, seed=seed)
            exact = np.asarray(jaxshap.ExactExplainer(model, background)(X).values, np.float64)
            xgb = None
        else:
            xgb, model, background, X, exact = xgboost_problem(m, n_bg, n_rows, seed=seed, trees=30 if quick else 100)
            numpy_model = model
        newer = _shapiq18(kind, xgb, numpy_model, background, X, budgets, seed, quick)
        for j, budget in enumerate(budgets):
            values, secs, controls, prior = _jaxshap(model, background, X, budget, seed, m)
            err = {f"jaxshap {k}": float(((v - exact) ** 2).mean()) for k, v in values.items()}
            t0 = time.perf_counter()
            err["shap"] = float(((_shap_values(numpy_model, background, X, budget, seed) - exact) ** 2).mean())
            secs["shap"] = time.perf_counter() - t0
            if not newer:  # shapiq 1.4 (this environment's) when 1.8's is absent
                for name in ("kernel", "permutation"):
                    t0 = time.perf_counter()
                    values = _shapiq_values(name, numpy_model, background, X, budget, seed)
                    secs[f"shapiq {name}"] = time.perf_counter() - t0
                    err[f"shapiq {name}"] = float(((values - exact) ** 2).mean())
            for i, name in enumerate(newer.get("methods", ())):
                err[f"shapiq18 {name}"] = float(((newer["values"][i, j] - exact) ** 2).mean())
                secs[f"shapiq18 {name}"] = float(newer["seconds"][i, j])
            rows.append({"model": kind, "M": m, "budget": budget, "seed": seed, "third_order": controls, "prior": prior,
                         "errors": newer.get("errors", []), "version": newer.get("version"),
                         **err, **{f"s {k if k in err else 'jaxshap ' + k}": v for k, v in secs.items()}})
    return rows


SEEDS_VARIABLE = "JAXSHAP_BENCH_SEEDS"
"""Environment variable: the number of seeds (default 6). With 3 seeds single cells move by up to
about 0.5x between runs of different random streams."""

METHODS_VARIABLE = "JAXSHAP_BENCH_SHAPIQ18_METHODS"
"""Environment variable: a comma-separated subset of shapiq 1.8's approximators (the worker's
names, :data:`._shapiq18.METHODS`); ProxySHAP, RegressionMSR and PolySHAP take minutes per game
at ``M = 100``."""

QUICK_METHODS = ("KernelSHAP", "LeverageSHAP", "OddSHAP")
"""shapiq 1.8's approximators that ``--quick`` runs."""

OTHERS = ("shap", "shapiq kernel", "shapiq permutation", *(f"shapiq18 {n}" for n in _shapiq18_bridge.METHODS))


def _summary(sel: list[dict]) -> dict:
    """One cell of the table: mean squared error and seconds of every method over seeds."""
    mean = lambda k: float(np.mean([r[k] for r in sel]))
    others = [k for k in OTHERS if k in sel[0] and np.isfinite(mean(k))]
    best = min(others, key=mean)
    head = {
        "model": sel[0]["model"],
        "M": sel[0]["M"],
        "budget": sel[0]["budget"],
        "controls on": sel[0]["third_order"],
        "prior": sel[0]["prior"],
        "best other": best,
        "default / best other": mean("jaxshap default") / mean(best),
        "plain / default": mean("jaxshap plain") / mean("jaxshap default"),
        "paired/leverage sizes / default": mean("jaxshap sizes") / mean("jaxshap default"),
        "isotropic / best other": mean("jaxshap isotropic") / mean(best),
        "time default / plain": mean("s jaxshap default") / mean("s jaxshap plain"),
        "time isotropic / plain": mean("s jaxshap isotropic") / mean("s jaxshap plain"),
    }
    names = ["jaxshap default", "jaxshap plain", "jaxshap sizes", "jaxshap isotropic", *others]
    mse = {f"mse {k}": mean(k) for k in names}
    secs = {f"s {k}": mean(f"s {k}") for k in names if f"s {k}" in sel[0]}
    return {**head, **mse, **secs}


def run(quick: bool = False) -> dict:
    seeds = (0,) if quick else tuple(range(int(os.environ.get(SEEDS_VARIABLE, "6"))))
    plan = [("MLP", m) for m in ((12,) if quick else (12, 14, 16))]
    plan += [("XGBoost", m) for m in ((30,) if quick else (30, 60, 100))]
    rows = []
    for kind, m in plan:
        budgets = (10 * m,) if quick else (2 * m + 2, 5 * m, 10 * m, 20 * m)
        n_bg, n_rows = (10, 2) if quick else (20, 4)
        rows += _cells(kind, m, budgets, seeds, n_bg, n_rows, quick)
    table = []
    for kind, m in plan:
        for budget in sorted({r["budget"] for r in rows if r["model"] == kind and r["M"] == m}):
            table.append(_summary([r for r in rows if r["model"] == kind and r["M"] == m and r["budget"] == budget]))
    newer = rows[0]["version"]
    failures = sorted({e for r in rows for e in r["errors"]})
    notes = [
        f"Mean squared error over {len(seeds)} seeds (model, data and sampling seed) x rows x M features; "
        "MLP(64): exact values from ExactExplainer; XGBoost (depth 4, 100 trees; 30 in --quick): exact "
        "interventional values from jaxshap's TreeExplainer on the same background rows.",
        "Budget = coalitions besides the empty and full ones (shap's nsamples); shapiq gets budget + 2 "
        "(it counts those two). shap: l1_reg=False.",
        (
            f"shapiq {newer} in its own Python 3.12 environment (bench/shapiq18/setup.sh), on the same games: "
            "the XGBoost model as its JSON file with the same background and rows, the MLP games as their "
            "table of values at every coalition (so shapiq's MLP times leave out the model); 'shapiq18 X' is "
            "shapiq's approximator X with its defaults (KernelSHAP and PolySHAP paired; PolySHAP order 3 "
            "with budget/2 terms; ProxySHAP and RegressionMSR with their XGBoost proxy; OddSHAP with its "
            "LightGBM proxy)."
            if newer
            else "shapiq 1.8 environment absent (bash bench/shapiq18/setup.sh builds it): shapiq "
            "(this environment's): KernelSHAP (pairing trick) and PermutationSamplingSV."
        ),
        "paired/leverage sizes: the default's controls with sizes as sampler='paired' (below 10M) or "
        "'leverage' (from 10M). prior: the prior the default (prior='auto') took: the leading-terms prior (a "
        "low-rank update per row) up to 32 coalitions per feature and 2048 in all, else the isotropic one "
        "(one shared solve); isotropic: the default with prior='isotropic' at every budget.",
        "s X: wall seconds of method X on the cell's rows (jaxshap warm, its plan cached; the XGBoost "
        "model runs on the host for every method). time default / plain: jaxshap defaults over "
        "third_order=False.",
        *(["shapiq 1.8 failures (NaN, left out of 'best other'): " + "; ".join(failures)] if failures else []),
    ]
    checks = {
        "the default is never worse than plain paired KernelSHAP by more than 10% (mean over cells)": float(
            np.mean([r["plain / default"] for r in table])
        )
        > 0.9,
        "the default beats shap (l1_reg=False) on average over cells": float(
            np.mean([np.log(r["mse shap"] / r["mse jaxshap default"]) for r in table])
        )
        > 0,
    }
    return {"title": TITLE, "tables": {"mse": table}, "notes": notes, "checks": checks}
