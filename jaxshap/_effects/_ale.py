r"""Accumulated local effects (Apley & Zhu, 2020).

Apley & Zhu, "Visualizing the effects of predictor variables in black box supervised learning
models", JRSS-B 82(4), 2020. Where partial dependence moves a feature across its whole range in
every row (and so evaluates the model where no data lie when features are dependent), ALE only
moves each row across the bin it lies in, and accumulates the mean local differences:

.. math::

    \hat g_j(z_k) = \sum_{k'=1}^{k} \frac{1}{n_j(k')} \sum_{i:\, x^{(i)}_j \in (z_{k'-1}, z_{k'}]}
        \big[f(z_{k'}, x^{(i)}_{\setminus j}) - f(z_{k'-1}, x^{(i)}_{\setminus j})\big],

centred by the mean over the rows of the value at each row's bin's upper edge (eqs. 15-16).
Bins, category orders and empty cells are settled on the host (:mod:`._ale_bins`,
:mod:`._ale_order`); the model evaluations, the accumulation and the bootstrap are one compiled
program (:mod:`._ale_program`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from .._core._categorical import category_codes
from .._core._inputs import as_key, check_finite_outputs, is_traced
from .._core._model import wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer
from ._ale_bins import (
    bin_index,
    cell_counts,
    check_codes,
    refuse_constant,
    nearest_filled,
    quantile_edges,
    resolve_categorical,
)
from ._ale_order import category_order
from ._ale_program import Layout, ale_program, as_units
from ._partial_dependence import check_budget, feature_index, prepare_data, units_per_chunk


EDGE_ROWS_HINT = (
    "moving those rows' feature to the edges of their bin (or to a neighbouring category) takes the model where "
    "it is undefined; fix the model, or drop or clip those rows."
)


@jax.tree_util.register_pytree_node_class
class ALE:
    """Accumulated local effects of one feature or of a pair.

    Attributes:
      grid: where the values are: for a numeric feature its bin edges ``[B + 1]`` (``B <= n_bins``
        bins), for a categorical one its category codes ``[C]`` in the order the effects
        accumulate along, for a pair a tuple of the two features' edges ``([B_j + 1], [B_k + 1])``.
      values: the centred effect at each grid point: ``[B + 1]``, ``[C]`` or ``[B_j + 1, B_k + 1]``,
        with a trailing ``K`` axis for a model of ``K`` outputs.
      stderr: bootstrap standard errors of ``values`` (same shape), or ``None`` without bootstrap.
      counts: the rows of ``X`` in each bin ``[B]``, category ``[C]`` or cell ``[B_j, B_k]``.
      features: the feature positions, a tuple of one or two ints (static).
      feature_names: their names (static).
      categorical: whether the (single) feature is categorical (static).
    """

    def __init__(self, grid, values, stderr, counts, features, feature_names, categorical=False):
        self.grid, self.values, self.stderr, self.counts = grid, values, stderr, counts
        self.features = tuple(int(j) for j in features)
        self.feature_names = tuple(str(n) for n in feature_names)
        self.categorical = bool(categorical)

    def tree_flatten(self):
        return (self.grid, self.values, self.stderr, self.counts), (self.features, self.feature_names, self.categorical)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __repr__(self) -> str:
        kind = "pair" if len(self.features) == 2 else ("categorical" if self.categorical else "numeric")
        return f"ALE(features={list(self.feature_names)}, {kind}, values: {tuple(np.shape(self.values))})"


# --- units of each kind (host) ----------------------------------------------------------------


def numeric_units(column: np.ndarray, n_bins: int, name: str):
    """One unit per row: its bin's two edges; the row's value sits at its bin's upper edge."""
    column = np.ascontiguousarray(column)
    refuse_constant(column, name)
    edges = quantile_edges(column, n_bins)
    b = bin_index(column, edges)
    corners = np.stack([b, b - 1], axis=1)[:, :, None]
    counts = np.bincount(b - 1, minlength=edges.size - 1)
    return edges, dict(row=np.arange(column.size), corners=corners, segment=b - 1, value_index=b,
                       fill=np.arange(edges.size - 1), tables=(edges,), segment_value=np.arange(1, edges.size)), counts


