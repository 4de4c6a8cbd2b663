"""KernelSHAP's sampling: the designs (how a budget's sampled pairs are shared among coalition
sizes, and the rule behind ``sampler="auto"``) and the draw of a plan's coalitions.

A plan (:func:`jaxshap.coalitions.kernel_plan`) enumerates the outermost layers ``{s, M - s}``
that its budget covers and samples complementary pairs from the others, each sampled coalition
carrying its Horvitz-Thompson weight: every design estimates the same kernel-weighted sums
without bias and differs only in its variance. A :class:`Sampler` says what differs:
:meth:`Sampler.size_mass`, the mass of one coalition size (the sampled layers share the pairs in
proportion to it, each keeping at least one), and :meth:`Sampler.enumeration_mass`, the mass
that decides which layers are enumerated (by default the same). A subclass that sets ``name``
is registered when defined, so ``sampler="its name"`` and ``sampler=TheClass()`` both select it.
Samplers are frozen dataclasses: hashable, immutable, equal by value (static configuration of
compiled programs). :class:`Auto` picks a design, the controls and their prior from the budget.

:func:`sample_coalitions` fills a :class:`~jaxshap._coalitions._kernel_plan.KernelPlan` with
coalitions from a PRNG key inside a JAX program; the explainer's shared draw and every per-row
draw go through it, so one key gives one set of coalitions everywhere. Uniform ``k``-subsets
are made in one of two ways:

* by rank: the combinatorial number system numbers the ``k``-subsets of ``range(n)`` in
  colexicographic order, ``rank = sum_i C(c_i, i)`` over the members ``c_1 < ... < c_k``, so a
  uniform rank in ``[0, C(n, k))`` is a uniform subset (ranks are ``int32``: populations above
  :data:`MAX_RANKED` are drawn by scores);
* by scores: the ``k`` positions of smallest score among ``n`` i.i.d. uniform scores.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._pytree import Registered
from .._core._validate import number
from ._combinatorics import binomial_table, shapley_kernel_mass, static_cache

if TYPE_CHECKING:  # annotations only: the plan imports its Sampler from here
    from ._kernel_plan import KernelPlan, Pooled, Stratum


MIDDLE_SHARE = 0.9
"""The default share of :class:`Middle`'s mass on the two innermost layers."""


@dataclasses.dataclass(frozen=True)
class Sampler(Registered, abc.ABC, family=("KernelSHAP sampler", "sampler", "jaxshap.coalitions.Sampler")):
    """A KernelSHAP design: the mass of each coalition size (see the module docstring).

    Subclass it with ``@dataclasses.dataclass(frozen=True)`` (parameters with defaults: a name
    selects the class's default instance), give it a ``name`` and define :meth:`size_mass`. A
    subclass without a ``name`` of its own is not registered.
    """

    @abc.abstractmethod
    def size_mass(self, n_features: int, size: int) -> float:
        """The mass of coalition size ``s`` (``0 < s < M``; positive, in any unit)."""

    def enumeration_mass(self, n_features: int, size: int) -> float:
        """The mass of size ``s`` when deciding which layers to enumerate (:meth:`size_mass` by default)."""
        return self.size_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Paired(Sampler):
    """Sizes in proportion to the Shapley kernel's mass, ``C(M, s) k(M, s) = (M - 1) / (s (M - s))``:
    KernelSHAP's own distribution, drawn in complementary pairs (Lundberg & Lee, 2017; Covert &
    Lee, 2021, "Improving KernelSHAP: practical Shapley value estimation via linear regression")."""

    name = "paired"

    def size_mass(self, n_features: int, size: int) -> float:
        return shapley_kernel_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Leverage(Sampler):
    """Every size the same mass: the leverage scores of the efficiency-constrained Shapley
    regression are ``1 / C(M, s)`` up to a constant (Musco & Witter, 2025, "Provably accurate
    Shapley value estimation via leverage score sampling")."""

    name = "leverage"

    def size_mass(self, n_features: int, size: int) -> float:
        return 1.0


def innermost(n_features: int, size: int) -> bool:
    """Whether the layer ``{s, M - s}`` is one of the two nearest ``M / 2``."""
    return size >= n_features // 2 - 1


