"""GradientExplainer (expected gradients) speed and error; integrated-gradients quadrature convergence.

Table ``expected gradients``: rows per second of GradientExplainer (200 gradient samples per
row, shap's default) on a tanh MLP(64) with 100 background rows, for M = 8, 16, 32, next to
KernelExplainer at its default budget on the same rows, and the error of each against reference
interventional Shapley values (ExactExplainer for M <= 10, else PermutationExplainer with 256
walks per row, whose own standard error is reported). Expected gradients estimate a different
quantity (an average of path integrals) that equals interventional SHAP only for additive
models, so their error here includes that bias; it is reported, not hidden.

Table ``integrated gradients``: the completeness gap ``|sum phi - (f(x) - f(b))|`` relative to
``|f(x) - f(b)|`` (the quadrature error) of each rule against the number of gradient
evaluations, M = 16, baseline the background mean.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import jaxshap

from ..harness import timed
from ._common import mlp_problem

TITLE = "GradientExplainer (expected gradients) and integrated_gradients quadrature, MLP(64), 100 background rows"


def _relative(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def run(quick: bool = False) -> dict:
    sizes = (8,) if quick else (8, 16, 32)
    n_bg, n_rows = (20 if quick else 100), (8 if quick else 100)
    rows, checks = [], {}
    for m in sizes:
        model, _, background, X = mlp_problem(m, n_bg, n_rows, seed=m)
        ex = jaxshap.GradientExplainer(model, background, n_samples=200)
        first, warm = timed(lambda: ex(X, key=jax.random.key(0)).values)
        eg = ex(X, key=jax.random.key(0))
        kernel = jaxshap.KernelExplainer(model, background)
        k_first, k_warm = timed(lambda: kernel(X, key=jax.random.key(1)).values, repeat=1)
        ks = kernel(X, key=jax.random.key(1))
        if m <= 10:
            ref, ref_se = jaxshap.ExactExplainer(model, background)(X).values, 0.0
        else:
            perm = jaxshap.PermutationExplainer(model, background, n_permutations=256)(X, key=jax.random.key(2))
            ref, ref_se = perm.values, float(np.linalg.norm(np.asarray(perm.stderr)) / np.linalg.norm(np.asarray(perm.values)))
        fx = np.asarray(model(X))
        gap = np.abs(np.asarray(eg.values.sum(1) + eg.base_values) - fx)
        rows.append(
            {
                "M": m,
                "rows": n_rows,
                "EG rows/s (warm)": n_rows / warm,
                "EG compile+first s": first,
                "Kernel rows/s (warm)": n_rows / k_warm,
                "EG / Kernel throughput": k_warm / warm,
                "EG rel err vs SHAP": _relative(eg.values, ref),
                "EG rel stderr": float(np.linalg.norm(np.asarray(eg.stderr)) / np.linalg.norm(np.asarray(eg.values))),
                "Kernel rel err vs SHAP": _relative(ks.values, ref),
                "reference rel stderr": ref_se,
                "EG completeness gap / stderr (max)": float((gap / np.asarray(eg.stderr).sum(1)).max()),
            }
        )
        checks[f"M={m}: expected gradients complete within 4 summed stderr"] = rows[-1]["EG completeness gap / stderr (max)"] < 4.0

    m = 8 if quick else 16
    model, _, background, X = mlp_problem(m, n_bg, n_rows, seed=100 + m)
    baseline = background.mean(0)
    scale = np.abs(np.asarray(model(X)) - float(model(baseline[None])[0]))
    ig_rows = []
    for rule in ("gauss_legendre", "riemann_left", "riemann_middle", "riemann_trapezoid"):
        row = {"rule": rule}
        for n in (4, 8, 16, 32, 64):
            expl = jaxshap.integrated_gradients(model, X, baseline, n_steps=n, rule=rule)
            gap = np.abs(np.asarray(expl.values.sum(1) + expl.base_values - model(X)))
            row[f"{n} steps"] = float(np.median(gap / np.maximum(scale, 1e-12)))
        t0 = time.perf_counter()
        jax.block_until_ready(jaxshap.integrated_gradients(model, X, baseline, n_steps=32, rule=rule).values)
        row["s (32 steps, warm)"] = time.perf_counter() - t0
        ig_rows.append(row)
    gl, mid = ig_rows[0], ig_rows[2]
    checks["Gauss-Legendre at 32 steps beats the midpoint rule at 64"] = gl["32 steps"] < mid["64 steps"]
    notes = [
        "EG: 200 gradient samples per row (one forward and one reverse pass each); Kernel: default budget 2M + 2048 "
        "coalitions x background rows per row. Relative errors are Frobenius norms over all rows.",
        "IG table: median over rows of |sum phi + f(b) - f(x)| / |f(x) - f(b)|, the quadrature error.",
    ]
    return {"title": TITLE, "tables": {"expected gradients": rows, "integrated gradients": ig_rows}, "notes": notes, "checks": checks}