def categorical_units(X: np.ndarray, j: int, categorical, name: str):
    r"""Two units per row at most: the step from its category to the next one in the order and the
    step from the previous one to its own. The step :math:`c_s \to c_{s+1}` averages both
    categories' rows, :math:`(n_s + n_{s+1})^{-1} \sum [f(c_{s+1}, x_{\setminus j}) - f(c_s, x_{\setminus j})]`,
    as ALEPlot does; the row's value is its own category's."""
    column = X[:, j]
    check_codes(column, name)
    refuse_constant(column, name)
    order = category_order(X, j, categorical)
    sorter = np.argsort(order)
    position = sorter[np.searchsorted(order, column, sorter=sorter)]
    up, down = np.flatnonzero(position < order.size - 1), np.flatnonzero(position > 0)
    row = np.concatenate([up, down])
    lo = np.concatenate([position[up], position[down] - 1])
    corners = np.stack([lo + 1, lo], axis=1)[:, :, None]
    counts = np.bincount(position, minlength=order.size)
    return order, dict(row=row, corners=corners, segment=lo, value_index=position,
                       fill=np.arange(order.size - 1), tables=(order,), segment_value=np.zeros(order.size - 1)), counts


def pair_units(X: np.ndarray, pair: tuple[int, int], n_bins: int, names: Sequence[str]):
    """One unit per row: the four corners of its cell; the row's value sits at the cell's upper corner."""
    cols = [np.ascontiguousarray(X[:, j]) for j in pair]
    for c, j in zip(cols, pair):
        refuse_constant(c, names[j])
    edges = [quantile_edges(c, n_bins) for c in cols]
    bj, bk = (bin_index(c, e) for c, e in zip(cols, edges))
    nj, nk = edges[0].size - 1, edges[1].size - 1
    corners = np.stack([np.stack(p, axis=1) for p in ((bj, bk), (bj - 1, bk), (bj, bk - 1), (bj - 1, bk - 1))], axis=1)
    counts = cell_counts(bj, bk, nj, nk)
    upper = np.arange(1, nj + 1)[:, None] * (nk + 1) + np.arange(1, nk + 1)[None, :]  # each cell's upper corner
    return tuple(edges), dict(row=np.arange(bj.size), corners=corners, segment=(bj - 1) * nk + (bk - 1),
                              value_index=bj * (nk + 1) + bk, fill=nearest_filled(counts, *edges),
                              tables=tuple(edges), segment_value=upper.ravel()), counts


# --- arguments ------------------------------------------------------------------------------


def feature_items(features: Any, names: Sequence[str]) -> tuple[list[tuple[int, ...]], bool]:
    """The studied items (one feature or a pair each) and whether several were asked for (a list)."""
    def item(f):
        if isinstance(f, tuple):
            if len(f) != 2:
                raise ValueError(
                    f"`features`: a tuple names a pair of features and must have two entries; got {len(f)}: {f!r}."
                )
            pair = tuple(feature_index(v, names, "features") for v in f)
            if pair[0] == pair[1]:
                raise ValueError(f"`features`: the pair {f!r} names the same feature twice.")
            return pair
        return (feature_index(f, names, "features"),)

    if isinstance(features, (list, np.ndarray)):
        items = list(features)
        if not items:
            raise ValueError("`features` is empty; name at least one feature.")
        return [item(f) for f in items], True
    return [item(features)], False


def check_bootstrap(n_bootstrap: Any) -> int:
    rule = "0 (no standard errors) or an integer of at least 2"
    n = integer(n_bootstrap, "n_bootstrap", least=0, rule=rule)
    if n == 1:  # one resample has no spread
        raise ValueError(f"`n_bootstrap` must be {rule}; got 1.")
    return n


# --- the public function --------------------------------------------------------------------


