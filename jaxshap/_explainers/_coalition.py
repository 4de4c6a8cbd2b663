"""``CoalitionExplainer``: exact Winter values over a named, nested hierarchy of the features (shap's)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .._coalitions._nested import coalition_count, read_partition_tree
from .._core._inputs import resolve_feature_names
from .._core._validate import DEFAULT_MEMORY_BUDGET
from .._engine._explainer import ModelAgnosticExplainer, as_masker
from .._estimators._exact import winter_values
from ..maskers import Partition
from ..maskers._base import SHAPLEY
from ._exact import MAX_EXACT_FEATURES


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
