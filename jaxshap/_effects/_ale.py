r"""Accumulated local effects (Apley & Zhu, 2020).

Apley & Zhu, "Visualizing the effects of predictor variables in black box supervised learning
models", JRSS-B 82(4), 2020. Where partial dependence moves a feature across its whole range in
every row (and so evaluates the model where no data lie when features are dependent), ALE only
moves each row across the bin it lies in, and accumulates the mean local differences:

.. math::

    \hat g_j(z_k) = \sum_{k'=1}^{k} \frac{1}{n_j(k')} \sum_{i:\, x^{(i)}_j \in (z_{k'-1}, z_{k'}]}
        \big[f(z_{k'}, x^{(i)}_{\setminus j}) - f(z_{k'-1}, x^{(i)}_{\setminus j})\big],

centred by the mean over the rows of the value at each row's bin's upper edge (eqs. 15-16).
Category orders and empty cells are settled on the host (:mod:`._ale_bins`); the rows' bins and
the model's differences come from one compiled program that reads the data in place, and the
groups' moments of those differences give the estimate, on the host in float64
(:mod:`._ale_program`), and the bootstrap, without a model call (:mod:`._ale_moments`). Quantile edges and the groups' moments are computed on the host
on a CPU backend and where the rows are on an accelerator (:func:`reduce_on_device`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np

from .._core._chunking import chunk_bytes
from .._core._device_rows import device_rows
from .._core._inputs import check_finite, check_finite_outputs, host_key_bits, is_traced
from .._core._model import wrap_model
from .._core._validate import DEFAULT_MEMORY_BUDGET, integer
from ._ale_bins import (
    category_order,
    check_codes,
    nearest_filled,
    quantile_edges,
    quantile_ranks,
    refuse_constant,
    resolve_categorical,
)
from ._ale_moments import GroupMoments, bootstrap_stderr, device_moments, host_moments, merge, row_moments
from ._ale_program import Layout, Plan, categorical_differences, effects, row_differences
from ._frames import frame_inputs, host_precision
from ._partial_dependence import check_budget, feature_index, units_per_chunk


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
      labels: for a pandas ``category`` column, the categories at ``grid``'s codes, in its order
        (static); ``None`` otherwise.
    """

    def __init__(self, grid, values, stderr, counts, features, feature_names, categorical=False, labels=None):
        self.grid, self.values, self.stderr, self.counts = grid, values, stderr, counts
        self.features = tuple(int(j) for j in features)
        self.feature_names = tuple(str(n) for n in feature_names)
        self.categorical = bool(categorical)
        self.labels = None if labels is None else tuple(labels)

    def tree_flatten(self):
        aux = (self.features, self.feature_names, self.categorical, self.labels)
        return (self.grid, self.values, self.stderr, self.counts), aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __repr__(self) -> str:
        kind = "pair" if len(self.features) == 2 else ("categorical" if self.categorical else "numeric")
        return f"ALE(features={list(self.feature_names)}, {kind}, values: {tuple(np.shape(self.values))})"


# --- the rows' differences, by kind ---------------------------------------------------------


class Differences(NamedTuple):
    """One feature's (or pair's) differences, grouped: what the estimate and the bootstrap read.

    Attributes:
      kind: ``"numeric"``, ``"categorical"`` or ``"pair"``.
      grid: the edges ``[B + 1]``, the codes in order ``[C]``, or a pair's two edges.
      shape: the values' shape without the output axis.
      moments: the groups' counts, sums and (with a bootstrap) scatters, on the host.
      dtype: the differences' dtype, which the results take.
      plan: where groups and segments sit.
    """

    kind: str
    grid: Any
    shape: tuple[int, ...]
    moments: GroupMoments
    dtype: Any
    plan: Plan


def reduce_on_device() -> bool:
    """Whether quantile edges and the groups' moments are computed where the rows are rather
    than on the host: on an accelerator, which then sends back a few numbers per bin instead of
    every row's difference and group; not on a CPU backend, where the differences are in host
    memory already and NumPy's partition and ``bincount`` beat a compiled sort and scatter."""
    return jax.default_backend() != "cpu"


