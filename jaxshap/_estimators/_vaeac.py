r"""A masked conditional variational autoencoder (vaeac) as pure functions.

After Ivanov, Figurnov & Vetrov (2019), "Variational autoencoder with arbitrary conditioning"
(ICLR), as used for Shapley values by Olsen, Glad, Jullum & Aas (2022), "Using Shapley values
and variational autoencoders to explain predictive models with dependent mixed features"
(JMLR). Three networks share a latent space of dimension ``L``:

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
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

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
