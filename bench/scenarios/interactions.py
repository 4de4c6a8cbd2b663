"""Interaction values: exact indices vs shapiq, sampled Faith-SHAP vs shapiq, trees vs shap and XGBoost."""

from __future__ import annotations

import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxshap
from jaxshap import estimators

from ..harness import time_host, timed

TITLE = "Interaction values: exact indices vs shapiq ExactComputer, sampled FSII vs shapiq, trees vs shap / XGBoost"


def _mlp_game(m: int, seed: int = 0, n_bg: int = 16):
    """Interventional game of a tanh MLP at one row: ``v(S) = mean_b f(x_S, b_-S)`` (JAX and NumPy)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(m, 32)) / np.sqrt(m)
    a = rng.normal(size=32) / np.sqrt(32)
    x, bg = rng.normal(size=m), rng.normal(size=(n_bg, m))
    Wj, aj, xj, bgj = (jnp.asarray(t, jnp.float32) for t in (W, a, x, bg))

    def value_fn(masks):
        Z = jnp.where(masks[:, None, :], xj, bgj[None])
        return (jnp.tanh(Z @ Wj) @ aj).mean(1)

    def numpy_game(masks):
        Z = np.where(np.asarray(masks, bool)[:, None, :], x, bg[None])
        return (np.tanh(Z @ W) @ a).mean(1)

    return value_fn, numpy_game


def _table_game(m: int, seed: int = 0):
    """A precomputed game (one value per coalition), so that only the index computation is timed."""
    table = np.random.default_rng(seed).normal(size=2**m).astype(np.float32)
    weights = 2 ** np.arange(m)

    def value_fn(tj):  # the table is an argument of the jitted program, not a constant it could fold
        return lambda masks: tj[(masks.astype(jnp.int32) * weights).sum(-1)]

    def numpy_game(masks):
        return table[(np.asarray(masks, np.int64) * weights).sum(-1)].astype(np.float64)

    return value_fn, numpy_game, jnp.asarray(table)


def _max_diff(terms, reference, m: int, order: int) -> float:
    worst = 0.0
    for t in range(1, order + 1):
        dense = np.asarray(terms[t - 1])
        for T in itertools.combinations(range(m), t):
            worst = max(worst, abs(float(dense[T]) - float(reference[T])))
    return worst


def exact_rows(quick: bool, sizes: tuple[int, ...] | None = None, indices: tuple[str, ...] | None = None) -> list[dict]:
    import shapiq

    sizes = sizes or ((8, 10) if quick else (10, 12, 14, 16))
    indices = indices or (("k-SII", "FSII") if quick else ("SII", "k-SII", "STII", "FSII"))
    rows = []
    for m in sizes:
        value_fn, numpy_game, table = _table_game(m)
        computer = shapiq.ExactComputer(numpy_game, n_players=m)
        computer("SV", order=1)  # evaluate and cache the game once: only the indices are timed below
        for index in indices:
            if index == "FSII" and m > 12:
                continue  # shapiq's FSII builds a dense 2**M x 2**M weight matrix (32 GiB at M = 16)
            jitted = jax.jit(lambda tab: estimators.exact_interactions(value_fn(tab), m, index, 2)[0])
            run = lambda: jitted(table)
            first, warm = timed(run, repeat=2)
            t0 = time.perf_counter()
            reference = computer(index, order=2)
            shapiq_s = time.perf_counter() - t0
            rows.append(
                {
                    "M": m,
                    "index": index,
                    "jaxshap s (warm)": warm,
                    "jaxshap compile+first s": first,
                    "shapiq s": shapiq_s,
                    "shapiq / jaxshap": shapiq_s / warm,
                    "max |jaxshap - shapiq|": _max_diff(run(), reference, m, 2),
                }
            )
    return rows


def sampled_rows(quick: bool) -> list[dict]:
    """Squared error against the exact FSII at equal budgets, over a few seeds."""
    from shapiq.approximator import RegressionFSII

    m = 10 if quick else 14
    budgets = (200,) if quick else (500, 2000, 8000)
    seeds = 2 if quick else 5
    value_fn, numpy_game = _mlp_game(m)
    exact = [np.asarray(t) for t in estimators.exact_interactions(value_fn, m, "FSII", 2)[0]]
    sets = [T for t in (1, 2) for T in itertools.combinations(range(m), t)]
    truth = np.array([exact[len(T) - 1][T] for T in sets])
    rows = []
    for budget in budgets:
        run = jax.jit(lambda k: estimators.kernel_interactions(k, value_fn, m, budget))
        ours_err, theirs_err, ours_s, theirs_s, covered = [], [], [], [], []
        for seed in range(seeds):
            t0 = time.perf_counter()
            terms, stderr, _, _ = jax.block_until_ready(run(jax.random.key(seed)))
            ours_s.append(time.perf_counter() - t0)
            est = np.array([np.asarray(terms[len(T) - 1])[T] for T in sets])
            se = np.array([np.asarray(stderr[len(T) - 1])[T] for T in sets])
            ours_err.append(np.mean((est - truth) ** 2))
            covered.append(np.mean(np.abs(est - truth) <= 2 * se))
            approx = RegressionFSII(n=m, max_order=2, pairing_trick=True, random_state=seed)
            t0 = time.perf_counter()
            iv = approx.approximate(budget, numpy_game)
            theirs_s.append(time.perf_counter() - t0)
            theirs = np.array([iv[T] for T in sets])
            theirs_err.append(np.mean((theirs - truth) ** 2))
        rows.append(
            {
                "M": m,
                "budget": budget,
                "jaxshap MSE": float(np.mean(ours_err)),
                "shapiq RegressionFSII MSE": float(np.mean(theirs_err)),
                "shapiq MSE / jaxshap MSE": float(np.mean(theirs_err) / np.mean(ours_err)),
                "2-stderr coverage": float(np.mean(covered)),
                "jaxshap s (warm, median)": float(np.median(ours_s[1:] or ours_s)),
                "shapiq s (median)": float(np.median(theirs_s)),
            }
        )
    return rows


def tree_rows(quick: bool) -> list[dict]:
    import shap
    import xgboost

    m, n_train = 20, (2000 if quick else 10000)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_train, m)).astype(np.float32)
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.5 * X[:, 4:8].sum(1) + 0.1 * rng.normal(size=n_train)
    n_trees, depth = (20, 3) if quick else (500, 6)
    model = xgboost.XGBRegressor(n_estimators=n_trees, max_depth=depth, n_jobs=2, random_state=0).fit(X, y)
    n_rows = 50 if quick else 1000
    rows_x = X[:n_rows]

    t0 = time.perf_counter()
    explainer = jaxshap.TreeExplainer(model)
    ours = explainer.shap_interaction_values(rows_x)  # builds the tables, compiles, runs
    cold = time.perf_counter() - t0
    warm = min(time_host(lambda: explainer.shap_interaction_values(rows_x)) for _ in range(2))

    reference = shap.TreeExplainer(model)
    reference.shap_interaction_values(rows_x[:5])
    t0 = time.perf_counter()
    theirs = np.asarray(reference.shap_interaction_values(rows_x))
    shap_s = time.perf_counter() - t0

    booster = model.get_booster()
    dm = xgboost.DMatrix(rows_x)
    booster.set_param({"nthread": 2})
    booster.predict(xgboost.DMatrix(rows_x[:5]), pred_interactions=True)  # warm-up
    t0 = time.perf_counter()
    xgb_out = booster.predict(dm, pred_interactions=True)[:, :m, :m]
    xgb_s = time.perf_counter() - t0

    margin = model.predict(rows_x, output_margin=True)
    shap_values = np.asarray(explainer(rows_x).values)
    return [
        {
            "trees x depth": f"{n_trees} x {depth}",
            "M": m,
            "rows": n_rows,
            "jaxshap cold s (build+compile+run)": cold,
            "jaxshap s (warm)": warm,
            "shap s": shap_s,
            "shap / jaxshap (warm)": shap_s / warm,
            "shap / jaxshap (cold)": shap_s / cold,
            "xgboost pred_interactions s (2 threads)": xgb_s,
            "xgboost / jaxshap (warm)": xgb_s / warm,
            "max |jaxshap - shap|": float(np.abs(ours - theirs).max()),
            "max |jaxshap - xgboost|": float(np.abs(ours - xgb_out).max()),
            "rows sum to SHAP values err": float(np.abs(ours.sum(-1) - shap_values).max()),
            "max |f(x)|": float(np.abs(margin).max()),
        }
    ]


def run(quick: bool = False) -> dict:
    exact = exact_rows(quick)
    sampled = sampled_rows(quick)
    trees = tree_rows(quick)
    checks = {
        "exact indices equal shapiq ExactComputer within 1e-4": all(r["max |jaxshap - shapiq|"] < 1e-4 for r in exact),
        "sampled FSII error at most 1.5x shapiq's RegressionFSII at equal budget": all(
            r["shapiq MSE / jaxshap MSE"] > 1 / 1.5 for r in sampled
        ),
        "tree interaction values equal shap within 1e-4 of max |f(x)|": all(
            r["max |jaxshap - shap|"] < 1e-4 * max(1.0, r["max |f(x)|"]) for r in trees
        ),
        "tree interaction rows sum to the SHAP values": all(
            r["rows sum to SHAP values err"] < 1e-4 * max(1.0, r["max |f(x)|"]) for r in trees
        ),
    }
    notes = [
        "exact: a precomputed game (one value per coalition), so only the index computation is timed "
        "(FSII only up to M = 12: shapiq's ExactComputer builds a dense 2**M x 2**M weight matrix for it); "
        "shapiq's game values are cached before timing (ExactComputer); jaxshap warm = jitted, compile excluded.",
        "sampled: Faith-SHAP (order 2) of an MLP's interventional game at one row, MSE over all singletons and "
        "pairs against the exact FSII, mean over seeds; shapiq RegressionFSII with the pairing trick.",
        "trees: path-dependent SHAP interaction values; XGBoost pred_interactions on 2 threads (its [M+1, M+1] "
        "output cut to [M, M]); jaxshap cold = building the per-pattern tables + compiling + the first run.",
    ]
    return {"title": TITLE, "tables": {"exact": exact, "sampled": sampled, "trees": trees}, "checks": checks, "notes": notes}
