"""shap's ``shap.explainers`` names: ``jaxshap.explainers.Exact(model, X)`` and so on.

Each name is the jaxshap explainer of that algorithm; constructors take shap's arguments (see
:mod:`jaxshap._engine._shap_api`):

* :data:`Exact` -- :class:`jaxshap.ExactExplainer`;
* :data:`Permutation` -- :class:`jaxshap.PermutationExplainer`;
* :data:`Partition` -- :class:`jaxshap.PartitionExplainer` (exact Owen values);
* :data:`Coalition` -- :class:`jaxshap.CoalitionExplainer` (exact Winter values over a named,
  nested ``partition_tree``);
* :data:`Kernel` -- :class:`jaxshap.KernelExplainer`;
* :data:`Linear` -- :class:`jaxshap.LinearExplainer`;
* :data:`Tree` -- :class:`jaxshap.TreeExplainer`;
* :data:`GPUTree` -- :class:`jaxshap.TreeExplainer` too: it runs on whatever device JAX uses,
  a GPU included, so shap's CUDA-only class needs no counterpart of its own.

:func:`register_algorithm` adds an explainer to :class:`jaxshap.Explainer`'s choices (its
``algorithm=`` name and, optionally, when ``"auto"`` picks it; see :class:`Choice`).
"""

from ._explainers._auto import Choice, register_algorithm
from ._explainers._exact import (
    CoalitionExplainer as Coalition,
    ExactExplainer as Exact,
    PartitionExplainer as Partition,
)
from ._explainers._kernel import KernelExplainer as Kernel
from ._explainers._linear import LinearExplainer as Linear
from ._explainers._permutation import PermutationExplainer as Permutation
from ._explainers._tree import TreeExplainer as Tree

GPUTree = Tree

__all__ = ["Choice", "Coalition", "Exact", "GPUTree", "Kernel", "Linear", "Partition", "Permutation", "Tree", "register_algorithm"]
