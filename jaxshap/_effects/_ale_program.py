r"""The compiled program of accumulated local effects: finite differences, accumulation, bootstrap.

Every estimate is built from *units*. A unit is a data row :math:`x^{(i)}` with the studied
feature(s) moved to the corners of one bin (cell) and a signed sum of the model there:

* a first difference :math:`f(z_{hi}, x^{(i)}_{\setminus j}) - f(z_{lo}, x^{(i)}_{\setminus j})`
  (two corners; a numeric bin's edges, or two neighbouring categories);
* a second difference :math:`f(z_k, w_l) - f(z_{k-1}, w_l) - f(z_k, w_{l-1}) + f(z_{k-1}, w_{l-1})`
  at the row's other features (four corners; a cell of a pair's grid).

Each unit belongs to one *segment* (a bin, a step between categories, a cell); the local
effect of a segment is the mean of its units. The model evaluations are mapped in chunks under
the memory budget (:func:`jaxshap._core._chunking.map_chunks`); the unit differences stay on
the device, and the accumulation and the bootstrap replicates reuse them, so the bootstrap
costs no model evaluation.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks
from .._core._model import Model

SIGNS = {2: (1.0, -1.0), 4: (1.0, -1.0, -1.0, 1.0)}
"""The sign of each corner of a unit: ``(hi, lo)`` for a first difference and
``(hi-hi, lo-hi, hi-lo, lo-lo)`` for a second difference."""


class Layout(NamedTuple):
    """How units, segments and values fit together (static, hashable).

    Attributes:
      kind: ``"first"`` (a numeric feature or a categorical one: values are the cumulative sums
        of the segment means, starting at 0) or ``"pair"`` (a ``[n_j, n_k]`` grid of cells).
      n_segments: segments (bins, category steps or cells).
      shape: the shape of the values without the output axis: ``(n_segments + 1,)`` or
        ``(n_j + 1, n_k + 1)``.
      chunk: units per chunk of model evaluations.
      n_bootstrap: bootstrap replicates (0: none).
      rows_are_units: whether unit ``i`` is row ``i`` (one unit per row, in row order: a numeric
        feature or a pair), so that a segment's rows all sit at one value (``segment_value``).
    """

    kind: str
    n_segments: int
    shape: tuple[int, ...]
    chunk: int
    n_bootstrap: int
    rows_are_units: bool


class Units(NamedTuple):
    """The units and the rows' places, as arrays.

    Attributes:
      row: ``[U]`` the data row of each unit.
      corners: ``[U, C, s]`` the corner of each unit, as positions into ``tables``.
      segment: ``[U]`` the segment of each unit.
      value_index: ``[n]`` each row's place in the flattened values (its bin's upper edge, its
        category, its cell's upper corner), for the centring.
      fill: ``[n_segments]`` the segment whose full-sample mean stands for each segment (itself,
        or for an empty cell of a pair the nearest non-empty one).
      tables: ``s`` arrays of the values the features take at the corners (edges or codes).
      segment_value: ``[n_segments]`` where the rows of each segment sit in the flattened values
        (used when the rows are the units).
    """

    row: jax.Array
    corners: jax.Array
    segment: jax.Array
    value_index: jax.Array
    fill: jax.Array
    tables: tuple
    segment_value: jax.Array


def unit_differences(model: Model, X: jax.Array, features: tuple[int, ...], units: Units, chunk: int) -> jax.Array:
    """``[U, K]``: each unit's signed sum of the model over its corners, in chunks of ``chunk`` units."""
    n_corners = units.corners.shape[1]
    signs = jnp.asarray(SIGNS[n_corners], X.dtype)
    columns = jnp.arange(X.shape[1])

    def batch(args):
        rows, corners = args
        x = jnp.broadcast_to(X[rows][:, None, :], (rows.shape[0], n_corners, X.shape[1]))
        for a, (j, table) in enumerate(zip(features, units.tables)):
            # a select, not a scatter into the column: XLA fuses it into the model's first layer
            x = jnp.where(columns == j, table[corners[..., a]][..., None].astype(X.dtype), x)
        y = model.fn(x.reshape(-1, X.shape[1])).reshape(rows.shape[0], n_corners, -1)
        return jnp.einsum("c,ucK->uK", signs, y)

    return map_chunks(batch, (units.row, units.corners), chunk)


def _segment_means(d, weights, units: Units, layout: Layout, fallback):
    """Weighted segment means ``[S, K]`` and weights ``[S]``; empty segments take ``fallback``
    (the full sample's means) or, without one, the mean of their ``fill`` segment."""
    w = weights if layout.rows_are_units else weights[units.row]
    both = jnp.concatenate([w[:, None] * d, w[:, None]], axis=1)  # one pass over the units
    summed = jax.ops.segment_sum(both, units.segment, layout.n_segments)
    total, count = summed[:, :-1], summed[:, -1]
    mean = total / jnp.maximum(count, 1)[:, None]
    if fallback is None:
        return mean[units.fill], count
    return jnp.where(count[:, None] > 0, mean, fallback[0]), count


