r"""Combinatorics of coalitions, one home: Shapley weights, the Shapley kernel, binomials, bit
masks, and the transforms over the subset lattice.

Most of it is exact host arithmetic (Python integers, NumPy) that fixes static shapes and tables
for compiled kernels; :func:`mobius` runs in JAX.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
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
