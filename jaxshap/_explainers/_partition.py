"""``PartitionExplainer``: shap's name for Owen values over a hierarchy of the features."""

from __future__ import annotations

from typing import Any, Callable

from ..maskers import Partition
from ._exact import ExactExplainer


class PartitionExplainer(ExactExplainer):
    r"""Owen values over a feature hierarchy, as ``shap.PartitionExplainer(model, masker)``.

    Given background rows (array or DataFrame) it uses ``jaxshap.maskers.Partition(data)``, as
    shap does: shap's sample of 100 rows and a single-linkage clustering of the columns'
    correlation distances; given a :class:`jaxshap.maskers.Partition` masker, its hierarchy.
    The values are the exact Owen values over that binary hierarchy (Owen, 1977), computed by
    :class:`ExactExplainer` from only the coalitions the hierarchy needs (about
    ``M * 2**depth``), whatever ``max_evals``: for a binary hierarchy shap's recursive
    partition algorithm computes the same values once its budget covers the hierarchy.

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      masker: background rows, or a :class:`jaxshap.maskers.Partition` masker.
      partition_tree: shap's named, possibly non-binary hierarchy (a nested dict); not taken
        here (shap's ``PartitionExplainer`` ignores it): use :class:`CoalitionExplainer`, which
        computes the Winter values over it, or pass a linkage matrix as
        ``maskers.Partition(data, clustering=Z)``.
      **kwargs: as :class:`ExactExplainer` (``link``, ``feature_names``, ``memory_budget``).

    Raises:
      ValueError: for a ``partition_tree``, a masker that is not a ``Partition``, or a
        hierarchy whose exact Owen values need more than ``2**20`` coalitions per row (use
        ``jaxshap.PermutationExplainer`` with the masker).
    """

    def __init__(self, model: Callable, masker: Any, *, partition_tree: Any = None, **kwargs: Any):
        if partition_tree is not None:
            raise ValueError(
                "`partition_tree` (shap's named, nested feature hierarchy) is not taken by PartitionExplainer, whose "
                "Owen values follow the masker's binary clustering: use jaxshap.CoalitionExplainer(model, masker, "
                "partition_tree=...) for the Winter values over it, or pass a linkage matrix [M - 1, 4] as "
                "jaxshap.maskers.Partition(data, clustering=Z)."
            )
        if not hasattr(masker, "coalition_values"):
            masker = Partition(masker)
        if not isinstance(masker, Partition):
            raise ValueError(
                f"PartitionExplainer needs background rows or a jaxshap.maskers.Partition masker; got "
                f"{type(masker).__name__}. For Shapley values use jaxshap.ExactExplainer."
            )
        super().__init__(model, masker, **kwargs)
