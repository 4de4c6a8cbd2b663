"""jaxshap: Shapley-value explanations as compiled, differentiable JAX programs.

Public API (everything else is private):

* Explainers: :class:`ExactExplainer`, :class:`PermutationExplainer`, :class:`KernelExplainer`.
* Result: :class:`Explanation`.
* Submodules: :mod:`jaxshap.maskers` (value functions), :mod:`jaxshap.estimators` (estimator
  kernels on any value function), :mod:`jaxshap.coalitions` (masks, weights, permutations),
  :mod:`jaxshap.datasets` (data shipped with the package).
"""

from . import coalitions, datasets, estimators, maskers
from ._chunking import DEFAULT_MEMORY_BUDGET
from ._exact_explainer import ExactExplainer
from ._explanation import Explanation
from ._kernel_explainer import KernelExplainer
from ._permutation_explainer import PermutationExplainer

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "ExactExplainer",
    "Explanation",
    "KernelExplainer",
    "PermutationExplainer",
    "coalitions",
    "datasets",
    "estimators",
    "maskers",
]
