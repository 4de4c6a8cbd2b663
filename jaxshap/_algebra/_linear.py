r"""Kernels for linear models: the correlation-dependent Shapley transform.

For :math:`f(x) = \beta x + b` and :math:`X \sim \mathcal N(\mu, \Sigma)`, the observational
value :math:`v_x(S) = E[f(X) \mid X_S = x_S]` is affine in :math:`x - \mu`, so the Shapley values
are a fixed linear map :math:`\phi(x) = T (x - \mu)` (Aas, Jullum & Loland, 2021, "Explaining
individual predictions when features are dependent"; the precompute follows the note on shap's
``LinearExplainer``). ``T`` is built once, by exact enumeration of all ``2**M`` coalitions or by
averaging antithetic permutations; explaining rows is then one matrix product.

The kernels work in standardised units (:mod:`jaxshap._algebra._gaussian`): with
:math:`z = (x - \mu)/d` and :math:`\tilde\beta = \beta \odot d`, they return :math:`\tilde T`
with :math:`\phi = \tilde T z`; :func:`to_data_units` turns it into ``T``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from .._core._chunking import map_chunks
from .._coalitions._combinatorics import all_masks, exact_coefficients, sample_permutations
from ._gaussian import antithetic_linear_steps, precision_matrix

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
    key: jax.Array,
    corr: jax.Array,
    beta: jax.Array,
    n_permutations: int,
    chunk: int | None = None,
    precision: jax.Array | None = None,
) -> jax.Array:
    r"""The transform averaged over ``n_permutations`` antithetic walks.

    Walks come in groups of four from one uniform permutation :math:`\rho`: :math:`\rho`
    backwards and forwards, and :math:`\rho` rotated by ``M // 2`` backwards and forwards (a
    budget that is 2 modulo 4 ends with one plain pair). Every walk is marginally a uniform
    permutation, so the average is unbiased for :math:`\tilde T`; the rotation stratifies the
    positions of each feature (see :func:`jaxshap._algebra._gaussian.antithetic_linear_steps`, which
    computes a group with one gather and one Cholesky factorisation per walk). Each walk's
    contributions telescope to :math:`\tilde\beta`, so efficiency is exact. ``chunk`` groups run
    per vectorised step of a scan, which bounds the memory to ``chunk * K * M**2`` numbers.

    Args:
      key: PRNG key.
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      n_permutations: number of walks, even and at least 2 (static).
      chunk: groups per vectorised step (static). By default 1 on a CPU (one group at a time,
        without a batch axis) and 2 on accelerators.
      precision: ``C^{-1}`` if already known (computed in float64 on the host, it keeps the
        walks accurate for condition numbers near ``1 / eps`` of the working dtype, where an
        inverse in that dtype loses every digit); by default :func:`precision_matrix` of ``corr``.

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    n_groups, n_pairs = divmod(n_permutations // 2, 2)
    orders = sample_permutations(key, m, n_groups + n_pairs)  # [G (+1), M]
    precision = precision_matrix(corr) if precision is None else precision.astype(corr.dtype)
    cov_beta = corr @ beta.T
    total = jnp.zeros((beta.shape[0], m, m), corr.dtype)
    if n_groups:
        if chunk is None:
            chunk = 1 if jax.default_backend() == "cpu" else 2
        chunk = max(1, min(chunk, n_groups))
        rotations = (0, m // 2)
        group = lambda o: antithetic_linear_steps(precision, beta, cov_beta, o, rotations)
        if chunk == 1:  # no batch axis rather than a vmap of one
            total, _ = jax.lax.scan(lambda acc, o: (acc + group(o), None), total, orders[:n_groups])
        else:
            n_steps = -(-n_groups // chunk)
            pad = n_steps * chunk - n_groups
            weight = jnp.concatenate([jnp.ones(n_groups, corr.dtype), jnp.zeros(pad, corr.dtype)])
            groups = jnp.concatenate([orders[:n_groups], jnp.broadcast_to(orders[:1], (pad, m))], axis=0)

            def step(acc, args):
                o, w = args
                return acc + jnp.tensordot(w, jax.vmap(group)(o), axes=1), None

            total, _ = jax.lax.scan(step, total, (groups.reshape(n_steps, chunk, m), weight.reshape(n_steps, chunk)))
    if n_pairs:
        total = total + antithetic_linear_steps(precision, beta, cov_beta, orders[-1])
    # antithetic_linear_steps puts features on the last axis; the transform has them first.
    return jnp.swapaxes(total, 1, 2) / n_permutations


def to_data_units(transform: jax.Array, safe_scale: jax.Array) -> jax.Array:
    r"""``T = \tilde T \,\mathrm{diag}(1/d)``, so that :math:`\phi = T (x - \mu)`."""
    return transform / safe_scale[None, None, :]
