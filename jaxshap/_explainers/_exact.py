"""``ExactExplainer``: Shapley values (and interaction values) over all ``2**M`` coalitions."""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp

from .._coalitions._combinatorics import all_masks
from .._estimators._interactions import INDICES, interaction_order, shapley_and_interactions
from .._engine._explainer import ModelAgnosticExplainer
from .._engine._shap_api import interactions_as_values
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
