r"""KernelSHAP's coalition plan: which coalitions a budget enumerates and how it samples the rest.

A *layer* is the set of coalitions of sizes ``{s, M - s}``, ``s = 1 .. floor(M / 2)`` (the
middle size of an even ``M`` is a layer on its own). A plan (:class:`KernelPlan`, built once in
Python from the static sizes by :func:`kernel_plan`) visits the layers from the outside in: a
layer is enumerated with its exact kernel weights while its share of the remaining budget, in
proportion to the sampler's :meth:`~jaxshap.coalitions.Sampler.enumeration_mass`, covers it (as
in shap's KernelExplainer); every later layer is a :class:`Stratum` with one complementary pair
``(S, N \ S)`` and then pairs in proportion to the sampler's
:meth:`~jaxshap.coalitions.Sampler.size_mass`, drawn uniformly without replacement, each
coalition weighted ``k(M, s) / pi(S)`` (Horvitz-Thompson). Budgets below one pair per layer
(:func:`stratified_coalitions`) enumerate the size-1 layer when it fits with a pair to spare and
pool the other layers, sampled with replacement (:class:`Pooled`, Hansen-Hurwitz weights). The
kernel-weighted sums ``sum_S k(S) z_S z_S^T`` and ``sum_S k(S) z_S v(S)`` over all coalitions are
then estimated without bias at any budget of at least one pair. :mod:`._kernel_sampling` draws
a plan's coalitions from a key.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from ._combinatorics import shapley_kernel, shapley_kernel_mass, static_cache
from ._kernel_sampling import Sampler

MIN_BUDGET = 2
"""The smallest budget of a plan: one complementary pair."""

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""Student's t quantiles ``t_{df, 0.975}`` for ``df = 1..30``."""


def max_coalitions(n_features: int) -> int:
    """Number of coalitions other than the empty and the full one: ``2**M - 2``."""
    return 2**n_features - 2


def min_coalitions(n_features: int) -> int:
    """Smallest budget: one complementary pair (:data:`MIN_BUDGET`), or every coalition for ``M < 2``.

    Below about ``2 (M - 1)`` the regression is not identified: the estimate is a
    ridge-regularised guess with an infinite standard error.
    """
    return min(max_coalitions(n_features), MIN_BUDGET)


