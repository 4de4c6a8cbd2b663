"""Coalition machinery: mask enumeration, Shapley weights and permutation sampling."""

from ._coalitions import (
    all_masks,
    exact_coefficients,
    permutation_ranks,
    prefix_masks,
    sample_permutations,
    shapley_weights,
)

__all__ = [
    "all_masks",
    "exact_coefficients",
    "permutation_ranks",
    "prefix_masks",
    "sample_permutations",
    "shapley_weights",
]
