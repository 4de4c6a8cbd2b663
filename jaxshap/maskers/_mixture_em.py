r"""Full-covariance Gaussian mixtures fitted by expectation-maximisation, as one compiled loop.

The mixture :math:`p(x) = \sum_{c=1}^{K} \pi_c\, \mathcal N(x; \mu_c, \Sigma_c)` is fitted to rows
:math:`x_1..x_n` by EM (Dempster, Laird & Rubin, 1977; the updates as in Bishop, *Pattern
Recognition and Machine Learning*, 2006, section 9.2.2):

* E-step: responsibilities :math:`r_{ic} = \pi_c \mathcal N(x_i; \mu_c, \Sigma_c) / \sum_d \pi_d
  \mathcal N(x_i; \mu_d, \Sigma_d)`, computed from log densities with log-sum-exp (Cholesky
  factors for the quadratic forms and log-determinants);
* M-step: :math:`n_c = \sum_i r_{ic}`, :math:`\pi_c = n_c / n`, :math:`\mu_c = \sum_i r_{ic} x_i /
  n_c`, :math:`\Sigma_c = \sum_i r_{ic} (x_i - \mu_c)(x_i - \mu_c)^\top / n_c + \lambda I` with the
  regularisation :math:`\lambda` (``reg_covar``) keeping every covariance positive definite.

The loop is a ``lax.while_loop`` that stops when the mean log-likelihood
:math:`\ell = \frac1n \sum_i \log p(x_i)` changes by less than ``tol`` between iterations, or
after ``max_iter`` iterations. The first responsibilities are the hard assignment of every row to
its nearest of ``K`` centres: k-means++ seeding (Arthur & Vassilvitskii, 2007: each next centre a
row drawn with probability proportional to its squared distance to the nearest centre so far) or
``K`` distinct rows drawn uniformly. The number of components can be chosen by the Bayesian
information criterion (:func:`bayesian_information_criterion`) over several fits.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import logsumexp


class MixtureFit(NamedTuple):
    """A fitted mixture and its fit's record (arrays).

    Attributes:
      weights: ``[K]`` mixing weights :math:`\\pi_c`.
      means: ``[K, M]``.
      covariances: ``[K, M, M]`` (regularised).
      log_likelihood: mean log-likelihood of the rows under the returned parameters.
      history: ``[max_iter]`` mean log-likelihood before each M-step (NaN after the last).
      n_iter: the number of M-steps taken.
      converged: whether the change in the mean log-likelihood fell below ``tol``.
    """

    weights: jax.Array
    means: jax.Array
    covariances: jax.Array
    log_likelihood: jax.Array
    history: jax.Array
    n_iter: jax.Array
    converged: jax.Array


def component_log_densities(x: jax.Array, means: jax.Array, covariances: jax.Array) -> jax.Array:
    r""":math:`\log \mathcal N(x_i; \mu_c, \Sigma_c)` for every row and component: ``[n, K]``."""
    m = x.shape[1]

    def one(mean, cov):
        factor = jnp.linalg.cholesky(cov)
        white = solve_triangular(factor, (x - mean).T, lower=True)  # [M, n]
        half_logdet = jnp.log(jnp.diagonal(factor)).sum()
        return -0.5 * (white**2).sum(0) - half_logdet - 0.5 * m * jnp.log(2.0 * jnp.pi)

    return jax.vmap(one, out_axes=1)(means, covariances)


def e_step(x, weights, means, covariances):
    """``(mean log-likelihood, responsibilities [n, K])`` by log-sum-exp."""
    joint = jnp.log(weights)[None, :] + component_log_densities(x, means, covariances)
    total = logsumexp(joint, axis=1, keepdims=True)
    return total.mean(), jnp.exp(joint - total)


def m_step(x, resp, reg_covar):
    """``(weights, means, covariances)`` from responsibilities ``[n, K]``."""
    n, m = x.shape
    counts = resp.sum(0) + 10 * jnp.finfo(x.dtype).eps  # an emptied component keeps finite moments
    means = resp.T @ x / counts[:, None]
    centred = x[None, :, :] - means[:, None, :]  # [K, n, M]
    scatter = jnp.einsum("nk,kni,knj->kij", resp, centred, centred)
    covariances = scatter / counts[:, None, None] + reg_covar * jnp.eye(m, dtype=x.dtype)
    return counts / n, means, covariances


def initial_centres(key: jax.Array, x: jax.Array, k: int, init: str) -> jax.Array:
    """``k`` rows of ``x`` as centres: k-means++ seeding or distinct uniform rows."""
    n = x.shape[0]
    if init == "random":
        return x[jax.random.choice(key, n, (k,), replace=False)]
    key, first_key = jax.random.split(key)
    first = x[jax.random.randint(first_key, (), 0, n)]
    centres = jnp.zeros((k, x.shape[1]), x.dtype).at[0].set(first)
    dist = ((x - first) ** 2).sum(1)

    def body(i, carry):
        centres, dist = carry
        logits = jnp.where(dist.sum() > 0, jnp.log(dist), 0.0)  # all rows equal: uniform
        nxt = x[jax.random.categorical(jax.random.fold_in(key, i), logits)]
        return centres.at[i].set(nxt), jnp.minimum(dist, ((x - nxt) ** 2).sum(1))

    centres, _ = jax.lax.fori_loop(1, k, body, (centres, dist))
    return centres


@partial(jax.jit, static_argnames=("k", "max_iter", "init"))
def fit_mixture(key, x, k: int, max_iter: int, tol, reg_covar, init: str) -> MixtureFit:
    """Fit a ``k``-component full-covariance mixture to ``x`` ``[n, M]`` by EM (see the module)."""
    centres = initial_centres(key, x, k, init)
    nearest = jnp.argmin(((x[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
    params = m_step(x, jax.nn.one_hot(nearest, k, dtype=x.dtype), reg_covar)
    history = jnp.full((max_iter,), jnp.nan, x.dtype)
    inf = jnp.asarray(-jnp.inf, x.dtype)

    def keep_going(state):
        it, _, previous, current, _ = state
        return (it < max_iter) & ~(jnp.abs(current - previous) < tol)

    def step(state):
        it, params, _, current, history = state
        ll, resp = e_step(x, *params)
        return it + 1, m_step(x, resp, reg_covar), current, ll, history.at[it].set(ll)

    # the first step compares with -inf (never converged); after it, with the previous value
    state = (jnp.asarray(0), params, inf, inf, history)
    it, params, previous, current, history = jax.lax.while_loop(keep_going, step, state)
    converged = jnp.abs(current - previous) < tol
    final, _ = e_step(x, *params)
    return MixtureFit(*params, final, history, it, converged)


def n_parameters(k: int, m: int) -> int:
    """Free parameters of a ``k``-component full-covariance mixture in ``m`` dimensions:
    ``k - 1`` weights, ``k m`` means and ``k m (m + 1) / 2`` covariance entries."""
    return (k - 1) + k * m + k * m * (m + 1) // 2


def bayesian_information_criterion(mean_log_likelihood: float, n: int, k: int, m: int) -> float:
    r"""Schwarz's (1978) criterion of a fit to ``n`` rows: :math:`\mathrm{BIC} = -2 n \bar\ell + p \log n`,
    :math:`\bar\ell` the mean log-likelihood and :math:`p` :func:`n_parameters`; lower is better."""
    return float(-2.0 * n * mean_log_likelihood + n_parameters(k, m) * np.log(n))
