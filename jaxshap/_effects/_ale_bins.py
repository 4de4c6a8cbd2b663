r"""The host-side layout of accumulated local effects: a numeric feature's bins, a categorical
feature's order of categories.

Bins (Apley & Zhu, 2020, "Visualizing the effects of predictor variables in black box
supervised learning models", JRSS-B 82(4), section 3): a numeric feature's range is cut at its
sample quantiles, every bin holds rows, and the local effect of a bin is averaged over the rows
in it. Everything here is NumPy on concrete data; the model is never called. (On an accelerator
the order statistics come from a sort where the rows are,
:func:`jaxshap._effects._ale_program.sorted_columns_at`, at the ranks :func:`quantile_ranks`
gives.)

The order of a categorical feature's categories (:func:`category_order`). Local effects
accumulate along an order, and categories have none; Apley & Zhu (2020, JRSS-B, section 5.3)
order them so that neighbours are alike in the *other* features, as their R package ALEPlot
does:

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
from typing import Any, Container, Sequence

import numpy as np

from .._core._validate import is_integer


def quantile_edges(column: np.ndarray, n_bins: int, *, in_place: bool = False) -> np.ndarray:
    r"""Bin edges of one numeric feature: the ``n_bins + 1`` sample quantiles at ``0, 1/n_bins, ..., 1``.

    The quantile at ``p`` is the inverse of the empirical distribution function (R's
    ``type = 1``, as ALEPlot takes them): the smallest order statistic :math:`x_{(i)}` with
    :math:`i / n \ge p`, here :math:`i = \lceil n k / n_{bins} \rceil` in integer arithmetic
    (so no rounding of ``k / n_bins`` moves an edge). Every edge is a data value, the first is the
    minimum and the last the maximum. Repeated quantiles (a feature with ties or few distinct
    values) collapse into one edge, so fewer than ``n_bins`` bins may remain; since each edge is a
    data value and bins are closed on their upper edge, none is empty. ``column`` is reordered
    with ``in_place`` (a contiguous array the caller owns), else left as it is.
    """
    return np.unique(order_statistics(column, quantile_ranks(column.size, n_bins), in_place=in_place))


def quantile_ranks(n: int, n_bins: int) -> np.ndarray:
    r"""The distinct 0-based ranks of :func:`quantile_edges`' order statistics among ``n`` values:
    :math:`\lceil n k / n_{bins} \rceil - 1` (at least 0) for ``k = 0 .. n_bins``, increasing."""
    return np.unique(np.maximum(1, -(-n * np.arange(n_bins + 1, dtype=np.int64) // n_bins)) - 1)


def order_statistics(values: np.ndarray, ranks: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """The order statistics of ``values`` at the increasing 0-based ``ranks``: exactly what
    ``np.sort(values)[ranks]`` gives, without sorting.

    A copy (or ``values`` itself, with ``in_place``) is partitioned in place around the middle
    rank, then each side around its own middle rank, and so on: ``O(n log k)`` for ``k`` ranks,
    against a sort's ``O(n log n)`` (NumPy's own partition at several ranks at once is slower
    than a sort). Each partition leaves the subarray's ranks in it, so the ranks on either side
    are found within it.
    """
    work = values if in_place else np.array(values, copy=True)
    pending = [(0, work.size, 0, len(ranks))]
    while pending:
        lo, hi, first, last = pending.pop()
        if first >= last:
            continue
        middle = (first + last) // 2
        r = int(ranks[middle])
        work[lo:hi].partition(r - lo)
        pending += [(lo, r, first, middle), (r + 1, hi, middle + 1, last)]
    return work[ranks]


def nearest_filled(counts: np.ndarray, edges_j: np.ndarray, edges_k: np.ndarray) -> np.ndarray:
    """For each cell (row-major, ``[n_j * n_k]``), the cell whose mean stands in for it.

    A cell with rows stands for itself. An empty cell takes the non-empty cell nearest to it,
    as ALEPlot does: the distance is Euclidean between cell midpoints, each axis divided by
    its feature's range (``edges[-1] - edges[0]``); among equally near cells the first in
    row-major order wins.
    """
    mid_j = (edges_j[1:] + edges_j[:-1]) / (2.0 * (edges_j[-1] - edges_j[0]))
    mid_k = (edges_k[1:] + edges_k[:-1]) / (2.0 * (edges_k[-1] - edges_k[0]))
    cj, ck = (c.ravel() for c in np.meshgrid(mid_j.astype(np.float64), mid_k.astype(np.float64), indexing="ij"))
    filled = counts.ravel() > 0
    fill = np.arange(counts.size, dtype=np.int32)
    empty, full = np.flatnonzero(~filled), np.flatnonzero(filled)
    if empty.size:  # distances from the empty cells alone
        d2 = (cj[empty, None] - cj[None, full]) ** 2 + (ck[empty, None] - ck[None, full]) ** 2
        fill[empty] = full[np.argmin(d2, axis=1)]
    return fill


# --- categorical columns ----------------------------------------------------------------------


def check_codes(column: np.ndarray, name: str) -> None:
    """Refuse a categorical column whose values are not integer codes."""
    if not np.all(np.equal(np.mod(column, 1), 0)):
        raise ValueError(
            f"`categorical`: feature {name!r} holds values that are not integers; categorical columns hold "
            "integer category codes (a pandas `category` column's codes are taken by themselves)."
        )


def refuse_constant(column: np.ndarray, name: str) -> None:
    """Refuse a constant feature: it has no effect to accumulate."""
    low, high = column.min(), column.max()
    if low == high:
        raise ValueError(
            f"`features`: feature {name!r} is constant in `X` (its only value is {low!r}); "
            "accumulated local effects need at least two distinct values."
        )


def resolve_categorical(categorical: Any, found: Sequence[str], resolve) -> frozenset[int]:
    """Column indices of the categorical features: those named in ``categorical`` (positions or
    names, resolved by ``resolve``) and the pandas ``category`` columns found in ``X``."""
    if categorical is None:
        items = []
    elif isinstance(categorical, str) or is_integer(categorical):
        items = [categorical]
    else:
        try:
            items = list(categorical)
        except TypeError:
            raise TypeError(
                f"`categorical` must be feature positions or names (a sequence); got {type(categorical).__name__}."
            ) from None
    return frozenset(resolve(v) for v in list(items) + list(found))


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
