"""Coalition sampling for KernelSHAP: stratified, paired, without replacement, shape-static.

A *plan* (built once in Python from the static sizes) splits the coalition sizes
``s = 1, ..., M - 1`` into *layers* ``{s, M - s}`` (a size and its complement's size; the
middle size ``M / 2`` is a layer on its own). Layers are visited from the outside in
(``s = 1, 2, ...``, where the Shapley kernel puts most of its mass); a layer is enumerated,
with its exact kernel weights, while its share of the remaining budget (in proportion to the
sampler's mass, as in shap's KernelExplainer) covers all its coalitions. Every other
layer is a *stratum*: it receives a fixed number of complementary pairs ``(S, N \\ S)`` (at least
one), drawn uniformly without replacement, and each sampled coalition gets the Horvitz-Thompson
weight ``k(M, s) / pi(S)`` with ``pi(S)`` its inclusion probability. The kernel-weighted sums
``sum_S k(S) z_S z_S^T`` and ``sum_S k(S) z_S v(S)`` over all coalitions are then estimated
without bias, and the regression built from them is consistent.

The two samplers differ only in how the sampled pairs are shared among strata:

* ``"paired"``: in proportion to the layer's kernel mass ``sum_{|S| = s} k(M, s) = (M - 1) / (s (M - s))``
  (KernelSHAP with paired sampling; Covert & Lee, 2021, "Improving KernelSHAP: practical Shapley
  value estimation via linear regression").
* ``"leverage"``: in proportion to the layer's leverage mass. For the efficiency-constrained
  Shapley regression all coalitions of one size have the same leverage score, ``1 / C(M, s)``
  up to a constant, so every size carries the same mass and sizes are sampled uniformly
  (Musco & Witter, 2025, "Provably accurate Shapley value estimation via leverage score sampling").

Everything is keyed and shape-static: the number of coalitions per stratum is fixed by the plan.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

SAMPLERS = ("paired", "leverage")

# Layers with more coalitions than this are sampled uniformly *with* replacement (ranks would not
# fit in int32); the chance that two of n draws coincide is below n**2 / 2**31 there.
MAX_RANKED = 2**30


def kernel_weight(n_features: int, size: int) -> float:
    """The Shapley kernel ``k(M, s) = (M - 1) / (C(M, s) s (M - s))`` (Lundberg & Lee, 2017)."""
    m = n_features
    return (m - 1) / (math.comb(m, size) * size * (m - size))


def max_coalitions(n_features: int) -> int:
    """Number of coalitions other than the empty and the full one: ``2**M - 2``."""
    return 2**n_features - 2


def min_coalitions(n_features: int) -> int:
    """Smallest budget of a plan: the size-1 layer enumerated and one pair in every other layer.

    That is ``2 M + 2 (floor(M / 2) - 1)`` coalitions, or every coalition for small ``M``.
    """
    m = n_features
    return min(max_coalitions(m), 2 * m + 2 * (m // 2 - 1))


@dataclasses.dataclass(frozen=True)
class Stratum:
    """A sampled layer: ``n_pairs`` complementary pairs plus ``extra`` (0 or 1) single coalitions.

    Sampled sets are ``k``-subsets of ``n_items`` items; for the middle layer of an even ``M``
    they are subsets of features ``1..M-1`` of size ``M/2 - 1`` completed with feature 0 (one
    representative per complementary pair), otherwise ``s``-subsets of all features.
    """

    size: int
    middle: bool
    n_pairs: int
    extra: int
    n_items: int
    k: int

    @property
    def population(self) -> int:
        return math.comb(self.n_items, self.k)

    @property
    def n_draws(self) -> int:
        return self.n_pairs + self.extra


@dataclasses.dataclass(frozen=True, eq=False)
class KernelPlan:
    """Static layout of one call's coalitions (NumPy arrays; built by :func:`kernel_plan`).

    Attributes:
      n_features: ``M``.
      n_coalitions: coalitions sampled or enumerated (``C``; the empty and full ones excluded).
      sampler: ``"paired"`` or ``"leverage"``.
      enum_masks: ``[E, M]`` boolean, the enumerated coalitions (they come first).
      enum_weights: ``[E]`` their kernel weights.
      strata: the sampled layers, in layout order after the enumerated coalitions.
      unit: ``[C]`` the sampling unit (a pair, or a single) of each coalition, for the variance.
      unit_group: ``[U]`` the variance group of each unit (group 0 holds the enumerated ones).
      group_factor: ``[G]`` ``n_g (1 - n_g / N_g) / (n_g - 1)`` per group (0 for group 0), the
        multiplier of the within-group sum of squares in the stratified variance estimator.
      group_count: ``[G]`` units per group.
    """

    n_features: int
    n_coalitions: int
    sampler: str
    enum_masks: np.ndarray
    enum_weights: np.ndarray
    strata: tuple[Stratum, ...]
    unit: np.ndarray
    unit_group: np.ndarray
    group_factor: np.ndarray
    group_count: np.ndarray

    @property
    def exact(self) -> bool:
        """True when every coalition is enumerated (the estimate is then the Shapley value)."""
        return not self.strata


def _layers(m: int) -> list[tuple[int, bool, int]]:
    """``(s, middle, coalitions)`` for the layers ``{s, M - s}``, ``s = 1 .. floor(M / 2)``."""
    out = []
    for s in range(1, m // 2 + 1):
        middle = 2 * s == m
        out.append((s, middle, math.comb(m, s) * (1 if middle else 2)))
    return out


def _layer_mass(m: int, s: int, middle: bool, sampler: str) -> float:
    sides = 1 if middle else 2
    if sampler == "leverage":
        return float(sides)
    return sides * (m - 1) / (s * (m - s))


def _allocate(m: int, layers: list[tuple[int, bool, int]], budget: int, sampler: str) -> list[tuple[int, int]]:
    """Split ``budget`` coalitions into ``(pairs, extra)`` per sampled layer: one pair each, the
    rest in proportion to the sampler's mass (largest remainders), within each layer's capacity."""
    capacity = [c // 2 for (_, _, c) in layers]  # complementary pairs in the layer
    mass = np.array([_layer_mass(m, s, mid, sampler) for (s, mid, _) in layers])
    pairs = [1] * len(layers)
    left = budget // 2 - len(layers)
    while left > 0:
        open_ = [i for i in range(len(layers)) if pairs[i] < capacity[i]]
        share = mass[open_] / mass[open_].sum() * left
        add = np.floor(share).astype(int)
        order = np.argsort(-(share - add), kind="stable")
        add[order[: left - add.sum()]] += 1
        for i, a in zip(open_, add):
            a = min(int(a), capacity[i] - pairs[i])
            pairs[i] += a
            left -= a
    extras = [0] * len(layers)
    if budget % 2:
        # The odd coalition goes to the largest stratum that still has an undrawn set.
        for i in sorted(range(len(layers)), key=lambda i: -pairs[i]):
            if pairs[i] < capacity[i]:
                extras[i] = 1
                break
    return list(zip(pairs, extras))


@functools.lru_cache(maxsize=64)
def kernel_plan(n_features: int, n_coalitions: int, sampler: str = "paired") -> KernelPlan:
    """Build the static sampling plan of ``n_coalitions`` coalitions over ``M = n_features``.

    Budgets of ``2**M - 2`` or more enumerate every coalition (the budget is capped there).

    Raises:
      ValueError: for an unknown sampler or a budget below :func:`min_coalitions`.
    """
    m = n_features
    if sampler not in SAMPLERS:
        raise ValueError(f"`sampler` must be one of {SAMPLERS}; got {sampler!r}.")
    if n_coalitions < min_coalitions(m):
        raise ValueError(
            f"`n_coalitions` must be at least {min_coalitions(m)} for {m} features (the size-1 "
            f"coalitions, their complements and one pair per other size); got {n_coalitions}."
        )
    budget = min(n_coalitions, max_coalitions(m))
    layers = _layers(m)
    left = budget
    n_enum = 0
    mass = [_layer_mass(m, s, middle, sampler) for (s, middle, _) in layers]
    for i, (_, _, count) in enumerate(layers):
        later = [c for (_, _, c) in layers[i + 1 :]]
        if count + sum(later) <= left:  # everything left fits: enumerate it all
            n_enum, left = len(layers), left - count - sum(later)
            break
        # Enumerate a layer when its share of the remaining budget, in proportion to the
        # sampler's mass, would cover it, and one pair is left for every later layer. The size-1
        # layer is always enumerated: its coalitions make the regression identifiable.
        share = left * mass[i] / sum(mass[i:])
        if (i == 0 or count <= share) and count <= left - 2 * len(later):
            left -= count
            n_enum += 1
        else:
            break
    enum_masks, enum_weights = [], []
    for s, middle, _ in layers[:n_enum]:
        for size in (s,) if middle else (s, m - s):
            sets = np.array(list(itertools.combinations(range(m), size)), dtype=int)
            masks = np.zeros((len(sets), m), dtype=bool)
            np.put_along_axis(masks, sets, True, axis=1)
            enum_masks.append(masks)
            enum_weights.append(np.full(len(sets), kernel_weight(m, size)))
    sampled = layers[n_enum:]
    strata = []
    if sampled:
        for (s, middle, _), (p, e) in zip(sampled, _allocate(m, sampled, left, sampler)):
            n_items, k = (m - 1, s - 1) if middle else (m, s)
            strata.append(Stratum(s, middle, p, e, n_items, k))

    # Variance layout: the enumerated coalitions are one zero-variance unit in group 0; each
    # stratum's pairs (and its extra single) are units of one group; strata with a single unit
    # are pooled into one group (collapsed strata), which errs on the conservative side.
    n_e = sum(len(w) for w in enum_weights)
    unit = [np.zeros(n_e, dtype=int)]
    unit_group = [0]
    groups = [(0, 0)]  # (units, population)
    collapsed = None
    next_unit = 1
    for st in strata:
        ids = np.arange(next_unit, next_unit + st.n_draws)
        unit.append(np.concatenate([ids, ids[: st.n_pairs]]))
        next_unit += st.n_draws
        if st.n_draws >= 2:
            groups.append((st.n_draws, st.population))
            unit_group += [len(groups) - 1] * st.n_draws
        else:
            if collapsed is None:
                groups.append((0, 0))
                collapsed = len(groups) - 1
            n_g, pop = groups[collapsed]
            groups[collapsed] = (n_g + st.n_draws, pop + st.population)
            unit_group += [collapsed] * st.n_draws
    counts = np.array([g[0] for g in groups], dtype=float)
    pops = np.array([max(g[1], 1) for g in groups], dtype=float)
    factor = np.where(counts >= 2, counts * (1 - counts / pops) / np.maximum(counts - 1, 1), 0.0)
    unit_arr = np.concatenate(unit)
    assert unit_arr.shape[0] == budget, (unit_arr.shape, budget)
    return KernelPlan(
        n_features=m,
        n_coalitions=budget,
        sampler=sampler,
        enum_masks=np.concatenate(enum_masks) if enum_masks else np.zeros((0, m), bool),
        enum_weights=np.concatenate(enum_weights) if enum_weights else np.zeros(0),
        strata=tuple(strata),
        unit=unit_arr,
        unit_group=np.array(unit_group, dtype=int),
        group_factor=factor,
        group_count=np.maximum(counts, 1.0),
    )


def _distinct_ranks(key: jax.Array, population: int, n: int) -> jax.Array:
    """``n`` distinct integers drawn uniformly from ``[0, population)``, in random order.

    Floyd's algorithm (Bentley & Floyd, 1987, "A sample of brilliance"): step ``i`` draws ``t``
    from ``[0, population - n + i]`` and keeps it, or keeps ``population - n + i`` when ``t`` was
    already chosen; the result is a uniform ``n``-subset. A final shuffle makes every prefix a
    uniform subset too. ``n`` sequential steps of ``O(n)`` work.
    """
    k_draw, k_perm = jax.random.split(key)
    tops = population - n + jnp.arange(n, dtype=jnp.int32)
    draws = jax.random.randint(k_draw, (n,), 0, tops + 1, dtype=jnp.int32)

    def step(i, chosen):
        t = draws[i]
        t = jnp.where(jnp.any(chosen == t), tops[i], t)
        return chosen.at[i].set(t)

    chosen = jax.lax.fori_loop(0, n, step, jnp.full((n,), -1, jnp.int32))
    # Shuffle by sorting random keys (compiles much faster than jax.random.permutation).
    order = jnp.argsort(jax.random.bits(k_perm, (n,), dtype=jnp.uint32))
    return chosen[order]


def _unrank(ranks: jax.Array, n_items: int, k: int) -> jax.Array:
    """``k``-subsets of ``range(n_items)`` from their colexicographic ranks, as ``[n, n_items]`` bools.

    The combinatorial number system: ``rank = sum_i C(c_i, i)`` over the members
    ``c_1 < ... < c_k``; members are recovered greedily from the largest position down.
    """
    table = np.zeros((n_items, k + 1), dtype=np.int64)
    for p in range(n_items):
        for j in range(k + 1):
            table[p, j] = math.comb(p, j)
    table = jnp.asarray(table.astype(np.int32))

    def step(carry, p):
        r, left = carry
        c = table[p, left]
        take = (left > 0) & (c <= r)
        r = jnp.where(take, r - c, r)
        left = jnp.where(take, left - 1, left)
        return (r, left), take

    init = (ranks, jnp.full(ranks.shape, k, jnp.int32))
    _, taken = jax.lax.scan(step, init, jnp.arange(n_items - 1, -1, -1))
    return taken[::-1].T  # [n, n_items], column p = position p


def _uniform_subsets(key: jax.Array, n_items: int, k: int, n: int) -> jax.Array:
    """``n`` independent uniform ``k``-subsets (with replacement across draws), ``[n, n_items]``."""
    scores = jax.random.uniform(key, (n, n_items))
    order = jnp.argsort(jnp.argsort(scores, axis=1), axis=1)
    return order < k


def _draw_stratum(key: jax.Array, m: int, st: Stratum) -> tuple[jax.Array, jax.Array]:
    """Masks ``[2 n + e, M]`` and weights of one stratum: the draws, then the complements of the
    first ``n_pairs`` draws."""
    if st.population <= MAX_RANKED:
        sets = _unrank(_distinct_ranks(key, st.population, st.n_draws), st.n_items, st.k)
        pop = st.population
    else:  # astronomically many sets: draws are distinct with overwhelming probability
        sets = _uniform_subsets(key, st.n_items, st.k, st.n_draws)
        pop = st.population
    if st.middle:
        sets = jnp.concatenate([jnp.ones((st.n_draws, 1), bool), sets], axis=1)
    masks = jnp.concatenate([sets, ~sets[: st.n_pairs]], axis=0)
    k = kernel_weight(m, st.size)  # k(M, s) == k(M, M - s)
    # Inclusion probabilities: draws n_draws / pop, complements n_pairs / pop.
    w = np.concatenate([np.full(st.n_draws, k * pop / st.n_draws), np.full(st.n_pairs, k * pop / st.n_pairs)])
    return masks, w


def sample_coalitions(key: jax.Array, plan: KernelPlan, dtype=None) -> tuple[jax.Array, jax.Array]:
    """Draw the coalitions of ``plan``: boolean masks ``[C, M]`` and regression weights ``[C]``.

    The enumerated coalitions come first with their kernel weights ``k(M, |S|)``; the sampled
    ones follow stratum by stratum with Horvitz-Thompson weights ``k(M, |S|) / pi(S)``, so that
    ``sum_c w_c g(S_c)`` is an unbiased estimate of ``sum_S k(M, |S|) g(S)`` over all
    ``2**M - 2`` coalitions for any ``g``.

    Args:
      key: PRNG key.
      plan: a :class:`KernelPlan` from :func:`kernel_plan`.
      dtype: floating dtype of the weights; by default float64 under ``jax_enable_x64``, else float32.
    """
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype
    masks = [jnp.asarray(plan.enum_masks)]
    weights = [plan.enum_weights]
    keys = jax.random.split(key, max(len(plan.strata), 1))
    for k, st in zip(keys, plan.strata):
        mk, w = _draw_stratum(k, plan.n_features, st)
        masks.append(mk)
        weights.append(w)
    return jnp.concatenate(masks, axis=0), jnp.asarray(np.concatenate(weights), dtype=dtype)
