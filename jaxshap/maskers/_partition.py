"""The Partition masker: interventional values, attributed as Owen values over a feature hierarchy."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._coalitions._hierarchy import (
    LINKAGES,
    check_linkage,
    correlation_distances,
    linkage,
    order_tables,
    owen_plan,
)
from ._independent import DEFAULT_MAX_SAMPLES, Independent
from .._coalitions._static_cache import static_cache

MAX_OWEN_COALITIONS = 2**20
"""Exact Owen values refuse hierarchies that need more coalitions per row than this."""


@static_cache(32)
def _tables(clustering: tuple, n_features: int):
    Z = np.asarray(clustering, np.float64).reshape(-1, 4)
    return owen_plan(Z, n_features), order_tables(Z, n_features)


@jax.tree_util.register_pytree_node_class
class Partition(Independent):
    r"""Interventional coalition values with a hierarchy of features: explainers give Owen values.

    The value function is :class:`Independent`'s, :math:`v_x(S) = \sum_b w_b f(x_S, b_{\bar S})`;
    what changes is the attribution. Features are clustered into a binary hierarchy (by default,
    single-linkage clustering of correlation distances ``1 - corr(x_i, x_j)`` between the
    background's columns, as ``shap.maskers.Partition(data, clustering="correlation")``), and
    :class:`~jaxshap.ExactExplainer` and :class:`~jaxshap.PermutationExplainer` average marginal
    contributions only over orders in which every cluster's features arrive together: the Owen
    values (Owen, 1977). Correlated features that form a cluster then share their credit instead
    of being split apart by orders that interleave them. For feature ``i`` with sibling clusters
    ``s_1..s_d`` on its path from the root,

    .. math::

        \phi_i = 2^{-d} \sum_{T \subseteq \{1..d\}} \bigl[v(\textstyle\bigcup_{k\in T} s_k \cup \{i\})
                 - v(\bigcup_{k \in T} s_k)\bigr]

    (see :mod:`jaxshap._coalitions._hierarchy`). Exact Owen values need only the coalitions that
    are unions of siblings along each path (about ``M * 2**depth``; far fewer than ``2**M`` for
    a balanced hierarchy); the permutation explainer samples hierarchy-consistent orders (each
    node swaps its children with probability 1/2; the reversed order is the antithetic one).
    ``KernelExplainer`` has no Owen form and refuses this masker.

    Args:
      data: background rows (as :class:`Independent`).
      max_samples: background rows kept (default 100, as shap; ``None`` keeps all).
      clustering: ``"correlation"`` (default), or a linkage matrix ``[M - 1, 4]`` in SciPy's
        format (``scipy.cluster.hierarchy.linkage`` or ``shap.utils.hclust``).
      linkage: ``"single"`` (default, as shap), ``"complete"`` or ``"average"``, for
        ``clustering="correlation"``.
      key: PRNG key for the subsample (``None``: shap's rows).
      weights: optional background row weights.

    Raises:
      ValueError: for an unknown clustering or linkage, or a malformed linkage matrix.
    """

    def __init__(
        self,
        data: Any,
        max_samples: int | None = DEFAULT_MAX_SAMPLES,
        clustering: Any = "correlation",
        *,
        linkage: str = "single",
        key: Any = None,
        weights: Any = None,
    ):
        super().__init__(data, max_samples, key, weights=weights)
        m = self.n_features
        if isinstance(clustering, str):
            if clustering != "correlation":
                raise ValueError(
                    f"`clustering` must be 'correlation' or a linkage matrix [M - 1, 4]; got {clustering!r}. "
                    "For another metric, pass scipy.cluster.hierarchy.linkage(...) of your distances."
                )
            if linkage not in LINKAGES:
                raise ValueError(f"`linkage` must be one of {LINKAGES}; got {linkage!r}.")
            Z = _linkage(np.asarray(self.data), linkage) if m > 1 else np.zeros((0, 4))
        else:
            Z = check_linkage(clustering, m)
        self.clustering = Z
        self._key = tuple(float(v) for v in Z.reshape(-1))

    @property
    def owen_coalitions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(masks [C, M], coef [M, C])``: exact Owen values are ``coef @ v(masks)``."""
        return _tables(self._key, self.n_features)[0]

    @property
    def order_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(node, side, size)`` tables to draw hierarchy-consistent orders."""
        return _tables(self._key, self.n_features)[1]

    def tree_flatten(self):
        return (self.data, self.weights), (self.feature_names, self._key)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.data, obj.weights = children
        obj.feature_names, obj._key = aux
        obj.clustering = np.asarray(obj._key, np.float64).reshape(-1, 4)
        return obj


def _linkage(data: np.ndarray, method: str) -> np.ndarray:
    return linkage(correlation_distances(data), method)
