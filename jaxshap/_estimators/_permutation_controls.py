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

from .._coalitions._combinatorics import prefix_masks
from ._control_variates import odd_kernel
from ._permutation import permutation_walks, summarise_pairs, walk_pair_means
from ._precision import full_precision

MAX_FIT_POINTS = 1024
"""Largest half-sample (``pairs / 2 * (M - 1)`` prefixes) for which ``control_variates="auto"``
fits the surrogate: the fit factorises a matrix of that size for every explained row."""


@full_precision
def _fit_and_predict(u_fit: jax.Array, o_fit: jax.Array, u_new: jax.Array, rho: float) -> jax.Array:
    r"""The fitted third-order part at new coalitions, ``[F, A, K]``, for ``F`` independent fits.

    Each fit is the ridge regression ``min ||o - U a - R b||^2 + lam ||b||^2`` (``U`` the signs,
    unpenalised; ``R`` the residualised third-order terms) in its kernel form: with
    ``B = I + R R^T / lam``, ``a = (U^T B^{-1} U)^{-1} U^T B^{-1} o`` and
    ``R b = (R R^T / lam) B^{-1} (o - U a)``. ``lam = rho * n``, ``rho`` relative to the curvature
    of a first-order column (``n`` points).

    The fits are stacked on a leading axis (``u_fit`` is ``[F, n, M]``) so that each
    factorisation is one batched LAPACK call rather than ``F`` independent ones. On a CPU, jaxlib
    0.10 splits a batched LAPACK call over XLA's intra-op thread pool and blocks a pool thread
    until its parts finish; two such calls running side by side on a pool of two threads (a
    2-core machine) wait for each other forever. One call at a time cannot deadlock.
    """
    f, n, m = u_fit.shape
    lam = rho * n
    gram = jax.vmap(lambda a: odd_kernel(a, a, 3))(u_fit) / lam
    bmat = jnp.eye(n, dtype=u_fit.dtype) + gram
    factor = cho_factor(bmat, lower=True)
    both = cho_solve(factor, jnp.concatenate([u_fit, o_fit], axis=-1))  # one solve for U and o
    bi_u, bi_o = both[..., :m], both[..., m:]
    ut = jnp.swapaxes(u_fit, -1, -2)
    normal = ut @ bi_u
    trace = jnp.trace(normal, axis1=-2, axis2=-1)[:, None, None]
    normal = normal + 1e-6 * trace / m * jnp.eye(m, dtype=u_fit.dtype)
    a = cho_solve(cho_factor(normal, lower=True), ut @ bi_o)
    alpha = bi_o - bi_u @ a
    cross = jax.vmap(lambda new, fit: odd_kernel(new, fit, 3))(u_new, u_fit) / lam
    return cross @ alpha


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
    check_control_walks(n_permutations)
    ranks, walk_f, walk_c = permutation_walks(key, value_fn, n_features, n_permutations // 2)
    return adjust_walks(ranks, walk_f, walk_c, rho)


def check_control_walks(n_permutations: int) -> None:
    """Raise unless ``n_permutations`` splits into two halves of at least two antithetic pairs."""
    if n_permutations < 8 or n_permutations % 4:
        raise ValueError(f"`n_permutations` must be a multiple of 4 of at least 8 for the controls; got {n_permutations}.")


def adjust_walks(
    ranks: jax.Array, walk_f: jax.Array, walk_c: jax.Array, rho: float
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The cross-fitted adjustment of walks already evaluated (see the module).

    Separate from the evaluation so that a caller can evaluate the walks of one row at a time
    (memory) and adjust many rows at once (the fit is many small matrix operations, which pay
    off only when batched over rows).

    Args:
      ranks: ``[P, M]`` rank of each feature in each of the ``P`` first walks (the reverse walk
        is implied), ``P`` even, from :func:`jaxshap._estimators._permutation.permutation_walks`.
      walk_f, walk_c: ``[P, M + 1, ...]`` values along each walk and along its reverse.
      rho: the controls' relative ridge.

    Returns:
      ``(phi, stderr, v_empty, v_full)``.
    """
    pairs, m = ranks.shape
    tail = walk_f.shape[2:]
    dtype = walk_f.dtype
    flat = lambda a: a.reshape(a.shape[:2] + (-1,))
    wf, wc = flat(walk_f), flat(walk_c)
    u = 2.0 * prefix_masks(ranks).astype(dtype) - 1.0  # [P, M - 1, M]: the inner prefixes
    odd = 0.5 * (wf[:, 1:m] - wc[:, 1:m])  # [P, M - 1, K]
    half = pairs // 2
    # Cross-fitting: each half is adjusted by the surrogate fitted on the other half.
    swap = lambda a: jnp.stack([a[half:], a[:half]])  # [2, half, ...]: fit on the other half
    keep = lambda a: jnp.stack([a[:half], a[half:]])
    u_fit, o_fit = swap(u).reshape(2, -1, m), swap(odd).reshape(2, -1, odd.shape[-1])
    g = _fit_and_predict(u_fit, o_fit, keep(u).reshape(2, -1, m), rho)
    g = g.reshape((pairs, m - 1, -1))  # [P, M - 1, K], each half from the other's fit
    zero = jnp.zeros((pairs, 1, g.shape[-1]), dtype)
    g_walk = jnp.concatenate([zero, g, zero], axis=1)  # g vanishes at the empty and full coalition
    # g is odd: its value at a prefix's complement is minus its value at the prefix.
    means = walk_pair_means(ranks, wf - g_walk, wc + g_walk)
    return summarise_pairs(means.reshape((pairs, m) + tail), walk_f)


def fit_points(n_features: int, n_permutations: int) -> int:
    """Prefixes in one half of the walks, ``n_permutations / 4 * (M - 1)``: the size of each
    fold's kernel matrix (compared with :data:`MAX_FIT_POINTS`)."""
    return n_permutations // 4 * (n_features - 1)


def fit_bytes_per_row(n_features: int, n_permutations: int, n_outputs: int) -> int:
    """Bytes the adjustment of one row holds at once (both folds' kernel matrices, counted at
    8 bytes an entry)."""
    n = fit_points(n_features, n_permutations)
    return 8 * 2 * (3 * n * n + n * (2 * n_features + 2 * n_outputs))
