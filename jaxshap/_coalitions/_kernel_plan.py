"""KernelSHAP's coalition plan: stratified, paired, without replacement, shape-static.

A plan (:class:`~jaxshap._coalitions._kernel_design.KernelPlan`, built once in Python from the
static sizes) splits the coalition sizes ``s = 1, ..., M - 1`` into layers ``{s, M - s}``
(:mod:`._kernel_layers`). The outermost layers that the budget covers are enumerated with their
exact kernel weights; every other layer is a *stratum* that receives a fixed number of
complementary pairs ``(S, N \\ S)`` (at least one), drawn uniformly without replacement, and
each sampled coalition gets the Horvitz-Thompson weight ``k(M, s) / pi(S)`` with ``pi(S)`` its
inclusion probability (:mod:`._kernel_allocation`). The kernel-weighted sums
``sum_S k(S) z_S z_S^T`` and ``sum_S k(S) z_S v(S)`` over all coalitions are then estimated
without bias, and the regression built from them is consistent. Budgets too small for one pair
per layer pool the layers instead (:mod:`._kernel_pooled`).

The designs (:class:`~jaxshap.coalitions.Sampler`: ``Paired``, ``Leverage``, ``Middle``, or one
of your own) differ only in how many pairs each stratum receives. Everything is shape-static:
the number of coalitions per stratum is fixed by the plan.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._combinatorics import shapley_kernel
from ._kernel_allocation import Layer, allocate, enumerated_layers
from ._kernel_design import KernelPlan, Stratum
from ._kernel_layers import layers, max_coalitions, min_coalitions, stratified_coalitions
from ._kernel_pooled import pooled_layout
from ._samplers import Sampler
from ._static_cache import static_cache


def kernel_plan(n_features: int, n_coalitions: int, sampler: str | Sampler = "paired") -> KernelPlan:
    """Build the static sampling plan of ``n_coalitions`` coalitions over ``M = n_features``.

    Budgets of ``2**M - 2`` or more enumerate every coalition (the budget is capped there).
    Budgets below :func:`~jaxshap._coalitions._kernel_layers.stratified_coalitions` enumerate
    the size-1 layer when it fits with at least one pair to spare (``2 M + 2``, shap's smallest
    useful budget) and sample the other layers together, with replacement
    (:class:`~jaxshap._coalitions._kernel_design.Pooled`).

    Args:
      n_features: ``M``.
      n_coalitions: the budget, coalitions other than the empty and the full one.
      sampler: the design that shares the sampled pairs among the layers: a
        :class:`~jaxshap.coalitions.Sampler` or the name of a registered one (``"paired"``:
        in proportion to the kernel mass; ``"leverage"``: uniformly over sizes; ``"middle"``:
        mostly at the sizes nearest ``M / 2``).

    Raises:
      ValueError: for an unknown sampler or a budget below
        :func:`~jaxshap._coalitions._kernel_layers.min_coalitions`.
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
        enum_masks, enum_weights, fields = pooled_layout(m, budget, sampler)
    else:
        every = layers(m)
        n_enum, left = enumerated_layers(m, every, budget, sampler)
        enum_masks, enum_weights = _enumerate(m, every[:n_enum])
        strata = _strata(m, every[n_enum:], left, sampler)
        fields = dict(strata=strata, **_variance_layout(strata, len(enum_weights), budget))
    return KernelPlan(
        n_features=m, n_coalitions=budget, sampler=sampler.name, enum_masks=enum_masks, enum_weights=enum_weights,
        **fields,
    )


def _enumerate(m: int, enumerated: list[Layer]) -> tuple[np.ndarray, np.ndarray]:
    """Every coalition of the enumerated layers, ``[E, M]``, with its kernel weight ``[E]``
    (size by size, each in lexicographic order of its members)."""
    masks, weights = [np.zeros((0, m), bool)], [np.zeros(0)]
    for s, middle, _ in enumerated:
        for size in (s,) if middle else (s, m - s):
            sets = np.array(list(itertools.combinations(range(m), size)), dtype=int)
            layer = np.zeros((len(sets), m), dtype=bool)
            np.put_along_axis(layer, sets, True, axis=1)
            masks.append(layer)
            weights.append(np.full(len(sets), shapley_kernel(m, size)))
    return np.concatenate(masks), np.concatenate(weights)


def _strata(m: int, sampled: list[Layer], budget: int, sampler: Sampler) -> tuple[Stratum, ...]:
    """The sampled layers with their pairs; a middle layer draws ``(M/2 - 1)``-subsets of ``M - 1`` features."""
    if not sampled:
        return ()
    return tuple(
        Stratum(s, middle, pairs, extra, *((m - 1, s - 1) if middle else (m, s)))
        for (s, middle, _), (pairs, extra) in zip(sampled, allocate(m, sampled, budget, sampler))
    )


def _variance_layout(strata: tuple[Stratum, ...], n_enumerated: int, budget: int) -> dict[str, np.ndarray]:
    """The sampling units and variance groups of a stratified plan (the fields of :class:`KernelPlan`).

    The enumerated coalitions are one zero-variance unit in group 0; each stratum's pairs (and
    its extra single) are units of one group; strata with a single unit are pooled into one
    group (collapsed strata), which errs on the conservative side.
    """
    unit = [np.zeros(n_enumerated, dtype=int)]
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
    return dict(
        unit=unit_arr,
        unit_group=np.array(unit_group, dtype=int),
        group_factor=factor,
        group_count=np.maximum(counts, 1.0),
        group_centred=np.ones(len(groups)),
    )
