"""The static layout of a KernelSHAP call's coalitions: enumerated layers, strata, pooled layers.

:func:`~jaxshap._coalitions._kernel_plan.kernel_plan` builds a :class:`KernelPlan` from the
static sizes; the compiled draw (:mod:`._kernel_sampling`) and the NumPy draw
(:mod:`._host_sampling`) fill it with coalitions from a key. The enumerated coalitions come first
with their kernel weights ``k(M, |S|)``; then every :class:`Stratum` in turn, its draws followed
by the complements of its first ``n_pairs`` draws, with Horvitz-Thompson weights
``k(M, |S|) / pi(S)``; or, for budgets below one pair per layer, the :class:`Pooled` draws with
Hansen-Hurwitz weights.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._combinatorics import shapley_kernel_mass
from ._static_cache import static_cache


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
            [share * _layer_mass(m, s) / 2 / (self.n_pairs * p) if self.n_pairs else 0.0
             for s, p in zip(self.sizes, self.probs)]
        )

    def single_weights(self, m: int) -> np.ndarray:
        """Weight of the odd single coalition drawn from each layer: ``(1 - a) k(M, s) N_L / p_L``."""
        share = self.extra / (2 * self.n_pairs + self.extra)
        return np.array([share * _layer_mass(m, s) / p for s, p in zip(self.sizes, self.probs)])


def _layer_mass(m: int, s: int) -> float:
    """``k(M, s) N_L``, the kernel summed over layer ``L`` (sizes ``s`` and ``M - s``; one size when
    ``2 s = M``), computed without the binomials so it stays finite for thousands of features."""
    return shapley_kernel_mass(m, s) * (1 if 2 * s == m else 2)


@dataclasses.dataclass(frozen=True, eq=False)
class KernelPlan:
    """Static layout of one call's coalitions (NumPy arrays; built by :func:`~jaxshap.coalitions.kernel_plan`).

    Attributes:
      n_features: ``M``.
      n_coalitions: coalitions sampled or enumerated (``C``; the empty and full ones excluded).
      sampler: the name of the :class:`~jaxshap.coalitions.Sampler` that allocated the sizes.
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
        :func:`~jaxshap._coalitions._kernel_layers.stratified_coalitions`), or ``None``.
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


def draw_layout(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static gather of a stratified plan's sampled coalitions from its draws ``[S, n_max, M]``.

    For each output row: its flat draw index in ``[S * n_max]``, whether it is the complement of
    that draw, and its Horvitz-Thompson weight ``k(M, s) / pi`` (inclusion probability
    ``n_draws / population`` for a draw, ``n_pairs / population`` for a complement).
    """
    m = plan.n_features
    n = max(st.n_draws for st in plan.strata)
    index, flip, weight = [], [], []
    for i, st in enumerate(plan.strata):
        draws = i * n + np.arange(st.n_draws)
        index += [draws, draws[: st.n_pairs]]
        flip += [np.zeros(st.n_draws, bool), np.ones(st.n_pairs, bool)]
        # k(M, s) times the population, the binomial cancelled (the middle layer's sets are half of C(M, s))
        mass = shapley_kernel_mass(m, st.size) * (0.5 if st.middle else 1.0)
        weight += [np.full(st.n_draws, mass / st.n_draws), np.full(st.n_pairs, mass / st.n_pairs)]
    return np.concatenate(index), np.concatenate(flip), np.concatenate(weight)


@static_cache(64)
def plan_rows(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The regression rows of a plan's coalitions: ``(first, second, unit)``, each ``[U]``.

    A row is a complementary pair (``first`` and ``second`` index the two coalitions in the
    layout of :func:`~jaxshap.coalitions.sample_kernel_coalitions`) or a single coalition
    (``first == second``); ``unit`` is the row's sampling unit in :attr:`KernelPlan.unit` (0 for
    the enumerated coalitions, which come in complementary pairs).
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
