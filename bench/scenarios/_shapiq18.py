"""shapiq 1.8's approximators on a scenario's games, run in their own Python 3.12 environment.

shapiq from 1.5 on needs Python 3.12; the project's environment may be older. ``bash
bench/shapiq18/setup.sh`` builds ``.venv-shapiq18`` (shapiq 1.8, xgboost, lightgbm); this module
finds its interpreter (``$JAXSHAP_SHAPIQ18_PYTHON``, else ``.venv-shapiq18/bin/python`` at the
repository root) and runs ``bench/shapiq18/worker.py`` on the scenario's own game: an XGBoost model
passed as its JSON file with the same background and rows, or a small game passed as its table of
values at every coalition. Random coalitions' values from both sides are compared before any
estimate is kept. Results are cached under :data:`CACHE`.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = ROOT / "bench" / "shapiq18" / "worker.py"
PYTHON_VARIABLE = "JAXSHAP_SHAPIQ18_PYTHON"
CACHE = ROOT / "bench" / "results" / ".shapiq18-cache"
"""Worker results by a hash of the request, the model file and the worker's source (shapiq's
estimates do not change when jaxshap does, so a rerun of the scenario skips them)."""
METHODS = ("KernelSHAP", "LeverageSHAP", "OddSHAP", "PolySHAP", "ProxySHAP", "RegressionMSR", "PermutationSamplingSV", "SVARM")
"""shapiq 1.8's Shapley-value approximators that the scenario compares (worker's names)."""


def python() -> str | None:
    """The shapiq 1.8 environment's interpreter, or ``None`` when there is none."""
    path = os.environ.get(PYTHON_VARIABLE) or str(ROOT / ".venv-shapiq18" / "bin" / "python")
    return path if os.path.exists(path) else None


def _probes(m: int, rng: np.random.Generator) -> np.ndarray:
    probes = rng.random((16, m)) < 0.5
    probes[0], probes[1] = False, True
    return probes


def _digest(request: dict) -> str:
    """A hash of the request's arrays, the model file it names and the worker's source."""
    h = hashlib.sha256(WORKER.read_bytes())
    for key in sorted(request):
        value = np.asarray(request[key])
        h.update(f"{key}{value.dtype}{value.shape}".encode())
        h.update(pathlib.Path(str(value)).read_bytes() if key == "model" else value.tobytes())
    return h.hexdigest()[:32]


def approximate(game: dict, budgets, seed: int, own_game, methods=METHODS, timeout: float = 3600) -> dict:
    """shapiq 1.8's estimates on ``game`` (the worker's request fields besides budgets, methods, seed).

    Args:
      game: ``{"kind": "xgboost", "model": booster, "background", "X"}`` or ``{"kind": "table",
        "table" [rows, 2**M]}``; ``n_features`` is added.
      budgets: coalitions besides the empty and the full one.
      seed: the sampling seed (row ``r`` gets shapiq's ``random_state = 1000 seed + r``).
      own_game: ``own_game(r, coalitions [P, M] bool) -> [P]``: the scenario's game at row ``r``,
        compared with the worker's.

    Returns:
      ``{"values" [methods, budgets, rows, M], "seconds" [methods, budgets], "methods",
      "errors", "version"}``.

    Raises:
      RuntimeError: when the worker fails or plays another game than ``own_game``.
    """
    exe = python()
    if exe is None:
        raise RuntimeError(f"no shapiq 1.8 environment: run `bash bench/shapiq18/setup.sh` or set {PYTHON_VARIABLE}")
    with tempfile.TemporaryDirectory() as tmp:
        request = {k: v for k, v in game.items() if k != "model"}
        m = (np.shape(game["X"])[1] if "X" in game else int(np.log2(np.shape(game["table"])[1])))
        if game["kind"] == "xgboost":
            game["model"].save_model(os.path.join(tmp, "model.json"))
            request["model"] = os.path.join(tmp, "model.json")
        probes = _probes(m, np.random.default_rng(seed))
        request.update(n_features=m, budgets=np.asarray(budgets), methods=np.array(methods), seed=seed, probes=probes)
        np.savez(os.path.join(tmp, "request.npz"), **request)
        out_path = CACHE / f"{_digest(request)}.npz"
        if not out_path.exists():
            CACHE.mkdir(parents=True, exist_ok=True)
            part = os.path.join(tmp, "result.npz")
            done = subprocess.run([exe, str(WORKER), os.path.join(tmp, "request.npz"), part], capture_output=True, text=True, timeout=timeout)
            if done.returncode:
                raise RuntimeError(f"shapiq 1.8 worker failed:\n{done.stderr[-3000:]}")
            shutil.move(part, out_path)
        with np.load(out_path, allow_pickle=False) as res:
            out = {k: res[k] for k in res.files}
    theirs = out["probe_values"]
    ours = np.stack([own_game(r, probes) for r in range(len(theirs))])
    gap = float(np.abs(theirs - ours).max() / max(1e-12, np.abs(ours).max()))
    if not gap < 1e-5:
        raise RuntimeError(f"the shapiq 1.8 worker's game differs from the scenario's (relative gap {gap:.3g})")
    return {"values": out["values"], "seconds": out["seconds"], "methods": [str(n) for n in out["methods"]],
            "errors": [str(e) for e in out["errors"]], "version": str(out["shapiq_version"]), "game gap": gap}


def tree_interactions(model_path: str, library: str, X, order: int, index: str = "k-SII",
                      methods=("TreeSHAPIQ", "QuadratureTreeSHAP"), timeout: float = 3600) -> dict:
    """shapiq 1.8's path-dependent tree explainers on a saved model (XGBoost JSON or LightGBM text):
    ``{"seconds" [methods, 2] (build, explain; process CPU), "terms": [[methods, rows, M**t] for t
    in 1..order], "baseline", "methods", "version"}`` (not cached: these are timings).

    Raises:
      RuntimeError: when there is no shapiq 1.8 environment or the worker fails.
    """
    exe = python()
    if exe is None:
        raise RuntimeError(f"no shapiq 1.8 environment: run `bash bench/shapiq18/setup.sh` or set {PYTHON_VARIABLE}")
    with tempfile.TemporaryDirectory() as tmp:
        request = os.path.join(tmp, "request.npz")
        np.savez(request, kind="tree", model=model_path, library=library, X=np.asarray(X, np.float64), order=order,
                 index=index, methods=np.array(methods))
        out_path = os.path.join(tmp, "result.npz")
        done = subprocess.run([exe, str(WORKER), request, out_path], capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"shapiq 1.8 worker failed:\n{done.stderr[-3000:]}")
        with np.load(out_path, allow_pickle=False) as res:
            return {"seconds": res["seconds"], "terms": [res[f"values_{t}"] for t in range(1, order + 1)],
                    "baseline": res["baseline"], "methods": [str(n) for n in res["methods"]],
                    "version": str(res["shapiq_version"])}
