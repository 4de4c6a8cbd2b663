r"""Accumulated local effects in the program: the model's finite differences at every row's bin
(or cell), grouped, and the effects from the groups.

For a numeric feature :math:`j` each data row is one unit: with :math:`x^{(i)}_j` in bin
:math:`k = (z_{k-1}, z_k]` (bin 1 also holds :math:`z_0`), its difference is

.. math:: d_i = f(z_k, x^{(i)}_{\setminus j}) - f(z_{k-1}, x^{(i)}_{\setminus j}),

and for a pair :math:`(j, l)` in cell :math:`(k, m)` the second difference
:math:`f(z_k, w_m) - f(z_{k-1}, w_m) - f(z_k, w_{m-1}) + f(z_{k-1}, w_{m-1})` at the row's
other features (Apley & Zhu 2020, eqs. 13 and 15). The row's bin is found inside the compiled
program (:func:`row_differences`), by comparing its value with the edges, so the comparisons
fuse into the building of the model's input and nothing per row travels from the host: the rows
are read in chunks straight from the data (:mod:`jaxshap._core._device_rows`), the last chunk
overlapping its neighbour instead of padding the data.

Every estimate is built from the rows' finite differences, gathered by *group* of rows: a
numeric feature's bins and a pair's cells (one difference per row), a categorical feature's
categories (two: the step to the next category in the order and the step from the previous one,
which share the row's own prediction, :func:`categorical_differences`). The groups' counts and
sums of differences give the *segments*' (bins, cells, steps between neighbouring categories)
counts and sums, the local effects are the segments' means, and the accumulated effects follow
(:func:`effects`). The bootstrap (:mod:`jaxshap._effects._ale_moments`) resamples through the
groups too, so no model is evaluated again.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks
from .._core._device_rows import DeviceRows, read_rows, take_rows
from .._core._model import Model


CHAIN_EDGES = 64
"""Up to this many edges a value's bin and its edges come from one comparison and two selects per
edge, fused into the model's input; beyond it, from a binary search and two gathers."""

SIGNS = {2: (1.0, -1.0), 4: (1.0, -1.0, -1.0, 1.0)}
"""The sign of each corner: ``(hi, lo)`` for a first difference, ``(hi-hi, lo-hi, hi-lo, lo-lo)``
for a second difference."""


