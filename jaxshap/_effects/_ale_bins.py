"""Bins of accumulated local effects, on the host: quantile edges, bin membership, empty cells.

Apley & Zhu (2020), "Visualizing the effects of predictor variables in black box supervised
learning models", JRSS-B 82(4), section 3: a numeric feature's range is cut at its sample
quantiles, every bin holds rows, and the local effect of a bin is averaged over the rows in it.
Everything here is NumPy on concrete data; the model is never called. (On an accelerator the
order statistics come from a sort where the rows are, :func:`._ale_rows.sorted_columns_at`, at
the ranks :func:`quantile_ranks` gives.)
"""

from __future__ import annotations

from typing import Any, Sequence

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
