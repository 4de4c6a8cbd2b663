r"""Regression-adjusted antithetic permutation sampling: cross-fitted third-order controls.

Antithetic permutation sampling is already exact for part of the game. With
:math:`u = 2 z - 1` and the game written as a sum of Walsh terms :math:`u_T`, every walk
telescopes, so first-order terms are exact, and a walk and its reverse credit an even-order
term with opposite signs, so even orders cancel in each pair (see :mod:`._control_variates`).
The sampling error comes from the odd orders of at least 3, as for paired KernelSHAP.

The controls are the residualised third-order terms
:math:`r_T(S) = u_T(S) - \tfrac13 \sum_{j \in T} u_j(S)`, whose Shapley values are zero. A
surrogate :math:`g = \sum_T b_T r_T` is fitted to the odd part of the game,
:math:`o(S) = (v(S) - v(N \setminus S)) / 2`, on the walks' prefixes (ridge regression next
to an unpenalised first-order part, solved in kernel form with :func:`._control_variates.odd_kernel`,
so its cost does not depend on :math:`\binom M3`). Since :math:`\phi(g) = 0`,

.. math::

    \hat\phi = \hat\phi_{\text{perm}}(v - g)

estimates :math:`\phi(v)`, with the error of the residual game only. The walks are split into
two halves; each half is adjusted with the surrogate fitted on the other half (cross-fitting,
Chernozhukov et al., 2018), so that, given the other half, the adjusted pair means are
independent and unbiased. This is the regression-adjusted Monte Carlo estimator of Witter et
al. (2025, "Regression-adjusted Monte Carlo estimators for Shapley values and probabilistic
values") with the odd Walsh surrogate that paired sampling makes sufficient. Efficiency still
holds exactly (``g`` vanishes on the empty and the full coalition).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from .._coalitions._masks import prefix_masks
from ._control_variates import odd_kernel
from ._permutation import permutation_walks, walk_pair_means
from ._precision import full_precision

MAX_FIT_POINTS = 1024
"""Largest half-sample (``pairs / 2 * (M - 1)`` prefixes) for which ``control_variates="auto"``
fits the surrogate: the fit factorises a matrix of that size for every explained row."""


@full_precision
def _fit_and_predict(u_fit: jax.Array, o_fit: jax.Array, u_new: jax.Array, rho: float) -> jax.Array:
    r"""The fitted third-order part at new coalitions, ``[A, K]``.

    The ridge regression ``min ||o - U a - R b||^2 + lam ||b||^2`` (``U`` the signs, unpenalised;
    ``R`` the residualised third-order terms) in its kernel form: with ``B = I + R R^T / lam``,
    ``a = (U^T B^{-1} U)^{-1} U^T B^{-1} o`` and ``R b = (R R^T / lam) B^{-1} (o - U a)``.
    ``lam = rho * n``, ``rho`` relative to the curvature of a first-order column (``n`` points).
    """
    n, m = u_fit.shape
    lam = rho * n
    gram = odd_kernel(u_fit, u_fit, 3) / lam
    bmat = jnp.eye(n, dtype=u_fit.dtype) + gram
    import os
    if os.environ.get("PCV_CG"):
        from jax.scipy.sparse.linalg import cg
        solve = lambda r: jax.vmap(lambda c: cg(bmat, c, maxiter=200)[0], in_axes=1, out_axes=1)(r)
        bi_u, bi_o = solve(u_fit), solve(o_fit)
    else:
        factor = cho_factor(bmat, lower=True)
        bi_u = cho_solve(factor, u_fit)
        bi_o = cho_solve(factor, o_fit)
    normal = u_fit.T @ bi_u
    normal = normal + 1e-6 * jnp.trace(normal) / m * jnp.eye(m, dtype=u_fit.dtype)
    if os.environ.get("PCV_CG"):
        a = jax.scipy.sparse.linalg.cg(normal, u_fit.T @ bi_o, maxiter=100)[0] if False else jnp.linalg.pinv(normal, hermitian=True) @ (u_fit.T @ bi_o)
    else:
        a = cho_solve(cho_factor(normal, lower=True), u_fit.T @ bi_o)
    alpha = bi_o - bi_u @ a
    return (odd_kernel(u_new, u_fit, 3) / lam) @ alpha


def adjusted_permutation_shapley(
    key: jax.Array,
    value_fn: Callable[[jax.Array], jax.Array],
    n_features: int,
    n_permutations: int,
    rho: float,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Antithetic permutation sampling with cross-fitted third-order controls (see the module).

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static, at least 3).
      n_permutations: walks, a multiple of 4 of at least 8 (two halves of at least two pairs).
      rho: the controls' relative ridge (:func:`jaxshap._estimators._kernel.third_order_ridge`).

    Returns:
      ``(phi, stderr, v_empty, v_full)`` as :func:`jaxshap.estimators.permutation_shapley`; the
      standard error is the spread of the adjusted pair means over the square root of their number.
    """
    if n_permutations < 8 or n_permutations % 4:
        raise ValueError(f"`n_permutations` must be a multiple of 4 of at least 8 for the controls; got {n_permutations}.")
    m, pairs = n_features, n_permutations // 2
    ranks, walk_f, walk_c = permutation_walks(key, value_fn, m, pairs)
    tail = walk_f.shape[2:]
    dtype = walk_f.dtype
    flat = lambda a: a.reshape(a.shape[:2] + (-1,))
    wf, wc = flat(walk_f), flat(walk_c)
    u = 2.0 * prefix_masks(ranks).astype(dtype) - 1.0  # [P, M - 1, M]: the inner prefixes
    odd = 0.5 * (wf[:, 1:m] - wc[:, 1:m])  # [P, M - 1, K]
    half = pairs // 2
    fitted = []
    for fit, new in ((slice(half, None), slice(None, half)), (slice(None, half), slice(half, None))):
        u_fit, o_fit = u[fit].reshape(-1, m), odd[fit].reshape(-1, odd.shape[-1])
        g = _fit_and_predict(u_fit, o_fit, u[new].reshape(-1, m), rho)
        fitted.append(g.reshape(u[new].shape[:2] + (-1,)))
    g = jnp.concatenate(fitted, axis=0)  # [P, M - 1, K], each half from the other's fit
    zero = jnp.zeros((pairs, 1, g.shape[-1]), dtype)
    g_walk = jnp.concatenate([zero, g, zero], axis=1)  # g vanishes at the empty and full coalition
    # g is odd: its value at a prefix's complement is minus its value at the prefix.
    means = walk_pair_means(ranks, wf - g_walk, wc + g_walk)
    means = means.reshape((pairs, m) + tail)
    phi = means.mean(axis=0)
    stderr = means.std(axis=0, ddof=1) / jnp.sqrt(pairs)
    return phi, stderr, walk_f[0, 0], walk_f[0, -1]
