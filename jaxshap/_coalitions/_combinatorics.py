"""Combinatorics of coalitions, one home: Shapley weights, the Shapley kernel, binomials, bit masks.

Everything here is exact host arithmetic (Python integers, NumPy); it fixes static shapes and
tables that compiled kernels take as constants.

* The Shapley weight of a coalition of ``s`` players among ``n`` (Shapley, 1953):
  ``w(n, s) = s! (n - s - 1)! / n! = 1 / (n C(n - 1, s))``, so that
  ``phi_j = sum_{S not containing j} w(n, |S|) [v(S + j) - v(S)]``.
* The Shapley kernel (Lundberg & Lee, 2017): ``k(M, s) = (M - 1) / (C(M, s) s (M - s))`` for
  ``0 < s < M``; the empty and the full coalition have infinite weight (they become constraints).
* Bit masks: coalition number ``c`` holds feature ``j`` when bit ``j`` of ``c`` is set.
"""

from __future__ import annotations

import math

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