def bin_edges_of(values: jax.Array, edges: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(k, lower, upper)``: the 1-based bin ``k`` of each value (bin ``k`` is
    ``(edges[k-1], edges[k]]``, bin 1 also holds ``edges[0]``) and that bin's two edges.

    ``edges`` are increasing and may repeat (the order statistics before repeated quantiles
    collapse): a value's bin is then the one bin between distinct edges that holds it, so a bin
    between two equal edges stays empty. That takes care only at the lowest edge, whose value
    belongs to the first bin above it: edges equal to ``edges[0]`` count as below every value.
    """
    n_bins = edges.shape[0] - 1
    below = jnp.where(edges == edges[0], -jnp.inf, edges)  # the threshold each edge sets (increasing)
    if edges.shape[0] > CHAIN_EDGES:
        k = jnp.clip(jnp.searchsorted(below, values, side="left"), 1, n_bins).astype(jnp.int32)
        return k, edges[k - 1], edges[k]
    k = jnp.ones(values.shape, jnp.int32)
    lower = jnp.broadcast_to(edges[0], values.shape)
    upper = jnp.broadcast_to(edges[1], values.shape)
    for e in range(1, n_bins):  # the inner edges below the value: one comparison each
        above = values > below[e]
        k = k + above
        lower = jnp.where(above, edges[e], lower)
        upper = jnp.where(above, edges[e + 1], upper)
    return k, lower, upper


def _corners(x: jax.Array, features: tuple[int, ...], edges: tuple) -> tuple[jax.Array, jax.Array]:
    """The chunk's model inputs ``[c, C, M]`` at its rows' corners, and each row's group: its bin
    (0-based) or its cell (row-major over the two features' bins)."""
    found = [bin_edges_of(x[:, j], e) for j, e in zip(features, edges)]
    if len(found) == 1:
        (k, lower, upper), = found
        values, group = [jnp.stack([upper, lower], axis=1)], k - 1
    else:
        (kj, lj, uj), (kl, ll, ul) = found
        values = [jnp.stack([uj, lj, uj, lj], axis=1), jnp.stack([ul, ul, ll, ll], axis=1)]
        group = (kj - 1) * (edges[1].shape[0] - 1) + (kl - 1)
    n_corners = values[0].shape[1]
    columns = jnp.arange(x.shape[1])
    inputs = jnp.broadcast_to(x[:, None, :], (x.shape[0], n_corners, x.shape[1]))
    for j, v in zip(features, values):  # a select, not a scatter: XLA fuses it into the model's first layer
        inputs = jnp.where(columns == j, v[..., None], inputs)
    return inputs, group


@functools.partial(jax.jit, static_argnums=(1, 2))
def sorted_columns_at(rows: DeviceRows, features: tuple[int, ...], ranks: tuple[int, ...]) -> jax.Array:
    """``[len(features), R]``: each feature's order statistics at the 0-based ``ranks`` (static),
    by a sort of its column where the rows are (NaN sorts last, so a NaN column ends in NaN)."""
    x = read_rows(rows, 0, rows.shape[0])
    return jnp.stack([jnp.sort(x[:, j])[jnp.asarray(ranks)] for j in features])


@functools.partial(jax.jit, static_argnums=(2, 4))
def row_differences(model: Model, rows: DeviceRows, features: tuple[int, ...], edges: tuple, chunk: int):
    """Every row's difference and its group.

    Args:
      model: the wrapped model.
      rows: the data ``[n, M]``.
      features: one feature or a pair (static).
      edges: each feature's bin edges.
      chunk: rows per model call (static).

    Returns:
      ``(d [n, K], group [n], rows_finite, d_finite [n])``: ``rows_finite`` is false
      when a chunk of the data sums to NaN or inf, which every NaN or inf makes it do (and, rarely,
      finite values whose sum overflows: the caller checks the data then).
    """
    n, m = rows.shape
    chunk = min(chunk, n)
    n_chunks = -(-n // chunk)

    def one(i):
        start = jnp.minimum(i * chunk, n - chunk)  # the last chunk ends at the last row
        x = read_rows(rows, start, chunk)
        inputs, group = _corners(x, features, edges)
        c = inputs.shape[1]
        y = model.fn(inputs.reshape(-1, m)).reshape(chunk, c, -1)
        d = jnp.einsum("c,ucK->uK", jnp.asarray(SIGNS[c], y.dtype), y)
        return d, group, jnp.isfinite(jnp.sum(x))  # a NaN or inf anywhere makes the sum one

    d, group, finite = jax.lax.map(one, jnp.arange(n_chunks))
    skip = n_chunks * chunk - n  # rows of the last chunk that its neighbour already holds
    d = jnp.concatenate([d[:-1].reshape(-1, d.shape[-1]), d[-1, skip:]])
    group = jnp.concatenate([group[:-1].reshape(-1), group[-1, skip:]])
    return d, group, jnp.all(finite), jnp.all(jnp.isfinite(d), axis=-1)


class Layout(NamedTuple):
    """How groups, segments and values fit together (static, hashable).

    Attributes:
      kind: ``"numeric"``, ``"categorical"`` or ``"pair"``.
      shape: the values' shape without the output axis: ``(B + 1,)``, ``(C,)`` or ``(B_j + 1, B_k + 1)``.
      n_bootstrap: bootstrap replicates (0: none).
    """

    kind: str
    shape: tuple[int, ...]
    n_bootstrap: int


class Plan(NamedTuple):
    """The arrays that place groups and segments.

    Attributes:
      value_of_group: ``[G]`` where each group's rows sit in the flattened values (their bin's upper
        edge, their cell's upper corner, their category), for the centring.
      fill: ``[S]`` the segment whose full-sample mean stands for each segment (itself, or for an
        empty cell of a pair the nearest non-empty one).
    """

    value_of_group: jax.Array
    fill: jax.Array


@functools.partial(jax.jit, static_argnums=(2, 4))
def categorical_differences(model: Model, X: DeviceRows, j: int, units: dict, chunk: int):
    r"""Each row's step up to the next category and down from the previous one, from three
    evaluations at most: the row as it is, at the next category and at the previous one (the
    row's own prediction is shared by both steps).

    Args:
      model: the wrapped model.
      X: the data ``[n, M]``.
      j: the categorical feature (static).
      units: ``up`` and ``down`` (the rows that have a next / a previous category in the order),
        ``position`` (each row's place in the order) and ``order`` (the codes in that order).
      chunk: evaluations per model call (static).

    Returns:
      ``(D [n, 2K], finite [n])``: ``D`` holds the up-step
      :math:`f(c_{p+1}, x_{\setminus j}) - f(c_p, x_{\setminus j})` in its first ``K`` columns
      and the down-step :math:`f(c_p, \cdot) - f(c_{p-1}, \cdot)` in the others (0 where the row
      has none); ``finite`` says per row whether the model was finite at all its evaluations.
    """
    n, n_up = X.shape[0], units["up"].shape[0]
    up, down, position = units["up"], units["down"], units["position"]
    rows = jnp.concatenate([jnp.arange(n, dtype=up.dtype), up, down])
    at = jnp.concatenate([position, position[up] + 1, position[down] - 1])
    columns = jnp.arange(X.shape[1])

    def batch(args):
        r, c = args
        x = jnp.where(columns == j, units["order"][c][:, None].astype(X.dtype), take_rows(X, r))
        return model.fn(x).reshape(r.shape[0], -1)

    y = map_chunks(batch, (rows, at), chunk)
    own, moved = y[:n], y[n:]
    k = y.shape[-1]
    D = jnp.zeros((n, 2 * k), y.dtype)
    D = D.at[up, :k].set(moved[:n_up] - own[up]).at[down, k:].set(own[down] - moved[n_up:])
    ok = jnp.all(jnp.isfinite(y), axis=-1)
    return D, ok[:n].at[up].min(ok[n : n + n_up]).at[down].min(ok[n + n_up :])


def segments(count, total, layout: Layout):
    r"""The segments' counts ``[..., S]`` and sums ``[..., S, K]`` from the groups' (any leading
    axes). A bin or cell is its own group; the step :math:`c_s \to c_{s+1}` between categories
    averages both categories' rows (as ALEPlot does): its count is :math:`n_s + n_{s+1}`, its sum
    the up-steps of :math:`c_s` and the down-steps of :math:`c_{s+1}`."""
    if layout.kind != "categorical":
        return count, total
    k = total.shape[-1] // 2
    return count[..., :-1] + count[..., 1:], total[..., :-1, :k] + total[..., 1:, k:]


def _accumulate(x: np.ndarray, axis: int) -> np.ndarray:
    """The cumulative sums along ``axis`` (negative), with a zero first: one longer."""
    summed = np.cumsum(x, axis)
    shape = list(summed.shape)
    shape[axis] = 1
    return np.concatenate([np.zeros(shape, summed.dtype), summed], axis)


def _pair_effects(mean, count, layout: Layout, fallback):
    r"""The pair's accumulated second differences with both first-order parts removed (Apley &
    Zhu 2020, eq. 15): ``h`` is the double cumulative sum of the cell means (0 on the lower
    edges), and along ``j`` the part removed is :math:`\sum_{k' \le k} \frac{1}{n_j(k')}
    \sum_m n(k', m) [h(z_{k'}, w_m) - h(z_{k'-1}, w_m)]`, along ``k`` likewise."""
    n_j, n_k = layout.shape[0] - 1, layout.shape[1] - 1
    batch = count.shape[:-1]
    h = _accumulate(_accumulate(mean.reshape(*batch, n_j, n_k, -1), -3), -2)
    n = count.reshape(*batch, n_j, n_k, 1)
    step_j = np.sum(n * (h[..., 1:, 1:, :] - h[..., :-1, 1:, :]), axis=-2)  # [..., n_j, K]
    step_k = np.sum(n * (h[..., 1:, 1:, :] - h[..., 1:, :-1, :]), axis=-3)  # [..., n_k, K]
    n_jk = np.sum(n, axis=-2), np.sum(n, axis=-3)
    step_j = step_j / np.maximum(n_jk[0], 1)
    step_k = step_k / np.maximum(n_jk[1], 1)
    if fallback is not None:
        step_j = np.where(n_jk[0] > 0, step_j, fallback[1])
        step_k = np.where(n_jk[1] > 0, step_k, fallback[2])
    main_j, main_k = _accumulate(step_j, -2), _accumulate(step_k, -2)
    return h - main_j[..., :, None, :] - main_k[..., None, :, :], (step_j, step_k)


def effects(group_count, group_total, plan: Plan, layout: Layout, fallback=None):
    """The centred effects from the groups' counts ``[..., G]`` and sums ``[..., G, Q]`` (the full
    sample's, or a batch of resamples'), and what a resample falls back on where it left a
    segment empty.

    On the host, in float64 (the sizes are a grid's: nothing to compile), for the full sample and
    for the bootstrap replicates (:mod:`._ale_moments`).

    Returns:
      ``(values [..., *shape, K], fallback)``.
    """
    count, total = segments(group_count, group_total, layout)
    mean = total / np.maximum(count, 1)[..., None]
    if fallback is None:
        mean = mean[..., plan.fill, :]
    else:
        mean = np.where(count[..., None] > 0, mean, fallback[0])
    if layout.kind == "pair":
        g, steps = _pair_effects(mean, count, layout, fallback)
    else:
        g, steps = _accumulate(mean, -2), ()
    batch, k = group_count.shape[:-1], g.shape[-1]
    at_rows = g.reshape(*batch, -1, k)[..., plan.value_of_group, :]  # the value each group's rows sit at
    centre = np.sum(group_count[..., None] * at_rows, axis=-2) / np.sum(group_count, axis=-1)[..., None]
    return g - centre.reshape(*batch, *(1,) * (g.ndim - len(batch) - 1), k), (mean, *steps)
