"""The compiled draw of a KernelSHAP plan's coalitions: keyed, shape-static, batched over strata.

:func:`sample_coalitions` fills a :class:`~jaxshap._coalitions._kernel_design.KernelPlan` with
coalitions from a PRNG key inside a JAX program; :mod:`._host_sampling` draws from the same
distribution with NumPy on the host.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._kernel_design import KernelPlan, Pooled, Stratum, draw_layout
from ._subsets import ranked, smallest, unrank


def _distinct_ranks(key: jax.Array, populations: np.ndarray, counts: np.ndarray) -> jax.Array:
    """Distinct uniform integers for several strata at once, each in random order.

    Row ``i`` of the ``[S, n]`` result (``n = max(counts)``) holds ``counts[i]`` distinct integers
    drawn uniformly from ``[0, populations[i])``, followed by ``-1`` padding.

    Floyd's algorithm (Bentley & Floyd, 1987, "A sample of brilliance"), run for all strata in one
    loop: step ``j`` of stratum ``i`` draws ``t`` from ``[0, top]`` with ``top = populations[i] -
    counts[i] + j`` and keeps it, or keeps ``top`` when ``t`` was already chosen; after
    ``counts[i]`` steps the chosen set is a uniform ``counts[i]``-subset (later steps of that
    stratum are masked out). A final shuffle (a sort by random keys, padding last) makes every
    prefix a uniform subset too. ``n`` sequential steps of ``O(S n)`` work, one compiled loop.
    """
    n = int(counts.max())
    steps = np.arange(n)
    valid_np = steps[None, :] < counts[:, None]
    # Upper bounds are inclusive; padded steps draw from [0, 0] and are discarded.
    tops_np = np.where(valid_np, populations[:, None] - counts[:, None] + steps[None, :], 0)
    tops = jnp.asarray(tops_np, jnp.int32)
    valid = jnp.asarray(valid_np)
    # One random call for everything (each call compiles its own hash): the Floyd draws, and
    # 31-bit sort keys for the shuffle.
    highs = np.stack([tops_np + 1, np.full(tops_np.shape, np.iinfo(np.int32).max)])
    draws, sort_keys = jax.random.randint(key, highs.shape, 0, jnp.asarray(highs, jnp.int32), dtype=jnp.int32)

    def step(j, chosen):
        t = draws[:, j]
        seen = jnp.any(chosen == t[:, None], axis=1)
        t = jnp.where(seen, tops[:, j], t)
        return chosen.at[:, j].set(jnp.where(valid[:, j], t, -1))

    chosen = jax.lax.fori_loop(0, n, step, jnp.full(tops.shape, -1, jnp.int32))
    # Shuffle each row by sorting on (padding flag, random key): valid entries first, in uniform order.
    pad = jnp.asarray((~valid_np).astype(np.int32))
    _, _, shuffled = jax.lax.sort((pad, sort_keys, chosen), dimension=1, num_keys=2)
    return shuffled


def _draw_sets(key: jax.Array, m: int, strata: tuple[Stratum, ...]) -> jax.Array:
    """The draws of all strata, ``[S, n_max, M]`` (row ``i`` padded after ``strata[i].n_draws``).

    Every stratum is sampled over ``M`` positions: a middle stratum's ``(M/2 - 1)``-subsets of
    features ``1..M-1`` are drawn as subsets of ``range(M - 1)`` and shifted right by one, with
    feature 0 added.
    """
    n = max(st.n_draws for st in strata)
    ks = np.array([st.k for st in strata])
    by_rank = np.array([ranked(st.population) for st in strata])
    k_rank, k_unif = jax.random.split(key)
    parts = []
    if by_rank.any():
        pops = np.array([st.population for st, r in zip(strata, by_rank) if r])
        counts = np.array([st.n_draws for st, r in zip(strata, by_rank) if r])
        parts.append(unrank(_distinct_ranks(k_rank, pops, counts), m, ks[by_rank], xp=jnp))
        if parts[0].shape[1] < n:
            parts[0] = jnp.pad(parts[0], ((0, 0), (0, n - parts[0].shape[1]), (0, 0)))
    if not by_rank.all():  # astronomically many sets: draws are distinct with overwhelming probability
        middle = np.array([st.middle for st, r in zip(strata, by_rank) if not r])
        scores = jax.random.uniform(k_unif, (len(middle), n, m))
        # A middle stratum draws from the first M - 1 positions only (the last one never ranks
        # among the k smallest scores); the shift below moves them to features 1..M-1.
        scores = jnp.where(jnp.asarray(middle)[:, None, None] & (jnp.arange(m) == m - 1), 2.0, scores)
        parts.append(smallest(scores, ks[~by_rank][:, None], xp=jnp))
    # Reassemble in plan order.
    order = np.argsort(np.concatenate([np.flatnonzero(by_rank), np.flatnonzero(~by_rank)]), kind="stable")
    sets = jnp.concatenate(parts, axis=0)[order] if len(parts) > 1 else parts[0]
    middle = np.array([st.middle for st in strata])
    if middle.any():
        shifted = jnp.concatenate([jnp.ones(sets.shape[:2] + (1,), bool), sets[..., :-1]], axis=-1)
        sets = jnp.where(jnp.asarray(middle)[:, None, None], shifted, sets)
    return sets


def sample_coalitions(key: jax.Array, plan: KernelPlan, dtype=None) -> tuple[jax.Array, jax.Array]:
    """Draw the coalitions of ``plan``: boolean masks ``[C, M]`` and regression weights ``[C]``.

    The enumerated coalitions come first with their kernel weights ``k(M, |S|)``; the sampled
    ones follow stratum by stratum (the draws, then the complements of the first ``n_pairs``
    draws) with Horvitz-Thompson weights ``k(M, |S|) / pi(S)``, so that ``sum_c w_c g(S_c)`` is
    an unbiased estimate of ``sum_S k(M, |S|) g(S)`` over all ``2**M - 2`` coalitions for any
    ``g``. All strata are drawn together in one batched computation (one Floyd loop, one
    unranking scan), which keeps compilation fast.

    Args:
      key: PRNG key.
      plan: a :class:`~jaxshap.coalitions.KernelPlan` from :func:`~jaxshap.coalitions.kernel_plan`.
      dtype: floating dtype of the weights; by default float64 under ``jax_enable_x64``, else float32.
    """
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype
    enum = jnp.asarray(plan.enum_masks)
    if plan.pooled is not None:
        masks, weights = _draw_pooled(key, plan.n_features, plan.pooled, dtype)
        return jnp.concatenate([enum, masks], axis=0), jnp.concatenate([jnp.asarray(plan.enum_weights, dtype), weights])
    if not plan.strata:
        return enum, jnp.asarray(plan.enum_weights, dtype=dtype)
    sets = _draw_sets(key, plan.n_features, plan.strata)
    index, flip, weight = draw_layout(plan)
    sampled = sets.reshape(-1, plan.n_features)[index] ^ jnp.asarray(flip)[:, None]
    masks = jnp.concatenate([enum, sampled], axis=0)
    return masks, jnp.asarray(np.concatenate([plan.enum_weights, weight]), dtype=dtype)


def _draw_pooled(key: jax.Array, m: int, pooled: Pooled, dtype) -> tuple[jax.Array, jax.Array]:
    """The pooled layers' coalitions: ``n_pairs`` draws, their complements, then the odd single."""
    n = pooled.n_pairs + pooled.extra
    k_layer, k_set, k_side = jax.random.split(key, 3)
    logits = jnp.log(jnp.asarray(pooled.probs, jnp.float32))
    layer = jax.random.categorical(k_layer, logits, shape=(n,))
    size = jnp.asarray(pooled.sizes, jnp.int32)[layer]
    # The single takes the larger side half of the time (uniform over the layer's coalitions).
    flip_single = jax.random.bernoulli(k_side, 0.5, (n,)) & (jnp.arange(n) >= pooled.n_pairs)
    size = jnp.where(flip_single, m - size, size)
    sets = smallest(jax.random.uniform(k_set, (n, m)), size, xp=jnp)
    pair_w = jnp.asarray(pooled.pair_weights(m), dtype)[layer]
    single_w = jnp.asarray(pooled.single_weights(m), dtype)[layer]
    p = pooled.n_pairs
    masks = jnp.concatenate([sets[:p], ~sets[:p], sets[p:]], axis=0)
    weights = jnp.concatenate([pair_w[:p], pair_w[:p], single_w[p:]])
    return masks, weights