def moments_of(group: Any, D: Any, n_groups: int, parts: int, second: bool) -> GroupMoments:
    """The groups' moments of the differences ``D`` ``[n, P * K]`` by the route :func:`reduce_on_device` picks."""
    if reduce_on_device():
        return device_moments(jax.numpy.asarray(group), jax.numpy.asarray(D), n_groups, parts, second)
    return host_moments(group, D, n_groups, parts, second)


def row_pass_bytes(budget: int) -> int:
    """The working set a chunk of the row pass is planned for: on a CPU half the usual one, since
    the pass also builds the model's inputs and holds its chunk of data (a 10^6-row MLP(64) ran
    1.31 -> 1.11 times the model's floor for one feature, 1.44 -> 1.19 for a pair, in a
    one-process A/B of the chunk sizes); elsewhere the budget."""
    return chunk_bytes(budget) // 2 if jax.default_backend() == "cpu" else budget


def column_edges(host: Any, j: int, n_bins: int, name: str) -> np.ndarray:
    """A numeric feature's quantile edges, refusing NaN/inf in ``X`` or a constant feature."""
    column = np.array(host[:, j], copy=True)
    if not np.isfinite(column).all():
        check_finite(host, "X")  # names the first NaN or inf of X
    edges = quantile_edges(column, n_bins, in_place=True)  # the copy is ours to reorder
    refuse_constant(edges, name)  # the edges run from the minimum to the maximum
    return edges


def feature_edges(host: Any, item: tuple[int, ...], n_bins: int, names) -> tuple[np.ndarray, ...]:
    """The quantile edges of a feature or pair on the host, errors in the features' order: a
    pair's two columns are copied and partitioned in two threads (NumPy lets go of the GIL in
    both)."""
    edges_of = lambda j: column_edges(host, j, n_bins, names[j])
    if len(item) == 1:
        return (edges_of(item[0]),)
    with ThreadPoolExecutor(max_workers=len(item)) as pool:
        return tuple(pool.map(edges_of, item))


def distinct_bins(found: np.ndarray) -> np.ndarray:
    """The groups (bins, or a pair's cells row-major) that lie between distinct order statistics,
    from the features' order statistics ``found`` ``[F, R]`` with their repeats: the others hold
    no rows (:func:`._ale_program.bin_edges_of`)."""
    kept = [np.flatnonzero(np.diff(f) > 0) for f in found]
    if len(kept) == 1:
        return kept[0]
    return (kept[0][:, None] * (found.shape[1] - 1) + kept[1][None, :]).ravel()


def numeric_rows(wrapped, host, rows, item: tuple[int, ...], n_bins: int, names, budget: int,
                 second: bool) -> Differences:
    """A numeric feature's or pair's differences: one per row, the bins found in the program,
    reduced to the groups' moments (with the scatters when ``second``).

    On the host route the quantile edges come first (NumPy), then the program's differences and
    groups, which NumPy sums. On the device route (:func:`reduce_on_device`) one program takes
    the order statistics, the differences at their bins and the bins' partial moments, and one
    copy brings back a few numbers per bin; the bins between repeated order statistics, empty,
    are dropped here."""
    n, m = rows.shape
    chunk = units_per_chunk(wrapped, n, 2 ** len(item), m, host.dtype.itemsize, row_pass_bytes(budget))
    ranks = tuple(int(r) for r in quantile_ranks(n, n_bins))
    if reduce_on_device() and len(ranks) > 1:  # one row: no bins, and the host route names the constant
        found, partials, rows_finite, finite = jax.device_get(row_moments(wrapped, rows, item, ranks, chunk, second))
        if not bool(rows_finite):
            check_finite(host, "X")  # a NaN or inf, or finite values whose sum overflowed
        edges = tuple(np.unique(f) for f in found)
        for j, e in zip(item, edges):
            refuse_constant(e, names[j])
        kept = distinct_bins(found)
        reduce = lambda: merge(partials, 1).take(kept)  # noqa: E731
    else:
        edges = feature_edges(host, item, n_bins, names)
        d, group, rows_finite, finite = row_differences(wrapped, rows, item, edges, chunk)
        if not bool(rows_finite):
            check_finite(host, "X")
        reduce = lambda: host_moments(group, d, int(np.prod([e.size - 1 for e in edges])), 1, second)  # noqa: E731
    if not np.all(finite):  # name the bad rows (on an accelerator their flags are made again for this)
        finite = finite if finite.ndim else row_differences(wrapped, rows, item, edges, chunk)[3]  # same bins
        check_finite_outputs(finite, "`model`", source=" of `X` (moved to a bin edge)", hint=EDGE_ROWS_HINT)
    moments = reduce()  # once the rows and the model's differences are known to be finite
    shape = tuple(e.size for e in edges)
    dtype = rows.dtype
    if len(item) == 1:
        plan = Plan(np.arange(1, shape[0]), np.arange(shape[0] - 1))
        return Differences("numeric", edges[0], shape, moments, dtype, plan)
    n_j, n_k = shape[0] - 1, shape[1] - 1
    upper = np.arange(1, n_j + 1)[:, None] * (n_k + 1) + np.arange(1, n_k + 1)[None, :]  # each cell's upper corner
    plan = Plan(upper.ravel(), nearest_filled(moments.counts.reshape(n_j, n_k), *edges))
    return Differences("pair", edges, shape, moments, dtype, plan)


