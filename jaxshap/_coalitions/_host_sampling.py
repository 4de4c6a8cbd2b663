"""The KernelSHAP coalitions of a plan drawn on the host, with NumPy, from a JAX key.

:func:`~jaxshap._coalitions._kernel_sampling.sample_coalitions` draws a plan's coalitions inside
the compiled program, at the price of compiling the sampler (the threefry hash, Floyd's loop,
the unranking scan, the sort) in every fresh process. :func:`host_coalitions` draws from the same
distribution with NumPy, seeded from the key's bits, so the same key gives the same coalitions in
eager code, under ``jax.jit`` and in every process. The random stream differs from the compiled
sampler's; the distribution (strata, draws without replacement, pairing, weights) is the same,
and subsets are made from ranks and scores by the same code (:mod:`._subsets`).
"""

from __future__ import annotations

import numpy as np

from ._kernel_design import KernelPlan, Stratum, draw_layout
from ._subsets import ranked, smallest, unrank

_STREAM = 0x6B65726E  # separates this stream from any other use of the same key's bits


def host_generator(key_bits: np.ndarray) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key's raw bits (``jax.random.key_data``)."""
    words = [int(w) for w in np.asarray(key_bits, dtype=np.uint32).ravel()]
    return np.random.default_rng(np.random.SeedSequence(words + [_STREAM]))


def _draw_stratum(rng: np.random.Generator, m: int, st: Stratum) -> np.ndarray:
    """``st.n_draws`` distinct uniform sets of one stratum, in random order, over ``M`` features."""
    if ranked(st.population):
        ranks = rng.choice(st.population, size=st.n_draws, replace=False, shuffle=True)
        sets = unrank(ranks, st.n_items, st.k)
    else:  # astronomically many sets: distinct with overwhelming probability
        sets = smallest(rng.random((st.n_draws, st.n_items)), st.k)
    if st.middle:  # subsets of features 1..M-1 completed with feature 0
        sets = np.concatenate([np.ones((st.n_draws, 1), bool), sets], axis=1)
    return sets


def _draw_pooled(rng: np.random.Generator, m: int, plan: KernelPlan) -> tuple[np.ndarray, np.ndarray]:
    """The pooled layers of a small budget: ``n_pairs`` draws, their complements, the odd single."""
    pooled = plan.pooled
    p, n = pooled.n_pairs, pooled.n_pairs + pooled.extra
    layer = rng.choice(len(pooled.sizes), size=n, p=np.asarray(pooled.probs) / np.sum(pooled.probs))
    size = np.asarray(pooled.sizes)[layer]
    # the single takes the larger side half of the time (uniform over its layer's coalitions)
    flip = (rng.random(n) < 0.5) & (np.arange(n) >= p)
    size = np.where(flip, m - size, size)
    sets = smallest(rng.random((n, m)), size)
    pair_w, single_w = pooled.pair_weights(m)[layer], pooled.single_weights(m)[layer]
    masks = np.concatenate([sets[:p], ~sets[:p], sets[p:]], axis=0)
    return masks, np.concatenate([pair_w[:p], pair_w[:p], single_w[p:]])


def host_coalitions(key_bits: np.ndarray, plan: KernelPlan) -> tuple[np.ndarray, np.ndarray]:
    """Draw the coalitions of ``plan`` with NumPy: masks ``[C, M]`` (bool) and weights ``[C]`` (float64).

    The layout and the weights are those of
    :func:`~jaxshap._coalitions._kernel_sampling.sample_coalitions`: the enumerated coalitions
    first with their kernel weights, then stratum by stratum the draws and the complements of
    the first ``n_pairs`` of them with Horvitz-Thompson weights ``k(M, |S|) / pi(S)`` (or, for
    budgets below one pair per layer, the pooled draws with Hansen-Hurwitz weights).

    Args:
      key_bits: the raw bits of a JAX key (``jax.random.key_data(key)``), ``uint32``.
      plan: a :class:`~jaxshap.coalitions.KernelPlan`.
    """
    m = plan.n_features
    rng = host_generator(key_bits)
    enum_masks, enum_weights = np.asarray(plan.enum_masks, bool), np.asarray(plan.enum_weights, np.float64)
    if plan.pooled is not None:
        masks, weights = _draw_pooled(rng, m, plan)
        return np.concatenate([enum_masks, masks]), np.concatenate([enum_weights, weights])
    if not plan.strata:
        return enum_masks, enum_weights
    n = max(st.n_draws for st in plan.strata)
    sets = np.zeros((len(plan.strata), n, m), bool)
    for i, st in enumerate(plan.strata):
        sets[i, : st.n_draws] = _draw_stratum(rng, m, st)
    index, flip, weight = draw_layout(plan)
    sampled = sets.reshape(-1, m)[index] ^ flip[:, None]
    return np.concatenate([enum_masks, sampled]), np.concatenate([enum_weights, weight])
