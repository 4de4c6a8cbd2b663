"""accumulated_local_effects on many rows against the bare model's floor, and against PyALE.

The floor is the MLP alone on as many rows as ALE evaluates (2 per row for one feature, 4 for a
pair; for a categorical feature 1 per row at its own category and 1 per neighbour in the order),
at its best batch size (``harness.model_floor``).
PyALE (when importable) computes the same first-order estimate through pandas; with ``n`` a
multiple of the bins its quantile edges are R's type 1 too, so its uncentred differences are
compared with ours.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import jaxshap
from jaxshap._effects._ale_bins import category_order

from ..harness import mlp, mlp_params, model_floor, time_host, timed

TITLE = "accumulated_local_effects, MLP(64), M=10: cold/warm vs the model floor, and vs PyALE"


def _pyale(model, X: np.ndarray, n_bins: int):
    """PyALE's first-order ALE of feature 0 and its seconds, or ``None`` without PyALE."""
    try:
        import pandas as pd
        from PyALE._src.ALE_1D import aleplot_1D_continuous
    except ImportError:
        return None
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    jitted = jax.jit(model)

    class Predictor:
        def predict(self, rows):
            return np.asarray(jitted(np.asarray(rows, np.float32)))

    run = lambda: aleplot_1D_continuous(frame, Predictor(), "x0", grid_size=n_bins, include_CI=False)
    seconds = time_host(run)
    return run(), seconds


