"""first_touch: a shap user's small job as a whole fresh process, jaxshap against shap.

Each case is a script run three ways in fresh Python processes: the base (imports of NumPy and
the model's library, the data, the model's fit), the base plus shap's explanation (import shap,
build, explain) and the base plus jaxshap's (twice, to see what a second run of the same job
costs). Reported: the seconds each library adds to the base process (process wall time, best of
``repeat`` runs), the ratio jaxshap / shap for the first and second jaxshap runs, and each
process's peak resident memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

TITLE = "First touch: a small job in a fresh process, the time and memory each library adds"

_SETUP = {
    "gbm_tree": (
        "from sklearn.ensemble import GradientBoostingRegressor\n"
        "X, y, names = diabetes()\n"
        "model = GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=0).fit(X, y)\n",
        "lib.TreeExplainer(model)(X[:100])",
    ),
    "xgb_probability": (
        "import xgboost\n"
        "X, y, names = diabetes()\n"
        "y = (y > np.median(y)).astype(int)\n"
        "model = xgboost.XGBClassifier(n_estimators=100, max_depth=4, random_state=0).fit(X, y)\n",
        "lib.TreeExplainer(model, X[:100], model_output='probability')(X[:100])",
    ),
    "auto_forest": (
        "from sklearn.ensemble import RandomForestRegressor\n"
        "X, y, names = diabetes()\n"
        "model = RandomForestRegressor(n_estimators=50, max_depth=6, random_state=0).fit(X, y)\n",
        "lib.Explainer(model, X[:100])(X[:100], check_additivity=False)",  # shap fails its own check here
    ),
    "kernel_svc": (
        "from sklearn.svm import SVC\n"
        "X, y, names = diabetes()\n"
        "y = (y > np.median(y)).astype(int)\n"
        "model = SVC(probability=True, random_state=0).fit(X, y)\n",
        "lib.KernelExplainer(model.predict_proba, lib.kmeans(X, 10)).shap_values(X[:20], nsamples=200)",
    ),
    "permutation_mlp": (
        "from sklearn.neural_network import MLPRegressor\n"
        "X, y, names = diabetes()\n"
        "X = (X - X.mean(0)) / X.std(0)\n"
        "model = MLPRegressor(hidden_layer_sizes=(32,), max_iter=300, random_state=0).fit(X, y)\n",
        "lib.PermutationExplainer(model.predict, X[:100])(X[:50])",
    ),
    "linear_logistic": (
        "from sklearn.linear_model import LogisticRegression\n"
        "X, y, names = diabetes()\n"
        "y = (y > np.median(y)).astype(int)\n"
        "model = LogisticRegression(max_iter=1000).fit(X, y)\n",
        "lib.LinearExplainer(model, X)(X)",
    ),
}

_HEAD = (
    "import warnings, logging, resource, numpy as np\n"
    "warnings.simplefilter('ignore')\n"
    "def diabetes():\n"
    "    from sklearn.datasets import load_diabetes\n"
    "    d = load_diabetes()\n"
    "    return d.data.astype(np.float64), d.target.astype(np.float64), list(d.feature_names)\n"
)


def _script(case: str, library: str | None) -> str:
    setup, call = _SETUP[case]
    body = _HEAD + setup
    if library is not None:
        body += f"import {library} as lib\nresult = {call}\n"
    body += "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    return body


def _run(case: str, library: str | None, env: dict) -> tuple[float, float]:
    """``(wall seconds, peak RSS in MB)`` of one fresh process."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _script(case, library)], capture_output=True, text=True, env=env,
                         timeout=1200)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"first_touch {case} ({library}): {out.stderr[-2000:]}")
    rss = [line for line in out.stdout.splitlines() if line.startswith("RSS")][-1]
    return wall, int(rss.split()[1]) / 1024


def run(quick: bool = False) -> dict:
    cases = ["gbm_tree", "linear_logistic"] if quick else list(_SETUP)
    repeat = 1 if quick else 2
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "JAXSHAP_CACHE_DIR": cache, "MPLBACKEND": "Agg"}
        for case in cases:
            base = min(_run(case, None, env)[0] for _ in range(repeat))
            shap_runs = [_run(case, "shap", env) for _ in range(repeat)]
            ours = [_run(case, "jaxshap", env) for _ in range(2)]  # a first and a second run of the job
            shap_added = min(w for w, _ in shap_runs) - base
            first, second = ours[0][0] - base, ours[1][0] - base
            rows.append({
                "case": case,
                "base process (s)": round(base, 2),
                "shap adds (s)": round(shap_added, 2),
                "jaxshap adds, first run (s)": round(first, 2),
                "jaxshap adds, second run (s)": round(second, 2),
                "first / shap": round(first / max(shap_added, 1e-3), 2),
                "second / shap": round(second / max(shap_added, 1e-3), 2),
                "peak MB shap": round(max(m for _, m in shap_runs)),
                "peak MB jaxshap": round(max(m for _, m in ours)),
                "peak ratio": round(max(m for _, m in ours) / max(m for _, m in shap_runs), 2),
            })
    notes = [
        "Each cell is a fresh Python process (best of the repeats for the base and shap); 'adds' is its wall time "
        "minus the base process's, which imports NumPy and the model's library, loads the data and fits the model.",
        "jaxshap runs the job twice with the same JAXSHAP_CACHE_DIR, empty at the start.",
    ]
    return {"title": TITLE, "tables": {"small jobs": rows}, "notes": notes,
            "checks": {"every case ran": len(rows) == len(cases)}}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
