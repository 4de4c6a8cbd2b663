r"""Combinatorics of coalitions, one home: Shapley weights, the Shapley kernel, binomials, bit
masks, the transforms over the subset lattice, mask enumeration and permutation sampling, and
the cache of host-side plans.

Most of it is exact host arithmetic (Python integers, NumPy) that fixes static shapes and tables
for compiled kernels; :func:`mobius`, the masks and the permutations run in JAX.

* The Shapley weight of a coalition of ``s`` players among ``n`` (Shapley, 1953):
  ``w(n, s) = s! (n - s - 1)! / n! = 1 / (n C(n - 1, s))``, so that
  ``phi_j = sum_{S not containing j} w(n, |S|) [v(S + j) - v(S)]``.
* The Shapley kernel (Lundberg & Lee, 2017): ``k(M, s) = (M - 1) / (C(M, s) s (M - s))`` for
  ``0 < s < M``; the empty and the full coalition have infinite weight (they become constraints).
* Bit masks: coalition number ``c`` holds feature ``j`` when bit ``j`` of ``c`` is set.
* Subset sums (the zeta transform) and the Möbius transform, its inverse:
  :math:`\hat z(Q) = \sum_{R \subseteq Q} z(R)` and :math:`g(S) = \sum_{T \subseteq S} (-1)^{|S| - |T|} F(T)`.
  Over all ``2**u`` subsets (dense, :func:`subset_sums`) each runs one item at a time, ``u``
  vectorised passes (Yates, 1937; the fast zeta transform); over a family of sets closed under
  taking subsets (:func:`mobius_plan`, :func:`mobius`), one step per rank.
* Masks are boolean arrays of shape ``[..., M]``; ``True`` marks a feature in the coalition
  (taken from the explained row), ``False`` one that is masked out (:func:`all_masks`,
  :func:`exact_coefficients`, :func:`prefix_masks`). Permutations (:func:`sample_permutations`)
  are keyed and have static shapes.
* :func:`static_cache` memoises host-side (NumPy) plans, keyed on JAX's x64 mode. Plans such as
  :func:`~jaxshap._coalitions._kernel_plan.kernel_plan` are pure functions of static sizes, so
  they are memoised. Their NumPy arrays are then the *same objects* on every call, and JAX (0.10)
  remembers the device buffer it made from a NumPy constant: an ``int64`` index array first used
  with x64 off is stored as ``int32``, and the same object used later inside
  ``jax.enable_x64(True)`` fails (``lax.add requires arguments to have the same dtypes``). Keying
  the cache on the x64 mode gives each mode its own arrays.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Callable, TypeVar

import jax
import jax.numpy as jnp
import numpy as np


def shapley_weight(n_players: int, size: int) -> float:
    """``w(n, s) = s! (n - s - 1)! / n!``, computed as ``1 / (n C(n - 1, s))`` to stay exact for large ``n``."""
    return 1.0 / (n_players * math.comb(n_players - 1, size))


def shapley_weights(n_players: int) -> np.ndarray:
    """``[w(n, 0), ..., w(n, n - 1)]`` in float64."""
    return np.array([shapley_weight(n_players, s) for s in range(n_players)], dtype=np.float64)


def shapley_kernel(n_features: int, size: int) -> float:
    """The Shapley kernel ``k(M, s) = (M - 1) / (C(M, s) s (M - s))`` for ``0 < s < M``."""
    m = n_features
    return (m - 1) / (math.comb(m, size) * size * (m - size))


def shapley_kernel_mass(n_features: int, size: int) -> float:
    """``C(M, s) k(M, s) = (M - 1) / (s (M - s))``: the kernel summed over the coalitions of size ``s``,
    with the binomials cancelled (``C(M, s)`` passes float range beyond about a thousand features)."""
    return (n_features - 1) / (size * (n_features - size))


def shapley_kernels(n_features: int) -> np.ndarray:
    """``[k(M, 0), ..., k(M, M)]`` in float64, with zeros at the empty and the full coalition."""
    out = np.zeros(n_features + 1)
    for s in range(1, n_features):
        out[s] = shapley_kernel(n_features, s)
    return out


def binomial_table(n_rows: int, n_cols: int, dtype: object = np.int64) -> np.ndarray:
    """``table[p, j] = C(p, j)`` for ``p < n_rows``, ``j < n_cols`` (``dtype=object`` keeps big integers exact)."""
    return np.array([[math.comb(p, j) for j in range(n_cols)] for p in range(n_rows)], dtype=dtype)


def code_bits(codes: np.ndarray, n_bits: int) -> np.ndarray:
    """The low ``n_bits`` bits of each integer code: ``[len(codes), n_bits]`` bool, bit ``j`` in column ``j``."""
    codes = np.asarray(codes)
    return ((codes[:, None] >> np.arange(n_bits, dtype=codes.dtype)) & 1).astype(bool)


def all_codes_bits(n_bits: int) -> np.ndarray:
    """Every subset of ``n_bits`` items as a ``[2**n_bits, n_bits]`` bool array, subset ``c`` in row ``c``."""
    return code_bits(np.arange(2**n_bits, dtype=np.int64), n_bits)


def subset_sums(z: np.ndarray, superset: bool = False) -> np.ndarray:
    """``out[..., Q] = sum_{R subseteq Q} z[..., R]`` over the ``u``-bit codes of the last axis
    (length ``2**u``), or over supersets ``R supseteq Q`` with ``superset=True``: ``u`` passes, each
    adding every code's value to the code with one more bit (a copy; NumPy)."""
    out = np.array(z, copy=True)
    lead, size = out.shape[:-1], out.shape[-1]
    for i in range(size.bit_length() - 1):
        view = out.reshape(lead + (size >> (i + 1), 2, 1 << i))
        if superset:
            view[..., 0, :] += view[..., 1, :]
        else:
            view[..., 1, :] += view[..., 0, :]
    return out