def _host_model_rows(X: np.ndarray, X_cat: np.ndarray, evals: dict, quick: bool) -> list[dict] | None:
    """A host model's cells (XGBoost, 100 trees of depth 6, ``inplace_predict``): the warm call
    against the model alone on as many rows at its best batch size, best of 3 each in turn; or
    ``None`` without xgboost."""
    try:
        import xgboost as xgb
    except ImportError:
        return None
    n, m = X.shape
    rng = np.random.default_rng(1)
    y = X_cat[:, 0] * X_cat[:, 1] + np.sin(X_cat[:, 3]) + 0.3 * X_cat[:, 2] + 0.1 * rng.normal(size=n)
    fit = slice(0, min(n, 20000))
    booster = xgb.train({"max_depth": 6, "eta": 0.1, "nthread": 2}, xgb.DMatrix(X_cat[fit], y[fit]), 100)
    predict = lambda x: booster.inplace_predict(np.asarray(x, np.float32))  # noqa: E731
    batches = (1 << 12, 1 << 14) if quick else (1 << 16, 1 << 18, 1 << 20)
    rows = []
    for label, data, features, kw in (("feature 0", X, 0, {}), ("categorical feature 2", X_cat, 2, {"categorical": [2]})):
        count = evals[label]
        tiled = np.tile(data, (-(-count // n), 1))[:count]
        floor = lambda: min(time_host(lambda: [predict(tiled[i : i + b]) for i in range(0, count, b)])  # noqa: E731
                            for b in batches)
        call = lambda: jaxshap.accumulated_local_effects(predict, data, features, n_bootstrap=50, **kw).values  # noqa: E731
        cold, _ = timed(call, repeat=0)
        warm, fl = np.inf, np.inf
        for _ in range(3):
            warm, fl = min(warm, timed(call, repeat=1)[1]), min(fl, floor())
        rows.append({"effect": label + " (the default call)", "rows": n, "model evals": count,
                     "cold s": cold, "warm s": warm, "floor s": fl, "warm / floor": warm / fl})
    return rows


def run(quick: bool = False) -> dict:
    m, n, n_bins = 10, (10**4 if quick else 10**6), 20
    params = mlp_params(jax.random.key(0), m)
    model = lambda x: mlp(params, x)
    X = np.random.default_rng(0).normal(size=(n, m)).astype(np.float32)
    X_cat = X.copy()  # feature 2 as 5 categories (its quintiles), for the categorical cells
    X_cat[:, 2] = np.searchsorted(np.quantile(X[:, 2], [0.2, 0.4, 0.6, 0.8]), X[:, 2]).astype(np.float32)
    order = category_order(X_cat, 2, {2})  # the rows in the order's end categories have one neighbour, not two
    ends = np.sum(X_cat[:, 2] == order[0]) + np.sum(X_cat[:, 2] == order[-1])
    batches = (1 << 12, 1 << 14) if quick else (1 << 12, 1 << 14, 1 << 16, 1 << 18)
    repeat = 2 if quick else 5
    cells = [("feature 0", 0, 0, 2 * n, False), ("feature 0 (the default call)", 0, 50, 2 * n, False),
             ("pair (0, 1)", (0, 1), 0, 4 * n, False), ("pair (0, 1) (the default call)", (0, 1), 50, 4 * n, False),
             ("categorical feature 2 (5 categories)", 2, 0, 3 * n - int(ends), True),
             ("categorical feature 2 (the default call)", 2, 50, 3 * n - int(ends), True)]
    best_batch = {e: min(batches, key=lambda b: model_floor(model, e, m, batches=(b,), repeat=1))
                  for e in {c[3] for c in cells}}
    rows, results = [], {}
    sources = {"": (X, X_cat)}
    if jax.default_backend() != "cpu":  # on an accelerator: also the data already there (no copy from the host)
        sources[", X on the device"] = jax.block_until_ready(jax.device_put((X, X_cat)))
    for (label, features, n_boot, evals, cat), (where, both) in ((c, w) for w in sources.items() for c in cells):
        label, data = label + where, both[cat]
        kw = {"categorical": [2]} if cat else {}
        call = lambda: jaxshap.accumulated_local_effects(model, data, features, n_bins=n_bins, n_bootstrap=n_boot,
                                                         **kw).values
        floor = lambda clock: model_floor(model, evals, m, batches=(best_batch[evals],), repeat=1, clock=clock)
        cold, _ = timed(call, repeat=0)
        best = {}
        for _ in range(repeat):  # the call and the floor in turn: both see the same load
            for clock in (time.perf_counter, time.process_time):
                _, seconds = timed(call, repeat=1, clock=clock)
                best[clock, "call"] = min(best.get((clock, "call"), np.inf), seconds)
                best[clock, "floor"] = min(best.get((clock, "floor"), np.inf), floor(clock))
        warm, warm_cpu = best[time.perf_counter, "call"], best[time.process_time, "call"]
        fl, fl_cpu = best[time.perf_counter, "floor"], best[time.process_time, "floor"]
        results[label, n_boot] = jaxshap.accumulated_local_effects(model, data, features, n_bins=n_bins,
                                                                   n_bootstrap=n_boot, **kw)
        rows.append({
            "effect": label, "rows": n, "n_bootstrap": n_boot, "model evals": evals,
            "cold s (incl. compile)": cold, "warm s": warm, "floor s": fl, "warm / floor": warm / fl,
            "warm cpu s": warm_cpu, "floor cpu s": fl_cpu, "cpu: warm / floor": warm_cpu / fl_cpu,
        })
    checks = {"values finite": all(bool(np.isfinite(np.asarray(r.values)).all()) for r in results.values())}
    if len(sources) > 1:
        same = lambda a, b: np.allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())  # float32; GPU sums' order varies
        checks["X on the device gives the same values"] = all(
            same(np.asarray(results[label + where, b].values), np.asarray(results[label, b].values))
            for where in list(sources)[1:] for label, _, b, _, _ in cells)
    notes = [
        "categorical cells: feature 2 replaced by its quintile (codes 0-4), `categorical=[2]`; a row is evaluated at "
        "its own category and at each neighbour in the order (three evaluations, two at the order's ends), and the "
        "call includes ordering the categories by their rows' other features (exact Kolmogorov-Smirnov distances, on the host)",
        "warm: a whole call (input checks, quantile bins, the compiled row pass, the bins' moments, the estimate on "
        "the host) with the programs cached; on an accelerator the rows marked 'X on the device' take a jax.Array "
        "already there, the others copy NumPy rows to the device within the call",
        "n_bootstrap: resamples for the standard errors (50 by default), drawn from the bins' moments of the model's "
        "differences (no extra model evaluations, no pass over the rows)",
        "floor: the bare model on as many rows at its best batch size, timed in turn with the call (best of "
        f"{repeat} each), so that both see the same load; timings on a shared machine are still noisy, the cpu "
        "columns (this process's CPU seconds) less than the wall-clock ones",
    ]
    theirs = _pyale(model, X, n_bins)
    if theirs is None:
        notes.append("PyALE is not importable here: no comparison (pip install PyALE)")
    else:
        frame, seconds = theirs
        ours = results["feature 0", 0]
        eff = frame["eff"].to_numpy()
        same_bins = np.allclose(np.asarray(ours.grid), frame.index.to_numpy())
        diff = float(np.max(np.abs((np.asarray(ours.values) - ours.values[0]) - (eff - eff[0])))) if same_bins else np.nan
        rows.append({"effect": "feature 0 (PyALE)", "rows": n, "n_bootstrap": 0, "model evals": 2 * n,
                     "cold s (incl. compile)": seconds, "warm s": seconds, "floor s": rows[0]["floor s"],
                     "warm / floor": seconds / rows[0]["floor s"], "warm cpu s": np.nan, "floor cpu s": rows[0]["floor cpu s"],
                     "cpu: warm / floor": np.nan})
        notes.append(f"PyALE / jaxshap (warm, feature 0): {seconds / rows[0]['warm s']:.1f}x; same bins: {same_bins}; "
                     f"max |difference of uncentred effects|: {diff:.2e}")
        checks["PyALE agrees (uncentred, same bins)"] = bool(same_bins and diff < 1e-3)
    tables = {"timing": rows}
    host = _host_model_rows(X, X_cat, {"feature 0": 2 * n, "categorical feature 2": 3 * n - int(ends)}, quick)
    if host is None:
        notes.append("xgboost is not importable here: no host model's cells (pip install xgboost)")
    else:
        tables["a host model: XGBoost, 100 trees of depth 6"] = host
        per_row = host[0]["floor s"] / host[0]["model evals"] * 1e6
        notes.append("host model: XGBoost's `inplace_predict` called from the program (a host callback) on float32 "
                     "rows; its floor is the same call on as many rows at its best batch size; at its cost "
                     f"({per_row:.2f} us a row here) the category order, which dominates the MLP's categorical "
                     "cells, weighs little")
    return {"title": TITLE, "tables": tables, "notes": notes, "checks": checks}
