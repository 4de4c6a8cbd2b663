"""The exact explainers: ``ExactExplainer``, Shapley values (and interaction values) over all
``2**M`` coalitions; ``PartitionExplainer``, shap's name for Owen values over a binary hierarchy
of the features; ``CoalitionExplainer``, exact Winter values over a named, nested hierarchy of
the features (shap's).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax.numpy as jnp

from .._coalitions._combinatorics import all_masks
from .._coalitions._nested import coalition_count, read_partition_tree
from .._core._inputs import resolve_feature_names
from .._core._validate import DEFAULT_MEMORY_BUDGET, interaction_order
from .._engine._explainer import ModelAgnosticExplainer, as_masker
from .._engine._shap_api import interactions_as_values
from .._estimators._exact import winter_values
from .._estimators._interactions import INDICES, shapley_and_interactions
from ..maskers import Partition
from ..maskers._base import SHAPLEY


MAX_EXACT_FEATURES = 20
"""Exact attributions evaluate at most ``2**MAX_EXACT_FEATURES`` coalitions per row (all the
coalitions of 20 features, or those a masker's hierarchy needs)."""

DEFAULT_INDEX = "STII"
"""The index behind ``interactions=True`` without ``index=``: shap's ``ExactExplainer`` ``interactions=2``."""


class ExactExplainer(ModelAgnosticExplainer):
    r"""Exact Shapley values by enumerating every coalition; exact interaction values on request.

    .. math::

        \phi_j(x) = \sum_{S \subseteq N \setminus \{j\}} \frac{|S|!\,(M-|S|-1)!}{M!}
                    \bigl[v_x(S \cup \{j\}) - v_x(S)\bigr]

    with ``v_x`` the masker's value function (by default interventional:
    ``v_x(S) = mean_b f(x_S, b_{-S})`` over the background). Each row costs ``2**M * B`` model
    evaluations, made in large batches under ``memory_budget``. Works inside ``jax.jit`` and
    ``jax.grad`` for JAX models.

    **Interactions** (``ex(X, interactions=True)``, or any call when ``index`` is given) are
    computed in the same pass from the same ``2**M`` coalition values (no further model
    evaluations; see :func:`jaxshap.estimators.exact_interactions`). ``interaction_values`` is
    ``[n, M, M]`` (or ``[n, M, M, K]``): the diagonal holds the index's order-1 terms and each
    pair's order-2 term is split evenly between ``[i, j]`` and ``[j, i]``. With
    ``interactions=True`` (shap's spelling) ``values`` are those ``[n, M, M]`` interaction values,
    as in shap; when only ``index`` asks for them, ``values`` stay the Shapley values. With
    ``interactions=k`` they are the order-``k`` tensor ``[n] + [M] * k (+ [K])`` of the index's
    terms of orders ``1..k`` (each set's term split evenly over the index tuples that hold exactly
    its features, see :func:`jaxshap._estimators._interactions.interaction_tensor`), the same
    numbers ``TreeExplainer`` gives for a tree model. By ``index``:

    * ``None`` or ``"STII"`` (default): Shapley-Taylor of order 2 (Sundararajan et al., 2020):
      the diagonal is ``v({i}) - v(empty)``; the same numbers as shap's
      ``ExactExplainer(...)(X, interactions=2)``. Rows sum to the Shapley values.
    * ``"k-SII"``: 2-SII (Bordt & von Luxburg, 2023), which is exactly what shap's
      ``TreeExplainer.shap_interaction_values`` computes for trees (Lundberg et al., 2020):
      off-diagonal ``SII_ij / 2``, diagonal ``phi_i - sum_{j != i} SII_ij / 2``. Rows sum to the
      Shapley values.
    * ``"FSII"``: Faith-SHAP of order 2 (Tsai et al., 2023). Rows sum to the Shapley values.
    * ``"SII"``: the Shapley interaction index (Grabisch & Roubens, 1999): the diagonal holds
      the Shapley values themselves, so rows do not sum to ``values``.
    * ``"BII"``: the Banzhaf interaction index: the diagonal holds the Banzhaf values; rows do
      not sum to ``values``.

    The masker decides the attribution (:meth:`jaxshap.maskers.Masker.exact_attribution`): with a
    :class:`jaxshap.maskers.Partition` masker it computes the exact Owen values over the masker's
    feature hierarchy instead, from only the coalitions that hierarchy needs (see
    :func:`jaxshap._estimators._exact.owen_exact`); the limit is then on those coalitions, not on
    the features, and interaction values are not available.

    Example::

        ex = jaxshap.ExactExplainer(model, background)
        expl = ex(X)                               # expl.values: [n, M]
        expl = ex(X, interactions=True)            # expl.values, expl.interaction_values: [n, M, M]
        jaxshap.ExactExplainer(model, background, index="k-SII")(X).interaction_values  # values: [n, M]

    Args:
      model, background, **kwargs: as :class:`jaxshap.Explainer` (``feature_names``,
        ``memory_budget``, ...).
      index: ``None``, ``"SII"``, ``"k-SII"``, ``"STII"``, ``"FSII"`` or ``"BII"``; when given,
        calls compute interaction values unless ``interactions=False``.

    Raises:
      ValueError: with more than 20 features (use ``KernelExplainer`` or ``PermutationExplainer``),
        or an unknown ``index``.
    """

    shap_budget = "enumerate"  # shap's max_evals=: at least 2**M (checked), else nothing changes

    def __init__(self, model: Callable, background: Any, *, index: str | None = None, **kwargs):
        if index is not None and (not isinstance(index, str) or index not in INDICES):
            raise ValueError(f"`index` must be None or one of {INDICES}; got {index!r}.")
        self.index = index
        # read while tracing and by _wrap; a static field of the pytree, so an interactions call
        # runs its own entry of the shared module-level program (see jaxshap._engine._program)
        self._interactions = False
        super().__init__(model, background, **kwargs)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._interactions = False

    def _check_n_features(self, n_features: int) -> None:
        self.masker.check_exact_size(2**MAX_EXACT_FEATURES)

    def _coalitions_per_row(self) -> int:
        return self.masker.exact_coalition_count()

    def _estimate(self, key, value_fn):
        if not self._interactions:  # the masker's exact attribution (Shapley values by default)
            phi, v0 = self.masker.exact_attribution(value_fn)
            return phi, v0, None
        masks = all_masks(self.n_features)
        v = value_fn(masks)
        phi, tensor = shapley_and_interactions(v, masks, self.index or DEFAULT_INDEX, self._interactions)
        return phi, v[0], tensor

    def _wrap(self, phi, base, third, X, names):
        if not self._interactions:
            return super()._wrap(phi, base, third, X, names)
        expl = super()._wrap(phi, base, None, X, names)
        expl.interaction_values = third[..., 0] if self.model.single_output else third
        return expl

    def __call__(self, X: Any, key: Any = None, *, interactions: bool | int | None = None, **kwargs):
        """Explain the rows of ``X`` (see :meth:`jaxshap.Explainer.__call__` for ``key``,
        ``progress`` and ``devices``).

        Args:
          interactions: ``True``: the result's ``values`` (and ``interaction_values``) are the
            pairwise interaction values (``[n, M, M]`` or ``[n, M, M, K]``), as shap's; an int
            ``k``: the order-``k`` tensor ``[n] + [M] * k (+ [K])`` of the index's terms of orders
            ``1..k`` (:func:`jaxshap._estimators._interactions.interaction_tensor`: each set's
            term split evenly over the index tuples that hold exactly its features; ``k = 2`` is
            shap's matrix); ``None`` (default): when ``index`` was given, the pairwise
            ``interaction_values`` are computed beside the Shapley ``values``; ``False``: Shapley
            values only.
        """
        order = interaction_order(interactions, None if self.n_features == 1 else self.n_features)
        if interactions is None and self.index is not None:
            order = 2
        if not order:
            return super().__call__(X, key, **kwargs)
        if self.masker.attribution != SHAPLEY:
            raise ValueError(
                f"interaction values need all 2**M coalitions; with a {type(self.masker).__name__} masker "
                f"ExactExplainer computes {self.masker.attribution} values only. Use a background array or "
                "jaxshap.maskers.Independent."
            )
        self._interactions = order
        try:
            expl = super().__call__(X, key, **kwargs)
        finally:
            self._interactions = False
        if expl.interaction_values is None:  # zero rows: the base class built the result itself
            values = expl.values
            expl.stderr = None
            expl.interaction_values = jnp.zeros(values.shape[:1] + values.shape[1:2] * order + values.shape[2:], values.dtype)
        return interactions_as_values(expl) if interactions else expl


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


class CoalitionExplainer(ModelAgnosticExplainer):
    r"""Exact Winter values over a nested hierarchy of named feature groups, as ``shap.CoalitionExplainer``.

    The user groups the features (``partition_tree``: groups of features and of further groups,
    any number of children per node, any depth). Features are credited as if every group's
    members arrived together, recursively, each group ordering its children uniformly at random:
    at every level the groups among siblings are the players of a quotient game, and a coalition
    at a lower level is evaluated together with the whole sibling groups chosen above it. These
    are the Winter values (Winter, 1989), the Owen values (Owen, 1977) of a multi-level structure:
    for feature ``i`` whose ancestor at level ``k`` is one of ``n_k`` children with siblings ``G_k``,

    .. math::

        \phi_i(x) = \sum_{T_1 \subseteq G_1} \cdots \sum_{T_d \subseteq G_d}
                    \prod_{k=1}^{d} \frac{|T_k|!\,(n_k - |T_k| - 1)!}{n_k!}
                    \bigl[v_x(U_T \cup \{i\}) - v_x(U_T)\bigr], \qquad U_T = \bigcup_k \bigcup_{g \in T_k} g,

    with ``v_x`` the masker's value function (by default interventional, ``v_x(S) = mean_b
    f(x_S, b_{-S})`` over shap's 100 background rows). A flat tree of single features gives the
    Shapley values (:class:`ExactExplainer`'s), a binary one the Owen values
    (:class:`PartitionExplainer`'s with that hierarchy). The values are exact and efficient
    (they sum to ``f(x) - E[f]``); each row evaluates every coalition the tree needs once (see
    :func:`jaxshap.estimators.winter_values`: ``2**n + sum_k 2**(n - 1) (c_k - 2)`` for a node
    with ``n`` children needing ``c_k`` each, far fewer than ``2**M`` for small groups), in large
    batches under ``memory_budget``; ``max_evals`` is accepted and ignored, as by shap. Works
    inside ``jax.jit`` and ``jax.grad`` for JAX models.

    Example::

        tree = {"Demographics": ["Age", "Sex"],
                "Financial": {"Income": ["Salary", "Bonus"], "Assets": ["Savings", "Investments"]}}
        ex = jaxshap.CoalitionExplainer(model.predict, X_background, partition_tree=tree)
        expl = ex(X)                              # expl.values: [n, M], in the columns' order

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]`` (JAX or NumPy).
      masker: background rows ``[B, M]`` (array or DataFrame; shap's 100 rows are kept) or a masker
        (``maskers.Independent``, ``maskers.Partition``, whose own binary clustering the tree
        replaces, as in shap, or a conditional masker such as ``maskers.Gaussian``).
      partition_tree: the hierarchy, shap's nested dict: each key names a group and maps to a list
        of members or to a dict of subgroups. Members are feature names (``feature_names=``, the
        background's DataFrame columns, else ``"Feature 0"``, ...) or column positions (ints); a
        dict inside a list adds its entries to the list's group, a nested list is an unnamed
        group, and ``{"x": "x"}`` (or ``{"x": None}``) is the single feature ``x``, as in shap's
        examples. Every feature appears exactly once.
      feature_names: names of the ``M`` features (default: the background's columns).
      memory_budget: bytes of working memory one chunk of model evaluations may use.
      link: ``"identity"`` or ``"logit"`` (values of the log-odds of a probability output).

    Raises:
      ValueError: without a ``partition_tree``, for one that leaves out a feature, names an unknown
        one, holds one twice or has an empty group (the message names ``partition_tree``), for a
        tree whose exact values need more than ``2**20`` coalitions per row (split large groups),
        or for a masker that changes the attribution itself (``maskers.Asymmetric``).
      TypeError: for a ``partition_tree`` that is not a dict or list.
    """

    shap_budget = "exact"  # shap's max_evals=: accepted and ignored (exact values whatever the budget)

    def __init__(
        self,
        model: Callable,
        masker: Any,
        *,
        partition_tree: Any = None,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        link: Any = "identity",
    ):
        if partition_tree is None:
            raise ValueError(
                "`partition_tree` is required: a nested dict of group names to feature names, such as "
                "{'Location': ['Latitude', 'Longitude'], 'House': ['AveRooms', 'AveBedrms', ...]}. For a hierarchy "
                "clustered from the data, use jaxshap.PartitionExplainer."
            )
        masker = as_masker(masker, self.background_rows, type(self).__name__)
        if masker.attribution != SHAPLEY and not isinstance(masker, Partition):
            raise ValueError(
                f"CoalitionExplainer attributes over `partition_tree` itself; a masker with {masker.attribution} "
                f"attribution ({type(masker).__name__}) cannot be combined with it. Pass background rows or "
                "jaxshap.maskers.Independent(data)."
            )
        m = masker.n_features
        names = resolve_feature_names(feature_names, m, getattr(masker, "feature_names", None))
        self._hierarchy = read_partition_tree(partition_tree, m, names)
        if (c := coalition_count(self._hierarchy)) > 2**MAX_EXACT_FEATURES:
            raise ValueError(
                f"exact Winter values over this `partition_tree` need {c:,} coalitions per row (more than "
                f"2**{MAX_EXACT_FEATURES}); split large groups into subgroups: a group of n members costs "
                "2**(n - 1) coalitions for each coalition of a member."
            )
        self.partition_tree_ = partition_tree  # the user's tree (not part of the pytree: _hierarchy is)
        super().__init__(model, masker, feature_names=feature_names, memory_budget=memory_budget, link=link)

    @property
    def partition_tree(self) -> Any:
        """The ``partition_tree`` as given."""
        return self.partition_tree_

    @property
    def hierarchy(self) -> tuple:
        """The tree as nested tuples of feature positions (groups as tuples, in the tree's order)."""
        return self._hierarchy

    def _coalitions_per_row(self) -> int:
        return coalition_count(self._hierarchy)

    def _estimate(self, key, value_fn):
        phi, v0, _ = winter_values(value_fn, self._hierarchy)
        return phi, v0, None
