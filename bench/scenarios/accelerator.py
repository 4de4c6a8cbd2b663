"""Accelerator: the explainers at 10^5-10^6 rows against the model's floor, and trees against XGBoost's GPU SHAP.

Run it first when a GPU is lent (``python -m bench accelerator --out DIR``; sized for at most
8 minutes on one GPU). On a CPU it runs the same cells at a few thousand rows, so that it is
checked before a device is there.

* **Model-agnostic cells** (tanh MLP(64), 32 background rows): Exact (M = 10), Permutation and
  Kernel (M = 20) at their defaults, and Kernel with ``maskers.Gaussian`` (M = 10, 64 samples).
  Each is timed on its first call (compilation included) and warm, against the *floor*: the bare
  model on as many evaluations, in jitted batches of its best size, measured on at most
  :data:`FLOOR_SAMPLE` rows and scaled by rate (the rows of a 10^6-row Exact job do not fit any
  memory at once).
* **ALE** on the same MLP: every feature, 20 bins, no bootstrap, against the floor of its
  ``2 x rows x features`` evaluations.
* **Trees:** an XGBoost regressor (300 trees of depth 8, M = 40), path-dependent values and
  pairwise interactions, against XGBoost's own ``pred_contribs`` and ``pred_interactions``
  on the same device (``device="cuda"``, GPUTreeShap, on a GPU). Without xgboost the tree rows
  are skipped and say so.

A larger row count is skipped (and listed in the notes) when the smaller one's time predicts more
than :data:`CELL_SECONDS` for it, which keeps the run inside its budget on slower devices.

On a machine that has JAX with CUDA but no xgboost and no package index (the lent GPU machines),
xgboost travels as a wheel beside the repository (57.6 MB for 3.4.1, CUDA included, with a 2.8 MB
working tree: under a 64 MiB transfer limit)::

    python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 -d .whl xgboost
    # there:
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:. python3 -m bench accelerator --out "$OUT"
"""

from __future__ import annotations

import importlib.util
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import jaxshap

from ..harness import mlp, mlp_params, timed

TITLE = ("Accelerator: Exact / Permutation / Kernel / Gaussian / ALE at 10^5-10^6 rows vs the floor; "
         "Tree vs XGBoost's own SHAP")
FLOOR_SAMPLE = {"quick": 1 << 16, "cpu": 1 << 20, "accelerator": 1 << 25}
"""At most this many rows are evaluated to measure the model's floor (its rate then scales)."""
CELL_SECONDS = 45.0
"""A larger row count is not run when the smaller one predicts more than this for its calls."""
RUN_SECONDS = 360.0
"""No larger row count starts once the scenario has run this long (the budget is 8 minutes)."""
N_BACKGROUND = 32