@dataclasses.dataclass(frozen=True)
class Middle(Sampler):
    """``share`` of the mass on the two innermost layers (the sizes nearest ``M / 2``), the rest uniform.

    For the third-order control variates while their ``C(M, 3)`` terms outnumber the sampled
    pairs: a residualised third-order term, zero on most coalitions of size 1 or ``M - 1``, varies
    most near ``M / 2``, so a middle-sized pair determines more of its coefficients. Every layer
    keeps a share that grows with the budget (consistent). Layers are enumerated as by
    :class:`Leverage` (this design's own mass would leave a small layer that the budget nearly
    covers to a few heavily weighted pairs).

    Attributes:
      share: the mass of the two innermost layers, in ``[0, 1)``.
    """

    share: float = MIDDLE_SHARE
    name = "middle"

    def __post_init__(self):
        number(self.share, "share", least=0.0, below=1.0)

    def size_mass(self, n_features: int, size: int) -> float:
        m = n_features
        inner = sum(1 for t in range(1, m) if innermost(m, min(t, m - t)))  # sizes in the two layers
        return (1 - self.share) / (m - 1) + (self.share / inner if innermost(m, min(size, m - size)) else 0.0)

    def enumeration_mass(self, n_features: int, size: int) -> float:
        return Leverage().size_mass(n_features, size)


@dataclasses.dataclass(frozen=True)
class Auto:
    """The rule behind ``sampler="auto"``, ``third_order="auto"`` and ``prior="auto"``.

    With the third-order control variates on: :class:`Middle` while the budget is at most
    ``middle_terms`` coalitions per third-order term (the surrogate interpolates the sample and a
    middle-sized pair determines most of it), then :class:`Leverage` from ``leverage_units``
    coalitions per feature; :class:`Paired` otherwise. Measured gains are in
    ``bench/scenarios/kernel_accuracy.py``.

    Attributes:
      controls_units: the controls are turned on once the plan samples (not enumerates) at least
        this many coalitions per feature (below that they barely help and their standard error
        loses coverage).
      leverage_units: coalitions per feature from which, with the controls on, leverage replaces paired.
      middle_terms: coalitions per third-order term up to which, with the controls on, middle is taken.
      prior_units, prior_coalitions: with the controls on, ``prior="auto"`` takes the leading-terms
        prior (:class:`jaxshap.estimators.Leading`, a rank-``r`` update per row of one shared
        solve) up to ``prior_units`` coalitions per feature and ``prior_coalitions`` in all, the
        isotropic one (one solve for every row) above. The update costs about
        ``(budget / 2)^2 r`` multiply-adds per row, which outgrows the row's model evaluations; the
        default 2048 keeps the default budget ``2 M + 2048`` on the shared solve for every ``M``.
      controls_coalitions: ``third_order="auto"`` leaves the controls off above this many coalitions
        when they would be solved in the dual form (more third-order terms than about half the
        coalitions, the regression rows ``U``): that form factorises ``U x U`` matrices, whose
        memory and cubic time outgrow the model evaluations (``M = 2048`` with 8192 coalitions
        peaked at 22.8 GB and took 125 s on 2 cores, against 0.8 GB and 4 s without), while so
        many terms share the prior variance of 16 features' and barely move the estimate.
    """

    controls_units: float = 2
    leverage_units: float = 10
    middle_terms: float = 1.5
    prior_units: float = 32
    prior_coalitions: float = 2048
    controls_coalitions: float = 4096
    name = "auto"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            number(getattr(self, field.name), field.name, least=0.0)

    def choose(self, n_features: int, n_coalitions: int, controls: bool) -> Sampler:
        """The design for ``n_coalitions`` coalitions over ``M = n_features``, controls on or off."""
        m = n_features
        if not controls or m < 3:
            return Paired()
        if n_coalitions <= self.middle_terms * math.comb(m, 3):
            return Middle()
        return Leverage() if n_coalitions >= self.leverage_units * m else Paired()

    def prior(self, n_features: int, n_coalitions: int, controls: bool) -> str:
        """``"leading"`` with the controls on, at most ``prior_units`` coalitions per feature and
        ``prior_coalitions`` in all, and some coalitions left unevaluated; else ``"isotropic"``."""
        m = n_features
        small = n_coalitions <= min(self.prior_units * m, self.prior_coalitions)
        return "leading" if controls and m >= 3 and n_coalitions < 2**m - 2 and small else "isotropic"

    def wants_controls(self, n_features: int, n_coalitions: int, sampler: str | Sampler | None = None) -> bool:
        """Whether ``third_order="auto"`` turns the controls on: the plan of ``sampler`` (paired
        while the design is still to be chosen, ``None``) samples at least ``controls_units``
        coalitions per feature, and the dual form, if it is the one, has at most
        ``controls_coalitions`` coalitions to factorise."""
        from ._kernel_plan import kernel_plan  # the plan is built from a sampler: imported when used

        plan = kernel_plan(n_features, n_coalitions, Paired() if sampler is None else sampler)
        dual = n_features + math.comb(n_features, 3) > plan.n_coalitions / 2
        if dual and plan.n_coalitions > self.controls_coalitions:
            return False
        return plan.n_coalitions - len(plan.enum_weights) >= self.controls_units * n_features


