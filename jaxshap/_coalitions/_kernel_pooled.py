"""The KernelSHAP plan of a budget below one pair per layer: pooled layers, sampled with replacement.

Below :func:`~jaxshap._coalitions._kernel_layers.stratified_coalitions` the size-1 layer is
enumerated when it fits with at least one pair to spare (``2 M + 2``, shap's smallest useful
budget), and each remaining pair picks its layer at random in proportion to the sampler's mass,
with Hansen-Hurwitz (importance) weights (:class:`~jaxshap._coalitions._kernel_design.Pooled`),
so the kernel-weighted sums stay unbiased at any budget of at least one pair.
"""

from __future__ import annotations

import numpy as np

from ._combinatorics import shapley_kernel
from ._kernel_allocation import layer_masses
from ._kernel_design import Pooled
from ._kernel_layers import layers
from ._samplers import Sampler

# Student's t quantiles t_{df, 0.975} for df = 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def small_sample_factor(df: int) -> float:
    """``(t_{df, 0.975} / z_{0.975})^2``: the variance scale that widens a normal interval to Student's."""
    t = _T975[df - 1] if df <= len(_T975) else 1.960 + 2.4 / df
    return (t / 1.960) ** 2


def pooled_layout(m: int, budget: int, sampler: Sampler) -> tuple[np.ndarray, np.ndarray, dict]:
    """The layout of ``budget`` coalitions over ``M = m`` features, ``budget`` below one pair per layer.

    Returns ``(enum_masks, enum_weights, fields)``: the enumerated coalitions (the size-1 layer,
    or none) and the other fields of the :class:`~jaxshap._coalitions._kernel_design.KernelPlan`.
    """
    every = layers(m)
    enum = budget >= 2 * m + 2 and len(every) >= 2
    pooled_layers = every[1:] if enum else every
    left = budget - 2 * m if enum else budget
    mass = np.array(layer_masses(m, pooled_layers, sampler))
    pooled = Pooled(tuple(s for s, _, _ in pooled_layers), tuple(mass / mass.sum()), left // 2, left % 2)
    if enum:
        enum_masks = np.concatenate([np.eye(m, dtype=bool), ~np.eye(m, dtype=bool)])
        enum_weights = np.full(2 * m, shapley_kernel(m, 1))
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
    pair_factor = (n_p / (n_p - 1) if n_p >= 2 else 1.0) * small_sample_factor(max(n_p - 1, 1))
    return enum_masks, enum_weights, dict(
        strata=(),
        unit=unit,
        unit_group=unit_group,
        group_factor=np.array([0.0, pair_factor, small_sample_factor(1)]),
        group_count=np.array([1.0, max(n_p, 1), 1.0]),
        group_centred=np.array([0.0, 1.0 if n_p >= 2 else 0.0, 0.0]),
        pooled=pooled,
        identified=enum or n_p + extra >= m - 1,
    )
