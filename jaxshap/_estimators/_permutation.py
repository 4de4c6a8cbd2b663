r"""Shapley values by antithetic permutation sampling, and its regression adjustment by
cross-fitted third-order controls.

Each sampled permutation is walked forward and then reversed (antithetic pairs); a feature's value
is its mean marginal contribution over the walks (:func:`permutation_shapley`).

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

from .._coalitions._combinatorics import permutation_ranks, prefix_masks, sample_permutations
from ._control_variates import odd_kernel
from ._exact import full_precision


ValueFn = Callable[[jax.Array], jax.Array]


def permutation_shapley(
    key: jax.Array,
    value_fn: ValueFn,
    n_features: int,
    n_permutations: int,
    ranks_fn: Callable[[jax.Array, int], jax.Array] | None = None,
    partner_fn: Callable[[jax.Array], jax.Array | None] | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    r"""Shapley values of one game by antithetic permutation sampling.

    For a permutation :math:`\pi` the marginal contribution of feature ``j`` is
    :math:`v(\mathrm{Pre}_\pi(j) \cup \{j\}) - v(\mathrm{Pre}_\pi(j))`; its mean over uniform
    permutations is the Shapley value (Castro, Gomez & Tejada, 2009, "Polynomial calculation of
    the Shapley value based on sampling"). Each sampled permutation is walked forward and then
    reversed (antithetic sampling, Mitchell et al., 2022, "Sampling permutations for Shapley
    value estimation"); the reverse walk's prefixes are the complements of the forward ones, so
    the pair's errors are negatively correlated. Every walk telescopes, so each estimate
    satisfies efficiency exactly.

    Cost: ``n_permutations`` walks of ``M + 1`` coalitions each; the empty and full coalitions
    are shared, so ``v`` is called once on ``n_permutations * (M - 1) + 2`` coalitions.

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static).
      n_permutations: number of walks, even and at least 4 (``n_permutations // 2`` antithetic
        pairs; at least two pairs are needed for a standard error).
      ranks_fn: optional ``(key, pairs) -> ranks [pairs, M]`` drawing the forward orders from
        another distribution whose reversed orders are equally likely (hierarchy-consistent
        orders give Owen values, see :class:`jaxshap.maskers.Partition`); default uniform.
      partner_fn: optional ``ranks [P, M] -> ranks [P, M] or None``: the antithetic partner of
        each drawn order, walked instead of its reverse (distributed as the drawn orders, as
        the orders of a causal chain with each component reversed in place: asymmetric Shapley
        values, see :class:`jaxshap.maskers.Asymmetric`); ``None`` (returned, or no function):
        the reverse.

    Returns:
      ``(phi, stderr, v_empty, v_full)``: the estimate and its standard error (``[M, ...]``;
      the standard deviation of the pair means over the square root of the number of pairs)
      and the values of the empty and full coalitions.
    """
    if n_permutations < 4 or n_permutations % 2:
        raise ValueError(f"`n_permutations` must be an even integer of at least 4; got {n_permutations}.")
    m, pairs = n_features, n_permutations // 2
    ranks = ranks_fn(key, pairs) if ranks_fn is not None else permutation_ranks(sample_permutations(key, m, pairs))
    partner = None if partner_fn is None else partner_fn(ranks)
    if partner is not None:
        walk_a, walk_b = partner_walks(value_fn, ranks, partner)
        means = 0.5 * (walk_contributions(ranks, walk_a) + walk_contributions(partner, walk_b))
        return summarise_pairs(means, walk_a)
    ranks, walk_f, walk_c = permutation_walks(key, value_fn, m, pairs, lambda _key, _pairs: ranks)
    return summarise_pairs(walk_pair_means(ranks, walk_f, walk_c), walk_f)


def partner_walks(value_fn: ValueFn, ranks: jax.Array, partner: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The forward walks of two sets of orders ``[P, M]``, one call of ``value_fn``: ``[P, M + 1, ...]`` each
    (prefix ``k`` of order ``p`` at ``[p, k]``; the empty and full coalitions evaluated once)."""
    pairs, m = ranks.shape
    inner = jnp.concatenate([prefix_masks(ranks), prefix_masks(partner)], axis=0).reshape(2 * pairs * (m - 1), m)
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    v = value_fn(jnp.concatenate([ends, inner], axis=0))
    tail = v.shape[1:]
    walks = v[2:].reshape((2, pairs, m - 1) + tail)
    edge0 = jnp.broadcast_to(v[0], (pairs, 1) + tail)
    edge1 = jnp.broadcast_to(v[1], (pairs, 1) + tail)
    return tuple(jnp.concatenate([edge0, walks[i], edge1], axis=1) for i in range(2))


def walk_contributions(ranks: jax.Array, walk: jax.Array) -> jax.Array:
    """Each feature's marginal contribution along forward walks: ``walk[p, rank + 1] - walk[p, rank]``, ``[P, M, ...]``."""
    pairs, m = ranks.shape
    tail = walk.shape[2:]
    idx = jnp.broadcast_to(ranks.reshape((pairs, m) + (1,) * len(tail)), (pairs, m) + tail)
    return jnp.take_along_axis(walk, idx + 1, axis=1) - jnp.take_along_axis(walk, idx, axis=1)


def summarise_pairs(pair_means: jax.Array, walk_f: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(phi, stderr, v_empty, v_full)`` from the pairs' mean contributions ``[P, M, ...]``: their
    mean, its standard error (their spread over ``sqrt(P)``), and the walks' two ends."""
    phi = pair_means.mean(axis=0)
    stderr = pair_means.std(axis=0, ddof=1) / jnp.sqrt(pair_means.shape[0])
    return phi, stderr, walk_f[0, 0], walk_f[0, -1]


def permutation_walks(key, value_fn: ValueFn, m: int, pairs: int, ranks_fn=None):
    """Draw ``pairs`` permutations and evaluate their walks: ``(ranks [P, M], walk_f, walk_c)``.

    ``walk_f[p, k]`` is the value of the first ``k`` features of permutation ``p`` (``k = 0..M``)
    and ``walk_c[p, k]`` the value of that prefix's complement, each ``[P, M + 1, ...]``; the
    empty and full coalitions are evaluated once and shared.
    """
    if ranks_fn is None:
        ranks = permutation_ranks(sample_permutations(key, m, pairs))  # [P, M]
    else:
        ranks = ranks_fn(key, pairs)
    forward = prefix_masks(ranks).reshape(pairs * (m - 1), m)
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    v = value_fn(jnp.concatenate([ends, forward, ~forward], axis=0))
    v0, v1 = v[0], v[1]
    tail = v.shape[1:]
    inner = v[2:].reshape((2, pairs, m - 1) + tail)
    edge0 = jnp.broadcast_to(v0, (pairs, 1) + tail)
    edge1 = jnp.broadcast_to(v1, (pairs, 1) + tail)
    walk_f = jnp.concatenate([edge0, inner[0], edge1], axis=1)
    walk_c = jnp.concatenate([edge1, inner[1], edge0], axis=1)
    return ranks, walk_f, walk_c


def walk_pair_means(ranks: jax.Array, walk_f: jax.Array, walk_c: jax.Array) -> jax.Array:
    """Each antithetic pair's mean marginal contributions, ``[P, M, ...]``."""
    pairs, m = ranks.shape
    tail = walk_f.shape[2:]
    idx = ranks.reshape((pairs, m) + (1,) * len(tail))
    take = lambda a, i: jnp.take_along_axis(a, jnp.broadcast_to(i, (pairs, m) + tail), axis=1)
    # Forward walk: j joins the prefix of length rank(j). Reverse walk: j joins the complement
    # of the prefix of length rank(j) + 1, turning it into the complement of the one of rank(j).
    phi_f = walk_contributions(ranks, walk_f)
    phi_b = take(walk_c, idx) - take(walk_c, idx + 1)
    return 0.5 * (phi_f + phi_b)


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
