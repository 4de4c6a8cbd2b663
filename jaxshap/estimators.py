"""Estimator kernels, for research use: attributions from any value function.

Each kernel works on one game ``v: [C, M] bool -> [C, ...]`` and knows nothing about models;
``jax.vmap`` over rows makes a batch. The explainers are built on these. KernelSHAP's priors on
its third-order control variates are :class:`RowPrior` objects (:class:`Isotropic`,
:class:`Hierarchical`, :class:`Leading`, or a subclass of your own, registered by its ``name``).
"""

from ._estimators._exact import exact_shapley, winter_values
from ._estimators._interactions import INDICES, banzhaf_values, exact_interactions, interaction_matrix
from ._estimators._kernel import kernel_interactions, kernel_shapley, kernel_solve
from ._estimators._permutation import permutation_shapley
from ._estimators._kernel_priors import Hierarchical, Isotropic, Leading, RowPrior

__all__ = [
    "INDICES",
    "banzhaf_values",
    "exact_interactions",
    "exact_shapley",
    "interaction_matrix",
    "kernel_interactions",
    "kernel_shapley",
    "kernel_solve",
    "permutation_shapley",
    "winter_values",
    "RowPrior",
    "Isotropic",
    "Hierarchical",
    "Leading",
]
