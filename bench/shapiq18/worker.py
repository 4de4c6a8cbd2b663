"""Run shapiq's Shapley-value approximators on games given as files (runs in the shapiq 1.8 venv).

Usage: ``python worker.py REQUEST.npz RESULT.npz``. This script imports neither jax nor jaxshap:
it runs under the Python 3.12 environment that ``bench/shapiq18/setup.sh`` builds, while
``bench/scenarios/kernel_accuracy.py`` runs jaxshap in the project's environment and sends it
the very games it explains:

* ``kind = "table"``: ``table [rows, 2**M]`` holds each row's game at every coalition, indexed by
  the coalition's bits (feature ``j`` is bit ``j``), so the game is the scenario's one exactly;
* ``kind = "tree"``: shapiq's path-dependent tree explainers on a saved XGBoost or LightGBM
  model (:func:`trees`), for ``python -m bench tree``;
* ``kind = "xgboost"``: the interventional game ``v(S) = mean_b f(x_S, b_{N \\ S})`` of the
  XGBoost model saved as JSON (``model``), over ``background [B, M]`` at the rows ``X [rows, M]``
  (float32, as the scenario evaluates it).

The request also holds ``budgets`` (coalitions besides the empty and full ones; shapiq gets two
more, it counts those), ``methods`` (names below) and ``seed``. The result holds ``values
[methods, budgets, rows, M]`` (NaN where a method failed), ``seconds [methods, budgets]`` (wall
time over all rows, game evaluations included), ``methods``, ``errors`` (the failure messages) and ``probe_values [rows, P]``, the game at the
request's ``probes [P, M]`` (the scenario checks that both sides play the same game).
"""

from __future__ import annotations

import itertools
import sys
import time
import warnings

import numpy as np


