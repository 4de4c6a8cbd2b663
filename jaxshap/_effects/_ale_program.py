r"""The compiled parts of accumulated local effects: categorical units, the effects, the bootstrap.

Every estimate is built from the rows' finite differences, gathered by *group* of rows: a
numeric feature's bins and a pair's cells (one difference per row, :mod:`._ale_rows`), a
categorical feature's categories (two: the step to the next category in the order and the step
from the previous one, :func:`categorical_differences`). The groups' counts and sums of
differences give the *segments*' (bins, cells, steps between neighbouring categories) counts and
sums, the local effects are the segments' means, and the accumulated effects follow. The
bootstrap (:mod:`._ale_bootstrap`) resamples the rows through the groups, so no model is
evaluated again.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks
from .._core._device_rows import DeviceRows, take_rows
from .._core._model import Model
from ._ale_bootstrap import Slots, group_draw_sums
from ._ale_rows import SIGNS


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
    r"""Each row's step up to the next category and down from the previous one.

    Args:
      model: the wrapped model.
      X: the data ``[n, M]``.
      j: the categorical feature (static).
      units: ``up`` and ``down`` (the rows that have a next / a previous category in the order),
        ``position`` (each row's place in the order) and ``order`` (the codes in that order).
      chunk: steps per model call (static).

    Returns:
      ``(D [n, 2K], finite [U])``: ``D`` holds the up-step
      :math:`f(c_{p+1}, x_{\setminus j}) - f(c_p, x_{\setminus j})` in its first ``K`` columns
      and the down-step :math:`f(c_p, \cdot) - f(c_{p-1}, \cdot)` in the others (0 where the row
      has none); ``finite`` says per step (up-steps first) whether the model was finite.
    """
    n_up = units["up"].shape[0]
    rows = jnp.concatenate([units["up"], units["down"]])
    lower = jnp.concatenate([units["position"][units["up"]], units["position"][units["down"]] - 1])
    corners = jnp.stack([lower + 1, lower], axis=1)
    signs = jnp.asarray(SIGNS[2], X.dtype)
    columns = jnp.arange(X.shape[1])

    def batch(args):
        r, c = args
        x = jnp.broadcast_to(take_rows(X, r)[:, None, :], (r.shape[0], 2, X.shape[1]))
        x = jnp.where(columns == j, units["order"][c][..., None].astype(X.dtype), x)
        y = model.fn(x.reshape(-1, X.shape[1])).reshape(r.shape[0], 2, -1)
        return jnp.einsum("c,ucK->uK", signs, y)

    d = map_chunks(batch, (rows, corners), chunk)
    k = d.shape[-1]
    D = jnp.zeros((X.shape[0], 2 * k), d.dtype).at[units["up"], :k].set(d[:n_up]).at[units["down"], k:].set(d[n_up:])
    return D, jnp.all(jnp.isfinite(d), axis=-1)


def segments(count, total, layout: Layout):
    r"""The segments' counts and sums from the groups'. A bin or cell is its own group; the step
    :math:`c_s \to c_{s+1}` between categories averages both categories' rows (as ALEPlot does):
    its count is :math:`n_s + n_{s+1}`, its sum the up-steps of :math:`c_s` and the down-steps of
    :math:`c_{s+1}`."""
    if layout.kind != "categorical":
        return count, total
    k = total.shape[-1] // 2
    return count[:-1] + count[1:], total[:-1, :k] + total[1:, k:]


def _cumsum(x, axis: int, xp):
    """Cumulative sums along ``axis``; in a program as a product with a triangle of ones, which
    compiles several times faster than XLA's cumulative sum on a CPU (sizes are a grid's: small)."""
    if xp is np:
        return np.cumsum(x, axis)
    ones = jnp.tril(jnp.ones((x.shape[axis], x.shape[axis]), x.dtype))
    summed = jnp.tensordot(ones, jnp.moveaxis(x, axis, 0), axes=1, precision=jax.lax.Precision.HIGHEST)
    return jnp.moveaxis(summed, 0, axis)


def _pair_effects(mean, count, layout: Layout, fallback, xp):
    r"""The pair's accumulated second differences with both first-order parts removed (Apley &
    Zhu 2020, eq. 15): ``h`` is the double cumulative sum of the cell means (0 on the lower
    edges), and along ``j`` the part removed is :math:`\sum_{k' \le k} \frac{1}{n_j(k')}
    \sum_m n(k', m) [h(z_{k'}, w_m) - h(z_{k'-1}, w_m)]`, along ``k`` likewise."""
    n_j, n_k = layout.shape[0] - 1, layout.shape[1] - 1
    cells = mean.reshape(n_j, n_k, -1)
    h = xp.pad(_cumsum(_cumsum(cells, 0, xp), 1, xp), ((1, 0), (1, 0), (0, 0)))
    n = count.reshape(n_j, n_k)[..., None]
    step_j = xp.sum(n * (h[1:, 1:] - h[:-1, 1:]), axis=1)  # [n_j, K]
    step_k = xp.sum(n * (h[1:, 1:] - h[1:, :-1]), axis=0)  # [n_k, K]
    n_jk = xp.sum(n, axis=1), xp.sum(n, axis=0)
    step_j = step_j / xp.maximum(n_jk[0], 1)
    step_k = step_k / xp.maximum(n_jk[1], 1)
    if fallback is not None:
        step_j = xp.where(n_jk[0] > 0, step_j, fallback[1])
        step_k = xp.where(n_jk[1] > 0, step_k, fallback[2])
    main_j = xp.pad(_cumsum(step_j, 0, xp), ((1, 0), (0, 0)))
    main_k = xp.pad(_cumsum(step_k, 0, xp), ((1, 0), (0, 0)))
    return h - main_j[:, None] - main_k[None, :], (step_j, step_k)


def effects(group_count, group_total, plan: Plan, layout: Layout, fallback=None, xp=jnp):
    """The centred effects from the groups' counts ``[G]`` and sums ``[G, Q]`` (the full sample's,
    or a resample's), and what a resample falls back on where it left a segment empty.

    The same code runs on the host (``xp=numpy``: the full sample, in float64, with nothing to
    compile) and in the bootstrap's program (``xp=jax.numpy``: each resample).

    Returns:
      ``(values [*shape, K], fallback)``.
    """
    count, total = segments(group_count, group_total, layout)
    mean = total / xp.maximum(count, 1)[:, None]
    if fallback is None:
        mean = mean[plan.fill]
    else:
        mean = xp.where(count[:, None] > 0, mean, fallback[0])
    if layout.kind == "pair":
        g, steps = _pair_effects(mean, count, layout, fallback, xp)
    else:
        g, steps = xp.pad(_cumsum(mean, 0, xp), ((1, 0), (0, 0))), ()
    at_rows = g.reshape(-1, g.shape[-1])[plan.value_of_group]  # the value each group's rows sit at
    centre = xp.sum(group_count[:, None] * at_rows, axis=0) / xp.sum(group_count)
    return g - centre, (mean, *steps)


def _replicates(D, group, order, resampled, seeds, slot: Slots, held, plan: Plan, layout: Layout):
    """``[B, *shape, K]``: the values of ``B`` resamples of the rows with replacement, the bins held fixed.

    Args:
      D: ``[n, Q]`` each row's differences.
      group: ``[n]`` each row's group.
      order: ``[n]`` the rows sorted by group.
      resampled: ``[B, G]`` the groups' counts in each resample.
      seeds: ``[B, 2]`` each resample's Threefry key.
      slot: where each group's draws go (:func:`._ale_bootstrap.slots`).
      held: the full sample's group means ``[G, Q]``, then what :func:`effects` returned beside
        its values (what an empty segment falls back on).
      plan: where groups and segments sit.
      layout: static.
    """
    mean, fallback = held[0], held[1:]
    dtype = D.dtype
    centred = D[order] - mean[group[order]]  # a group's draws sum to its count times its mean, plus these

    def replicate(args):
        c, seed = args
        draws = group_draw_sums(seed, c, slot, centred)
        return effects(c.astype(dtype), c.astype(dtype)[:, None] * mean + draws, plan, layout, fallback)[0]

    return jax.lax.map(replicate, (resampled, seeds))


bootstrap_replicates = jax.jit(_replicates, static_argnums=(8,))


@functools.partial(jax.jit, static_argnums=(8,))
def bootstrap_stderr(D, group, order, resampled, seeds, slot: Slots, held, plan: Plan, layout: Layout):
    """The bootstrap standard errors: the standard deviation (``ddof=1``) of :func:`_replicates`."""
    return jnp.std(_replicates(D, group, order, resampled, seeds, slot, held, plan, layout), axis=0, ddof=1)