def stratified_coalitions(n_features: int) -> int:
    """Smallest budget of a fully stratified plan, ``2 M + 2 (floor(M / 2) - 1)``: the size-1 layer
    enumerated and one pair in every other layer (or every coalition for small ``M``)."""
    m = n_features
    return min(max_coalitions(m), 2 * m + 2 * (m // 2 - 1))


def layers(n_features: int) -> list[tuple[int, bool, int]]:
    """``(s, middle, coalitions)`` of the layers ``{s, M - s}``, ``s = 1 .. floor(M / 2)``, outermost first."""
    m = n_features
    return [(s, 2 * s == m, math.comb(m, s) * (1 if 2 * s == m else 2)) for s in range(1, m // 2 + 1)]


def _layer_masses(m: int, chosen: list, sampler: Sampler, enumeration: bool = False) -> np.ndarray:
    """The sampler's mass of each layer (a two-sided layer counts its size twice)."""
    mass = sampler.enumeration_mass if enumeration else sampler.size_mass
    return np.array([(1 if middle else 2) * mass(m, s) for s, middle, _ in chosen])


@dataclasses.dataclass(frozen=True)
class Stratum:
    """A sampled layer: ``n_pairs`` complementary pairs plus ``extra`` (0 or 1) single coalitions.

    Draws are ``k``-subsets of ``n_items`` items: for the middle layer of an even ``M``, subsets
    of features ``1..M-1`` of size ``M/2 - 1`` completed with feature 0 (one representative per
    complementary pair); otherwise ``s``-subsets of all features.
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

    Each of ``n_pairs`` units picks a layer with probability ``probs`` (in proportion to the
    sampler's mass), then a uniform ``s``-subset and its complement; an odd budget adds one single
    coalition from a layer picked the same way. Weights are Hansen-Hurwitz (importance) weights.
    """

    sizes: tuple[int, ...]
    probs: tuple[float, ...]
    n_pairs: int
    extra: int

    def _mass(self, m: int) -> np.ndarray:
        """``k(M, s) N_L``, the kernel summed over each layer (binomials cancelled: finite for any ``M``)."""
        return np.array([shapley_kernel_mass(m, s) * (1 if 2 * s == m else 2) for s in self.sizes])

    def pair_weights(self, m: int) -> np.ndarray:
        """Weight of each member of a pair drawn from each layer: ``a k(M, s) N_L / (2 n p_L)``."""
        share = 2 * self.n_pairs / (2 * self.n_pairs + self.extra)
        return share * self._mass(m) / 2 / (max(self.n_pairs, 1) * np.asarray(self.probs)) * (self.n_pairs > 0)

    def single_weights(self, m: int) -> np.ndarray:
        """Weight of the odd single coalition drawn from each layer: ``(1 - a) k(M, s) N_L / p_L``."""
        return self.extra / (2 * self.n_pairs + self.extra) * self._mass(m) / np.asarray(self.probs)


@dataclasses.dataclass(frozen=True, eq=False)
class KernelPlan:
    """Static layout of one call's coalitions (NumPy arrays; built by :func:`~jaxshap.coalitions.kernel_plan`).

    Attributes:
      n_features: ``M``.
      n_coalitions: coalitions sampled or enumerated (``C``; the empty and full ones excluded).
      sampler: the name of the :class:`~jaxshap.coalitions.Sampler` that allocated the sizes.
      enum_masks: ``[E, M]`` boolean, the enumerated coalitions (they come first), ``enum_weights`` theirs.
      strata: the sampled layers, in layout order after the enumerated coalitions.
      unit: ``[C]`` the sampling unit (a pair, or a single) of each coalition, for the variance.
      unit_group: ``[U]`` the variance group of each unit (group 0 holds the enumerated ones).
      group_factor: ``[G]`` ``n_g (1 - n_g / N_g) / (n_g - 1)`` per group (0 for group 0), the
        multiplier of the within-group sum of squares in the stratified variance estimator.
      group_count: ``[G]`` units per group.
      group_centred: ``[G]`` 1 where the group's variance is taken around its mean, 0 where around
        zero (a group of one unit: the uncentred square is a conservative stand-in).
      pooled: the layers sampled together with replacement (small budgets), or ``None``.
      identified: False when the budget cannot identify the regression (fewer sampled pairs than
        ``M - 1`` and no enumerated layer): the estimate is then ridge-regularised toward the
        equal split and its standard error is infinite.
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


def kernel_plan(n_features: int, n_coalitions: int, sampler: str | Sampler = "paired") -> KernelPlan:
    """Build the static sampling plan of ``n_coalitions`` coalitions over ``M = n_features`` (see the module).

    Args:
      n_features: ``M``.
      n_coalitions: the budget, coalitions other than the empty and the full one; ``2**M - 2``
        or more enumerates every coalition (the budget is capped there).
      sampler: a :class:`~jaxshap.coalitions.Sampler` or the name of a registered one
        (``"paired"``: pairs in proportion to the kernel mass; ``"leverage"``: uniformly over
        sizes; ``"middle"``: mostly at the sizes nearest ``M / 2``).

    Raises:
      ValueError: for an unknown sampler or a budget below :func:`min_coalitions`.
    """
    m = n_features
    design = Sampler.resolve(sampler)
    if n_coalitions < min_coalitions(m):
        raise ValueError(
            f"`n_coalitions` must be at least {min_coalitions(m)} for {m} features (one complementary "
            f"pair); got {n_coalitions}."
        )
    return _plan(m, min(n_coalitions, max_coalitions(m)), design)


@static_cache(64)
def _plan(m: int, budget: int, sampler: Sampler) -> KernelPlan:
    """:func:`kernel_plan` for a budget within ``[min_coalitions(M), 2**M - 2]`` (memoised)."""
    if budget < stratified_coalitions(m):
        return KernelPlan(n_features=m, n_coalitions=budget, sampler=sampler.name, **_pooled_fields(m, budget, sampler))
    every = layers(m)
    n_enum, left = enumerated_layers(m, every, budget, sampler)
    sampled = every[n_enum:]
    strata = tuple(
        Stratum(s, middle, pairs, extra, *((m - 1, s - 1) if middle else (m, s)))
        for (s, middle, _), (pairs, extra) in zip(sampled, _allocate(m, sampled, left, sampler))
    )
    masks, weights = _enumerate(m, every[:n_enum])
    return KernelPlan(n_features=m, n_coalitions=budget, sampler=sampler.name, enum_masks=masks, enum_weights=weights,
                      strata=strata, **_variance_layout(strata, len(weights), budget))


def enumerated_layers(m: int, every: list, budget: int, sampler: Sampler) -> tuple[int, int]:
    """``(n_enumerated, left)``: how many outermost layers to enumerate, and the budget left.

    A layer is enumerated when its share of the remaining budget (by enumeration mass) covers it
    and one pair is left for every later layer; the size-1 layer whenever that pair is left (it
    makes the regression identifiable); everything once it all fits.
    """
    mass = _layer_masses(m, every, sampler, enumeration=True)
    left, n_enum = budget, 0
    for i, (_, _, count) in enumerate(every):
        later = sum(c for _, _, c in every[i + 1 :])
        if count + later <= left:
            return len(every), left - count - later
        if (i == 0 or count <= left * mass[i] / mass[i:].sum()) and count <= left - 2 * (len(every) - i - 1):
            left, n_enum = left - count, n_enum + 1
        else:
            break
    return n_enum, left


def _allocate(m: int, sampled: list, budget: int, sampler: Sampler) -> list[tuple[int, int]]:
    """``(pairs, extra)`` per sampled layer: one pair each, the rest in proportion to the sampler's
    mass (largest remainders) within each layer's capacity; an odd budget's last coalition goes to
    the largest stratum that still has an undrawn set."""
    capacity = [c // 2 for _, _, c in sampled]  # complementary pairs in the layer
    mass = _layer_masses(m, sampled, sampler)
    pairs = [1] * len(sampled)
    left = budget // 2 - len(sampled)
    while left > 0:
        open_ = [i for i in range(len(sampled)) if pairs[i] < capacity[i]]
        share = mass[open_] / mass[open_].sum() * left
        add = np.floor(share).astype(int)
        add[np.argsort(-(share - add), kind="stable")[: left - add.sum()]] += 1
        for i, a in zip(open_, add):
            a = min(int(a), capacity[i] - pairs[i])
            pairs[i] += a
            left -= a
    extras = [0] * len(sampled)
    if budget % 2:
        i = next((i for i in sorted(range(len(sampled)), key=lambda i: -pairs[i]) if pairs[i] < capacity[i]), None)
        if i is not None:
            extras[i] = 1
    return list(zip(pairs, extras))


def _enumerate(m: int, enumerated: list) -> tuple[np.ndarray, np.ndarray]:
    """Every coalition of the enumerated layers, ``[E, M]``, with its kernel weight ``[E]`` (size by
    size, each in lexicographic order of its members)."""
    masks, weights = [np.zeros((0, m), bool)], [np.zeros(0)]
    for s, middle, _ in enumerated:
        for size in (s,) if middle else (s, m - s):
            sets = np.array(list(itertools.combinations(range(m), size)), dtype=int)
            layer = np.zeros((len(sets), m), dtype=bool)
            np.put_along_axis(layer, sets, True, axis=1)
            masks.append(layer)
            weights.append(np.full(len(sets), shapley_kernel(m, size)))
    return np.concatenate(masks), np.concatenate(weights)


def _variance_layout(strata: tuple[Stratum, ...], n_enumerated: int, budget: int) -> dict:
    """The sampling units and variance groups of a stratified plan: the enumerated coalitions are
    one zero-variance unit in group 0; each stratum's pairs (and extra single) are units of one
    group; strata with a single unit are pooled into one group (collapsed strata: conservative)."""
    unit, unit_group, groups, collapsed, next_unit = [np.zeros(n_enumerated, int)], [0], [(0, 0)], None, 1
    for st in strata:
        ids = np.arange(next_unit, next_unit + st.n_draws)
        unit.append(np.concatenate([ids, ids[: st.n_pairs]]))
        next_unit += st.n_draws
        if st.n_draws >= 2:
            groups.append((st.n_draws, st.population))
            unit_group += [len(groups) - 1] * st.n_draws
            continue
        if collapsed is None:
            groups.append((0, 0))
            collapsed = len(groups) - 1
        n_g, pop = groups[collapsed]
        groups[collapsed] = (n_g + st.n_draws, pop + st.population)
        unit_group += [collapsed] * st.n_draws
    counts = np.array([g[0] for g in groups], dtype=float)
    pops = np.array([max(g[1], 1) if g[1] < 2**1023 else math.inf for g in groups], dtype=float)  # C(M, s) may pass float range
    unit = np.concatenate(unit)
    assert unit.shape[0] == budget, (unit.shape, budget)
    return dict(
        unit=unit, unit_group=np.array(unit_group, dtype=int),
        group_factor=np.where(counts >= 2, counts * (1 - counts / pops) / np.maximum(counts - 1, 1), 0.0),
        group_count=np.maximum(counts, 1.0), group_centred=np.ones(len(groups)),
    )


def small_sample_factor(df: int) -> float:
    """``(t_{df, 0.975} / z_{0.975})^2``: the variance scale that widens a normal interval to Student's."""
    t = _T975[df - 1] if df <= len(_T975) else 1.960 + 2.4 / df
    return (t / 1.960) ** 2


def _pooled_fields(m: int, budget: int, sampler: Sampler) -> dict:
    """The fields of a plan whose budget is below one pair per layer (see the module)."""
    every = layers(m)
    enum = budget >= 2 * m + 2 and len(every) >= 2
    pooled_layers = every[1:] if enum else every
    left = budget - 2 * m if enum else budget
    mass = _layer_masses(m, pooled_layers, sampler)
    pooled = Pooled(tuple(s for s, _, _ in pooled_layers), tuple(mass / mass.sum()), left // 2, left % 2)
    if enum:  # the size-1 layer: each single feature, then each complement
        masks = np.concatenate([np.eye(m, dtype=bool), ~np.eye(m, dtype=bool)])
        weights = np.full(2 * m, shapley_kernel(m, 1))
    else:
        masks, weights = np.zeros((0, m), bool), np.zeros(0)
    n_p, extra = pooled.n_pairs, pooled.extra
    pairs = np.arange(1, n_p + 1)
    # groups: 0 enumerated; 1 the pairs (with replacement: factor n / (n - 1), or one uncentred
    # unit); 2 the odd single (one uncentred unit). Few units estimate their spread poorly, so each
    # variance is widened by (t_{df, 0.975} / z_{0.975})^2 to keep the normal interval's coverage.
    pair_factor = (n_p / (n_p - 1) if n_p >= 2 else 1.0) * small_sample_factor(max(n_p - 1, 1))
    return dict(
        enum_masks=masks, enum_weights=weights, strata=(),
        unit=np.concatenate([np.zeros(len(weights), int), pairs, pairs, np.full(extra, n_p + 1)]),
        unit_group=np.concatenate([[0], np.ones(n_p, int), np.full(extra, 2)]),
        group_factor=np.array([0.0, pair_factor, small_sample_factor(1)]),
        group_count=np.array([1.0, max(n_p, 1), 1.0]),
        group_centred=np.array([0.0, 1.0 if n_p >= 2 else 0.0, 0.0]),
        pooled=pooled, identified=enum or n_p + extra >= m - 1,
    )
