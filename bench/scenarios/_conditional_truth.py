"""Distributions with closed-form conditionals, and exact Shapley values of their observational games.

Each distribution draws training rows and, for a row ``x`` and a coalition ``S``, draws from the
TRUE conditional of the other features given ``x_S`` (NumPy, from the formulas):

* ``gaussian``: :math:`\\mathcal N(\\mu, \\Sigma)`, Schur complements;
* ``mixture``: :math:`\\sum_c \\pi_c \\mathcal N(\\mu_c, \\Sigma_c)`, whose conditional is the
  mixture of the components' conditionals re-weighted by :math:`\\pi_c \\mathcal N(x_S; \\mu_{c,S},
  \\Sigma_{c,SS})`; the truth averages every component's draws with those weights exactly;
* ``lognormal``: :math:`X = \\exp(Z)`, :math:`Z` Gaussian, conditioned through :math:`z_S = \\log x_S`.

The truth :math:`v_x(S) = E[f(X) \\mid X_S = x_S]` is a Monte-Carlo mean over ``n_mc`` antithetic
draws (common to every coalition and row), and the Shapley values follow from all ``2**M``
coalitions by the subset formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial

import numpy as np


def random_cov(rng: np.random.Generator, m: int, strength: float = 1.0) -> np.ndarray:
    """A correlated covariance: ``A A^T / m`` plus a ridge, with unit-order variances."""
    a = rng.normal(size=(m, m)) * strength
    cov = a @ a.T / m + 0.2 * np.eye(m)
    d = np.sqrt(np.diag(cov))
    return cov / np.outer(d, d)


def _regression(mean, cov, x, mask):
    """``(conditional mean [M], factor of the conditional covariance [M, M])``, given entries kept."""
    s, r = np.flatnonzero(mask), np.flatnonzero(~mask)
    mu, factor = x.astype(np.float64).copy(), np.zeros((len(mean), len(mean)))
    if len(r) == 0:
        return mu, factor
    if len(s):
        reg = np.linalg.solve(cov[np.ix_(s, s)], cov[np.ix_(s, r)]).T
        mu[r] = mean[r] + reg @ (x[s] - mean[s])
        schur = cov[np.ix_(r, r)] - reg @ cov[np.ix_(s, r)]
    else:
        mu[r] = mean[r]
        schur = cov[np.ix_(r, r)]
    factor[np.ix_(r, r)] = np.linalg.cholesky(0.5 * (schur + schur.T) + 1e-12 * np.eye(len(r)))
    return mu, factor


def _log_density(x, mean, cov):
    d = x - mean
    return -0.5 * (d @ np.linalg.solve(cov, d) + np.linalg.slogdet(cov)[1] + len(d) * np.log(2 * np.pi))


@dataclass
class Distribution:
    """A distribution with exact conditionals: ``kind`` in gaussian, mixture, lognormal."""

    kind: str
    weights: np.ndarray
    means: np.ndarray  # [K, M] (of Z for the log-normal)
    covs: np.ndarray  # [K, M, M]

    @classmethod
    def make(cls, kind: str, m: int, seed: int = 0) -> "Distribution":
        rng = np.random.default_rng(seed)
        if kind == "mixture":
            means = rng.normal(scale=2.5, size=(3, m))
            covs = np.stack([0.5 * random_cov(rng, m) for _ in range(3)])
            return cls(kind, np.array([0.5, 0.3, 0.2]), means, covs)
        scale = 0.6 if kind == "lognormal" else 1.0
        return cls(kind, np.ones(1), np.zeros((1, m)), (scale**2 * random_cov(rng, m))[None])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        comp = rng.choice(len(self.weights), size=n, p=self.weights)
        rows = np.empty((n, self.means.shape[1]))
        for c in range(len(self.weights)):
            pick = comp == c
            rows[pick] = rng.multivariate_normal(self.means[c], self.covs[c], size=int(pick.sum()))
        return np.exp(rows) if self.kind == "lognormal" else rows

    def conditional(self, x: np.ndarray, mask: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(weights [K], draws [K, n, M])``: each component's conditional draws and its weight."""
        z = np.log(x) if self.kind == "lognormal" else x
        logw, draws = [], []
        s = np.flatnonzero(mask)
        for w, mean, cov in zip(self.weights, self.means, self.covs):
            mu, factor = _regression(mean, cov, z, mask)
            draws.append(mu + noise @ factor.T)
            logw.append(np.log(w) + (_log_density(z[s], mean[s], cov[np.ix_(s, s)]) if len(s) else 0.0))
        logw = np.array(logw)
        pw = np.exp(logw - logw.max())
        draws = np.stack(draws)
        if self.kind == "lognormal":
            draws = np.exp(draws)
        draws[:, :, mask] = x[mask]
        return pw / pw.sum(), draws


def antithetic_noise(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """``[n, M]`` normals in interleaved antithetic pairs, so any even prefix holds whole pairs."""
    half = rng.normal(size=(n // 2, m))
    return np.stack([half, -half], axis=1).reshape(n, m)


def shapley_from_codes(values: np.ndarray, m: int) -> np.ndarray:
    """Shapley values ``[..., M]`` from coalition values ``[..., 2**M]`` (bit ``j`` = feature ``j``)."""
    codes = np.arange(2**m)
    sizes = np.array([bin(c).count("1") for c in codes])
    weight = np.array([factorial(s) * factorial(m - s - 1) / factorial(m) if s < m else 0.0 for s in sizes])
    phi = []
    for j in range(m):
        without = codes[(codes >> j) & 1 == 0]
        phi.append(((values[..., without | (1 << j)] - values[..., without]) * weight[without]).sum(-1))
    return np.stack(phi, -1)


def true_values(dist: Distribution, model_np, X: np.ndarray, n_mc: int, seed: int = 1, block: int = 64):
    """``(values [n, 2**M], values from the first half of the draws [n, 2**M])``."""
    m = X.shape[1]
    noise = antithetic_noise(np.random.default_rng(seed), n_mc, m)
    masks = ((np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)
    full, half = np.empty((len(X), 2**m)), np.empty((len(X), 2**m))
    for i, x in enumerate(X):
        for start in range(0, 2**m, block):
            part = masks[start : start + block]
            conds = [dist.conditional(x, mask, noise) for mask in part]
            draws = np.stack([d for _, d in conds])  # [b, K, n, M]
            out = np.asarray(model_np(draws.reshape(-1, m).astype(np.float32)), np.float64).reshape(draws.shape[:3])
            w = np.stack([p for p, _ in conds])  # [b, K]
            full[i, start : start + block] = (w * out.mean(-1)).sum(-1)
            half[i, start : start + block] = (w * out[..., : n_mc // 2].mean(-1)).sum(-1)
    return full, half
