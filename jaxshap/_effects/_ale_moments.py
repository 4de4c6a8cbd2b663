r"""The groups' moments of the rows' differences, all that ALE and its bootstrap read of the rows,
and the bootstrap standard errors computed from them.

The estimate reads each group of rows (a numeric feature's bin, a pair's cell, a categorical
feature's category) through its count :math:`n_g` and the sum of its rows' differences; the
bootstrap also through the group's *scatter*, the sum over its rows of the centred outer
products of their ``P`` differences per output,
:math:`\sum_{i \in g} (d_i - m_g)(d_i - m_g)^\top` (``P = 2`` for a categorical feature's up-
and down-steps, else 1), which is :math:`n_g \Sigma_g`.

Two routes give the same moments:

* :func:`host_moments`, on a CPU backend: the differences are already in host memory, and
  NumPy's ``bincount`` (float64 accumulation) is used there.
* :func:`row_moments` and :func:`device_moments`, on an accelerator: rather than copying ``n``
  rows' differences and groups back to the host, the rows are reduced where they are, in chunks
  of rows whose float32 counts, means, sums about those means and scatters come back (a few
  numbers per group and chunk); :func:`merge` adds the chunks up on the host in float64 (Chan,
  Golub & LeVeque's pairwise update, so a large common mean does not cancel). XLA's scatter adds
  a chunk's terms in an order that can vary between runs on a GPU, so the last bits can too.

The bootstrap (:func:`bootstrap_stderr`). A resample of the ``n`` rows with replacement
(Efron's bootstrap, the bins and the category order held fixed) has the law

1. the groups' counts :math:`c \sim \mathrm{Multinomial}(n, (n_1, \dots, n_G) / n)`, then
2. for each group, the sum :math:`S_g` of :math:`c_g` differences drawn uniformly with
   replacement among its rows, whose mean and covariance given :math:`c` are exactly
   :math:`c_g m_g` and :math:`c_g \Sigma_g` (:math:`m_g`, :math:`\Sigma_g`: the group's mean and
   population covariance).

Given the counts, a replicate's value is *affine* in the sums: the estimate divides each sum by
its count, accumulates, and centres with the counts as weights
(:func:`jaxshap._effects._ale_program.effects`). So the replicates' variance, which is what the
standard error estimates, depends on the sums only through their conditional mean and
covariance. Step 2 therefore draws :math:`S_g \sim \mathcal N(c_g m_g, c_g \Sigma_g)`: the
replicates keep the row bootstrap's mean and variance exactly, step 1 is drawn exactly, and a
replicate costs :math:`O(G)` instead of a pass over the ``n`` rows. Only the replicates' higher
moments differ, by :math:`O(c_g^{-1/2})`, which a standard deviation does not read. The normal
deviates are shared by a model's outputs, so each output's replicates are those it would have
alone. The bootstrap runs on the host in float64 (the sizes are a grid's), seeded by the key's
words.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core._device_rows import DeviceRows
from .._core._inputs import key_bits
from .._core._model import Model
from ._ale_program import Layout, Plan, effects, row_differences, sorted_columns_at


CHUNK_ROWS = 1 << 15
"""Rows per chunk of :func:`partials` at the least: a float32 partial sum adds at most
this many terms, so its rounding error stays near that of the differences themselves."""

PARTIAL_VALUES = 1 << 22
"""The partials that come back to the host are kept under about this many values (chunks x
groups x moments), by taking longer chunks for fine grids with many outputs."""


class GroupMoments(NamedTuple):
    """The moments of the rows' differences per group (host arrays).

    Attributes:
      counts: ``[G]`` rows per group (int64).
      sums: ``[G, Q]`` the groups' sums of differences (float64), column ``p * K + k`` the
        ``p``-th difference of output ``k``.
      scatter: ``[G, K, P, P]`` the groups' sums of centred outer products (float64), or
        ``None`` when not asked for.
    """

    counts: np.ndarray
    sums: np.ndarray
    scatter: np.ndarray | None

    def take(self, groups: np.ndarray) -> "GroupMoments":
        """The moments of the groups at the indices ``groups``, in that order."""
        scatter = None if self.scatter is None else self.scatter[groups]
        return GroupMoments(self.counts[groups], self.sums[groups], scatter)


def host_moments(group: Any, D: Any, n_groups: int, parts: int, second: bool) -> GroupMoments:
    """The moments from each row's group ``[n]`` and differences ``[n, P * K]``, with NumPy.

    Two passes (the means, then the centred products), every sum in float64.
    """
    group, D = np.asarray(group).astype(np.intp), np.asarray(D)
    by_group = lambda w: np.bincount(group, weights=w, minlength=n_groups)
    counts = np.bincount(group, minlength=n_groups)
    sums = np.stack([by_group(D[:, q]) for q in range(D.shape[1])], axis=1)
    if not second:
        return GroupMoments(counts, sums, None)
    k_out = D.shape[1] // parts
    mean = sums / np.maximum(counts, 1)[:, None]
    centred = (D.astype(np.float64) - mean[group]).reshape(-1, parts, k_out)
    scatter = np.empty((n_groups, k_out, parts, parts))
    for a in range(parts):
        for b in range(a, parts):
            product = centred[:, a] * centred[:, b]
            total = np.stack([by_group(product[:, k]) for k in range(k_out)], axis=1)
            scatter[:, :, a, b] = scatter[:, :, b, a] = total
    return GroupMoments(counts, sums, scatter)


def chunk_rows(n: int, n_groups: int, width: int) -> int:
    """Rows per chunk: :data:`CHUNK_ROWS`, or more where the partials would pass :data:`PARTIAL_VALUES`."""
    most_chunks = max(1, PARTIAL_VALUES // max(1, n_groups * width))
    return max(min(CHUNK_ROWS, n), -(-n // most_chunks))


def partials(group: jax.Array, D: jax.Array, n_groups: int, parts: int, second: bool):
    """Per chunk of rows and group, inside a program, in the differences' dtype: the count
    ``[C, G]``, a rounded mean ``[C, G, Q]``, the sum of the differences about it ``[C, G, Q]``
    (small, so its rounding is the spread's, not the mean's) and, with ``second``, the scatter
    about it ``[C, G, K, P, P]``; :func:`merge` adds them up."""
    n, q = D.shape
    width = 2 * q + (q * parts if second else 0)
    chunk = chunk_rows(n, n_groups, width)
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n
    group = jnp.pad(group.astype(jnp.int32), (0, pad), constant_values=n_groups)  # out of range: dropped
    D = jnp.pad(D, ((0, pad), (0, 0))).reshape(n_chunks, chunk, q)
    group = group.reshape(n_chunks, chunk)
    k_out = q // parts

    def one(g, d):
        count = jax.ops.segment_sum(jnp.ones(g.shape, jnp.int32), g, n_groups)
        mean = jax.ops.segment_sum(d, g, n_groups) / jnp.maximum(count, 1).astype(d.dtype)[:, None]
        centred = d - mean[jnp.minimum(g, n_groups - 1)]
        out = count, mean, jax.ops.segment_sum(centred, g, n_groups)
        if not second:
            return out
        c = centred.reshape(chunk, parts, k_out)
        product = jnp.einsum("ipk,iqk->ikpq", c, c).reshape(chunk, -1)
        return *out, jax.ops.segment_sum(product, g, n_groups).reshape(n_groups, k_out, parts, parts)

    return jax.vmap(one)(group, D)


def merge(parts_out: tuple, parts: int) -> GroupMoments:
    r"""The groups' moments from the chunks' :func:`partials` (host arrays), in float64.

    For chunk :math:`c` and group :math:`g` the partials are the count :math:`n_{gc}`, a rounded
    mean :math:`\tilde m_{gc}`, the sum :math:`r_{gc}` of the differences about it and, with a
    fourth array, their scatter :math:`\tilde S_{gc}` about it. The chunk's sum is
    :math:`n_{gc} \tilde m_{gc} + r_{gc}`, its mean :math:`m_{gc}` that over :math:`n_{gc}`, its
    scatter about its mean :math:`\tilde S_{gc} - r_{gc} r_{gc}^\top / n_{gc}`, and the
    group's scatter adds the chunks' and :math:`\sum_c n_{gc} (m_{gc} - m_g)(m_{gc} - m_g)^\top`
    (Chan, Golub & LeVeque's pairwise update). Only sums about a chunk's own mean were rounded to
    float32, over at most :func:`chunk_rows` terms, so a large common mean costs no precision.
    """
    count_c = np.asarray(parts_out[0], np.int64)
    rest_c = np.asarray(parts_out[2], np.float64)
    sums_c = count_c[..., None] * np.asarray(parts_out[1], np.float64) + rest_c
    counts, sums = count_c.sum(0), sums_c.sum(0)
    if len(parts_out) == 3:
        return GroupMoments(counts, sums, None)
    weight = count_c.astype(np.float64)
    rest = rest_c.reshape(*count_c.shape, parts, -1)
    own = np.asarray(parts_out[3], np.float64) - np.einsum("cgpk,cgqk->cgkpq", rest, rest) / np.maximum(weight, 1)[
        ..., None, None, None]
    delta = (sums_c / np.maximum(weight, 1)[..., None] - sums / np.maximum(counts, 1)[:, None]).reshape(rest.shape)
    between = np.einsum("cg,cgpk,cgqk->gkpq", weight, delta, delta)
    return GroupMoments(counts, sums, own.sum(0) + between)


_partials = jax.jit(partials, static_argnums=(2, 3, 4))
"""The compiled :func:`partials`, for differences already made (a categorical feature's)."""


def device_moments(group: jax.Array, D: jax.Array, n_groups: int, parts: int, second: bool) -> GroupMoments:
    """The moments from each row's group ``[n]`` and differences ``[n, P * K]`` where they are
    (the device): :func:`partials` there, :func:`merge` on the host."""
    return merge(jax.device_get(_partials(group, D, n_groups, parts, second)), parts)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def row_moments(model: Model, rows: DeviceRows, features: tuple[int, ...], ranks: tuple[int, ...], chunk: int,
                second: bool):
    """The accelerator's whole pass over the rows, one program and one copy back: the features'
    order statistics at the quantile ``ranks`` (:func:`._ale_program.sorted_columns_at`, repeats
    kept), every row's difference at its bin of those edges (:func:`._ale_program.row_differences`)
    and their chunks' :func:`partials`, so that nothing per row leaves the device.

    The groups are the bins (or cells) between consecutive order statistics, ``R - 1`` per
    feature for ``R`` ranks; those between equal order statistics hold no rows, and the caller
    drops them once it has the edges. Returns ``(edges [F, R], partials, rows_finite,
    all_finite)``, the flags as :func:`._ale_program.row_differences`' (the second reduced over the
    rows); a NaN in a feature sorts last, so its edges show it too.
    """
    edges = sorted_columns_at(rows, features, ranks)
    n_groups = (len(ranks) - 1) ** len(features)
    d, group, rows_finite, finite = row_differences(model, rows, features, tuple(edges), chunk)
    return edges, partials(group, d, n_groups, 1, second), rows_finite, jnp.all(finite)


def generator(key: jax.Array) -> np.random.Generator:
    """NumPy's generator seeded by the words of a JAX key (typed or legacy ``uint32[2]``), or by
    those words already on the host (:func:`jaxshap._core._inputs.host_key_bits`)."""
    return np.random.default_rng(np.asarray(key_bits(key), np.uint32).ravel())


def within_roots(moments: GroupMoments) -> np.ndarray:
    r"""``[G, K, P, P]``: for each group and output, a square root :math:`L` of the population
    covariance :math:`\Sigma_g` (:math:`L L^\top = \Sigma_g`) of its rows' ``P`` differences,
    the group's scatter over its count (:mod:`._ale_moments`)."""
    cov = moments.scatter / np.maximum(moments.counts, 1)[:, None, None, None]
    w, v = np.linalg.eigh(cov)  # a group of one row, or of equal rows, has a singular covariance
    return v * np.sqrt(np.maximum(w, 0.0))[..., None, :]


BLOCK_VALUES = 1 << 22
"""Replicates are drawn and evaluated in blocks of about this many group sums (float64: 32 MiB
per array), so that a fine pair grid with many outputs and resamples stays in bounded memory."""


def replicate_blocks(moments: GroupMoments, fallback: tuple, plan: Plan, layout: Layout,
                     key: jax.Array) -> Iterator[np.ndarray]:
    """The centred effects of ``B = layout.n_bootstrap`` bootstrap replicates, in blocks
    ``[b, *shape, K]`` (the same values for every block size: the draws come in one stream).

    Args:
      moments: the groups' counts, sums and scatters (:mod:`._ale_moments`).
      fallback: what :func:`effects` returned beside the full sample's values: what a replicate
        that leaves a segment empty falls back on.
      plan: where groups and segments sit.
      layout: static; its ``n_bootstrap`` is the number of replicates.
      key: the replicates' key.
    """
    counts, sums = moments.counts, moments.sums
    parts = moments.scatter.shape[-1]
    n_groups, width = sums.shape
    mean = sums / np.maximum(counts, 1)[:, None]
    roots = within_roots(moments)
    rng = generator(key)
    n, b = int(counts.sum()), layout.n_bootstrap
    drawn = rng.multinomial(n, counts / n, size=b).astype(np.float64)  # step 1, exact
    block = max(1, BLOCK_VALUES // (n_groups * width))
    for start in range(0, b, block):
        c = drawn[start : start + block]
        z = rng.standard_normal((c.shape[0], n_groups, parts))  # shared by the outputs: no dependence on K
        spread = np.einsum("gkpq,bgq->bgpk", roots, z).reshape(c.shape[0], n_groups, width)  # column p * K + k
        totals = c[..., None] * mean + np.sqrt(c)[..., None] * spread  # step 2, by its first two moments
        yield effects(c, totals, plan, layout, fallback)[0]


def replicates(*args) -> np.ndarray:
    """``[B, *shape, K]``: every replicate of :func:`replicate_blocks` (same arguments)."""
    return np.concatenate(list(replicate_blocks(*args)))


def bootstrap_stderr(*args) -> np.ndarray:
    """The bootstrap standard errors ``[*shape, K]``: the standard deviation (``ddof=1``) over the
    replicates of :func:`replicate_blocks` (same arguments), merged block by block (Chan, Golub
    & LeVeque's pairwise update), so the replicates are never all held."""
    n, mean, m2 = 0, 0.0, 0.0
    for values in replicate_blocks(*args):
        b, block_mean = values.shape[0], values.mean(axis=0)
        block_m2 = np.sum((values - block_mean) ** 2, axis=0)
        delta = block_mean - mean
        m2 = m2 + block_m2 + delta**2 * n * b / (n + b)
        mean, n = mean + delta * b / (n + b), n + b
    return np.sqrt(m2 / (n - 1))
