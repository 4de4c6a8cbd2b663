"""jaxshap: Shapley-value explanations as compiled, differentiable JAX programs.

Public API (everything else is private):

* Explainers: :class:`Explainer` (picks one as ``shap.Explainer`` does), :class:`ExactExplainer`,
  :class:`PermutationExplainer`, :class:`PartitionExplainer`, :class:`CoalitionExplainer`,
  :class:`KernelExplainer`, :class:`LinearExplainer`, :class:`TreeExplainer` (also as shap spells them:
  :mod:`jaxshap.explainers`); for differentiable models :class:`GradientExplainer` (expected
  gradients), :func:`integrated_gradients` and :class:`AmortizedExplainer` (FastSHAP).
* Result: :class:`Explanation`; :class:`Decomposition` (``TreeExplainer.decompose``: the exact
  interventional functional decomposition of a tree ensemble).
* Interactions and effects: :func:`partial_dependence` (:class:`PartialDependence`),
  :func:`h_statistic` (:class:`HStatistics`), :func:`functional_anova` (:class:`FunctionalANOVA`),
  :func:`accumulated_local_effects` (:class:`ALE`).
* Choosing a value function: :func:`msev` (the MSEv criterion, with its standard error).
* Runtime: :func:`enable_compilation_cache` (JAX's persistent compilation cache, one switch).
* Data: :func:`sample` (shap's ``shap.sample``: the same background rows) and :func:`kmeans`
  (shap's ``shap.kmeans``: weighted centres, taken as a background by every explainer).
* shap's top-level plots: :func:`summary_plot`, :func:`force_plot`, :func:`dependence_plot`,
  :func:`decision_plot`, :func:`waterfall_plot`, :func:`initjs` (shap's, on converted results);
  ``shap.plots.*`` also take jaxshap results directly.
* Submodules: :mod:`jaxshap.maskers` (value functions), :mod:`jaxshap.estimators` (estimator
  kernels on any value function), :mod:`jaxshap.coalitions` (masks, weights, sampling),
  :mod:`jaxshap.datasets` (data shipped with the package), :mod:`jaxshap.plots` (shap's plots
  on jaxshap results), :mod:`jaxshap.links` (``identity``, ``logit``, as ``shap.links``),
  :mod:`jaxshap.trees` (tree ensembles: the reader protocol that adds a model format to
  ``TreeExplainer``).
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:  # the public names; each is imported on its first use (jaxshap._lazy)
    from . import coalitions, datasets, estimators, explainers, links, maskers, plots, trees
    from ._explainers._amortized import AmortizedExplainer
    from ._core._platform import enable_compilation_cache
    from ._core._validate import DEFAULT_MEMORY_BUDGET
    from ._explainers._auto import Explainer
    from ._explainers._exact import CoalitionExplainer
    from ._explainers._exact import ExactExplainer
    from ._explainers._gradient import GradientExplainer, integrated_gradients
    from ._result._decomposition import Decomposition
    from ._result._explanation import Explanation
    from ._effects._ale import ALE, accumulated_local_effects
    from ._effects._functional_anova import FunctionalANOVA, functional_anova
    from ._effects._hstats import HStatistics, h_statistic
    from ._effects._msev import msev
    from ._explainers._kernel import KernelExplainer
    from ._explainers._linear import LinearExplainer
    from ._effects._partial_dependence import PartialDependence, partial_dependence
    from ._explainers._exact import PartitionExplainer
    from .maskers._independent import sample
    from .maskers._kmeans import kmeans
    from .plots import decision_plot, dependence_plot, force_plot, initjs, summary_plot, waterfall_plot
    from ._explainers._permutation import PermutationExplainer
    from ._explainers._tree import TreeExplainer

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())

__version__ = "0.1.0"

__all__ = [
    "ALE",
    "AmortizedExplainer",
    "CoalitionExplainer",
    "DEFAULT_MEMORY_BUDGET",
    "Decomposition",
    "ExactExplainer",
    "Explainer",
    "Explanation",
    "FunctionalANOVA",
    "GradientExplainer",
    "HStatistics",
    "KernelExplainer",
    "LinearExplainer",
    "PartialDependence",
    "PartitionExplainer",
    "PermutationExplainer",
    "TreeExplainer",
    "accumulated_local_effects",
    "coalitions",
    "datasets",
    "decision_plot",
    "dependence_plot",
    "enable_compilation_cache",
    "estimators",
    "explainers",
    "force_plot",
    "functional_anova",
    "h_statistic",
    "initjs",
    "integrated_gradients",
    "kmeans",
    "links",
    "maskers",
    "msev",
    "partial_dependence",
    "plots",
    "sample",
    "summary_plot",
    "trees",
    "waterfall_plot",
]
