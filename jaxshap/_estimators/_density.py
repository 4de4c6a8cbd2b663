r"""Models of the data's distribution that the conditional maskers draw ``X_{-S} | x_S`` from, as
pure functions: a masked conditional variational autoencoder (vaeac, ``maskers.Generative``) and
full-covariance Gaussian mixtures fitted by expectation-maximisation (``maskers.GaussianMixture``).

The vaeac, after Ivanov, Figurnov & Vetrov (2019), "Variational autoencoder with arbitrary
conditioning" (ICLR), as used for Shapley values by Olsen, Glad, Jullum & Aas (2022), "Using
Shapley values and variational autoencoders to explain predictive models with dependent mixed
features" (JMLR). Three networks share a latent space of dimension ``L``:

* the full encoder :math:`q_\phi(z \mid x, S)` sees the whole row and the mask;
* the masked encoder (the prior) :math:`p_\psi(z \mid x_S, S)` sees the row's values in ``S``;
* the decoder :math:`p_\theta(x_{\bar S} \mid z, x_S, S)`: a Gaussian for each numeric column
  (mean and log standard deviation, in standardised units) and a softmax over the categories
  of each categorical column.

Training maximises, over rows and random coalitions, the vaeac evidence lower bound

.. math::

    \log p(x_{\bar S} \mid x_S) \ge \mathbb E_{z \sim q_\phi(z \mid x, S)}
        \log p_\theta(x_{\bar S} \mid z, x_S, S) - \mathrm{KL}\bigl(q_\phi(z \mid x, S)
        \,\|\, p_\psi(z \mid x_S, S)\bigr),

with one reparameterised draw of ``z``; the reconstruction term covers the columns outside
``S`` only. A conditional draw of :math:`X_{\bar S} \mid x_S` is then :math:`z \sim p_\psi`,
:math:`x \sim p_\theta(\cdot \mid z, x_S, S)`.

A row is coded as ``W`` inputs (:class:`Layout`): each numeric column standardised, each
categorical column one-hot over its ``C_j`` categories.

Gaussian mixtures, fitted as one compiled loop (:func:`fit_mixture`). The mixture
:math:`p(x) = \sum_{c=1}^{K} \pi_c\, \mathcal N(x; \mu_c, \Sigma_c)` is fitted to rows
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

from ._fastshap import apply_mlp, init_mlp


LOG_SIGMA_RANGE = (-6.0, 4.0)
"""Log standard deviations (latent and numeric outputs) are clipped to this range."""


class Layout(NamedTuple):
    """Static coding of a row's ``M`` columns (Python values).

    Attributes:
      numeric: indices of the numeric columns.
      categorical: indices of the categorical columns.
      n_categories: ``C_j`` of each categorical column (codes ``0..C_j - 1``).
      latent: ``L``.
    """

    numeric: tuple[int, ...]
    categorical: tuple[int, ...]
    n_categories: tuple[int, ...]
    latent: int

    @property
    def n_features(self) -> int:
        return len(self.numeric) + len(self.categorical)

    @property
    def width(self) -> int:
        """``W``: numeric columns plus one-hot categories."""
        return len(self.numeric) + sum(self.n_categories)

    def owner(self) -> np.ndarray:
        """The column of each of the ``W`` coded inputs."""
        return np.array(list(self.numeric) + [j for j, c in zip(self.categorical, self.n_categories) for _ in range(c)],
                        dtype=np.int32)

    def slots(self) -> tuple[np.ndarray, np.ndarray]:
        """``(index [n_cat, C_max], valid [n_cat, C_max])``: each categorical column's logits in the
        decoder's categorical outputs, padded to the largest ``C_j``."""
        c_max = max(self.n_categories, default=1)
        starts = np.cumsum((0,) + self.n_categories)[:-1]
        pos = np.arange(c_max)[None, :]
        valid = pos < np.array(self.n_categories, dtype=np.int64)[:, None]
        return np.where(valid, starts[:, None] + pos, 0).astype(np.int32), valid


def encode(layout: Layout, z_numeric: jax.Array, codes: jax.Array) -> jax.Array:
    """Coded rows ``[..., W]`` from standardised numeric columns ``[..., n_num]`` and codes ``[..., n_cat]``."""
    parts = [z_numeric]
    for i, c in enumerate(layout.n_categories):
        parts.append((codes[..., i, None] == jnp.arange(c)).astype(z_numeric.dtype))
    return jnp.concatenate(parts, axis=-1)


def init_vaeac(key: jax.Array, layout: Layout, hidden: tuple[int, ...], dtype) -> dict:
    """Parameters ``{"full", "prior", "decoder"}`` of the three networks (:func:`init_mlp`)."""
    w, m, L = layout.width, layout.n_features, layout.latent
    out = 2 * len(layout.numeric) + sum(layout.n_categories)
    k_full, k_prior, k_dec = jax.random.split(key, 3)
    return {
        "full": init_mlp(k_full, (w + m,) + hidden + (2 * L,), dtype),
        "prior": init_mlp(k_prior, (w + m,) + hidden + (2 * L,), dtype),
        "decoder": init_mlp(k_dec, (L + w + m,) + hidden + (out,), dtype),
    }


