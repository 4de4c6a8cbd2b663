"""The floor panel: every explainer on a panel of model kinds, warm and cold, against the model's floor.

The gate for any compile option, thread setting or platform branch: it must win by 1.2x in the
cells it aims at and lose in none. Model kinds: tanh, ReLU and GELU MLPs, a linear model, softmax
attention over the features, a NumPy host model and an XGBoost ensemble (its ``predict`` as a
host model, and TreeExplainer against XGBoost's own ``pred_contribs``). Explainers at their
defaults: Exact (M = 10), Permutation and Kernel (M = 20), 100 background rows, 50 rows.

* warm: the best of 3 later calls, in a fresh process per model (a ``--quick`` run: in this
  one); floor: the bare model on as many rows as the explainer evaluates, at its best batch size
  (:func:`bench.harness.model_floor`; for a host model, NumPy batches of 2^12 to 2^16 rows);
* cold: a fresh process, from ``import jaxshap`` through the explainer's build and first call;
* shap: the same work with shap's explainer on the tanh MLP, warm and as a cold one-off Kernel job.

Comparing two configurations (each cell's warm time with and without an environment setting,
both in fresh processes)::

    python -m bench.scenarios.floor_panel --compare XLA_FLAGS=--xla_cpu_enable_fast_math=true
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..harness import mlp, mlp_params, model_floor, time_host, timed
from .runtime import ROOT, _cold

TITLE = "Floor panel: Exact / Permutation / Kernel / Tree on tanh, ReLU, GELU MLPs, linear, attention, host models"
FEATURES = {"Exact": 10, "Permutation": 20, "Kernel": 20}
HIGHEST = jax.lax.Precision.HIGHEST


def _dense(key, a, b):
    return jax.random.normal(key, (a, b)) / np.sqrt(a)


def _relu_mlp(m, key):
    k = jax.random.split(key, 3)
    p = [_dense(k[0], m, 256), _dense(k[1], 256, 256), _dense(k[2], 256, 1)]
    return lambda x: (jax.nn.relu(jax.nn.relu(x @ p[0]) @ p[1]) @ p[2])[:, 0]


def _gelu_residual(m, key):
    k = jax.random.split(key, 4)
    w_in, w1, w2, w_out = _dense(k[0], m, 128), _dense(k[1], 128, 128), _dense(k[2], 128, 128), _dense(k[3], 128, 1)

    def f(x):
        h = x @ w_in
        h = h + jax.nn.gelu(h @ w1) @ w2
        return (jax.nn.gelu(h) @ w_out)[:, 0]

    return f


def _linear(m, key):
    w = jax.random.normal(key, (m,))
    return lambda x: x @ w + 0.5


def _attention(m, key, d=16):
    """Each feature a token ``x_j e_j + p_j``; one softmax self-attention layer; mean-pooled."""
    k = jax.random.split(key, 6)
    emb, pos = jax.random.normal(k[0], (m, d)), jax.random.normal(k[1], (m, d)) / 4
    wq, wk, wv, w_out = (_dense(k[i], d, d) for i in range(2, 6))

    def f(x):
        tokens = x[:, :, None] * emb + pos                          # [n, M, d]
        q, kk, v = tokens @ wq, tokens @ wk, tokens @ wv
        att = jax.nn.softmax(jnp.einsum("nid,njd->nij", q, kk) / np.sqrt(d), axis=-1)
        h = jnp.einsum("nij,njd->nid", att, v).mean(axis=1)         # [n, d]
        return jnp.tanh(h @ w_out).sum(-1)

    return f


def _host_mlp(m, key):
    p = jax.tree_util.tree_map(np.asarray, mlp_params(key, m, 64))
    return lambda x: np.tanh(np.asarray(x, np.float32) @ p["w1"] + p["b1"]) @ p["w2"]


def _xgboost(m, seed=0):
    import xgboost

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2000, m)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=2000)
    return xgboost.XGBRegressor(n_estimators=100, max_depth=6, n_jobs=1).fit(X, y)


MODELS = {
    "tanh MLP(64)": lambda m, key: partial(mlp, mlp_params(key, m, 64)),
    "ReLU MLP(256,256)": _relu_mlp,
    "GELU MLP(128) residual": _gelu_residual,
    "linear": _linear,
    "attention": _attention,
    "NumPy MLP(64) (host)": _host_mlp,
    "XGBoost predict (host)": lambda m, key: _xgboost(m).predict,
}
HOST = ("NumPy MLP(64) (host)", "XGBoost predict (host)")
QUICK_MODELS = ("tanh MLP(64)", "linear", "NumPy MLP(64) (host)")
"""The models of a ``--quick`` run (which checks that the panel runs, not its figures)."""


def _data(m, quick):
    n_bg, n_rows = (20, 5) if quick else (100, 50)
    rng = np.random.default_rng(1)
    return rng.normal(size=(n_bg, m)).astype(np.float32), rng.normal(size=(n_rows, m)).astype(np.float32)


def _explainer(name, model, background, quick):
    import jaxshap

    if name == "Exact":
        return jaxshap.ExactExplainer(model, background)
    if name == "Permutation":
        return jaxshap.PermutationExplainer(model, background, 8 if quick else 32)
    return jaxshap.KernelExplainer(model, background, 256 if quick else None)


def _host_floor(model, n_evals, m, batches=(1 << 12, 1 << 14, 1 << 16)):
    """Seconds for a host model on ``n_evals`` rows at its best NumPy batch size."""
    best = float("inf")
    for batch in batches:
        batch = min(batch, n_evals)
        rows = np.random.default_rng(0).normal(size=(batch, m)).astype(np.float32)
        seconds = time_host(lambda: model(rows), repeat=3)
        best = min(best, seconds * n_evals / batch)
    return best


def warm_cell(model_name, explainer_name, quick):
    """``{warm, first, evals, floor}`` of one (model, explainer) cell, in this process."""
    m = FEATURES[explainer_name]
    model = MODELS[model_name](m, jax.random.key(0))
    background, X = _data(m, quick)
    ex = _explainer(explainer_name, model, background, quick)
    first, warm = timed(lambda: ex(X).values)
    evals = X.shape[0] * ex._evals_per_row()
    floor = _host_floor(model, evals, m) if model_name in HOST else model_floor(model, evals, m)
    return {"warm s": warm, "first call s": first, "model evals": evals, "floor s": floor, "warm / floor": warm / floor}


def tree_cell(quick):
    """TreeExplainer (path-dependent) on the XGBoost model against its own ``pred_contribs``."""
    import xgboost

    import jaxshap

    model = _xgboost(20)
    X = np.random.default_rng(2).normal(size=(200 if quick else 2000, 20)).astype(np.float32)
    ex = jaxshap.TreeExplainer(model)
    first, warm = timed(lambda: ex(X).values)
    booster = model.get_booster()
    own = time_host(lambda: booster.predict(xgboost.DMatrix(X), pred_contribs=True), repeat=3)
    return {"warm s": warm, "first call s": first, "xgboost pred_contribs s": own, "xgboost / jaxshap": own / warm}


_COLD = """
import json, sys, time
t0 = time.perf_counter()
import jaxshap
from bench.scenarios import floor_panel as p
model_name, explainer_name, quick = json.loads(sys.argv[1])
if explainer_name == "Tree":
    cell = p.tree_cell(quick)
