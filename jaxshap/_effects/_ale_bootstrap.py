r"""The bootstrap standard errors of accumulated local effects, from the groups' moments.

The estimate reads the rows only through *groups* of rows (a numeric feature's bins, a pair's
cells, a categorical feature's categories): each group's count :math:`n_g` and the sum of its
rows' differences. A resample of the ``n`` rows with replacement (Efron's bootstrap, the bins
and the category order held fixed) has the law

1. the groups' counts :math:`c \sim \mathrm{Multinomial}(n, (n_1, \dots, n_G) / n)`, then
2. for each group, the sum :math:`S_g` of :math:`c_g` differences drawn uniformly with
   replacement among its rows, whose mean and covariance given :math:`c` are exactly
   :math:`c_g m_g` and :math:`c_g \Sigma_g` (:math:`m_g`, :math:`\Sigma_g`: the group's mean and
   population covariance).

Given the counts, a replicate's value is *affine* in the sums: the estimate divides each sum by
its count, accumulates, and centres with the counts as weights (:func:`._ale_program.effects`).
So the replicates' variance, which is what the standard error estimates, depends on the sums
only through their conditional mean and covariance. Step 2 therefore draws
:math:`S_g \sim \mathcal N(c_g m_g, c_g \Sigma_g)`: the replicates keep the row bootstrap's mean
and variance exactly, step 1 is drawn exactly, and a replicate costs :math:`O(G)` instead of a
pass over the ``n`` rows. Only the replicates' higher moments differ, by
:math:`O(c_g^{-1/2})`, which a standard deviation does not read. The normal deviates are shared
by a model's outputs, so each output's replicates are those it would have alone.

Everything here runs on the host in float64 (the sizes are a grid's), seeded by the key's words.
"""

from __future__ import annotations

from typing import Iterator

import jax
import numpy as np

from .._core._inputs import key_bits
from ._ale_moments import GroupMoments
from ._ale_program import Layout, Plan, effects


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
