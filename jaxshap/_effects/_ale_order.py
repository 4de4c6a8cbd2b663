r"""The order of a categorical feature's categories for accumulated local effects.

Local effects accumulate along an order, and categories have none; Apley & Zhu (2020, JRSS-B,
section 5.3) order them so that neighbours are alike in the *other* features, as their R
package ALEPlot does:

1. for every other feature :math:`m`, a distance between each two categories :math:`a, b` of
   the distributions of :math:`x_m` in the rows of ``a`` and of ``b``: the Kolmogorov–Smirnov
   distance :math:`\max_t |F_{m|a}(t) - F_{m|b}(t)|` for a numeric feature (here exact: the
   supremum over the data values of :math:`x_m`, where ALEPlot evaluates the empirical
   distribution functions at 100 quantiles), the total variation distance
   :math:`\frac12 \sum_v |P(x_m = v|a) - P(x_m = v|b)|` for a categorical one;
2. the distances summed over the other features, :math:`D_{ab} = \sum_m D^{(m)}_{ab}`;
3. classical multidimensional scaling of :math:`D` to one dimension (the leading eigenvector
   of :math:`-\frac12 J D^{\circ 2} J`, :math:`J = I - \frac1K 11^\top`, scaled by the square
   root of its eigenvalue), and the categories sorted by that coordinate.

The coordinate's sign is arbitrary: when the order by coordinate starts with a larger category
code than it ends with, the coordinate's sign is flipped. Coordinates equal up to rounding
(:data:`TIE_DIGITS` digits relative to the largest) are ties, ordered by code. With one or two
categories, the order is the codes' order.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Container

import numpy as np

TIE_DIGITS = 9
"""Coordinates that agree to this many digits (relative to the largest) are ties."""

PAIRWISE_VALUES = 8
"""KS distances compare every pair at every distinct value while ``K U`` is at most this many
times ``n``: a contiguous pass per pair then costs less than each group's gathered values."""

MAX_THREADS = 8
"""Features measured at once at most: each holds its ``[K, U]`` distribution functions."""


def _value_counts(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """``[K, U]``: how many rows of each group hold each of the ``U`` distinct ``values`` (in
    increasing order), from one sort and one ``bincount``."""
    if values.dtype == np.float32:
        n_levels, codes, groups = _sorted_codes(values, groups)
    else:
        levels, codes = np.unique(values, return_inverse=True)
        n_levels, codes = levels.size, codes.ravel()
    flat = groups.astype(np.int64) * n_levels + codes
    return np.bincount(flat, minlength=n_groups * n_levels).reshape(n_groups, n_levels)


def _sorted_codes(values: np.ndarray, groups: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """``(U, codes, groups)`` of float32 ``values`` in increasing order: each distinct value's
    rank and each value's group, one entry per row.

    Each value's bits are mapped to an unsigned integer in the floats' order and joined with its
    group's in one 64-bit key, so one sort of the keys (NumPy's vectorised sort, several times
    faster than the indirect sort of ``np.unique``) orders the values and carries their groups;
    the codes count the changes of value. ``-0.0`` joins ``0.0``, as in ``np.unique``."""
    bits = (values + np.float32(0)).view(np.uint32)  # -0.0 + 0.0 is 0.0
    bits = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31))  # negatives reversed, below the positives
    key = (bits.astype(np.uint64) << np.uint64(32)) | groups.astype(np.uint64)
    key.sort()
    value = key >> np.uint64(32)
    codes = np.zeros(key.size, np.int64)
    np.cumsum(value[1:] != value[:-1], out=codes[1:])
    return int(codes[-1]) + 1, codes, key & np.uint64(0xFFFFFFFF)


def _pairwise(rows: np.ndarray, distance) -> np.ndarray:
    """``[K, K]``: ``distance(rows[a], rows[a + 1:])``, each row against the rows after it (one
    ``[K - a - 1, U]`` temporary at a time), mirrored."""
    k = rows.shape[0]
    D = np.zeros((k, k))
    for a in range(k - 1):
        D[a, a + 1 :] = distance(rows[a], rows[a + 1 :])
    return D + D.T


