"""h_statistic (all pairs) against a plain NumPy implementation of Friedman & Popescu's definitions.

pyartemis pins numpy<2 and pandas<2 (it cannot share an environment with JAX 0.10) and
sklearn-gbmi does not build, so the reference is written here from the definitions: for each
feature set, the partial dependence at every row is the model averaged over an ``[n, n, M]``
block of rows, evaluated by a NumPy copy of the same MLP, one vectorised call per feature set.
"""

from __future__ import annotations

import itertools

import jax
import numpy as np

import jaxshap
from jaxshap import DEFAULT_MEMORY_BUDGET
from jaxshap._effects._hstats import centred_pds, set_masks
from jaxshap._core._model import wrap_model

from ..harness import mlp, mlp_params, model_floor, time_host, timed

TITLE = "h_statistic, all pairs, M=10, MLP(64), vs a NumPy implementation of the definition"


def numpy_mlp(params: dict):
    w1, b1, w2 = (np.asarray(params[k], np.float32) for k in ("w1", "b1", "w2"))
    return lambda x: np.tanh(x @ w1 + b1) @ w2


def reference_h(f, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Overall, pairwise and total H^2 straight from the definitions (centred PDs at the rows)."""
    n, m = X.shape

    def pd(cols):
        block = np.broadcast_to(X[None, :, :], (n, n, m)).copy()  # block[i, b] = x_b ...
        block[:, :, cols] = X[:, None, cols]  # ... with the features in `cols` from x_i
        v = f(block.reshape(n * n, m)).reshape(n, n).mean(1)
        return v - v.mean()

    fx = f(X)
    fx = fx - fx.mean()
    single = [pd([j]) for j in range(m)]
    overall = np.array([np.sum((fx - single[j] - pd([k for k in range(m) if k != j])) ** 2) for j in range(m)])
    overall /= np.sum(fx**2)
    pairwise = np.zeros((m, m))
    for j, k in itertools.combinations(range(m), 2):
        fjk = pd([j, k])
        pairwise[j, k] = pairwise[k, j] = np.sum((fjk - single[j] - single[k]) ** 2) / np.sum(fjk**2)
    total = np.sum((fx - sum(single)) ** 2) / np.sum(fx**2)
    return overall, pairwise, float(total)


def run(quick: bool = False) -> dict:
    m, n = 10, (100 if quick else 500)
    params = mlp_params(jax.random.key(0), m)
    model = lambda x: mlp(params, x)
    X = np.random.default_rng(0).normal(size=(n, m)).astype(np.float32)

    call = lambda: jaxshap.h_statistic(model, X, n_max=n)
    first_call, second_call = timed(lambda: call().pairwise, repeat=1)
    ours = call()

    # The same work with the compiled program reused (what a loop over data sets would pay).
    wrapped = wrap_model(model, m, X.dtype, X[:2])
    sets = [(j,) for j in range(m)] + list(itertools.combinations(range(m), 2))
    masks = np.concatenate([set_masks(m, sets), set_masks(m, [(j,) for j in range(m)], complement=True)])
    kernel = jax.jit(lambda rows: centred_pds(wrapped, rows, masks, DEFAULT_MEMORY_BUDGET))
    _, warm = timed(lambda: kernel(X), repeat=2)

    ref_model = numpy_mlp(params)
    ref_s = time_host(lambda: reference_h(ref_model, X))
    overall, pairwise, total = reference_h(ref_model, X)

    evals = n + len(masks) * n * n
    floor = model_floor(model, evals, m)
    row = {
        "rows": n,
        "pairs": m * (m - 1) // 2,
        "model evals": evals,
        "jaxshap s (call, incl. compile)": first_call,
        "jaxshap s (2nd call)": second_call,
        "jaxshap s (warm kernel)": warm,
        "numpy ref s": ref_s,
        "ref / jaxshap call": ref_s / second_call,
        "ref / jaxshap warm": ref_s / warm,
        "floor s": floor,
        "jaxshap warm / floor": warm / floor,
        "max |dH2 overall|": float(np.abs(np.asarray(ours.overall) - overall).max()),
        "max |dH2 pairwise|": float(np.abs(np.asarray(ours.pairwise) - pairwise).max()),
        "|dH2 total|": abs(float(ours.total) - total),
    }
    top = ours.ranked_pairs()[:3]
    notes = [
        "reference: NumPy, one vectorised [n*n, M] model call per feature set (2M + M(M-1)/2 sets), float32",
        "jaxshap 'call' timings include input checks, model wrapping and compilation (each call compiles)",
        "strongest pairs (jaxshap): " + ", ".join(f"{a}x{b}: {v:.4f}" for a, b, v in top),
        f"overall H2 range {float(np.min(ours.overall)):.4f}..{float(np.max(ours.overall)):.4f}, total {float(ours.total):.4f}",
    ]
    return {"title": TITLE, "tables": {"timing": [row]}, "notes": notes}
