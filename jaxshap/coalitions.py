"""Coalition machinery: mask enumeration, Shapley weights, permutation and KernelSHAP sampling.

KernelSHAP's designs are :class:`Sampler` objects (:class:`Paired`, :class:`Leverage`,
:class:`Middle`, or a subclass of your own, registered by its ``name``); :class:`Auto` is the
rule behind ``sampler="auto"``.
"""

from ._coalitions._combinatorics import (
    all_masks,
    exact_coefficients,
    permutation_ranks,
    prefix_masks,
    sample_permutations,
    shapley_kernel as kernel_weight,
    shapley_weights,
)
from ._coalitions._kernel_plan import KernelPlan, kernel_plan
from ._coalitions._kernel_plan import min_coalitions as min_kernel_coalitions
from ._coalitions._kernel_sampling import (
    Auto,
    Leverage,
    Middle,
    Paired,
    Sampler,
    sample_coalitions as sample_kernel_coalitions,
)

__all__ = [
    "KernelPlan",
    "kernel_plan",
    "kernel_weight",
    "min_kernel_coalitions",
    "sample_kernel_coalitions",
    "Sampler",
    "Paired",
    "Leverage",
    "Middle",
    "Auto",
    "all_masks",
    "exact_coefficients",
    "permutation_ranks",
    "prefix_masks",
    "sample_permutations",
    "shapley_weights",
]
