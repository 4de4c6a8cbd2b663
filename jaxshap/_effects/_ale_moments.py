r"""The groups' moments of the rows' differences: reduced chunk by chunk in the program, merged on the host.

What the estimate and its bootstrap read of the rows (:mod:`._ale_program`,
:mod:`._ale_bootstrap`) is, for each group of rows (a bin, a cell, a category) and each output,
the group's count :math:`n_g`, the sum of its rows' differences and their centred second moments
:math:`M_g = \sum_{i \in g} (d_i - m_g)(d_i - m_g)^\top`, taken over the ``P`` differences a row
has per output (``P = 2`` for a categorical feature's up- and down-steps, else 1). Each chunk of
rows reduces to these by products with its rows' indicator matrices (a group is a pair of
coordinates on a grid ``G0 x G1``: a bin and 0, a pair's two bins, a category and 0), its second
moments centred on the chunk's own group means, so that single precision loses nothing to
cancellation. The host merges the chunks in float64 (Chan, Golub & LeVeque 1979):

.. math::

    n = \sum_c n_c, \quad m = \frac{1}{n} \sum_c n_c m_c, \quad
    M = \sum_c M_c + \sum_c n_c (m_c - m)(m_c - m)^\top.

Nothing per row returns to the host.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Moments(NamedTuple):
    """Each group's moments (host, float64; groups row-major over the grid).

    Attributes:
      counts: ``[G]`` rows per group (integers).
      sums: ``[G, Q]`` the sums of the differences, column ``p * K + k`` the ``p``-th difference
        of output ``k``.
      second: ``[G, K, P, P]`` the centred second moments :math:`M_g` per output.
    """

    counts: np.ndarray
    sums: np.ndarray
    second: np.ndarray


def chunk_moments(d: jax.Array, first: jax.Array, second: jax.Array, valid: jax.Array, grid: tuple[int, int],
                  parts: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One chunk's ``(count [G0, G1], total [G0, G1, Q], second [G0, G1, K, P, P])``.

    Args:
      d: ``[c, Q]`` the rows' differences (``Q = P * K``).
      first: ``[c]`` each row's group coordinate on the grid's first axis.
      second: ``[c]`` on its second axis.
      valid: ``[c]`` whether the row counts (rows a neighbouring chunk holds too do not).
      grid: ``(G0, G1)`` (static).
      parts: ``P`` (static).
    """
    g0, g1 = grid
    a = ((first[:, None] == jnp.arange(g0)) & valid[:, None]).astype(d.dtype)  # [c, G0]
    b = (second[:, None] == jnp.arange(g1)).astype(d.dtype)  # [c, G1]
    exact = functools.partial(jnp.einsum, precision=jax.lax.Precision.HIGHEST)
    count = exact("ca,cb->ab", a, b)  # whole numbers, exact in float32 below 2^24 rows per chunk
    total = exact("ca,cb,cq->abq", a, b, d)
    mean = total / jnp.maximum(count, 1)[..., None]
    centred = (d - mean[first, second]).reshape(d.shape[0], parts, -1)  # [c, P, K]
    outer = centred[:, :, None, :] * centred[:, None, :, :]  # [c, P, P, K]
    return count, total, exact("ca,cb,cpqk->abkpq", a, b, outer)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def grouped_moments(D: jax.Array, group: jax.Array, n_groups: int, parts: int, chunk: int):
    """:func:`chunk_moments` over ``D [n, Q]`` in chunks of ``chunk`` rows, ``group [n]`` a
    coordinate on a grid ``n_groups x 1``; each chunk's results stacked on a leading axis."""
    n = D.shape[0]
    chunk = min(chunk, n)
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n
    valid = jnp.arange(n_chunks * chunk) < n
    D = jnp.concatenate([D, jnp.zeros((pad, D.shape[1]), D.dtype)]).reshape(n_chunks, chunk, -1)
    group = jnp.concatenate([group, jnp.zeros((pad,), group.dtype)]).reshape(n_chunks, chunk)
    zero = jnp.zeros((chunk,), group.dtype)
    one = lambda args: chunk_moments(args[0], args[1], zero, args[2], (n_groups, 1), parts)
    return jax.lax.map(one, (D, group, valid.reshape(n_chunks, chunk)))


def merge(count, total, second, parts: int) -> Moments:
    """The groups' :class:`Moments` from the chunks' (leading chunk axis), merged in float64."""
    count, total, second = (np.asarray(x, np.float64) for x in (count, total, second))
    n_chunks = count.shape[0]
    count = count.reshape(n_chunks, -1)
    total = total.reshape(*count.shape, -1)
    second = second.reshape(*count.shape, *second.shape[-3:])
    n = count.sum(0)
    sums = total.sum(0)
    mean = sums / np.maximum(n, 1)[:, None]
    shift = (total / np.maximum(count, 1)[..., None] - mean).reshape(n_chunks, n.size, parts, -1)  # [c, G, P, K]
    between = np.einsum("cg,cgpk,cgqk->gkpq", count, shift, shift)
    return Moments(np.rint(n).astype(np.int64), sums, second.sum(0) + between)