MAX_RANKED = 2**30
"""Populations above this are drawn by scores, *with* replacement (ranks would not fit in
``int32``); the chance that two of ``n`` draws coincide is below ``n**2 / 2**31`` there."""


def ranked(population: int) -> bool:
    """Whether a population of subsets is drawn by rank (without replacement)."""
    return population <= MAX_RANKED


def smallest(scores: Any, ks: Any, most: int | None = None) -> jax.Array:
    """Each row's ``k`` positions of smallest score (a uniform ``k``-subset for i.i.d. uniform
    scores; ties go to the lower position); ``ks`` broadcasts against ``scores.shape[:-1]`` and
    is at most ``most`` (static; default every position). One partial sort (``lax.top_k``) and a
    scatter, where ranking by two full sorts is several times slower on a CPU."""
    scores = jnp.asarray(scores)
    m = scores.shape[-1]
    order = jax.lax.top_k(-scores, m if most is None else most)[1]  # positions by increasing score
    take = jnp.broadcast_to(jnp.arange(order.shape[-1]) < jnp.asarray(ks)[..., None], order.shape)
    rows = jnp.indices(order.shape[:-1] + (1,), sparse=True)[:-1]
    return jnp.zeros(scores.shape, bool).at[(*rows, order)].set(take)


def unrank(ranks: jax.Array, n_items: int, ks: np.ndarray) -> jax.Array:
    """Subsets from their colexicographic ranks, ``ranks.shape + (n_items,)`` bools.

    ``ks`` holds the subset size of each row of ``ranks`` (shape ``ranks.shape[:-1]``). Members
    are recovered greedily from the largest position down (one ``lax.scan``): position ``p`` is
    taken when ``C(p, left) <= rank``, which then drops by that amount. A rank below
    ``C(n', k)`` gives a subset of ``range(n')``, so rows over fewer items share the scan.
    Negative (padding) ranks give arbitrary rows.
    """
    ks = np.asarray(ks)
    # entries a row can use are below its population (< 2**31); larger ones only need to stay larger
    table = binomial_table(n_items, int(ks.max()) + 1, dtype=object)
    table = jnp.asarray(np.minimum(table, np.iinfo(np.int32).max).astype(np.int32))

    def step(carry, p):
        rank, left = carry
        c = table[p, left]
        take = (left > 0) & (c <= rank)
        return (jnp.where(take, rank - c, rank), jnp.where(take, left - 1, left)), take

    left = jnp.broadcast_to(jnp.asarray(ks, jnp.int32)[..., None], ranks.shape)
    _, taken = jax.lax.scan(step, (ranks, left), jnp.arange(n_items - 1, -1, -1))
    return jnp.moveaxis(taken[::-1], 0, -1)


