"""TreeExplainer against the libraries' own C++ TreeSHAP, shap and shapiq, on large ensembles.

Models (full run): XGBoost of depth 6, 8 and 12, LightGBM of 31, 127 and 255 leaves (leaf-wise,
unbounded depth), a scikit-learn random forest of depth 20, each of 300 trees, M = 40 features;
CatBoost of depth 6 and 10 when catboost is installed. 2000 rows explained. Every time is process
CPU seconds (both cores' work; the machine is shared, and CPU time is what other processes' load
disturbs least): cold = building the explainer and its first call in a fresh process (compilation
included), warm = the best later call in this process. References: XGBoost's ``pred_contribs``
and LightGBM's ``pred_contrib`` (their own C++ TreeSHAP, 2 threads), shap's ``TreeExplainer``,
XGBoost's ``pred_interactions`` and shap's ``shap_interaction_values`` for pairs, shap's interventional
TreeSHAP for a classifier's probability, and shapiq 1.8's
TreeSHAP-IQ and QuadratureTreeSHAP for order 3 (in the Python 3.12 environment that
``bench/shapiq18/setup.sh`` builds). Slow references are timed on fewer rows and compared by rate.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import jaxshap

from . import _shapiq18

TITLE = "TreeExplainer vs XGBoost/LightGBM C++ TreeSHAP, shap and shapiq (process CPU s), M=40, 2000 rows"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
cpu = time.process_time


def data(m: int, n: int, seed: int = 0):
    """Regression data: a few strong effects, pairwise and three-way products, a linear tail, 2% NaN."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, m)).astype(np.float32)
    Z = X.copy()
    y = 2 * Z[:, 0] + np.sin(3 * Z[:, 1]) + Z[:, 2] * Z[:, 3] + Z[:, 4] * Z[:, 5] * Z[:, 6]
    y = y + Z[:, 7:] @ rng.normal(size=m - 7) * 0.3 + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < 0.02] = np.nan
    return X, y


def specs(quick: bool) -> list[dict]:
    """The models: name, library, options."""
    if quick:
        return [dict(name="XGBoost 20 x depth 3", lib="xgboost", trees=20, depth=3),
                dict(name="LightGBM 20 x 7 leaves", lib="lightgbm", trees=20, leaves=7),
                dict(name="random forest 10 x depth 5", lib="sklearn", trees=10, depth=5)]
    out = [dict(name=f"XGBoost 300 x depth {d}", lib="xgboost", trees=300, depth=d) for d in (6, 8, 12)]
    out += [dict(name=f"LightGBM 300 x {k} leaves", lib="lightgbm", trees=300, leaves=k) for k in (31, 127, 255)]
    out.append(dict(name="random forest 300 x depth 20", lib="sklearn", trees=300, depth=20))
    # CatBoost (symmetric trees) of depth 6 and 10: measured once catboost and its reader are there
    out += [dict(name=f"CatBoost 300 x depth {d}", lib="catboost", trees=300, depth=d) for d in (6, 10)]
    return out


