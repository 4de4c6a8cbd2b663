r"""The model's finite differences at every row's bin (or cell), with the bins found in the program.

For a numeric feature :math:`j` each data row is one unit: with :math:`x^{(i)}_j` in bin
:math:`k = (z_{k-1}, z_k]` (bin 1 also holds :math:`z_0`), its difference is

.. math:: d_i = f(z_k, x^{(i)}_{\setminus j}) - f(z_{k-1}, x^{(i)}_{\setminus j}),

and for a pair :math:`(j, l)` in cell :math:`(k, m)` the second difference
:math:`f(z_k, w_m) - f(z_{k-1}, w_m) - f(z_k, w_{m-1}) + f(z_{k-1}, w_{m-1})` at the row's
other features (Apley & Zhu 2020, eqs. 13 and 15). The row's bin is found here, inside the
compiled program, by comparing its value with the edges, so the comparisons fuse into the
building of the model's input and nothing per row travels from the host: the rows are read in
chunks straight from the data (:mod:`jaxshap._core._device_rows`), the last chunk overlapping
its neighbour instead of padding the data.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from .._core._device_rows import DeviceRows, read_rows
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
