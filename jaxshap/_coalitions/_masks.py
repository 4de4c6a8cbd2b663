"""Coalition machinery: mask enumeration, Shapley weights, permutation sampling.

Masks are boolean arrays of shape ``[..., M]``; ``True`` marks a feature in the coalition
(taken from the explained row), ``False`` one that is masked out. Everything here is pure,
keyed where random, and has static shapes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._combinatorics import shapley_weights


def all_masks(n_features: int) -> jax.Array:
    """All ``2**M`` coalitions as a boolean ``[2**M, M]`` array.

    Row ``i`` holds the binary digits of ``i``: feature ``j`` is in coalition ``i`` when bit ``j``
    of ``i`` is set, so row 0 is the empty coalition and the last row the full one.
    """
    index = jnp.arange(2**n_features, dtype=jnp.uint32)[:, None]
    bits = jnp.arange(n_features, dtype=jnp.uint32)[None, :]
    return ((index >> bits) & 1).astype(bool)


def exact_coefficients(masks: jax.Array, dtype=jnp.float32) -> jax.Array:
    """The ``[M, C]`` matrix ``A`` with ``phi = A @ v`` over the coalitions in ``masks``.

    For a coalition ``S``: ``A[j, S] = w(|S| - 1)`` when ``j`` is in ``S`` (``S`` is reached by
    adding ``j``) and ``-w(|S|)`` when it is not (``S`` is left by adding ``j``). Each row sums
    to zero, so a constant shift of ``v`` leaves ``phi`` unchanged.

    Args:
      masks: ``[C, M]`` boolean, every coalition exactly once (for instance :func:`all_masks`).
      dtype: floating dtype of the result.
    """
    m = masks.shape[-1]
    w = jnp.asarray(np.append(shapley_weights(m), 0.0), dtype=dtype)  # w[M] = 0 is never selected
    size = masks.sum(axis=-1)
    return jnp.where(masks.T, w[size - 1][None, :], -w[size][None, :])


PACKED_INDEX_BITS = 12
"""Largest index width (``M <= 4096``) for which :func:`sample_permutations` packs keys."""


def sample_permutations(key: jax.Array, n_features: int, n_permutations: int) -> jax.Array:
    """``n_permutations`` uniform permutations of ``range(M)``, as ``[n, M]`` ints.

    A random-key shuffle: each permutation lists the features in the order of ``M``
    independent uniform keys. For ``M <= 4096`` a key is 32 random bits with the low
    ``b = ceil(log2 M)`` bits replaced by the feature's rank in one extra uniform permutation
    ``t``, so that all keys of a row are distinct and a plain sort of integers, several times
    faster than an argsort on a CPU, orders them; ``t`` is then inverted to read off the features.
    Ties between the random high bits are broken by ``t``; since ``t`` is uniform and independent
    of them, the joint law of the keys is exchangeable across features and every row is an
    exactly uniform permutation (rows share ``t`` and so are dependent only through such ties,
    which occur with probability below ``M**2 / 2**(33 - b)`` per row). Larger ``M`` argsorts
    32-bit keys (ties favour index order, with probability below ``M**2 / 2**33``).
    Compiles far faster than ``jax.random.permutation`` under ``vmap``.
    """
    m, n = n_features, n_permutations
    width = max(1, (m - 1).bit_length())
    if width > PACKED_INDEX_BITS:
        return jnp.argsort(jax.random.bits(key, (n, m), dtype=jnp.uint32), axis=-1)
    k_rows, k_ties = jax.random.split(key)
    ties = jnp.argsort(jax.random.bits(k_ties, (m,), dtype=jnp.uint32)).astype(jnp.uint32)  # t
    low = jnp.uint32((1 << width) - 1)
    keys = (jax.random.bits(k_rows, (n, m), dtype=jnp.uint32) & ~low) | ties[None, :]
    ranks = (jnp.sort(keys, axis=-1) & low).astype(jnp.int32)
    return jnp.argsort(ties)[ranks]


def permutation_ranks(perms: jax.Array) -> jax.Array:
    """Position of each feature in each permutation: ``ranks[p, perms[p, k]] = k``."""
    return jnp.argsort(perms, axis=-1)


def prefix_masks(ranks: jax.Array) -> jax.Array:
    """The interior prefixes of each permutation: ``[P, M - 1, M]`` boolean.

    ``out[p, k - 1]`` is the coalition of the first ``k`` features of permutation ``p``,
    for ``k = 1, ..., M - 1`` (the empty and full coalitions are shared by every walk).
    """
    m = ranks.shape[-1]
    lengths = jnp.arange(1, m)
    return ranks[:, None, :] < lengths[None, :, None]