def _approximator(name: str, m: int, budget: int, random_state: int):
    """shapiq's approximator ``name`` for ``m`` players, with the settings its paper recommends."""
    import shapiq.approximator as a

    rs = random_state
    make = {
        "KernelSHAP": lambda: a.KernelSHAP(n=m, pairing_trick=True, random_state=rs),
        "LeverageSHAP": lambda: a.LeverageSHAP(n=m, random_state=rs),
        "OddSHAP": lambda: a.OddSHAP(n=m, random_state=rs),
        "PolySHAP": lambda: a.PolySHAP(n=m, max_order=3, max_terms=max(m + 1, budget // 2), pairing_trick=True, random_state=rs),
        "ProxySHAP": lambda: a.ProxySHAP(n=m, max_order=1, index="SV", random_state=rs),
        "RegressionMSR": lambda: a.RegressionMSR(n=m, index="SV", random_state=rs),
        "PermutationSamplingSV": lambda: a.PermutationSamplingSV(n=m, random_state=rs),
        "SVARM": lambda: a.SVARM(n=m, index="SV", pairing_trick=True, random_state=rs),
    }
    return make[name]()


def _games(request) -> list:
    """One callable per row: a ``[n, M]`` bool array of coalitions to their values ``[n]``."""
    kind = str(request["kind"])
    if kind == "table":
        table = np.asarray(request["table"], np.float64)
        m = int(request["n_features"])
        bits = 1 << np.arange(m, dtype=np.int64)

        def make(row):
            return lambda c: row[np.atleast_2d(np.asarray(c, bool)).astype(np.int64) @ bits]

        return [make(row) for row in table]
    import xgboost

    booster = xgboost.Booster()
    booster.load_model(str(request["model"]))
    background = np.asarray(request["background"], np.float32)
    m = background.shape[1]

    def make(x):
        def game(c):
            c = np.atleast_2d(np.asarray(c, bool))
            z = np.where(c[:, None, :], x, background).reshape(-1, m)
            out = booster.inplace_predict(z)
            return np.asarray(out, np.float64).reshape(len(c), -1).mean(1)

        return game

    return [make(x) for x in np.asarray(request["X"], np.float32)]


def run(request) -> dict:
    games = _games(request)
    m = int(request["n_features"])
    budgets = [int(b) for b in request["budgets"]]
    methods = [str(n) for n in request["methods"]]
    seed = int(request["seed"])
    values = np.full((len(methods), len(budgets), len(games), m), np.nan)
    seconds = np.full((len(methods), len(budgets)), np.nan)
    errors = []
    probes = np.asarray(request["probes"], bool)
    probe_values = np.stack([game(probes) for game in games])
    for i, name in enumerate(methods):
        for j, budget in enumerate(budgets):
            t0 = time.perf_counter()
            try:
                for r, game in enumerate(games):
                    approx = _approximator(name, m, budget, 1000 * seed + r)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        result = approx.approximate(budget=budget + 2, game=game)
                    values[i, j, r] = np.asarray(result.get_n_order_values(1), np.float64)
            except Exception as exc:  # a method that refuses a budget: NaN, and the reason
                values[i, j] = np.nan
                errors.append(f"{name} at budget {budget}: {type(exc).__name__}: {exc}"[:300])
            seconds[i, j] = time.perf_counter() - t0
    return {"values": values, "seconds": seconds, "probe_values": probe_values, "methods": np.array(methods), "errors": np.array(errors, dtype=str)}


def _load_tree_model(request):
    """The tree model of a ``kind = "tree"`` request: an XGBoost JSON file or a LightGBM text file."""
    path, library = str(request["model"]), str(request["library"])
    if library == "xgboost":
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(path)
        return booster
    import lightgbm

    return lightgbm.Booster(model_file=path)


def trees(request) -> dict:
    """``kind = "tree"``: shapiq's path-dependent tree explainers (``methods``: ``TreeSHAPIQ``, the
    TreeSHAP-IQ of Muschalik et al. 2024, and ``QuadratureTreeSHAP``, shapiq's default since 1.8)
    on the rows ``X`` at ``order`` and ``index``. Returns per method the seconds of building the
    explainer and of explaining the rows (process CPU time) and the terms of each order ``t`` as
    dense symmetric arrays ``values_t [methods, rows, M**t]``."""
    from shapiq.tree import QuadratureTreeSHAP, TreeSHAPIQ

    model = _load_tree_model(request)
    X = np.asarray(request["X"], np.float64)
    order, index = int(request["order"]), str(request["index"])
    methods = [str(n) for n in request["methods"]]
    m = X.shape[1]
    make = {"TreeSHAPIQ": TreeSHAPIQ, "QuadratureTreeSHAP": QuadratureTreeSHAP}
    values = {t: np.zeros((len(methods), len(X), m**t)) for t in range(1, order + 1)}
    seconds = np.zeros((len(methods), 2))
    baseline = np.zeros(len(methods))
    for i, name in enumerate(methods):
        t0 = time.process_time()
        explainer = make[name](model, max_order=order, min_order=1, index=index)
        seconds[i, 0] = time.process_time() - t0
        t0 = time.process_time()
        results = [explainer.explain(x) for x in X]
        seconds[i, 1] = time.process_time() - t0
        for r, result in enumerate(results):
            baseline[i] = float(result.baseline_value)
            for T, pos in result.interaction_lookup.items():
                if not 1 <= len(T) <= order:
                    continue
                for perm in itertools.permutations(T):
                    values[len(T)][i, r, np.ravel_multi_index(perm, (m,) * len(T))] = result.values[pos]
    return {"seconds": seconds, "baseline": baseline, "methods": np.array(methods),
            **{f"values_{t}": v for t, v in values.items()}}


def main(argv: list[str]) -> None:
    import shapiq

    with np.load(argv[1], allow_pickle=False) as request:
        out = trees(request) if str(request["kind"]) == "tree" else run(request)
    np.savez(argv[2], shapiq_version=np.array(shapiq.__version__), **out)


if __name__ == "__main__":
    main(sys.argv)
