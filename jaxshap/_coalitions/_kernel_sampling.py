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

Budgets too small for one pair per layer (below :func:`stratified_coalitions`) enumerate the
size-1 layer when it fits and sample the other layers *pooled*: each pair picks its layer at
random in proportion to the sampler's mass, with Hansen-Hurwitz (importance) weights
(:class:`Pooled`), so the weighted sums stay unbiased at any budget of at least one pair.

The samplers differ only in how the sampled pairs are shared among strata:

* ``"paired"``: in proportion to the layer's kernel mass ``sum_{|S| = s} k(M, s) = (M - 1) / (s (M - s))``
  (KernelSHAP with paired sampling; Covert & Lee, 2021, "Improving KernelSHAP: practical Shapley
  value estimation via linear regression").
* ``"leverage"``: in proportion to the layer's leverage mass. For the efficiency-constrained
  Shapley regression all coalitions of one size have the same leverage score, ``1 / C(M, s)``
  up to a constant, so every size carries the same mass and sizes are sampled uniformly
  (Musco & Witter, 2025, "Provably accurate Shapley value estimation via leverage score sampling").
* ``"middle"``: :data:`MIDDLE_SHARE` of the mass on the two innermost layers (the sizes nearest
  ``M / 2``), the rest spread as in ``"leverage"``, so every layer keeps a share that grows with
  the budget and the estimate stays consistent. It is meant for the third-order control
  variates while their terms outnumber the sampled pairs: the surrogate then interpolates the
  sample, and its error is the part of the ``C(M, 3)`` coefficients the sample leaves
  undetermined. A residualised third-order term is zero on most coalitions of size 1 or
  ``M - 1`` and varies most near ``M / 2``, so a middle-sized pair pins down more of those
  coefficients (the posterior variance of the Shapley values under an isotropic prior on them
  ranks the designs the same way as the measured errors). Once the sampled pairs outnumber the
  terms the surrogate is determined, higher orders dominate the error and this design loses
  (about 2x the squared error of leverage at ``M = 12`` to 16 with 1.2 to 1.9 pairs per term).

Everything is keyed and shape-static: the number of coalitions per stratum is fixed by the plan.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from ._static_cache import static_cache

SAMPLERS = ("paired", "leverage", "middle")

MIDDLE_SHARE = 0.9
"""The share of the ``"middle"`` sampler's mass on the two innermost layers. With the third-order
controls, against the paired or leverage design the explainer used before (squared error): 1.2x
to 1.8x lower on MLP games at ``M = 12`` to 16 with 5, 10 and 20 coalitions per feature (12
seeds), 1.2x to 1.9x on XGBoost games at ``M = 30`` to 100 from 5 coalitions per feature to the
default budget (6 seeds). Shares of 0.8 and 0.95 were within about 10% of it; everything on the
two layers (the others keeping their one pair) was about as good and is not consistent. Most of what
a size allocation can give is here: the two middle sizes with no pair elsewhere (not consistent,
and with no honest ``stderr``) were at most 1.2x better still."""

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


MIN_BUDGET = 2
"""The smallest budget a plan accepts: one complementary pair."""


def min_coalitions(n_features: int) -> int:
    """Smallest budget of a plan: one complementary pair (:data:`MIN_BUDGET`), or every coalition for ``M < 2``.

    Budgets below :func:`stratified_coalitions` are sampled with replacement from pooled layers
    (see :class:`Pooled`); below about ``2 (M - 1)`` the regression is not identified and the
    estimate is only a ridge-regularised guess with an infinite standard error.
    """
    return min(max_coalitions(n_features), MIN_BUDGET)


def stratified_coalitions(n_features: int) -> int:
    """Smallest budget of a fully stratified plan: the size-1 layer enumerated and one pair in every other layer.

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


@dataclasses.dataclass(frozen=True)
class Pooled:
    """Layers too many for the budget, sampled together *with* replacement (small budgets).

    Each of ``n_pairs`` units picks a layer ``{s, M - s}`` with probability ``probs`` (in
    proportion to the sampler's mass), then a uniform ``s``-subset and its complement; an odd
    budget adds one single coalition, uniform in a layer picked the same way. Weights are
    Hansen-Hurwitz (importance) weights, so the kernel-weighted sums stay unbiased.
    """

    sizes: tuple[int, ...]
    probs: tuple[float, ...]
    n_pairs: int
    extra: int

    def pair_weights(self, m: int) -> np.ndarray:
        """Weight of each member of a pair drawn from each layer: ``a k(M, s) (N_L / 2) / (n p_L)``."""
        share = 2 * self.n_pairs / (2 * self.n_pairs + self.extra)
        return np.array(
            # k(M, s) N_L is the layer's kernel mass, the binomials cancelled (C(M, s) overflows a float)
            [share * _layer_mass(m, s, 2 * s == m, "paired") / 2 / (self.n_pairs * p) if self.n_pairs else 0.0
             for s, p in zip(self.sizes, self.probs)]
        )

    def single_weights(self, m: int) -> np.ndarray:
        """Weight of the odd single coalition drawn from each layer: ``(1 - a) k(M, s) N_L / p_L``."""
        share = self.extra / (2 * self.n_pairs + self.extra)
        return np.array([share * _layer_mass(m, s, 2 * s == m, "paired") / p for s, p in zip(self.sizes, self.probs)])


def _layer_count(m: int, s: int) -> int:
    """Coalitions in the layer ``{s, M - s}`` (both sides; the middle layer has one)."""
    return math.comb(m, s) * (1 if 2 * s == m else 2)


@dataclasses.dataclass(frozen=True, eq=False)
class KernelPlan:
    """Static layout of one call's coalitions (NumPy arrays; built by :func:`kernel_plan`).

    Attributes:
      n_features: ``M``.
      n_coalitions: coalitions sampled or enumerated (``C``; the empty and full ones excluded).
      sampler: ``"paired"``, ``"leverage"`` or ``"middle"``.
      enum_masks: ``[E, M]`` boolean, the enumerated coalitions (they come first).
      enum_weights: ``[E]`` their kernel weights.
      strata: the sampled layers, in layout order after the enumerated coalitions.
      unit: ``[C]`` the sampling unit (a pair, or a single) of each coalition, for the variance.
      unit_group: ``[U]`` the variance group of each unit (group 0 holds the enumerated ones).
      group_factor: ``[G]`` ``n_g (1 - n_g / N_g) / (n_g - 1)`` per group (0 for group 0), the
        multiplier of the within-group sum of squares in the stratified variance estimator.
      group_count: ``[G]`` units per group.
      group_centred: ``[G]`` 1 where the group's variance is taken around its mean, 0 where
        around zero (a group of one unit, whose spread cannot be estimated: the estimating
        equations have mean zero overall, so the uncentred square is a conservative stand-in).
      pooled: the layers sampled together with replacement (budgets below
        :func:`min_coalitions`), or ``None``.
      identified: False when the budget is too small to identify the regression (fewer sampled
        pairs than ``M - 1`` and no enumerated layer): the estimate is then ridge-regularised
        toward the equal split and its standard error is infinite.
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
    group_centred: np.ndarray
    pooled: Pooled | None = None
    identified: bool = True

    @property
    def exact(self) -> bool:
        """True when every coalition is enumerated (the estimate is then the Shapley value)."""
        return not self.strata and self.pooled is None


def _layers(m: int) -> list[tuple[int, bool, int]]:
    """``(s, middle, coalitions)`` for the layers ``{s, M - s}``, ``s = 1 .. floor(M / 2)``."""
    out = []
    for s in range(1, m // 2 + 1):
        middle = 2 * s == m
        out.append((s, middle, math.comb(m, s) * (1 if middle else 2)))
    return out


def _innermost(m: int, s: int) -> bool:
    """Whether the layer ``{s, M - s}`` is one of the two nearest ``M / 2``."""
    return s >= m // 2 - 1


def _layer_mass(m: int, s: int, middle: bool, sampler: str) -> float:
    """The sampler's mass of the layer ``{s, M - s}`` (per size: a two-sided layer counts twice)."""
    sides = 1 if middle else 2
    if sampler == "leverage":
        return float(sides)
    if sampler == "middle":
        inner = sum(1 for t in range(1, m) if _innermost(m, min(t, m - t)))  # sizes in the two layers
        spread = (1 - MIDDLE_SHARE) / (m - 1) + (MIDDLE_SHARE / inner if _innermost(m, s) else 0.0)
        return sides * spread
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


@static_cache(64)
def kernel_plan(n_features: int, n_coalitions: int, sampler: str = "paired") -> KernelPlan:
    """Build the static sampling plan of ``n_coalitions`` coalitions over ``M = n_features``.

    Budgets of ``2**M - 2`` or more enumerate every coalition (the budget is capped there).

    Budgets below :func:`stratified_coalitions` enumerate the size-1 layer when it fits with at
    least one pair to spare (``2 M + 2``, shap's smallest useful budget) and sample the other
    layers together, with replacement (:class:`Pooled`).

    ``sampler`` shares the sampled pairs among the layers: ``"paired"`` in proportion to the
    kernel mass, ``"leverage"`` uniformly over sizes, ``"middle"`` mostly at the sizes nearest
    ``M / 2`` (the module docstring says when each pays).

    Raises:
      ValueError: for an unknown sampler or a budget below :func:`min_coalitions`.
    """
    m = n_features
    if sampler not in SAMPLERS:
        raise ValueError(f"`sampler` must be one of {SAMPLERS}; got {sampler!r}.")
    if n_coalitions < min_coalitions(m):
        raise ValueError(
            f"`n_coalitions` must be at least {min_coalitions(m)} for {m} features (one complementary "
            f"pair); got {n_coalitions}."
        )
    budget = min(n_coalitions, max_coalitions(m))
    if budget < stratified_coalitions(m):
        return _pooled_plan(m, budget, sampler)
    layers = _layers(m)
    left = budget
    n_enum = 0
    # Which layers to enumerate: the middle sampler decides as leverage does (its own mass would
    # leave a small layer that the budget nearly covers to a few heavily weighted pairs).
    enum_by = "leverage" if sampler == "middle" else sampler
    mass = [_layer_mass(m, s, middle, enum_by) for (s, middle, _) in layers]
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
    pops = np.array([max(g[1], 1) if g[1] < 2**1023 else math.inf for g in groups], dtype=float)  # C(M, s) may pass float range
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
        group_centred=np.ones(len(groups)),
    )


# Student's t quantiles t_{df, 0.975} for df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _small_sample_factor(df: int) -> float:
    """``(t_{df, 0.975} / z_{0.975})^2``: the variance scale that widens a normal interval to Student's."""
    t = _T975[df - 1] if df <= len(_T975) else 1.960 + 2.4 / df
    return (t / 1.960) ** 2


def _pooled_plan(m: int, budget: int, sampler: str) -> KernelPlan:
    """The plan of a budget below :func:`stratified_coalitions` (see :func:`kernel_plan`)."""
    layers = _layers(m)
    enum = budget >= 2 * m + 2 and len(layers) >= 2
    pooled_layers = layers[1:] if enum else layers
    left = budget - 2 * m if enum else budget
    mass = np.array([_layer_mass(m, s, middle, sampler) for (s, middle, _) in pooled_layers])
    pooled = Pooled(tuple(s for s, _, _ in pooled_layers), tuple(mass / mass.sum()), left // 2, left % 2)
    if enum:
        enum_masks = np.concatenate([np.eye(m, dtype=bool), ~np.eye(m, dtype=bool)])
        enum_weights = np.full(2 * m, kernel_weight(m, 1))
    else:
        enum_masks, enum_weights = np.zeros((0, m), bool), np.zeros(0)
    n_p, extra = pooled.n_pairs, pooled.extra
    pairs = np.arange(1, n_p + 1)
    unit = np.concatenate([np.zeros(len(enum_weights), int), pairs, pairs, np.full(extra, n_p + 1)])
    # Groups: 0 enumerated; 1 the pairs (drawn with replacement: factor n / (n - 1), or one
    # uncentred unit); 2 the odd single (one uncentred unit).
    unit_group = np.concatenate([[0], np.ones(n_p, int), np.full(extra, 2)])
    # Few units estimate their spread poorly: each variance is scaled by (t_{df, 0.975} / z_{0.975})^2
    # so that the normal interval on the reported standard error keeps its coverage.
    pair_factor = (n_p / (n_p - 1) if n_p >= 2 else 1.0) * _small_sample_factor(max(n_p - 1, 1))
    return KernelPlan(
        n_features=m,
        n_coalitions=budget,
        sampler=sampler,
        enum_masks=enum_masks,
        enum_weights=enum_weights,
        strata=(),
        unit=unit,
        unit_group=unit_group,
        group_factor=np.array([0.0, pair_factor, _small_sample_factor(1)]),
        group_count=np.array([1.0, max(n_p, 1), 1.0]),
        group_centred=np.array([0.0, 1.0 if n_p >= 2 else 0.0, 0.0]),
        pooled=pooled,
        identified=enum or n_p + extra >= m - 1,
    )


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


def _unrank(ranks: jax.Array, n_items: int, ks: np.ndarray) -> jax.Array:
    """Subsets from their colexicographic ranks, as ``[S, n, n_items]`` bools.

    ``ranks`` is ``[S, n]``; row ``i`` holds ranks of ``ks[i]``-subsets. The combinatorial number
    system: ``rank = sum_i C(c_i, i)`` over the members ``c_1 < ... < c_k``; members are recovered
    greedily from the largest position down. A rank below ``C(n', k)`` gives a subset of
    ``range(n')``, so strata over fewer items share the scan (their top positions stay empty).
    Negative (padding) ranks give arbitrary rows.
    """
    k_max = int(ks.max())
    table = np.array([[math.comb(p, j) for j in range(k_max + 1)] for p in range(n_items)], dtype=object)
    # Entries a stratum can use are at most its population (< 2**31); larger ones only need to
    # stay larger than every rank.
    table = jnp.asarray(np.minimum(table, np.iinfo(np.int32).max).astype(np.int32))
    left0 = jnp.broadcast_to(jnp.asarray(ks, jnp.int32)[:, None], ranks.shape)

    def step(carry, p):
        r, left = carry
        c = table[p, left]
        take = (left > 0) & (c <= r)
        return (jnp.where(take, r - c, r), jnp.where(take, left - 1, left)), take

    _, taken = jax.lax.scan(step, (ranks, left0), jnp.arange(n_items - 1, -1, -1))
    return jnp.moveaxis(taken[::-1], 0, -1)  # [S, n, n_items], last axis = position


def _draw_sets(key: jax.Array, m: int, strata: tuple[Stratum, ...]) -> jax.Array:
    """The draws of all strata, ``[S, n_max, M]`` (row ``i`` padded after ``strata[i].n_draws``).

    Every stratum is sampled over ``M`` positions: a middle stratum's ``(M/2 - 1)``-subsets of
    features ``1..M-1`` are drawn as subsets of ``range(M - 1)`` and shifted right by one, with
    feature 0 added.
    """
    n = max(st.n_draws for st in strata)
    ks = np.array([st.k for st in strata])
    ranked = np.array([st.population <= MAX_RANKED for st in strata])
    k_rank, k_unif = jax.random.split(key)
    parts = []
    if ranked.any():
        pops = np.array([st.population for st, r in zip(strata, ranked) if r])
        counts = np.array([st.n_draws for st, r in zip(strata, ranked) if r])
        parts.append(_unrank(_distinct_ranks(k_rank, pops, counts), m, ks[ranked]))
        if parts[0].shape[1] < n:
            parts[0] = jnp.pad(parts[0], ((0, 0), (0, n - parts[0].shape[1]), (0, 0)))
    if not ranked.all():  # astronomically many sets: draws are distinct with overwhelming probability
        middle = np.array([st.middle for st, r in zip(strata, ranked) if not r])
        scores = jax.random.uniform(k_unif, (len(middle), n, m))
        # A middle stratum draws from the first M - 1 positions only (the last one never ranks
        # among the k smallest scores); the shift below moves them to features 1..M-1.
        scores = jnp.where(jnp.asarray(middle)[:, None, None] & (jnp.arange(m) == m - 1), 2.0, scores)
        parts.append(jnp.argsort(jnp.argsort(scores, axis=-1), axis=-1) < jnp.asarray(ks[~ranked])[:, None, None])
    # Reassemble in plan order.
    order = np.argsort(np.concatenate([np.flatnonzero(ranked), np.flatnonzero(~ranked)]), kind="stable")
    sets = jnp.concatenate(parts, axis=0)[order] if len(parts) > 1 else parts[0]
    middle = np.array([st.middle for st in strata])
    if middle.any():
        shifted = jnp.concatenate([jnp.ones(sets.shape[:2] + (1,), bool), sets[..., :-1]], axis=-1)
        sets = jnp.where(jnp.asarray(middle)[:, None, None], shifted, sets)
    return sets


def _layout(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static gather of the sampled coalitions: for each output row, its flat draw index in
    ``[S * n_max]``, whether it is the complement of that draw, and its weight."""
    m = plan.n_features
    n = max(st.n_draws for st in plan.strata)
    index, flip, weight = [], [], []
    for i, st in enumerate(plan.strata):
        draws = i * n + np.arange(st.n_draws)
        index += [draws, draws[: st.n_pairs]]
        flip += [np.zeros(st.n_draws, bool), np.ones(st.n_pairs, bool)]
        # k(M, s) times the population, the binomial cancelled (the middle layer's sets are half of C(M, s))
        mass = _layer_mass(m, st.size, True, "paired") * (0.5 if st.middle else 1.0)
        # Inclusion probabilities: draws n_draws / pop, complements n_pairs / pop.
        weight += [np.full(st.n_draws, mass / st.n_draws), np.full(st.n_pairs, mass / st.n_pairs)]
    return np.concatenate(index), np.concatenate(flip), np.concatenate(weight)


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
      plan: a :class:`KernelPlan` from :func:`kernel_plan`.
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
    index, flip, weight = _layout(plan)
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
    scores = jax.random.uniform(k_set, (n, m))
    sets = jnp.argsort(jnp.argsort(scores, axis=-1), axis=-1) < size[:, None]
    pair_w = jnp.asarray(pooled.pair_weights(m), dtype)[layer]
    single_w = jnp.asarray(pooled.single_weights(m), dtype)[layer]
    p = pooled.n_pairs
    masks = jnp.concatenate([sets[:p], ~sets[:p], sets[p:]], axis=0)
    weights = jnp.concatenate([pair_w[:p], pair_w[:p], single_w[p:]])
    return masks, weights


@static_cache(64)
def plan_rows(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The regression rows of a plan's coalitions: ``(first, second, unit)``, each ``[U]``.

    A row is a complementary pair (``first`` and ``second`` index the two coalitions in the
    layout of :func:`sample_coalitions`) or a single coalition (``first == second``); ``unit`` is
    the row's sampling unit in :attr:`KernelPlan.unit` (0 for the enumerated coalitions, which
    come in complementary pairs).
    """
    m = plan.n_features
    n_e = len(plan.enum_weights)
    codes = plan.enum_masks.astype(np.int64) @ (1 << np.arange(m, dtype=np.int64))
    where = {int(cde): i for i, cde in enumerate(codes)}
    full = (1 << m) - 1
    first, second = [], []
    for i, cde in enumerate(codes):
        j = where.get(full - int(cde), i)
        if i <= j:
            first.append(i)
            second.append(j)
    unit = [0] * len(first)
    sampled = plan.unit[n_e:]
    order = np.argsort(sampled, kind="stable")
    bounds = np.flatnonzero(np.diff(sampled[order])) + 1
    for rows in np.split(order, bounds) if len(order) else []:
        rows = rows + n_e
        first.append(int(rows[0]))
        second.append(int(rows[-1]))
        unit.append(int(plan.unit[rows[0]]))
    return np.array(first), np.array(second), np.array(unit)
