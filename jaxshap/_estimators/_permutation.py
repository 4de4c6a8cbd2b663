"""Shapley values by antithetic permutation sampling."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from .._coalitions._combinatorics import permutation_ranks, prefix_masks, sample_permutations

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