def categorical_rows(wrapped, host, rows, j: int, categorical, name: str, budget: int, second: bool) -> Differences:
    r"""A categorical feature's differences: each row's step to the next category in the order
    and from the previous one (three evaluations of the model for a row with both neighbours,
    two at the order's ends). The step :math:`c_s \to c_{s+1}` averages both categories' rows,
    :math:`(n_s + n_{s+1})^{-1} \sum [f(c_{s+1}, x_{\setminus j}) - f(c_s, x_{\setminus j})]`,
    as ALEPlot does; the row's value is its own category's."""
    data = np.asarray(host)
    check_finite(data, "X")
    column = data[:, j]
    check_codes(column, name)
    refuse_constant(column, name)
    order = category_order(data, j, categorical)
    sorter = np.argsort(order)
    position = sorter[np.searchsorted(order, column, sorter=sorter)]
    up, down = np.flatnonzero(position < order.size - 1), np.flatnonzero(position > 0)
    units = {k: jax.numpy.asarray(np.asarray(v, np.int32))
             for k, v in (("up", up), ("down", down), ("position", position))}
    units["order"] = jax.numpy.asarray(order)
    chunk = units_per_chunk(wrapped, data.shape[0] + up.size + down.size, 1, data.shape[1], data.dtype.itemsize,
                            budget)
    D, finite = categorical_differences(wrapped, rows, j, units, chunk)
    check_finite_outputs(finite, "`model`", source=" of `X` (at its category or a neighbouring one)",
                         hint=EDGE_ROWS_HINT)
    moments = moments_of(position, D, order.size, 2, second)
    plan = Plan(np.arange(order.size), np.arange(order.size - 1))
    return Differences("categorical", order, (order.size,), moments, D.dtype, plan)


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


