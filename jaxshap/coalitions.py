"""Coalition machinery: mask enumeration, Shapley weights, permutation and KernelSHAP sampling."""

from ._coalitions._masks import (
    all_masks,
    exact_coefficients,
    permutation_ranks,
    prefix_masks,
    sample_permutations,
)
from ._coalitions._combinatorics import shapley_weights
from ._coalitions._kernel_sampling import KernelPlan, kernel_plan, kernel_weight
from ._coalitions._kernel_sampling import min_coalitions as min_kernel_coalitions
from ._coalitions._kernel_sampling import sample_coalitions as sample_kernel_coalitions

__all__ = [
    "KernelPlan",
    "kernel_plan",
    "kernel_weight",
    "min_kernel_coalitions",
    "sample_kernel_coalitions",
    "all_masks",
    "exact_coefficients",
    "permutation_ranks",
    "prefix_masks",
    "sample_permutations",
    "shapley_weights",
]