else:
    m = p.FEATURES[explainer_name]
    model = p.MODELS[model_name](m, p.jax.random.key(0))
    background, X = p._data(m, quick)
    p.np.asarray(p._explainer(explainer_name, model, background, quick)(X).values)
print("RESULT " + json.dumps(time.perf_counter() - t0))
"""


def _child(code, args, env=None):
    env = {**os.environ, **(env or {}), "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(args)], env=env, capture_output=True, text=True,
                         timeout=1800, cwd=ROOT)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"panel child failed: {out.stderr[-2000:]}")


_WARM = """
import json, sys
from bench.scenarios import floor_panel as p
cells, quick = json.loads(sys.argv[1])
print("RESULT " + json.dumps({f"{m}|{e}": p.warm_cell(m, e, quick) for m, e in cells}))
"""


def fresh_warm_cells(cells, quick, env=None):
    """``{"model|explainer": warm_cell(...)}`` for ``cells``, one fresh process per model: a long
    run in one process drifts (its first cells read up to 1.8x slower than fresh processes)."""
    out = {}
    for model_name in dict.fromkeys(m for m, _ in cells):
        out.update(_child(_WARM, [[c for c in cells if c[0] == model_name], quick], env))
    return out


def cold_cell(model_name, explainer_name, quick):
    """Seconds from ``import jaxshap`` to the first call's values, in a fresh process with an empty
    program store (for a tree, the cell's own fit and pred_contribs are in it too)."""
    with tempfile.TemporaryDirectory() as empty:
        return _child(_COLD, [model_name, explainer_name, quick], {"JAXSHAP_CACHE_DIR": empty})


def _shap_cells(quick):
    """shap's explainers on the tanh MLP, same work, warm; jaxshap's ratio from the panel."""
    import shap

    out = {}
    for name, m in FEATURES.items():
        model = MODELS["tanh MLP(64)"](m, jax.random.key(0))
        jitted = jax.jit(model)
        f = lambda x: np.asarray(jitted(np.asarray(x, np.float32)))  # noqa: E731
        background, X = _data(m, quick)
        ex = _explainer(name, model, background, quick)
        if name == "Kernel":
            ref = shap.KernelExplainer(f, background)
            run = lambda rows: ref.shap_values(rows, nsamples=ex.n_coalitions, l1_reg=False, silent=True)  # noqa: E731
        else:
            masker = shap.maskers.Independent(background, max_samples=background.shape[0])
            cls = shap.ExactExplainer if name == "Exact" else shap.PermutationExplainer
            ref = cls(f, masker)
            evals = 2**m if name == "Exact" else ex.n_permutations // 2 * (2 * m + 1)
            run = lambda rows: ref(rows, max_evals=evals, silent=True)  # noqa: E731
        run(X[:1])
        out[name] = time_host(lambda: run(X))
    return out


def run(quick: bool = False) -> dict:
    rows, checks = [], {}
    cells = [(m, e) for m in (QUICK_MODELS if quick else MODELS) for e in FEATURES]
    warm = {f"{m}|{e}": warm_cell(m, e, quick) for m, e in cells} if quick else fresh_warm_cells(cells, quick)
    for model_name, explainer_name in cells:
        cell = warm[f"{model_name}|{explainer_name}"]
        cell["cold s"] = None if quick else cold_cell(model_name, explainer_name, quick)
        rows.append({"model": model_name, "explainer": explainer_name, **cell})
        print(f"  {model_name:24s} {explainer_name:12s} warm/floor {cell['warm / floor']:.2f}", flush=True)
    tree = tree_cell(quick)
    tree["cold s"] = None if quick else cold_cell("XGBoost", "Tree", quick)
    shap_s = _shap_cells(quick)
    versus = []
    for name, seconds in shap_s.items():
        ours = next(r for r in rows if r["model"] == "tanh MLP(64)" and r["explainer"] == name)
        versus.append({"explainer": name, "shap s": seconds, "jaxshap warm s": ours["warm s"],
                       "shap / jaxshap": seconds / ours["warm s"]})
    spec = dict(m=20, background=(20 if quick else 100), rows=(5 if quick else 50), budget=(256 if quick else 2048),
                hidden=64, cache=None)
    shap_cold, ours_cold = _cold({**spec, "who": "shap"}), _cold({**spec, "who": "jaxshap"})
    one_off = {"job": f"KernelSHAP, tanh MLP(64), M=20, {spec['rows']} rows, {spec['budget']} coalitions",
               "shap s": shap_cold["seconds"], "jaxshap s": ours_cold["seconds"],
               "shap / jaxshap": shap_cold["seconds"] / ours_cold["seconds"]}
    if not quick:
        for r in rows:
            limit = 2.0 if r["model"] == "linear" else 1.2
            checks[f"{r['model']}, {r['explainer']}: warm <= {limit}x the floor"] = r["warm / floor"] <= limit
        checks.update({f"{v['explainer']}: >= 10x shap warm on the tanh MLP": v["shap / jaxshap"] >= 10 for v in versus})
        checks["a cold one-off Kernel job >= 3x shap's"] = one_off["shap / jaxshap"] >= 3
    checks["every cell ran with a finite time"] = all(np.isfinite(r["warm / floor"]) for r in rows)
    return {
        "title": TITLE,
        "tables": {"panel": rows, "TreeExplainer vs XGBoost pred_contribs": [tree], "vs shap, tanh MLP(64)": versus,
                   "cold one-off Kernel job": [one_off]},
        "notes": ["Cold: a fresh process from `import jaxshap` to the values (compilation included)."
                  + (" A quick run measures three models and no cold cells." if quick else "")],
        "checks": checks,
    }




def compare(setting: str, quick: bool) -> list[dict]:
    """Each cell's warm time with ``NAME=VALUE`` over without it (two fresh processes)."""
    name, _, value = setting.partition("=")
    cells = [(m, e) for m in MODELS for e in FEATURES]
    base = {k: c["warm s"] for k, c in fresh_warm_cells(cells, quick).items()}
    other = {k: c["warm s"] for k, c in fresh_warm_cells(cells, quick, {name: value}).items()}
    return [{"cell": k, "without s": base[k], "with s": other[k], "speed-up": base[k] / other[k]} for k in base]


if __name__ == "__main__":
    from ..harness import markdown_table

    parser = argparse.ArgumentParser(prog="python -m bench.scenarios.floor_panel")
    parser.add_argument("--compare", required=True, help="an environment setting NAME=VALUE to judge")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    table = compare(args.compare, args.quick)
    print(markdown_table(table))
    wins = [r for r in table if r["speed-up"] >= 1.2]
    losses = [r for r in table if r["speed-up"] < 1 / 1.05]
    print(f"\n{len(wins)} cells win by >= 1.2x; {len(losses)} lose by more than 5%: "
          + ("keep it only where it aims and loses nowhere" if losses else "no losses"))