@host_precision
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
    sample's mean. A model that does not depend on the feature gets 0. A resample's counts of
    rows per bin (cell, category) are drawn exactly (multinomial); given them, each bin's sum of
    resampled differences is drawn from the normal with its exact conditional mean and
    covariance. A resample's values are affine in those sums, so their variance, and with it the
    standard error, is the row bootstrap's, at a cost per resample of the grid's size rather
    than of ``n`` (:mod:`jaxshap._effects._ale_moments`).

    The model is evaluated twice per row (four times for a pair; for a categorical feature at
    the row's own category and at each neighbour in the order, three times or at the order's
    ends twice), in chunks under ``memory_budget``; the bootstrap reuses those differences.

    **Where the work runs**: the rows' bins and differences in one compiled program on the
    default device. On a CPU backend the quantile edges and the bins' sums come from NumPy on
    the host. On an accelerator the columns are sorted and the differences reduced to their
    bins' moments where they are made, so only a few numbers per bin come back; a ``jax.Array``
    ``X`` already on the device is read there, where NumPy rows are first copied to it. The
    accelerator adds float32 partial sums in an order that can vary between runs (XLA's
    scatter), so two identical calls there can differ in the last bits; set
    ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` for bitwise-repeatable results.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable or a plain NumPy callable.
      X: data rows ``[n, M]`` (array or DataFrame; pandas ``category`` columns are replaced by
        their codes and treated as categorical, and their results carry the labels). A host model
        fitted on a DataFrame (scikit-learn's ``feature_names_in_``, or one that needs the
        categories' labels) is called with the frame rebuilt from the rows, and a host model given
        float64 rows computes in float64, as the explainers do.
      features: a feature (position or name), a tuple ``(j, k)`` for a pair, or a list (or 1-D
        array) of such items, which returns a tuple of results in the list's order.
      n_bins: the number of quantile bins per numeric feature (before repeated quantiles collapse).
      key: PRNG key (or int seed) for the bootstrap; ``None`` means ``jax.random.key(0)``. Read
        only with ``n_bootstrap`` above 0.
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
    model, host, names, found, labels = frame_inputs(model, X, feature_names, on_host=True)  # NaN/inf: checked later
    n_bins = integer(n_bins, "n_bins", least=1, rule="a positive integer number of bins")
    n_bootstrap = check_bootstrap(n_bootstrap)
    budget = check_budget(memory_budget)
    items, several = feature_items(features, names)
    cats = resolve_categorical(categorical, found, lambda v: feature_index(v, names, "categorical"))
    key = host_key_bits(key) if n_bootstrap else None  # the bootstrap's seed, read on the host alone
    wrapped = wrap_model(model, host.shape[1], host.dtype, host)  # a host model is probed on two rows
    rows = []  # the data on the device, aliased (not copied) where the backend allows, made once

    def on_device():
        if not rows:
            rows.append(device_rows(host))
        return rows[0]

    results = tuple(_one(wrapped, host, on_device, item, n_bins, n_bootstrap, cats, names, budget, key, labels)
                    for item in items)
    return results if several else results[0]


def _one(wrapped, host, on_device, item, n_bins, n_bootstrap, cats, names, budget, key, labels) -> ALE:
    """The ALE of one feature or pair: its rows' differences, then the estimate and the bootstrap
    (``labels``: the labels behind a pandas ``category`` column's codes, by position)."""
    diff = differences(wrapped, host, on_device, item, n_bins, cats, names, budget, second=n_bootstrap > 0)
    layout = Layout(diff.kind, diff.shape, n_bootstrap)
    counts = diff.moments.counts
    values, fallback = effects(counts.astype(np.float64), diff.moments.sums, diff.plan, layout)
    stderr = None if not n_bootstrap else bootstrap_stderr(diff.moments, fallback, diff.plan, layout, key)
    values, stderr = (None if a is None else np.asarray(a, diff.dtype) for a in (values, stderr))
    if wrapped.single_output:
        values = values[..., 0]
        stderr = None if stderr is None else stderr[..., 0]
    pair = diff.kind == "pair"
    counts = counts.reshape(diff.shape[0] - 1, diff.shape[1] - 1) if pair else counts
    # made on the host, sent in one transfer (an array made with jax.numpy is a device call each)
    grid, values, stderr, counts = jax.device_put((diff.grid, values, stderr, counts.astype(np.int32)))
    categorical = diff.kind == "categorical"
    known = labels.get(item[0]) if categorical else None
    shown = None if known is None else [known[int(c)] for c in diff.grid]
    return ALE(grid, values, stderr, counts, item, [names[j] for j in item], categorical, shown)


def differences(wrapped, host, on_device, item, n_bins, cats, names, budget, second=True) -> Differences:
    """The grouped differences of one feature or pair, of the kind it is (with the groups'
    scatters, which only the bootstrap reads, when ``second``)."""
    if len(item) == 2:
        bad = [names[j] for j in item if j in cats]
        if bad:
            raise ValueError(
                f"`features`: second-order ALE needs two numeric features, and {bad} is listed as categorical "
                "(in `categorical` or as a pandas category column); study categorical features one at a time."
            )
    if len(item) == 1 and item[0] in cats:
        return categorical_rows(wrapped, host, on_device(), item[0], cats, names[item[0]], budget, second)
    return numeric_rows(wrapped, host, on_device(), item, n_bins, names, budget, second)