def _sizes(quick: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Row counts for the model-agnostic cells and for the tree cells."""
    if quick:
        return (64,), (200,)
    if jax.default_backend() == "cpu":
        return (2_000,), (2_000,)
    return (100_000, 1_000_000), (100_000, 1_000_000)


def floor_seconds(model, n_features: int, n_evals: int, quick: bool = False) -> float:
    """Seconds for the bare ``model`` on ``n_evals`` rows at its best batch size, by rate.

    The rate is measured on ``min(n_evals, FLOOR_SAMPLE)`` rows drawn on the device, in batches
    of 2^12 to 2^22 rows (the best counts), and scaled to ``n_evals``.
    """
    kind = "quick" if quick else "cpu" if jax.default_backend() == "cpu" else "accelerator"
    sample = min(n_evals, FLOOR_SAMPLE[kind])
    best = float("inf")
    for batch in (1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22):
        batch = min(batch, sample)
        n_batches = -(-sample // batch)
        xs = jax.random.normal(jax.random.key(0), (n_batches, batch, n_features), jnp.float32)
        run = jax.jit(lambda xs: jax.lax.map(lambda x: jnp.sum(model(x)), xs))
        _, seconds = timed(lambda: run(xs), repeat=2)
        best = min(best, seconds / (n_batches * batch))
        if batch == sample:
            break
    return best * n_evals


def _rows(m: int, n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, m)).astype(np.float32)


def _explainers(quick: bool) -> dict:
    """name -> (M, build(model, background))."""
    gaussian = lambda model, bg: jaxshap.KernelExplainer(  # noqa: E731
        model, jaxshap.maskers.Gaussian(np.zeros(10), np.eye(10) * 0.5 + 0.5, n_samples=16 if quick else 64))
    return {
        "Exact": (10, lambda model, bg: jaxshap.ExactExplainer(model, bg)),
        "Permutation": (20, lambda model, bg: jaxshap.PermutationExplainer(model, bg)),
        "Kernel": (20, lambda model, bg: jaxshap.KernelExplainer(model, bg, 256 if quick else None)),
        "Kernel, maskers.Gaussian": (10, gaussian),
    }


def _efficiency_gap(result, model, X) -> float:
    """``max |sum_j phi_j + base - f(x)|`` over the rows: the additivity every explainer keeps."""
    values = np.asarray(result.values, np.float64)
    fx = np.asarray(model(jnp.asarray(X)), np.float64)
    return float(np.max(np.abs(values.sum(-1) + np.asarray(result.base_values, np.float64) - fx)))


def _scaled(sizes, run_one, notes, label, deadline):
    """Run ``run_one(n)`` for each size; a larger size is skipped (and noted) when the previous
    one's warm time predicts more than :data:`CELL_SECONDS` for its two calls, or past the
    scenario's ``deadline`` (a ``time.perf_counter()`` value)."""
    rows, previous = [], None
    for n in sizes:
        if previous is not None:
            predicted = 2 * previous[1] * n / previous[0]
            if predicted > CELL_SECONDS or time.perf_counter() > deadline:
                notes.append(f"{label}: {n} rows skipped (predicted {predicted:.0f} s, or past the "
                             f"run's {RUN_SECONDS:.0f} s).")
                break
        row = run_one(n)
        rows.append(row)
        previous = (n, row["jaxshap s (warm)"])
    return rows


def model_agnostic_rows(quick: bool, notes: list, deadline: float) -> tuple[list[dict], float]:
    """Exact / Permutation / Kernel / Gaussian cells; also the largest efficiency gap seen."""
    sizes, _ = _sizes(quick)
    out, worst = [], 0.0
    for name, (m, build) in _explainers(quick).items():
        model = partial(mlp, mlp_params(jax.random.key(0), m, 64))
        ex = build(model, _rows(m, N_BACKGROUND, seed=0))

        def one(n, ex=ex, model=model, m=m, name=name):
            nonlocal worst
            X = _rows(m, n)
            first, warm = timed(lambda: ex(X).values, repeat=1 if n >= 10**6 else 2)
            check = min(n, 256)
            worst = max(worst, _efficiency_gap(ex(X[:check]), model, X[:check]))
            evals = n * ex._evals_per_row()  # noqa: SLF001 - the evaluations the call makes
            floor = floor_seconds(model, m, evals, quick)
            return {"explainer": name, "M": m, "rows": n, "model evals": evals, "first call s": first,
                    "jaxshap s (warm)": warm, "floor s": floor, "jaxshap / floor": warm / floor,
                    "rows / s": n / warm}

        out += _scaled(sizes, one, notes, name, deadline)
    return out, worst


def ale_rows(quick: bool, notes: list, deadline: float) -> list[dict]:
    """accumulated_local_effects on every feature of the MLP, against its ``2 n M`` evaluations' floor."""
    sizes, _ = _sizes(quick)
    m = 10
    model = partial(mlp, mlp_params(jax.random.key(0), m, 64))

    def one(n):
        X = _rows(m, n)
        def call():
            effects = jaxshap.accumulated_local_effects(model, X, list(range(m)), n_bins=20, n_bootstrap=0)
            return [a.values for a in effects]

        first, warm = timed(call, repeat=2)
        floor = floor_seconds(model, m, 2 * n * m, quick)
        return {"rows": n, "features": m, "first call s": first, "jaxshap s (warm)": warm, "floor s": floor,
                "jaxshap / floor": warm / floor}

    return _scaled(tuple(10 * s for s in sizes), one, notes, "ALE", deadline)


def _xgboost_model(m: int, device: str, quick: bool):
    """300 trees of depth 8 fitted on 20,000 rows (a quick run: 20 trees of depth 4 on 2,000)."""
    import xgboost

    n, trees, depth = (2_000, 20, 4) if quick else (20_000, 300, 8)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, m)).astype(np.float32)
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + X[:, 4:] @ rng.normal(size=m - 4) * 0.3
    return xgboost.XGBRegressor(n_estimators=trees, max_depth=depth, device=device).fit(X, y)