def _gaussian(params: list[dict], inputs: jax.Array) -> tuple[jax.Array, jax.Array]:
    mu, log_sigma = jnp.split(apply_mlp(params, inputs), 2, axis=-1)
    return mu, jnp.clip(log_sigma, *LOG_SIGMA_RANGE)


def prior(params: dict, layout: Layout, coded: jax.Array, masks: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The masked encoder's ``(mean, log sd)`` ``[n, L]`` of rows ``coded [n, W]`` given ``masks [n, M]``."""
    given = masks[:, layout.owner()]
    return _gaussian(params["prior"], jnp.concatenate([jnp.where(given, coded, 0.0), masks.astype(coded.dtype)], -1))


def decode(params: dict, layout: Layout, z: jax.Array, coded: jax.Array, masks: jax.Array):
    """The decoder on latents ``z [n, L]``: ``(mean [n, n_num], log sd [n, n_num], logits [n, n_cat, C_max])``.

    Padded category slots hold ``-inf``.
    """
    given = masks[:, layout.owner()]
    inputs = jnp.concatenate([z, jnp.where(given, coded, 0.0), masks.astype(coded.dtype)], -1)
    out = apply_mlp(params["decoder"], inputs)
    n_num = len(layout.numeric)
    mean, log_sd = out[:, :n_num], jnp.clip(out[:, n_num : 2 * n_num], *LOG_SIGMA_RANGE)
    index, valid = layout.slots()
    logits = jnp.where(valid, out[:, 2 * n_num :][:, index], -jnp.inf)
    return mean, log_sd, logits


def negative_elbo(params: dict, layout: Layout, z_numeric, codes, masks, eps) -> jax.Array:
    """The vaeac loss of a batch, per row and column: ``-ELBO / M`` averaged over rows.

    Args:
      params: :func:`init_vaeac`'s parameters.
      layout: the row coding.
      z_numeric: standardised numeric columns ``[n, n_num]``.
      codes: category codes ``[n, n_cat]`` (integers).
      masks: coalitions ``[n, M]`` (``True``: given).
      eps: standard normal draws ``[n, L]`` for the reparameterised ``z``.
    """
    coded = encode(layout, z_numeric, codes)
    q_mu, q_ls = _gaussian(params["full"], jnp.concatenate([coded, masks.astype(coded.dtype)], -1))
    p_mu, p_ls = prior(params, layout, coded, masks)
    z = q_mu + jnp.exp(q_ls) * eps
    mean, log_sd, logits = decode(params, layout, z, coded, masks)
    hidden_num = ~masks[:, np.array(layout.numeric, dtype=np.int32)]
    nll_num = 0.5 * ((z_numeric - mean) * jnp.exp(-log_sd)) ** 2 + log_sd + 0.5 * np.log(2 * np.pi)
    log_p = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(log_p, codes.astype(jnp.int32)[..., None], axis=-1)[..., 0]
    hidden_cat = ~masks[:, np.array(layout.categorical, dtype=np.int32)]
    recon = jnp.sum(jnp.where(hidden_num, nll_num, 0.0), -1) - jnp.sum(jnp.where(hidden_cat, picked, 0.0), -1)
    kl = jnp.sum(p_ls - q_ls + (jnp.exp(2 * q_ls) + (q_mu - p_mu) ** 2) * (0.5 * jnp.exp(-2 * p_ls)) - 0.5, -1)
    return jnp.mean(recon + kl) / layout.n_features


def draw(params: dict, layout: Layout, coded: jax.Array, masks: jax.Array, eps_z, eps_num, gumbel):
    """Conditional draws ``(numeric [n, n_num] standardised, codes [n, n_cat])`` of coded rows given ``masks``.

    ``z = mu + sd * eps_z`` from the masked encoder, then numeric columns ``mean + sd * eps_num``
    and categories ``argmax(logits + gumbel)`` (the Gumbel-max trick: a draw from the softmax).
    ``coded [r, W]`` and ``masks [r, M]`` hold ``r = n`` rows, or one row that all ``n`` draws
    share (its masked encoder then runs once).
    """
    p_mu, p_ls = prior(params, layout, coded, masks)
    n = eps_z.shape[0]
    coded, masks = jnp.broadcast_to(coded, (n, coded.shape[-1])), jnp.broadcast_to(masks, (n, masks.shape[-1]))
    mean, log_sd, logits = decode(params, layout, p_mu + jnp.exp(p_ls) * eps_z, coded, masks)
    return mean + jnp.exp(log_sd) * eps_num, jnp.argmax(logits + gumbel, axis=-1)


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