def _distinct_ranks(key: jax.Array, populations: np.ndarray, counts: np.ndarray) -> jax.Array:
    """Distinct uniform integers for several strata at once, each row in random order.

    Row ``i`` of the ``[S, n]`` result (``n = max(counts)``) holds ``counts[i]`` distinct integers
    uniform in ``[0, populations[i])``, then ``-1`` padding. Floyd's algorithm (Bentley & Floyd,
    1987, "A sample of brilliance") for all strata in one loop: step ``j`` draws ``t`` in
    ``[0, top]``, ``top = populations[i] - counts[i] + j``, and keeps ``t``, or ``top`` when ``t``
    was chosen before; a final sort by random keys makes every prefix a uniform subset too.
    """
    n = int(counts.max())
    steps = np.arange(n)
    valid_np = steps[None, :] < counts[:, None]
    tops_np = np.where(valid_np, populations[:, None] - counts[:, None] + steps[None, :], 0)  # inclusive
    tops, valid = jnp.asarray(tops_np, jnp.int32), jnp.asarray(valid_np)
    # one random call for the Floyd draws and the shuffle's 31-bit sort keys
    highs = np.stack([tops_np + 1, np.full(tops_np.shape, np.iinfo(np.int32).max)])
    draws, sort_keys = jax.random.randint(key, highs.shape, 0, jnp.asarray(highs, jnp.int32), dtype=jnp.int32)

    def step(j, chosen):
        t = draws[:, j]
        t = jnp.where(jnp.any(chosen == t[:, None], axis=1), tops[:, j], t)
        return chosen.at[:, j].set(jnp.where(valid[:, j], t, -1))

    chosen = jax.lax.fori_loop(0, n, step, jnp.full(tops.shape, -1, jnp.int32))
    pad = jnp.asarray((~valid_np).astype(np.int32))  # valid entries first, in uniform order
    return jax.lax.sort((pad, sort_keys, chosen), dimension=1, num_keys=2)[2]


def _draw_sets(key: jax.Array, m: int, strata: tuple[Stratum, ...]) -> jax.Array:
    """The draws of all strata, ``[S, n_max, M]`` (row ``i`` padded after ``strata[i].n_draws``).

    A middle stratum's ``(M/2 - 1)``-subsets of features ``1..M-1`` are drawn over the first
    ``M - 1`` positions and shifted right by one, with feature 0 added.
    """
    n = max(st.n_draws for st in strata)
    ks = np.array([st.k for st in strata])
    by_rank = np.array([ranked(st.population) for st in strata])
    middle = np.array([st.middle for st in strata])
    k_rank, k_unif = jax.random.split(key)
    parts = []
    if by_rank.any():
        pops = np.array([st.population for st in strata])[by_rank]
        counts = np.array([st.n_draws for st in strata])[by_rank]
        sets = unrank(_distinct_ranks(k_rank, pops, counts), m, ks[by_rank])
        parts.append(jnp.pad(sets, ((0, 0), (0, n - sets.shape[1]), (0, 0))))
    if not by_rank.all():  # astronomically many sets: draws are distinct with overwhelming probability
        scores = jax.random.uniform(k_unif, (int((~by_rank).sum()), n, m))
        # a middle stratum scores the last position out (the shift below moves the rest right)
        scores = jnp.where(jnp.asarray(middle[~by_rank])[:, None, None] & (jnp.arange(m) == m - 1), 2.0, scores)
        parts.append(smallest(scores, ks[~by_rank][:, None], int(ks[~by_rank].max())))
    order = np.argsort(np.concatenate([np.flatnonzero(by_rank), np.flatnonzero(~by_rank)]), kind="stable")
    sets = jnp.concatenate(parts, axis=0)[order]
    if middle.any():
        shifted = jnp.concatenate([jnp.ones(sets.shape[:2] + (1,), bool), sets[..., :-1]], axis=-1)
        sets = jnp.where(jnp.asarray(middle)[:, None, None], shifted, sets)
    return sets


