"""maskers.Gaussian: cost per explained row against maskers.Independent, and Monte-Carlo error."""

from __future__ import annotations

import numpy as np

import jaxshap

from ..harness import timed
from ._common import mlp_problem

TITLE = "maskers.Gaussian vs maskers.Independent (ExactExplainer, MLP(64)), and MC error vs n_samples"


def _correlated(m: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, m))
    cov = a @ a.T / m + 0.1 * np.eye(m)
    return np.zeros(m), cov, rng


def run(quick: bool = False) -> dict:
    m = 6 if quick else 8
    n_rows = 4 if quick else 20
    samples = [64, 256] if quick else [256, 1024, 2048]
    model, _, _, _ = mlp_problem(m, 2, 2)
    mean, cov, rng = _correlated(m)
    X = rng.multivariate_normal(mean, cov, size=n_rows).astype(np.float32)
    cost = []
    for n in samples:
        background = rng.multivariate_normal(mean, cov, size=n).astype(np.float32)
        ind = jaxshap.ExactExplainer(model, jaxshap.maskers.Independent(background, max_samples=None))
        gau = jaxshap.ExactExplainer(model, jaxshap.maskers.Gaussian(mean, cov, n_samples=n))
        _, t_ind = timed(lambda: ind(X).values, repeat=2)
        _, t_gau = timed(lambda: gau(X).values, repeat=2)
        cost.append(
            {
                "M": m,
                "samples (= background rows)": n,
                "model evals / row": 2**m * n,
                "Independent ms/row": 1e3 * t_ind / n_rows,
                "Gaussian ms/row": 1e3 * t_gau / n_rows,
                "Gaussian / Independent": t_gau / t_ind,
            }
        )

    # Monte-Carlo error of the attributions against a large-sample reference.
    m_err = 5 if quick else 6
    model, _, _, _ = mlp_problem(m_err, 2, 2, seed=1)
    mean, cov, rng = _correlated(m_err, seed=1)
    Xe = rng.multivariate_normal(mean, cov, size=8).astype(np.float32)
    ref_n = 4096 if quick else 65536
    reference = np.asarray(jaxshap.ExactExplainer(model, jaxshap.maskers.Gaussian(mean, cov, ref_n, key=99))(Xe).values)
    rms_phi = float(np.sqrt((reference**2).mean()))
    error = []
    for n in ([16, 64, 256] if quick else [16, 64, 256, 1024, 2048, 4096]):
        errs = []
        for seed in range(3):
            est = np.asarray(jaxshap.ExactExplainer(model, jaxshap.maskers.Gaussian(mean, cov, n, key=seed))(Xe).values)
            errs.append(np.sqrt(((est - reference) ** 2).mean()))
        error.append({"M": m_err, "n_samples": n, "RMS err (3 keys)": float(np.mean(errs)), "RMS err / RMS phi": float(np.mean(errs)) / rms_phi})
    notes = [
        "Cost: ExactExplainer over all 2**M coalitions, the same number of model evaluations per coalition "
        "for both maskers (background rows = n_samples).",
        f"MC error: RMS difference of the attributions from a {ref_n}-sample reference (different key), "
        "averaged over 3 keys; draws are antithetic pairs shared by all coalitions (common random numbers).",
    ]
    return {"title": TITLE, "tables": {"cost per row": cost, "MC error": error}, "notes": notes}
