r"""Kernels for linear models: the correlation-dependent Shapley transform.

For :math:`f(x) = \beta x + b` and :math:`X \sim \mathcal N(\mu, \Sigma)`, the observational
value :math:`v_x(S) = E[f(X) \mid X_S = x_S]` is affine in :math:`x - \mu`, so the Shapley values
are a fixed linear map :math:`\phi(x) = T (x - \mu)` (Aas, Jullum & Loland, 2021, "Explaining
individual predictions when features are dependent"; the precompute follows the note on shap's
``LinearExplainer``). ``T`` is built once, by exact enumeration of all ``2**M`` coalitions or by
averaging antithetic permutations; explaining rows is then one matrix product.

The kernels work in standardised units (:mod:`jaxshap._gaussian`): with
:math:`z = (x - \mu)/d` and :math:`\tilde\beta = \beta \odot d`, they return :math:`\tilde T`
with :math:`\phi = \tilde T z`; :func:`to_data_units` turns it into ``T``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from ._chunking import map_chunks
from ._coalitions import all_masks, exact_coefficients, sample_permutations
from ._gaussian import permutation_linear_steps, precision_matrix

EXACT_CHUNK = 4096
"""Coalitions per vectorised batch in :func:`exact_transform`."""


def coalition_linear_weights(corr: jax.Array, g: jax.Array, mask: jax.Array) -> jax.Array:
    r"""``w_S`` with :math:`\beta E[z \mid z_S] = w_S \cdot z`, i.e. :math:`C_{SS}^{-1} g_S` padded with zeros.

    Uses :math:`\beta_S + C_{SS}^{-1} C_{SR}\beta_R = C_{SS}^{-1} (C\beta^\top)_S`, solved with the
    block-diagonal :math:`\mathrm{diag}(s) C \mathrm{diag}(s) + \mathrm{diag}(1 - s)` (static shapes).

    Args:
      corr: ``[M, M]`` correlation matrix.
      g: ``C beta^T``, ``[M, K]``.
      mask: ``[M]`` boolean coalition.

    Returns:
      ``[K, M]``, zero outside the coalition.
    """
    s = mask.astype(corr.dtype)
    blocked = s[:, None] * corr * s[None, :] + jnp.diag(1.0 - s)
    factor = jnp.linalg.cholesky(blocked)
    return cho_solve((factor, True), s[:, None] * g).T


def exact_transform(corr: jax.Array, beta: jax.Array) -> jax.Array:
    r"""The exact transform by enumerating every coalition.

    .. math::

        \tilde T_{k,j,:} = \sum_{S \not\ni j} \frac{|S|!\,(M - |S| - 1)!}{M!}
            \bigl(w_{S \cup j} - w_S\bigr)_{k}

    (Shapley, 1953), evaluated as one contraction of the Shapley coefficient matrix with the
    ``[2**M, K, M]`` coalition weights. Costs ``2**M`` Cholesky factorisations of size ``M``.

    Args:
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    masks = all_masks(m)
    g = corr @ beta.T
    weights = map_chunks(
        jax.vmap(lambda s: coalition_linear_weights(corr, g, s)), masks, min(EXACT_CHUNK, masks.shape[0])
    )  # [C, K, M]
    coef = exact_coefficients(masks, dtype=corr.dtype)  # [M, C]
    return jnp.einsum("jc,ckm->kjm", coef, weights)


def sampled_transform(
    key: jax.Array, corr: jax.Array, beta: jax.Array, n_permutations: int, chunk: int | None = None
) -> jax.Array:
    r"""The transform averaged over antithetic permutations (a permutation and its reverse).

    Each permutation's contribution comes from :func:`jaxshap._gaussian.permutation_linear_steps`
    (one Cholesky factorisation) and telescopes to :math:`\tilde\beta`, so efficiency is exact.
    Unbiased for :math:`\tilde T`; ``n_permutations // 2`` pairs, ``chunk`` permutations per
    vectorised step (a scan over steps bounds the memory to ``chunk * K * M**2`` numbers).

    Args:
      key: PRNG key.
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      n_permutations: number of walks, even and at least 2 (static).
      chunk: permutations per vectorised step (static). By default 1 on a CPU, where one
        factorisation at a time measured fastest (0.08 s against 0.13 s for chunks of 8 at
        M=100 with 1000 walks), and 8 on accelerators.

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    pairs = n_permutations // 2
    forward = sample_permutations(key, m, pairs)
    orders = jnp.concatenate([forward, forward[:, ::-1]], axis=0)  # [2P, M]
    n = orders.shape[0]
    if chunk is None:
        chunk = 1 if jax.default_backend() == "cpu" else 8
    chunk = max(1, min(chunk, n))
    n_steps = -(-n // chunk)
    pad = n_steps * chunk - n
    weight = jnp.concatenate([jnp.ones(n, corr.dtype), jnp.zeros(pad, corr.dtype)])
    orders = jnp.concatenate([orders, jnp.broadcast_to(orders[:1], (pad, m))], axis=0)

    precision = precision_matrix(corr)

    def step(total, args):
        o, w = args
        t = jax.vmap(lambda oo: permutation_linear_steps(precision, beta, oo))(o)
        return total + jnp.tensordot(w, t, axes=1), None

    init = jnp.zeros((beta.shape[0], m, m), corr.dtype)
    total, _ = jax.lax.scan(step, init, (orders.reshape(n_steps, chunk, m), weight.reshape(n_steps, chunk)))
    return total / n


def to_data_units(transform: jax.Array, safe_scale: jax.Array) -> jax.Array:
    r"""``T = \tilde T \,\mathrm{diag}(1/d)``, so that :math:`\phi = T (x - \mu)`."""
    return transform / safe_scale[None, None, :]