def _best_of_two(fn):
    """``(best seconds of two calls, the result)`` of a host call (the first warms the device up)."""
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def tree_rows(quick: bool, notes: list, deadline: float) -> tuple[list[dict], float]:
    """TreeExplainer (values, then pairs) against XGBoost's own SHAP on the same device."""
    if importlib.util.find_spec("xgboost") is None:
        notes.append("Trees: xgboost is not installed here, so the tree rows were not run.")
        return [], 0.0
    import xgboost

    m = 40
    _, sizes = _sizes(quick)
    device = "cpu" if jax.default_backend() == "cpu" else "cuda"
    model = _xgboost_model(m, device, quick)
    booster = model.get_booster()
    ex = jaxshap.TreeExplainer(model)
    out, worst = [], 0.0

    def values(n):
        nonlocal worst
        X = _rows(m, n, seed=2)
        first, warm = timed(lambda: ex(X, check_additivity=False).values, repeat=2)
        own, theirs = _best_of_two(lambda: booster.predict(xgboost.DMatrix(X), pred_contribs=True))
        worst = max(worst, float(np.max(np.abs(np.asarray(ex(X[:256]).values) - theirs[:256, :m]))))
        return {"output": "values", "rows": n, "first call s": first, "jaxshap s (warm)": warm,
                f"xgboost ({device}) s": own, "xgboost / jaxshap": own / warm}

    def pairs(n):
        X = _rows(m, n, seed=3)
        first, warm = timed(lambda: ex(X, interactions=2, check_additivity=False).values, repeat=2)
        own, _ = _best_of_two(lambda: booster.predict(xgboost.DMatrix(X), pred_interactions=True))
        return {"output": "pairwise interactions", "rows": n, "first call s": first, "jaxshap s (warm)": warm,
                f"xgboost ({device}) s": own, "xgboost / jaxshap": own / warm}

    out += _scaled(sizes, values, notes, "Tree values", deadline)
    out += _scaled(tuple(s // 10 for s in sizes), pairs, notes, "Tree pairs", deadline)
    return out, worst


def run(quick: bool = False) -> dict:
    deadline = time.perf_counter() + RUN_SECONDS
    notes = [f"Backend {jax.default_backend()}, devices {[str(d) for d in jax.devices()]}."]
    agnostic, gap = model_agnostic_rows(quick, notes, deadline)
    ale = ale_rows(quick, notes, deadline)
    trees, tree_gap = tree_rows(quick, notes, deadline)
    checks = {
        "every explainer's values add up to f(x) - E f (to 1e-3)": gap <= 1e-3,
        "TreeExplainer equals XGBoost's pred_contribs (to 1e-3)": tree_gap <= 1e-3,
        "every cell ran with a finite time": all(np.isfinite(r["jaxshap s (warm)"]) for r in agnostic + ale + trees),
    }
    tables = {"model-agnostic explainers vs the floor": agnostic, "ALE vs the floor": ale}
    if trees:
        tables["TreeExplainer vs XGBoost's own SHAP"] = trees
    return {"title": TITLE, "tables": tables, "notes": notes, "checks": checks}