def accumulated_local_effects(
    model: Callable,
    X: Any,
    features: Any,
    n_bins: int = 20,
    key: Any = None,
    *,
    n_bootstrap: int = 50,
    categorical: Any = None,
    feature_names: Sequence[str] | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> ALE | tuple[ALE, ...]:
    r"""Accumulated local effects of one feature or of a pair (Apley & Zhu, 2020, JRSS-B).

    **Numeric feature** ``j``: the bin edges :math:`z_0 < \dots < z_B` are the sample quantiles
    of :math:`x_j` at :math:`0, 1/n_{bins}, \dots, 1` (the inverse empirical distribution
    function, R's ``type = 1`` as in ALEPlot: every edge is a data value, :math:`z_0` the minimum
    and :math:`z_B` the maximum). Repeated quantiles collapse into one edge, so a feature with ties
    or fewer than ``n_bins + 1`` distinct values gets fewer bins (``B <= n_bins``), and no bin is
    empty. Bin :math:`k` is :math:`(z_{k-1}, z_k]`, the first also holding :math:`z_0`. The
    uncentred effect is :math:`\hat g(z_k) = \sum_{k' \le k} \Delta_{k'}` with
    :math:`\Delta_k` the mean over the rows in bin ``k`` of
    :math:`f(z_k, x_{\setminus j}) - f(z_{k-1}, x_{\setminus j})`; each row takes the value at
    its bin's upper edge, and the values are centred by the mean of that over the rows of ``X``,
    :math:`\frac1n \sum_k n_k \hat g(z_k)` (eqs. 15-16 of the paper; PyALE and ALEPlot
    centre by a trapezoid average instead, which shifts their values by a constant).

    **Categorical feature** (listed in ``categorical`` or a pandas ``category`` column; its values
    are integer codes): the categories present are ordered by similarity in the other features,
    as Apley & Zhu (section 5.3) and ALEPlot do. The distance between categories ``a`` and ``b``
    is the sum over the other features of the Kolmogorov–Smirnov distance
    :math:`\max_t |F_{m|a}(t) - F_{m|b}(t)|` between the feature's empirical distributions in the
    two categories' rows (exact: the supremum over the feature's data values, where ALEPlot
    evaluates at 100 quantiles), or, for a categorical other feature, the total variation distance
    :math:`\frac12 \sum_v |P(x_m = v|a) - P(x_m = v|b)|`. The categories are sorted by their
    one-dimensional classical MDS coordinate (the leading eigenvector of
    :math:`-\frac12 J D^{\circ 2} J` scaled by the square root of its eigenvalue); coordinates equal
    to 9 digits (relative to the largest) are ordered by code, and the coordinate's sign is flipped when the order would
    start with a larger code than it ends with. One or two categories keep the codes' order. The
    step between neighbours :math:`c_s, c_{s+1}` is the mean of
    :math:`f(c_{s+1}, x_{\setminus j}) - f(c_s, x_{\setminus j})` over the rows of both
    categories; the effects accumulate along the order from 0, each row takes its own category's
    value, and they are centred likewise. ``grid`` holds the codes in that order.

    **Pair** ``(j, k)`` of numeric features: each row's second difference over the corners of its
    cell of the two quantile grids, averaged per cell and summed over the cells below and left of
    each grid point; both first-order parts of that sum are removed (eq. 15) and the result is
    centred by the mean over the rows of the value at their cell's upper corner. A cell without
    rows takes the mean of the nearest non-empty cell (Euclidean distance between cell midpoints,
    each axis scaled by its feature's range; ties to the first in row-major order), as ALEPlot
    does. Pairs with a categorical feature are refused.

    **Standard errors**: the standard deviation (``ddof=1``) over ``n_bootstrap`` resamples of the
    rows of ``X`` with replacement (drawn with ``key``) of the whole estimate, centring included,
    with the bins, category order and grid held fixed; the model is not evaluated again (each
    row's differences do not change). A bin or cell that a resample leaves empty takes the full
    sample's mean. A model that does not depend on the feature gets 0.

    The model is evaluated twice per row (four times for a pair; at most four for a categorical
    feature), in chunks under ``memory_budget``, in one compiled program with the accumulation
    and the bootstrap.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame; pandas ``category`` columns are replaced by
        their codes and treated as categorical).
      features: a feature (position or name), a tuple ``(j, k)`` for a pair, or a list (or 1-D
        array) of such items, which returns a tuple of results in the list's order.
      n_bins: the number of quantile bins per numeric feature (before repeated quantiles collapse).
      key: PRNG key (or int seed) for the bootstrap; ``None`` means ``jax.random.key(0)``.
      n_bootstrap: bootstrap resamples for ``stderr``; 0 gives ``stderr=None``.
      categorical: positions or names of categorical features (besides pandas ``category`` columns).
      feature_names: names of the ``M`` features (default: DataFrame columns, else ``Feature j``).
      memory_budget: bytes of working memory one chunk of model evaluations may use.

    Returns:
      An :class:`ALE`, or a tuple of them when ``features`` is a list.

    Raises:
      ValueError: for NaN/inf in ``X``; ``n_bins`` below 1; an ``n_bootstrap`` of 1 or below 0; a
        feature out of range or an unknown name; a constant feature; categorical values that are
        not integers; a pair with a categorical feature; a model that returns NaN or inf.
      TypeError: for a model that cannot be called, or features of the wrong type.
    """
    if is_traced(X):
        raise TypeError("`X` is traced: accumulated local effects bin the concrete rows on the host; call "
                        "accumulated_local_effects outside jax.jit / jax.grad (the model may still be a JAX function).")
    X, found = category_codes(X)
    X, names = prepare_data(X, feature_names)
    n_bins = integer(n_bins, "n_bins", least=1, rule="a positive integer number of bins")
    n_bootstrap = check_bootstrap(n_bootstrap)
    budget = check_budget(memory_budget)
    items, several = feature_items(features, names)
    cats = resolve_categorical(categorical, found, lambda v: feature_index(v, names, "categorical"))
    key = as_key(key)
    wrapped = wrap_model(model, X.shape[1], X.dtype, X[:2])
    host = np.asarray(X)
    results = tuple(_one(wrapped, X, host, item, n_bins, n_bootstrap, cats, names, budget, key) for item in items)
    return results if several else results[0]


def _one(wrapped, X, host, item, n_bins, n_bootstrap, cats, names, budget, key) -> ALE:
    """The ALE of one feature or pair: units on the host, then the compiled program."""
    is_categorical = len(item) == 1 and item[0] in cats
    if len(item) == 2:
        bad = [names[j] for j in item if j in cats]
        if bad:
            raise ValueError(
                f"`features`: second-order ALE needs two numeric features, and {bad} is listed as categorical "
                "(in `categorical` or as a pandas category column); study categorical features one at a time."
            )
        grid, spec, counts = pair_units(host, item, n_bins, names)
        kind, shape = "pair", (grid[0].size, grid[1].size)
    elif is_categorical:
        grid, spec, counts = categorical_units(host, item[0], cats, names[item[0]])
        kind, shape = "first", (grid.size,)
    else:
        grid, spec, counts = numeric_units(host[:, item[0]], n_bins, names[item[0]])
        kind, shape = "first", (grid.size,)
    units = as_units(**spec)
    n_corners = units.corners.shape[1]
    chunk = units_per_chunk(wrapped, int(units.row.shape[0]), n_corners, X.shape[1], X.dtype.itemsize, budget)
    layout = Layout(kind, int(np.prod([s - 1 for s in shape])) if kind == "pair" else shape[0] - 1, shape,
                    chunk, n_bootstrap, rows_are_units=not is_categorical)
    values, stderr, finite = ale_program(wrapped, X, item, units, layout, key)
    check_finite_outputs(finite, "`model`", row_ids=np.asarray(spec["row"]), source=" of `X` (moved to a bin edge)",
                         hint=EDGE_ROWS_HINT)
    if wrapped.single_output:
        values = values[..., 0]
        stderr = None if stderr is None else stderr[..., 0]
    grid = tuple(jax.numpy.asarray(g) for g in grid) if kind == "pair" else jax.numpy.asarray(grid)
    return ALE(grid, values, stderr, jax.numpy.asarray(counts), item, [names[j] for j in item], is_categorical)