def draw_layout(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static gather of a stratified plan's sampled coalitions from its draws ``[S, n_max, M]``.

    For each output row: its flat draw index, whether it is the complement of that draw, and its
    Horvitz-Thompson weight ``k(M, s) / pi`` (inclusion probability ``n_draws / population`` for
    a draw, ``n_pairs / population`` for a complement; the binomial cancels).
    """
    n = max(st.n_draws for st in plan.strata)
    index, flip, weight = [], [], []
    for i, st in enumerate(plan.strata):
        draws = i * n + np.arange(st.n_draws)
        index += [draws, draws[: st.n_pairs]]
        flip += [np.zeros(st.n_draws, bool), np.ones(st.n_pairs, bool)]
        mass = shapley_kernel_mass(plan.n_features, st.size) * (0.5 if st.middle else 1.0)  # middle sets: half of C(M, s)
        weight += [np.full(st.n_draws, mass / st.n_draws), np.full(st.n_pairs, mass / st.n_pairs)]
    return np.concatenate(index), np.concatenate(flip), np.concatenate(weight)


@static_cache(64)
def plan_rows(plan: KernelPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The regression rows of a plan's coalitions: ``(first, second, unit)``, each ``[U]``.

    A row is a complementary pair (``first`` and ``second`` index its two coalitions in the
    layout of :func:`sample_coalitions`) or a single coalition (``first == second``); ``unit`` is
    its sampling unit in :attr:`KernelPlan.unit` (0 for the enumerated coalitions).
    """
    m, n_e = plan.n_features, len(plan.enum_weights)
    codes = plan.enum_masks.astype(np.int64) @ (1 << np.arange(m, dtype=np.int64))
    where = {int(c): i for i, c in enumerate(codes)}
    first, second = [], []
    for i, c in enumerate(codes):
        j = where.get((1 << m) - 1 - int(c), i)
        if i <= j:
            first.append(i)
            second.append(j)
    unit = [0] * len(first)
    sampled = plan.unit[n_e:]
    order = np.argsort(sampled, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(sampled[order])) + 1) if len(order) else []:
        first.append(int(rows[0]) + n_e)
        second.append(int(rows[-1]) + n_e)
        unit.append(int(plan.unit[rows[0] + n_e]))
    return np.array(first), np.array(second), np.array(unit)


def sample_coalitions(key: jax.Array, plan: KernelPlan, dtype=None) -> tuple[jax.Array, jax.Array]:
    """Draw the coalitions of ``plan``: boolean masks ``[C, M]`` and regression weights ``[C]``.

    The enumerated coalitions come first with their kernel weights ``k(M, |S|)``; the sampled
    ones follow stratum by stratum (the draws, then the complements of the first ``n_pairs``
    draws) with Horvitz-Thompson weights ``k(M, |S|) / pi(S)``, so that ``sum_c w_c g(S_c)`` is
    an unbiased estimate of ``sum_S k(M, |S|) g(S)`` over all ``2**M - 2`` coalitions for any
    ``g``; budgets below one pair per layer draw pooled layers with Hansen-Hurwitz weights. All
    strata are drawn together (one Floyd loop, one unranking scan).

    Args:
      key: PRNG key.
      plan: a :class:`~jaxshap.coalitions.KernelPlan` from :func:`~jaxshap.coalitions.kernel_plan`.
      dtype: floating dtype of the weights; by default float64 under ``jax_enable_x64``, else float32.
    """
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype
    enum, enum_w = jnp.asarray(plan.enum_masks), jnp.asarray(plan.enum_weights, dtype)
    if plan.pooled is not None:
        masks, weights = _draw_pooled(key, plan.n_features, plan.pooled, dtype)
        return jnp.concatenate([enum, masks]), jnp.concatenate([enum_w, weights])
    if not plan.strata:
        return enum, enum_w
    index, flip, weight = draw_layout(plan)
    sampled = _draw_sets(key, plan.n_features, plan.strata).reshape(-1, plan.n_features)[index] ^ jnp.asarray(flip)[:, None]
    return jnp.concatenate([enum, sampled]), jnp.concatenate([enum_w, jnp.asarray(weight, dtype)])


def _draw_pooled(key: jax.Array, m: int, pooled: Pooled, dtype) -> tuple[jax.Array, jax.Array]:
    """The pooled layers' coalitions: ``n_pairs`` draws, their complements, then the odd single
    (which takes the larger side half of the time: uniform over its layer's coalitions)."""
    p, n = pooled.n_pairs, pooled.n_pairs + pooled.extra
    k_layer, k_set, k_side = jax.random.split(key, 3)
    layer = jax.random.categorical(k_layer, jnp.log(jnp.asarray(pooled.probs, jnp.float32)), shape=(n,))
    size = jnp.asarray(pooled.sizes, jnp.int32)[layer]
    size = jnp.where(jax.random.bernoulli(k_side, 0.5, (n,)) & (jnp.arange(n) >= p), m - size, size)
    sets = smallest(jax.random.uniform(k_set, (n, m)), size)
    pair_w = jnp.asarray(pooled.pair_weights(m), dtype)[layer]
    single_w = jnp.asarray(pooled.single_weights(m), dtype)[layer]
    return (jnp.concatenate([sets[:p], ~sets[:p], sets[p:]]), jnp.concatenate([pair_w[:p], pair_w[:p], single_w[p:]]))