def fit(spec: dict, X, y, folder: str):
    """The fitted model and the file it is saved to (for the cold subprocess and shapiq)."""
    lib = spec["lib"]
    if lib == "xgboost":
        import xgboost

        model = xgboost.XGBRegressor(n_estimators=spec["trees"], max_depth=spec["depth"], n_jobs=2, random_state=0)
        booster = model.fit(X, y).get_booster()
        path = os.path.join(folder, "model.json")
        booster.save_model(path)
        return booster, path
    if lib == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMRegressor(n_estimators=spec["trees"], num_leaves=spec["leaves"], max_depth=-1, n_jobs=2,
                                       verbose=-1, random_state=0)
        booster = model.fit(X, y).booster_
        path = os.path.join(folder, "model.txt")
        booster.save_model(path)
        return booster, path
    if lib == "catboost":
        import catboost

        model = catboost.CatBoostRegressor(iterations=spec["trees"], depth=spec["depth"], thread_count=2, verbose=False,
                                           random_seed=0, allow_writing_files=False).fit(X, y)
    else:
        from sklearn.ensemble import RandomForestRegressor

        half = slice(0, len(X) // 2)  # a forest grows deeper the more rows: half the rows, depth 20
        model = RandomForestRegressor(n_estimators=spec["trees"], max_depth=spec["depth"], min_samples_leaf=5,
                                      max_features=0.3, n_jobs=2, random_state=0).fit(np.nan_to_num(X[half]), y[half])
    path = os.path.join(folder, "model.pkl")
    with open(path, "wb") as f:
        pickle.dump(model, f)
    return model, path


def load(lib: str, path: str):
    if lib == "xgboost":
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(path)
        return booster
    if lib == "lightgbm":
        import lightgbm

        return lightgbm.Booster(model_file=path)
    with open(path, "rb") as f:
        return pickle.load(f)


_COLD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    spec = json.loads(sys.argv[1])
    from bench.scenarios.tree import data, load
    X, _ = data(spec["m"], spec["n"])
    rows = X[: spec["rows"]]
    if spec["lib"] == "sklearn":
        rows = np.nan_to_num(rows)
    model = load(spec["lib"], spec["path"])
    import jaxshap
    t0 = time.process_time()
    ex = jaxshap.TreeExplainer(model)
    build = time.process_time() - t0
    t0 = time.process_time()
    np.asarray(ex(rows).values)
    first = time.process_time() - t0
    t0 = time.process_time()
    np.asarray(ex(rows).values)
    warm = time.process_time() - t0
    print("RESULT " + json.dumps({"build": build, "first": first, "warm": warm}))
    """
)


def cold(spec: dict, path: str, m: int, n: int, rows: int) -> dict:
    """Build + first call in a fresh process, and its second call (``first - warm`` is mostly compilation)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    arg = json.dumps({"lib": spec["lib"], "path": path, "m": m, "n": n, "rows": rows})
    done = subprocess.run([sys.executable, "-c", _COLD, arg], env=env, capture_output=True, text=True, timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"cold job failed: {done.stderr[-2000:]}")


def timed(fn, repeat: int = 1):
    """``(result, best process CPU seconds)``."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = cpu()
        out = fn()
        best = min(best, cpu() - t0)
    return out, best


def library_shap(spec: dict, model, rows):
    """The library's own C++ TreeSHAP: ``(values [n, M], seconds)``, or ``(None, None)``."""
    if spec["lib"] == "xgboost":
        import xgboost

        def run():
            return model.predict(xgboost.DMatrix(rows, nthread=2), pred_contribs=True)[:, :-1]
    elif spec["lib"] == "lightgbm":
        def run():
            return model.predict(rows, pred_contrib=True, num_threads=2)[:, :-1]
    elif spec["lib"] == "catboost":
        import catboost

        def run():
            return model.get_feature_importance(catboost.Pool(rows), type="ShapValues", thread_count=2)[:, :-1]
    else:
        return None, None
    return timed(run)


def shapley_row(spec, model, path, X, rows, m, n_train, quick) -> dict:
    """Path-dependent SHAP values: jaxshap cold / warm / compile against the C++ and shap."""
    import shap

    c = cold(spec, path, m, n_train, len(rows))
    ex = jaxshap.TreeExplainer(model)
    values, warm = timed(lambda: np.asarray(ex(rows).values), repeat=2)
    lib_values, lib_s = library_shap(spec, model, rows)
    t0 = cpu()
    reference = shap.TreeExplainer(model)
    shap_build = cpu() - t0
    theirs, shap_s = timed(lambda: reference(rows, check_additivity=False).values)
    best_warm = min(s for s in (lib_s, shap_s) if s is not None)
    best_cold = min(s for s in (lib_s, shap_s + shap_build) if s is not None)
    ours_cold = c["build"] + c["first"]
    row = {
        "model": spec["name"],
        "paths": int(ex._default.paths.n_paths),
        "widest path": int(ex._default.paths.n_slots),
        "dtype": str(np.asarray(values).dtype),
        "jaxshap warm s": warm,
        "jaxshap cold s": ours_cold,
        "first call - warm s": c["first"] - c["warm"],
        "library C++ s": lib_s,
        "shap s": shap_s,
        "shap cold s": shap_s + shap_build,
        "vs best warm": best_warm / warm,
        "vs best cold": best_cold / ours_cold,
        "max |jaxshap - shap|": float(np.abs(values - theirs).max()),
        "max |jaxshap - C++|": None if lib_values is None else float(np.abs(values - lib_values).max()),
    }
    return row


def interventional_row(spec, model, rows, bg, shap_rows: int, model_output: str = "raw") -> dict:
    """Interventional SHAP values of ``model_output``: jaxshap on all ``rows`` against shap on
    ``shap_rows``, by rate."""
    import shap

    t0 = cpu()
    ex = jaxshap.TreeExplainer(model, bg, model_output=model_output)
    build = cpu() - t0
    values, first = timed(lambda: np.asarray(ex(rows).values))
    _, warm = timed(lambda: np.asarray(ex(rows).values), repeat=2)
    t0 = cpu()
    reference = shap.TreeExplainer(model, bg, model_output=model_output, feature_perturbation="interventional")
    theirs = reference(rows[:shap_rows], check_additivity=False).values
    rate = (cpu() - t0) * len(rows) / shap_rows
    return {"model": spec["name"], "background": len(bg), "jaxshap warm s": warm, "jaxshap cold s": build + first,
            "shap rows timed": shap_rows, "shap s (scaled to all rows)": rate, "vs shap warm": rate / warm,
            "max |jaxshap - shap|": float(np.abs(values[:shap_rows] - theirs).max())}


def probability_row(spec, X, y, rows, bg, shap_rows: int) -> dict:
    """:func:`interventional_row` of a classifier's probability: the same kind and size of model
    fit to ``y > median``."""
    labels = (y > np.nanmedian(y)).astype(int)
    if spec["lib"] == "xgboost":
        import xgboost

        model = xgboost.XGBClassifier(n_estimators=spec["trees"], max_depth=spec["depth"], n_jobs=2, random_state=0)
    else:
        import lightgbm

        model = lightgbm.LGBMClassifier(n_estimators=spec["trees"], num_leaves=spec["leaves"], max_depth=-1, n_jobs=2,
                                        verbose=-1, random_state=0)
    named = {**spec, "name": spec["name"] + " classifier"}
    return interventional_row(named, model.fit(X, labels), rows, bg, shap_rows, model_output="probability")


PAIR_WORK = 5e7
"""The pair rows' budget: ``sum over paths of U^3`` (pairs of slots at ``U / 2`` quadrature nodes)
per explained row that still gets 500 rows; deeper ensembles get fewer, at least 50."""


def pair_rows(ex) -> int:
    """Rows for the pairwise table of explainer ``ex``: 500, or fewer for ensembles whose paths are
    long and many (a LightGBM model of 255 leaves took over 15 minutes for 500 rows), compared by
    rate all the same."""
    width = np.asarray(ex._default.paths.length, np.float64)
    return int(np.clip(500 * PAIR_WORK / max(float((width**3).sum()), 1.0), 50, 500))


def pair_row(spec, model, rows, ref_rows: int) -> dict:
    """Pairwise (k-SII) interaction values: jaxshap on the first :func:`pair_rows` of ``rows``
    against shap (and XGBoost's ``pred_interactions``) on ``ref_rows``, by rate."""
    import shap

    ex = jaxshap.TreeExplainer(model)
    rows = rows[: pair_rows(ex)]
    values, first = timed(lambda: np.asarray(ex(rows, interactions=2).values))
    _, warm = timed(lambda: np.asarray(ex(rows, interactions=2).values))
    t0 = cpu()
    theirs = np.asarray(shap.TreeExplainer(model).shap_interaction_values(rows[:ref_rows]))
    shap_rate = (cpu() - t0) / ref_rows
    row = {"model": spec["name"], "rows": len(rows), "jaxshap warm s": warm, "jaxshap first call s": first,
           "shap s per row": shap_rate, "vs shap": shap_rate * len(rows) / warm,
           "max |jaxshap - shap|": float(np.abs(values[:ref_rows] - theirs).max())}
    if spec["lib"] == "xgboost":
        import xgboost

        t0 = cpu()
        model.predict(xgboost.DMatrix(rows[:ref_rows], nthread=2), pred_interactions=True)
        row["XGBoost pred_interactions s per row"] = (cpu() - t0) / ref_rows
        row["vs XGBoost"] = row["XGBoost pred_interactions s per row"] * len(rows) / warm
    return row


ORDER3_TIMEOUT = 900.0
"""Seconds shapiq's order-3 explainers get for their reference rows; past it the row reports a bound."""


def order3_row(spec, model, path, rows, ref_rows: int) -> dict:
    """Order-3 k-SII: jaxshap against shapiq 1.8's TreeSHAP-IQ and QuadratureTreeSHAP, by rate."""
    from jaxshap._estimators._interactions import interaction_tensor
    import jax.numpy as jnp

    ex = jaxshap.TreeExplainer(model)
    values, first = timed(lambda: np.asarray(ex(rows, interactions=3).values))
    _, warm = timed(lambda: np.asarray(ex(rows, interactions=3).values))
    row = {"model": spec["name"], "rows": len(rows), "jaxshap warm s": warm, "jaxshap first call s": first}
    if spec["lib"] not in ("xgboost", "lightgbm") or _shapiq18.python() is None:
        row["shapiq"] = "not run (no shapiq 1.8 environment: bash bench/shapiq18/setup.sh)"
        return row
    sub = np.nan_to_num(rows[:ref_rows]) if spec["lib"] == "sklearn" else rows[:ref_rows]
    try:
        out = _shapiq18.tree_interactions(path, spec["lib"], sub, 3, "k-SII", timeout=ORDER3_TIMEOUT)
    except subprocess.TimeoutExpired:  # a lower bound on the ratio: shapiq needed more than this per row
        row["shapiq"] = f"did not finish {ref_rows} row(s) in {ORDER3_TIMEOUT:.0f} s"
        row["vs shapiq (at least)"] = ORDER3_TIMEOUT / ref_rows * len(rows) / warm
        return row
    m = rows.shape[1]
    for i, name in enumerate(out["methods"]):
        terms = [jnp.moveaxis(jnp.asarray(t[i]).reshape((ref_rows,) + (m,) * (j + 1)), 0, -1) for j, t in enumerate(out["terms"])]
        theirs = np.moveaxis(np.asarray(interaction_tensor(terms, 3)), -1, 0)
        per_row = out["seconds"][i].sum() / ref_rows
        row[f"{name} s per row"] = per_row
        row[f"vs {name}"] = per_row * len(rows) / warm
        row[f"max |jaxshap - {name}|"] = float(np.abs(values[:ref_rows] - theirs).max())
    row["shapiq"] = out["version"]
    return row


def _progress(table: str, rows: list) -> None:
    """The row just added, on stderr: a run stopped part-way still shows what it measured."""
    print(f"[tree] {table}: {json.dumps(rows[-1], default=str)}", file=sys.stderr, flush=True)


def run(quick: bool = False) -> dict:
    m, n_train = (8, 1000) if quick else (40, 10000)
    n_rows = 200 if quick else 2000
    X, y = data(m, n_train)
    rows_all = X[:n_rows]
    shapley, interventional, probability, pairs, order3, skipped = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for spec in specs(quick):
            if spec["lib"] == "catboost" and importlib.util.find_spec("catboost") is None:
                skipped.append(f"{spec['name']}: catboost is not installed")
                continue
            model, path = fit(spec, X, y, folder)
            rows = np.nan_to_num(rows_all) if spec["lib"] == "sklearn" else rows_all
            try:
                shapley.append(shapley_row(spec, model, path, X, rows, m, n_train, quick))
                _progress("path-dependent", shapley)
            except TypeError as err:  # a model jaxshap has no reader for (CatBoost before its reader)
                skipped.append(f"{spec['name']}: {err}"[:200])
                continue
            if spec["lib"] in ("xgboost", "lightgbm") and (quick or spec.get("depth", 0) <= 8 and spec.get("leaves", 0) <= 31):
                bg = np.nan_to_num(X[-100:]) if spec["lib"] == "sklearn" else X[-100:]
                interventional.append(interventional_row(spec, model, rows, bg, 20 if quick else 200))
                _progress("interventional", interventional)
                probability.append(probability_row(spec, X, y, rows, bg, 20 if quick else 200))
                _progress("probability", probability)
            if spec["lib"] != "sklearn" or quick:
                pairs.append(pair_row(spec, model, rows[: 50 if quick else 500], 5 if quick else 10))
                _progress("pairs", pairs)
            if spec["lib"] in ("xgboost", "lightgbm") and (quick or spec.get("depth", 99) <= 6 or spec.get("leaves", 99) <= 31):
                # shapiq's TreeSHAP-IQ ran 16 minutes on three rows of XGBoost depth 6 at order 3 here
                # (M = 40) without finishing: one reference row, on the two smallest models only
                order3.append(order3_row(spec, model, path, rows[: 10 if quick else 50], 2 if quick else 1))
                _progress("order 3", order3)
    notes = [
        "Times are process CPU seconds (both cores' work) on a shared 2-core machine; 'vs best' divides the "
        "fastest of the library's C++ TreeSHAP and shap by jaxshap. cold: TreeExplainer(model) and its first "
        "call in a fresh process (compilation included); 'first call - warm': the same process's second call "
        "subtracted, mostly compilation.",
        "Pairwise interactions explain 500 rows, or fewer (at least 50) where the paths' sum of U^3 passes "
        f"{PAIR_WORK:.0e} (the table's rows column).",
        "References timed on fewer rows (shap interventional, shap / XGBoost pair interactions, shapiq order 3) "
        "are compared by their rate per row; their values are compared on the rows they explained.",
        "LightGBM and the random forest are explained in float64 (their own precision), XGBoost in float32.",
    ] + [f"skipped: {s}" for s in skipped]
    checks = {
        "jaxshap's SHAP values equal shap's (path-dependent) to 1e-3": all(r["max |jaxshap - shap|"] < 1e-3 for r in shapley),
        "pair interaction values equal shap's to 1e-3": all(r["max |jaxshap - shap|"] < 1e-3 for r in pairs),
        "probability values equal shap's to 1e-4": all(r["max |jaxshap - shap|"] < 1e-4 for r in probability),
        "order-3 k-SII equals shapiq's to 1e-3": all(v < 1e-3 for r in order3 for k, v in r.items() if k.startswith("max |")),
    }
    tables = {"path-dependent SHAP values": shapley, "interventional SHAP values (100 background rows)": interventional,
              "interventional SHAP values of a classifier's probability (100 background rows)": probability,
              "pairwise interaction values (k-SII)": pairs, "order-3 interaction values (k-SII)": order3}
    return {"title": TITLE, "tables": tables, "notes": notes, "checks": checks}