def set_code(features: Sequence[int]) -> int:
    """The bit mask of a feature set (a Python int, so any number of features fits)."""
    return sum(1 << int(j) for j in features)


def mobius_plan(sets: Sequence[tuple[int, ...]], family: Sequence[tuple[int, ...]]) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Index arrays of the fast Möbius transform over ``family``, as rows of ``sets``.

    Step ``p`` (``p = 1, 2, ...``) takes every set ``S`` of at least ``max(p, 2)`` features and
    subtracts the value of ``S`` without its ``p``-th largest feature, all sets at once (each
    reading the values the previous step left): the feature-by-feature transform with the
    features in descending order, in ``max |S|`` steps instead of ``M``. A pair's component is
    ``(F_jk - F_j) - F_k``.

    Args:
      sets: the feature sets in the order of the rows of the array to transform.
      family: the sets to transform, closed under taking non-empty subsets; each is in ``sets``.

    Returns:
      One ``(members, parents)`` pair of row indices per step (singletons, whose parent is the
      empty set, 0, are left out).

    Raises:
      ValueError: when ``family`` is not closed under taking subsets (an internal error).
    """
    row = {set_code(s): r for r, s in enumerate(sets)}
    closed = {set_code(s) for s in family}
    steps: list[tuple[list[int], list[int]]] = []
    for s in family:
        s = tuple(sorted(s))
        code = set_code(s)
        for p in range(1, len(s) + 1 if len(s) > 1 else 1):
            parent = code ^ (1 << s[-p])
            if parent not in closed:
                raise ValueError(f"internal: the set {s} lacks its subset {tuple(k for k in s if k != s[-p])}.")
            while len(steps) < p:
                steps.append(([], []))
            steps[p - 1][0].append(row[code])
            steps[p - 1][1].append(row[parent])
    return tuple((np.asarray(m, dtype=np.int32), np.asarray(q, dtype=np.int32)) for m, q in steps)


def mobius(F: jax.Array, plan: Sequence[tuple[jax.Array, jax.Array]]) -> jax.Array:
    r"""The Möbius transform :math:`g_S = \sum_{T \subseteq S} (-1)^{|S|-|T|} F_T` along axis 0, by
    :func:`mobius_plan`'s steps (rows outside its family keep their value)."""
    for members, parents in plan:
        F = F.at[members].add(-F[parents])
    return F


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


F = TypeVar("F", bound=Callable)


def static_cache(maxsize: int = 64) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` with JAX's x64 mode as a hidden part of the key."""

    def decorate(fn: F) -> F:
        @functools.lru_cache(maxsize=maxsize)
        def keyed(x64: bool, *args, **kwargs):
            del x64
            return fn(*args, **kwargs)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return keyed(bool(jax.config.jax_enable_x64), *args, **kwargs)

        wrapper.cache_clear = keyed.cache_clear  # type: ignore[attr-defined]
        wrapper.cache_info = keyed.cache_info  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
