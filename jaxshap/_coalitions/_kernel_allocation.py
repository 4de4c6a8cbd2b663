"""How a KernelSHAP budget is shared among the layers of coalition sizes.

Layers ``{s, M - s}`` are visited from the outside in (``s = 1, 2, ...``, where the Shapley
kernel puts most of its mass). A layer is enumerated while its share of the remaining budget, in
proportion to the sampler's :meth:`~jaxshap.coalitions.Sampler.enumeration_mass`, covers all its
coalitions (as in shap's KernelExplainer); every later layer is a stratum, which receives one
complementary pair and then pairs in proportion to the sampler's
:meth:`~jaxshap.coalitions.Sampler.size_mass`.
"""

from __future__ import annotations

import numpy as np

from ._kernel_layers import sides
from ._samplers import Sampler

Layer = tuple[int, bool, int]
"""``(s, middle, coalitions)`` of a layer ``{s, M - s}`` (:func:`._kernel_layers.layers`)."""


def layer_masses(m: int, layers: list[Layer], sampler: Sampler, *, enumeration: bool = False) -> list[float]:
    """The sampler's mass of each layer: the mass of its sizes (a two-sided layer counts twice)."""
    mass = sampler.enumeration_mass if enumeration else sampler.size_mass
    return [sides(m, s) * mass(m, s) for (s, _, _) in layers]


def enumerated_layers(m: int, layers: list[Layer], budget: int, sampler: Sampler) -> tuple[int, int]:
    """``(n_enumerated, left)``: how many outermost layers to enumerate, and the budget left for the rest.

    A layer is enumerated when its share of the remaining budget, in proportion to the
    enumeration mass, would cover it and one pair is left for every later layer; the size-1
    layer is enumerated whenever that pair is left (its coalitions make the regression
    identifiable); everything is enumerated once it all fits.
    """
    mass = layer_masses(m, layers, sampler, enumeration=True)
    left, n_enum = budget, 0
    for i, (_, _, count) in enumerate(layers):
        later = [c for (_, _, c) in layers[i + 1 :]]
        if count + sum(later) <= left:  # everything left fits: enumerate it all
            return len(layers), left - count - sum(later)
        share = left * mass[i] / sum(mass[i:])
        if (i == 0 or count <= share) and count <= left - 2 * len(later):
            left -= count
            n_enum += 1
        else:
            break
    return n_enum, left


def allocate(m: int, layers: list[Layer], budget: int, sampler: Sampler) -> list[tuple[int, int]]:
    """Split ``budget`` coalitions into ``(pairs, extra)`` per sampled layer: one pair each, the
    rest in proportion to the sampler's mass (largest remainders), within each layer's capacity.
    An odd budget's last coalition goes to the largest stratum that still has an undrawn set."""
    capacity = [c // 2 for (_, _, c) in layers]  # complementary pairs in the layer
    mass = np.array(layer_masses(m, layers, sampler))
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
        for i in sorted(range(len(layers)), key=lambda i: -pairs[i]):
            if pairs[i] < capacity[i]:
                extras[i] = 1
                break
    return list(zip(pairs, extras))