def _largest_gap(a: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """``max |rest - a|`` per row of ``rest``, from the largest and smallest difference (one
    temporary instead of two)."""
    gap = rest - a
    return np.maximum(gap.max(axis=1), -gap.min(axis=1))


def ks_distances(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """``[K, K]`` Kolmogorov–Smirnov distances between the groups' empirical distributions of
    ``values``.

    Each group's distribution function is tabulated at every distinct value (cumulative counts
    over the group's size, ``[K, U]``), and two groups' largest difference read off. With few
    groups or few distinct values every pair is compared at every value (``K^2 U / 2``
    contiguous operations); otherwise at the values the two groups hold, where alone
    ``F_a - F_b`` changes (each group's values against every group: ``K n`` gathered ones).
    Both give the same maximum."""
    counts = _value_counts(values, groups, n_groups)
    cdf = np.cumsum(counts, axis=1).astype(np.float64)
    cdf /= cdf[:, -1:]
    if n_groups * cdf.shape[1] <= PAIRWISE_VALUES * values.size:
        return _pairwise(cdf, _largest_gap)
    half = np.empty((n_groups, n_groups))  # half[a, b]: the largest |F_a - F_b| at the values of group a
    for a in range(n_groups):
        at = np.flatnonzero(counts[a])  # where F_a steps
        columns = cdf[:, at]  # [K, n_a]: every group's function there
        half[a] = np.abs(columns - columns[a]).max(axis=1)
    return np.maximum(half, half.T)


def tv_distances(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """``[K, K]`` total variation distances between the groups' distributions of a discrete ``values``."""
    table = _value_counts(values, groups, n_groups).astype(np.float64)
    table /= table.sum(axis=1, keepdims=True)
    return _pairwise(table, lambda a, rest: 0.5 * np.abs(rest - a).sum(axis=1))


def category_distances(X: np.ndarray, j: int, groups: np.ndarray, n_groups: int, categorical: Container[int]) -> np.ndarray:
    """``D``: the distances of step 2 between the categories of feature ``j``, summed over the others.

    The other features are measured in a few threads (NumPy's sorts and ufuncs let go of the
    GIL) and summed in the features' order, so the result does not depend on the threads.

    Args:
      X: the data rows ``[n, M]`` (host).
      j: the categorical feature.
      groups: each row's category as a position ``0 .. K-1``.
      n_groups: ``K``.
      categorical: the indices of the categorical features (total variation for them, KS otherwise).
    """
    others = [m for m in range(X.shape[1]) if m != j]

    def measure(m: int) -> np.ndarray:
        return (tv_distances if m in categorical else ks_distances)(X[:, m], groups, n_groups)

    D = np.zeros((n_groups, n_groups))
    workers = min(len(others), os.cpu_count() or 1, MAX_THREADS)
    if workers <= 1:
        parts = map(measure, others)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(measure, others))
    for part in parts:
        D += part
    return D


def mds_order(D: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The categories (``codes``, one per row of ``D``) sorted by their 1-D classical MDS coordinate."""
    k = D.shape[0]
    J = np.eye(k) - 1.0 / k
    B = -0.5 * J @ (D**2) @ J
    eigval, eigvec = np.linalg.eigh((B + B.T) / 2)
    coord = eigvec[:, -1] * np.sqrt(max(eigval[-1], 0.0))
    scale = np.abs(coord).max()
    if scale > 0:
        coord = np.round(coord / scale, TIE_DIGITS)
    order = np.lexsort((codes, coord))
    if codes[order[0]] > codes[order[-1]]:
        order = np.lexsort((codes, -coord))
    return codes[order]


def category_order(X: np.ndarray, j: int, categorical: Container[int]) -> np.ndarray:
    """The codes of feature ``j``'s categories (those present in ``X``) in the order effects accumulate along."""
    codes, groups = np.unique(X[:, j], return_inverse=True)
    if codes.size <= 2:
        return codes
    return mds_order(category_distances(X, j, groups.ravel(), codes.size, categorical), codes)
