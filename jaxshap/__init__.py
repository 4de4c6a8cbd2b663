"""jaxshap: Shapley-value explanations as compiled, differentiable JAX programs.

Public API (everything else is private):

* Explainers: :class:`ExactExplainer`, :class:`PermutationExplainer`, :class:`KernelExplainer`,
  :class:`LinearExplainer`, :class:`TreeExplainer`.
* Result: :class:`Explanation`.
* Interactions and effects: :func:`partial_dependence` (:class:`PartialDependence`),
  :func:`h_statistic` (:class:`HStatistics`), :func:`functional_anova` (:class:`FunctionalANOVA`).
* Runtime: :func:`enable_compilation_cache` (JAX's persistent compilation cache, one switch).
* Submodules: :mod:`jaxshap.maskers` (value functions), :mod:`jaxshap.estimators` (estimator
  kernels on any value function), :mod:`jaxshap.coalitions` (masks, weights, sampling),
  :mod:`jaxshap.datasets` (data shipped with the package).
"""

from . import coalitions, datasets, estimators, maskers
from ._runtime._cache import enable_compilation_cache
from ._runtime._chunking import DEFAULT_MEMORY_BUDGET
from ._explainers._exact import ExactExplainer
from ._explanation import Explanation
from ._effects._functional_anova import FunctionalANOVA, functional_anova
from ._effects._hstats import HStatistics, h_statistic
from ._explainers._kernel import KernelExplainer
from ._explainers._linear import LinearExplainer
from ._effects._partial_dependence import PartialDependence, partial_dependence
from ._explainers._permutation import PermutationExplainer
from ._tree import TreeExplainer

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "ExactExplainer",
    "Explanation",
    "FunctionalANOVA",
    "HStatistics",
    "KernelExplainer",
    "LinearExplainer",
    "PartialDependence",
    "PermutationExplainer",
    "TreeExplainer",
    "coalitions",
    "datasets",
    "enable_compilation_cache",
    "estimators",
    "functional_anova",
    "h_statistic",
    "maskers",
    "partial_dependence",
]
