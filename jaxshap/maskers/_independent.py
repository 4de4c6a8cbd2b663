"""The interventional value functions: features outside the coalition come from background rows
(``maskers.Independent``), attributed as Shapley values, or as Owen values over a feature
hierarchy (``maskers.Partition``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import static_cache
from .._coalitions._hierarchy import (
    LINKAGES,
    balanced_flips,
    check_linkage,
    consistent_ranks,
    correlation_distances,
    linkage,
    order_tables,
    owen_plan,
)
from .._core._categorical import category_codes, frame_categories
from .._core._inputs import as_matrix, check_finite, column_names, is_traced
from .._core._validate import integer
from .._estimators._exact import owen_exact
from ._base import Masker, ValueFn
from ._kmeans import is_summary


DEFAULT_MAX_SAMPLES = 100
"""Background rows kept by default, as ``shap.maskers.Independent``."""


def shap_sample_rows(n_rows: int, n_samples: int, random_state: int = 0) -> np.ndarray:
    """The rows ``shap.utils.sample(data, n_samples, random_state)`` keeps, in its order.

    shap shuffles the row indices with NumPy's ``RandomState(random_state)`` and keeps the first
    ``n_samples`` (scikit-learn's ``shuffle``); drawing the same indices keeps the same rows, so
    results can be compared with shap's on identical backgrounds.
    """
    index = np.arange(n_rows)
    np.random.RandomState(random_state).shuffle(index)
    return index[:n_samples]


def sample(X: Any, nsamples: int = 100, random_state: int = 0) -> Any:
    """shap's ``shap.sample(X, nsamples, random_state)``: the same ``nsamples`` rows of ``X``
    (array, DataFrame or ``scipy.sparse`` matrix, in shap's order), or ``X`` itself when it has
    no more rows than that.

    Raises:
      ValueError: for an ``nsamples`` that is not a positive integer.
    """
    nsamples = integer(nsamples, "nsamples", least=1)
    n = int(X.shape[0]) if hasattr(X, "shape") else len(X)
    if nsamples >= n:
        return X
    pick = shap_sample_rows(n, int(nsamples), random_state)
    if hasattr(X, "iloc"):
        return X.iloc[pick]
    return X[pick] if hasattr(X, "shape") else [X[i] for i in pick]


def _read_background(data: Any) -> tuple[Any, Any, Any]:
    """``(rows, weights, names)`` from an array, DataFrame, sparse matrix, ``{"mean", "cov"}``
    dict, or a weighted summary with ``.data`` and ``.weights`` (``shap.kmeans``' result)."""
    if isinstance(data, dict):
        if "mean" not in data:
            raise ValueError("a `data` dict must hold the background's 'mean' (and optionally 'cov').")
        return np.asarray(data["mean"])[None, :], None, None
    if is_summary(data):
        names = getattr(data, "group_names", None)
        names = [str(n) for n in names] if names is not None else None
        return data.data, data.weights, names
    return data, None, column_names(data)


class Independent(Masker):
    r"""Interventional (marginal) coalition values over a background data set.

    .. math::

        v_x(S) = \sum_{b=1}^{B} w_b\, f(x_S, b_{\bar S}), \qquad \sum_b w_b = 1,

    the expectation of the model with the features in ``S`` fixed to the explained row and the
    others drawn independently of them from the background (Janzing et al., 2020, "Feature
    relevance quantification in explainable AI: a causal problem"; Lundberg & Lee, 2017); the
    weights are ``1 / B`` unless a weighted summary is given.

    Args:
      data: background rows ``[B, M]``: an array, DataFrame or ``scipy.sparse`` matrix; a
        ``{"mean": [M], "cov": ...}`` dict (one background row, the mean, as shap); or a weighted
        summary with ``.data`` ``[k, M]`` and ``.weights`` ``[k]`` (``jaxshap.kmeans(X, k)`` or
        ``shap.kmeans(X, k)``).
      max_samples: keep at most this many background rows (default 100, as
        ``shap.maskers.Independent``): a larger background is subsampled (the same rows shap
        keeps, or drawn with ``key``), silently as in shap (a ``logging`` INFO record on the
        ``"jaxshap"`` logger, as shap 0.52 logs it). ``None`` keeps every row. The cost of every
        explainer grows linearly with the rows kept.
      key: PRNG key for the subsample; ``None`` draws shap's rows (``shap.utils.sample``).
      weights: ``[B]`` non-negative weights of the rows (normalised to sum to 1), for a weighted
        summary such as k-means centres weighted by their cluster sizes.

    A DataFrame's pandas ``category`` columns are read as their codes (the background rows swap
    codes like any other value); explainers then map the labels of such columns in a DataFrame
    ``X`` to the same codes (:attr:`column_categories`), and a host model fitted on DataFrames is
    called with the frame rebuilt, labels restored (see :mod:`jaxshap._core._categorical`).

    Raises:
      ValueError: for an empty background, one holding NaN or inf, bad weights or a bad
        ``max_samples``.
    """

    calls_model_once = True

    def __init__(self, data: Any, max_samples: int | None = DEFAULT_MAX_SAMPLES, key: Any = None, *, weights: Any = None):
        data, summary_weights, names = _read_background(data)
        if weights is None:
            weights = summary_weights
        self.feature_names = None if names is None else tuple(names)
        if max_samples is not None:
            max_samples = integer(max_samples, "max_samples", least=1, rule="a positive integer or None (keep every row)")
        n_rows = int(np.shape(data)[0]) if np.ndim(data) == 2 or hasattr(data, "nnz") else None
        if weights is not None and not is_traced(weights):
            weights = np.asarray(weights, np.float64).reshape(-1)
            if n_rows is not None and weights.shape[0] != n_rows:
                raise ValueError(f"`weights` has {weights.shape[0]} entries but the background has {n_rows} rows.")
            if not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
                raise ValueError("`weights` must be finite, non-negative and not all zero.")
        if max_samples is not None and n_rows is not None and n_rows > max_samples:
            if key is None:
                pick = shap_sample_rows(n_rows, max_samples)
            else:
                pick = np.asarray(jax.random.choice(key, n_rows, (max_samples,), replace=False))
            logging.getLogger("jaxshap").info(
                "jaxshap.maskers.Independent: the background has %d rows; keeping a random sample of %d "
                "(max_samples=%d, as shap does). Pass max_samples=None to keep all %d rows (the cost grows with "
                "them), or a weighted summary (jaxshap.kmeans).", n_rows, max_samples, max_samples, n_rows,
            )
            data = data.iloc[pick] if hasattr(data, "iloc") else data[pick]
            weights = None if weights is None else weights[pick]
        self.categories_ = frame_categories(data)  # the labels behind a category column's codes, for X's labels
        data, _ = category_codes(data)
        data = as_matrix(data, "background")
        if data.shape[0] == 0:
            raise ValueError("`background` is empty; pass at least one background row (100 or more is usual).")
        check_finite(data, "background")
        self.data = data
        self.weights = None if weights is None else jnp.asarray(weights / np.sum(weights), data.dtype)

    @property
    def n_features(self) -> int:
        return self.data.shape[1]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs: one per background row."""
        return self.data.shape[0]

    @property
    def fitted_rows(self) -> jax.Array:
        """The rows the coalition values average over (see :attr:`Masker.fitted_rows`)."""
        return self.data

    @property
    def probe_rows(self) -> jax.Array:
        """Valid input rows for probing a model's output shape."""
        return self.data

    @property
    def mean(self) -> jax.Array:
        """The (weighted) mean background row ``[M]``."""
        return self.data.mean(axis=0) if self.weights is None else self.weights @ self.data

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """One background row (drawn with the rows' weights) for each row's columns outside
        ``given``: ``[N, M]``. The given values do not inform the draw (the interventional
        answer: the background's marginal distribution of the other columns).

        Args:
          key: PRNG key of the draw.
          rows: ``[N, M]`` rows holding the given values.
          given: ``[M]`` boolean, ``True`` where the value is given (kept).
        """
        b = self.data.shape[0]
        pick = jax.random.choice(key, b, (rows.shape[0],), p=self.weights)
        return jnp.where(given[None, :], rows, self.data[pick])

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition in ``masks``.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions.

        Returns:
          ``[C, K]`` coalition values.
        """
        inputs = jnp.where(masks[:, None, :], x[None, None, :], self.data[None, :, :])
        if self.weights is None:
            return f(inputs).mean(axis=1)
        return jnp.einsum("cbk,b->ck", f(inputs), self.weights)

    def __repr__(self) -> str:
        shape = tuple(self.data.shape) if not is_traced(self.data) else "traced"
        weighted = ", weighted" if self.weights is not None else ""
        return f"{type(self).__name__}(data: {shape}{weighted})"


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
