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

from ._chunking import map_chunks
from ._coalitions import all_masks, exact_coefficients, sample_permutations
from ._gaussian import conditional_moments, precision_matrix, prefix_linear_weights

EXACT_CHUNK = 4096
"""Coalitions per vectorised batch in :func:`exact_transform`."""


def coalition_linear_weights(corr: jax.Array, beta: jax.Array, mask: jax.Array) -> jax.Array:
    r"""``w_S`` with :math:`\beta E[z \mid z_S] = w_S \cdot z`: :math:`s \odot \beta + G_S^\top \beta`.

    Args:
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      mask: ``[M]`` boolean coalition.

    Returns:
      ``[K, M]``, zero outside the coalition.
    """
    regression, _ = conditional_moments(corr, mask)
    return jnp.where(mask[None, :], beta, 0.0) + beta @ regression


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
    weights = map_chunks(
        jax.vmap(lambda s: coalition_linear_weights(corr, beta, s)), masks, min(EXACT_CHUNK, masks.shape[0])
    )  # [C, K, M]
    coef = exact_coefficients(masks, dtype=corr.dtype)  # [M, C]
    return jnp.einsum("jc,ckm->kjm", coef, weights)


def permutation_transform(
    corr: jax.Array, beta: jax.Array, order: jax.Array, precision: jax.Array | None = None
) -> jax.Array:
    r"""One permutation's transform: :math:`\tilde T_{\pi_j,:} = w_{j+1} - w_j` (unpermuted).

    The walk telescopes (rows sum to :math:`\tilde\beta`), so any average of these satisfies
    efficiency exactly. :math:`O(M^3)` via :func:`jaxshap._gaussian.prefix_linear_weights`.

    Args:
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      order: ``[M]`` permutation.
      precision: optional ``C^{-1}``, shared across permutations.

    Returns:
      ``[K, M, M]``.
    """
    w = prefix_linear_weights(corr, beta, order, precision)  # [K, M + 1, M] in permuted coordinates
    steps = w[:, 1:, :] - w[:, :-1, :]
    back = jnp.argsort(order)
    return steps[:, back][:, :, back]


def sampled_transform(
    key: jax.Array, corr: jax.Array, beta: jax.Array, n_permutations: int, chunk: int = 32
) -> jax.Array:
    r"""The transform averaged over antithetic permutations (a permutation and its reverse).

    Unbiased for :math:`\tilde T`; ``n_permutations // 2`` pairs, ``chunk`` permutations per
    vectorised step (a scan over steps bounds the memory to ``chunk * K * M**2`` numbers).

    Args:
      key: PRNG key.
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      n_permutations: number of walks, even and at least 2 (static).
      chunk: permutations per vectorised step (static).

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    pairs = n_permutations // 2
    forward = sample_permutations(key, m, pairs)
    orders = jnp.concatenate([forward, forward[:, ::-1]], axis=0)  # [2P, M]
    n = orders.shape[0]
    chunk = max(1, min(chunk, n))
    n_steps = -(-n // chunk)
    pad = n_steps * chunk - n
    weight = jnp.concatenate([jnp.ones(n, corr.dtype), jnp.zeros(pad, corr.dtype)])
    orders = jnp.concatenate([orders, jnp.broadcast_to(orders[:1], (pad, m))], axis=0)

    precision = precision_matrix(corr)

    def step(total, args):
        o, w = args
        t = jax.vmap(lambda oo: permutation_transform(corr, beta, oo, precision))(o)
        return total + jnp.tensordot(w, t, axes=1), None

    init = jnp.zeros((beta.shape[0], m, m), corr.dtype)
    total, _ = jax.lax.scan(step, init, (orders.reshape(n_steps, chunk, m), weight.reshape(n_steps, chunk)))
    return total / n


def to_data_units(transform: jax.Array, safe_scale: jax.Array) -> jax.Array:
    r"""``T = \tilde T \,\mathrm{diag}(1/d)``, so that :math:`\phi = T (x - \mu)`."""
    return transform / safe_scale[None, None, :]
