"""The Partition masker: interventional values, attributed as Owen values over a feature hierarchy."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._hierarchy import (
    LINKAGES,
    check_linkage,
    balanced_flips,
    consistent_ranks,
    correlation_distances,
    linkage,
    order_tables,
    owen_plan,
)
from .._coalitions._combinatorics import static_cache
from .._estimators._exact import owen_exact
from ._base import ValueFn
from ._independent import DEFAULT_MAX_SAMPLES, Independent


@static_cache(32)
def _tables(clustering: tuple, n_features: int):
    Z = np.asarray(clustering, np.float64).reshape(-1, 4)
    return owen_plan(Z, n_features), order_tables(Z, n_features)


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
        # static configuration: a tuple stays concrete under jit (an array would be a traced leaf)
        self._clustering = tuple(float(v) for v in Z.reshape(-1))

    @property
    def clustering(self) -> np.ndarray:
        """The feature hierarchy as a linkage matrix ``[M - 1, 4]`` in SciPy's format."""
        return np.asarray(self._clustering, np.float64).reshape(-1, 4)

    @property
    def owen_coalitions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(masks [C, M], coef [M, C])``: exact Owen values are ``coef @ v(masks)``."""
        return _tables(self._clustering, self.n_features)[0]

    @property
    def order_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(node, side, size)`` tables to draw hierarchy-consistent orders."""
        return _tables(self._clustering, self.n_features)[1]

    # --- attribution hooks: Owen values over the hierarchy -----------------------------------
    attribution = "Owen"
    auto_exact_features = 32
    """``jaxshap.Explainer`` computes exact Owen values up to 32 features (shap's rule), when the
    hierarchy needs at most ``ExactExplainer``'s limit of coalitions."""

    def exact_coalition_count(self) -> int:
        """The coalitions exact Owen values need: unions of siblings along each feature's path."""
        return self.owen_coalitions[0].shape[0]

    def check_exact_size(self, max_coalitions: int) -> None:
        """Raise when the hierarchy needs more than ``max_coalitions`` coalitions per row."""
        c = self.exact_coalition_count()
        if c > max_coalitions:
            raise ValueError(
                f"exact Owen values over this feature hierarchy need {c:,} coalitions per row (more than "
                f"{max_coalitions:,}); use jaxshap.PermutationExplainer with the Partition masker."
            )

    def exact_attribution(self, value_fn: ValueFn) -> tuple[jax.Array, jax.Array]:
        """Exact Owen values ``coef @ v(masks)`` (see :func:`jaxshap._estimators._exact.owen_exact`)."""
        phi, v_empty, _ = owen_exact(value_fn, *self.owen_coalitions)
        return phi, v_empty

    def sample_order_ranks(self, key: jax.Array, n_orders: int) -> jax.Array:
        """Ranks of hierarchy-consistent orders: each internal node swaps its two children with
        probability 1/2 (flipping every node reverses an order, so reverses are as likely), the
        flips balanced across orders (:func:`jaxshap._coalitions._hierarchy.balanced_flips`)."""
        node, side, size = (jnp.asarray(t) for t in self.order_tables)
        flips = balanced_flips(key, n_orders, max(self.n_features - 1, 1))
        return consistent_ranks(flips, node, side, size)


def _linkage(data: np.ndarray, method: str) -> np.ndarray:
    return linkage(correlation_distances(data), method)