def _pair_effects(mean, count, layout: Layout, fallback):
    r"""The pair's accumulated second differences with both first-order parts removed (Apley &
    Zhu 2020, eq. 15): ``h`` is the double cumulative sum of the cell means (0 on the lower
    edges), and along ``j`` the part removed is :math:`\sum_{k' \le k} \frac{1}{n_j(k')}
    \sum_m n(k', m) [h(z_{k'}, w_m) - h(z_{k'-1}, w_m)]`, along ``k`` likewise."""
    n_j, n_k = layout.shape[0] - 1, layout.shape[1] - 1
    cells = mean.reshape(n_j, n_k, -1)
    h = jnp.pad(jnp.cumsum(jnp.cumsum(cells, 0), 1), ((1, 0), (1, 0), (0, 0)))
    n = count.reshape(n_j, n_k)[..., None]
    step_j = jnp.sum(n * (h[1:, 1:] - h[:-1, 1:]), axis=1)  # [n_j, K]
    step_k = jnp.sum(n * (h[1:, 1:] - h[1:, :-1]), axis=0)  # [n_k, K]
    n_jk = jnp.sum(n, axis=1), jnp.sum(n, axis=0)
    step_j = step_j / jnp.maximum(n_jk[0], 1)
    step_k = step_k / jnp.maximum(n_jk[1], 1)
    if fallback is not None:
        step_j = jnp.where(n_jk[0] > 0, step_j, fallback[1])
        step_k = jnp.where(n_jk[1] > 0, step_k, fallback[2])
    main_j = jnp.pad(jnp.cumsum(step_j, 0), ((1, 0), (0, 0)))
    main_k = jnp.pad(jnp.cumsum(step_k, 0), ((1, 0), (0, 0)))
    return h - main_j[:, None] - main_k[None, :], (step_j, step_k)


def effects(d, weights, units: Units, layout: Layout, fallback=None):
    """The centred effects for one weighting of the rows (1 each, or a bootstrap replicate's
    counts), and what a replicate falls back on where its resample left a segment empty.

    Returns:
      ``(values [*shape, K], fallback)``.
    """
    mean, count = _segment_means(d, weights, units, layout, fallback)
    if layout.kind == "pair":
        g, steps = _pair_effects(mean, count, layout, fallback)
    else:
        g, steps = jnp.pad(jnp.cumsum(mean, 0), ((1, 0), (0, 0))), ()
    flat = g.reshape(-1, g.shape[-1])
    if layout.rows_are_units:  # each segment's rows sit at one value: weigh the values by the counts
        at_value = jnp.zeros(flat.shape[0], count.dtype).at[units.segment_value].add(count)
    else:
        at_value = jax.ops.segment_sum(weights, units.value_index, flat.shape[0])
    centre = jnp.sum(at_value[:, None] * flat, axis=0) / jnp.sum(at_value)
    return g - centre, (mean, *steps)


def _replicate_weights(key, n: int, dtype) -> jax.Array:
    """Each row's count in a resample of ``n`` rows drawn with replacement."""
    draws = jax.random.randint(key, (n,), 0, n)
    return jnp.zeros(n, dtype).at[draws].add(1)


@functools.partial(jax.jit, static_argnums=(2, 4))
def ale_program(model: Model, X: jax.Array, features: tuple[int, ...], units: Units, layout: Layout, key):
    """Values, bootstrap standard errors (``None`` without replicates) and per-unit finiteness.

    The standard error is the standard deviation (``ddof=1``) of the values over
    ``layout.n_bootstrap`` resamples of the rows of ``X`` with replacement, the bins held fixed.
    """
    d = unit_differences(model, X, features, units, layout.chunk)
    ones = jnp.ones(X.shape[0], X.dtype)
    values, fallback = effects(d, ones, units, layout)
    stderr = None
    if layout.n_bootstrap:
        keys = jax.random.split(key, layout.n_bootstrap)
        replicate = lambda k: effects(d, _replicate_weights(k, X.shape[0], X.dtype), units, layout, fallback)[0]
        stderr = jnp.std(jax.lax.map(replicate, keys), axis=0, ddof=1)
    return values, stderr, jnp.isfinite(d).all(-1)


def as_units(row, corners, segment, value_index, fill, tables, segment_value) -> Units:
    """:class:`Units` from host arrays (int32 indices, tables in the data's dtype)."""
    as32 = lambda a: jnp.asarray(np.asarray(a, np.int32))
    return Units(as32(row), as32(corners), as32(segment), as32(value_index), as32(fill),
                 tuple(jnp.asarray(t) for t in tables), as32(segment_value))
