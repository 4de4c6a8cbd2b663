"""Asymmetric Shapley values over a causal chain of components: ``maskers.Asymmetric``."""

from __future__ import annotations

from typing import Any

import jax

from .._coalitions._hierarchy import asymmetric_plan, chain_coalition_count, consistent_order_ranks, reverse_within_components
from .._coalitions._combinatorics import static_cache
from .._estimators._exact import owen_exact
from ._base import Masker, ValueFn
from ._columns import resolve_partition
from ._wrapped import Wrapped

ASYMMETRIC = "asymmetric Shapley"
"""The :attr:`Masker.attribution` of asymmetric Shapley values."""


@static_cache(32)
def _plan(components: tuple, n_players: int):
    return asymmetric_plan(components, n_players)


class ChainMasker(Wrapped):
    """Base of the maskers that know a causal chain of components of the players
    (:class:`Asymmetric`, :class:`Causal`): with ``asymmetric`` set, the attribution hooks give
    asymmetric Shapley values over the chain (see :mod:`jaxshap._coalitions._hierarchy`), else the
    inner masker's Shapley values."""

    def _set_chain(self, causal_ordering: Any, asymmetric: bool) -> None:
        self.components = resolve_partition(causal_ordering, self.masker.feature_names, self.masker.n_features,
                                            "causal_ordering")
        self.asymmetric = bool(asymmetric)
        if self.asymmetric:
            self.attribution = ASYMMETRIC
            self.auto_exact_features = 32

    def exact_coalition_count(self) -> int:
        """``1 + sum_k (2**|tau_k| - 1)`` coalitions for asymmetric values, else ``2**M``."""
        if not self.asymmetric:
            return super().exact_coalition_count()
        return chain_coalition_count(self.components)

    def check_exact_size(self, max_coalitions: int) -> None:
        """Raise when the chain's exact asymmetric values need more than ``max_coalitions``."""
        if not self.asymmetric:
            return super().check_exact_size(max_coalitions)
        c = self.exact_coalition_count()
        if c > max_coalitions:
            raise ValueError(
                f"exact asymmetric Shapley values over this causal ordering need {c:,} coalitions per row (more than "
                f"{max_coalitions:,}); split the largest components of `causal_ordering`."
            )

    def exact_attribution(self, value_fn: ValueFn) -> tuple[jax.Array, jax.Array]:
        """Exact asymmetric Shapley values ``coef @ v(masks)`` over the chain's coalitions, or
        the Shapley values."""
        if not self.asymmetric:
            return super().exact_attribution(value_fn)
        phi, v_empty, _ = owen_exact(value_fn, *_plan(self.components, self.n_features))
        return phi, v_empty

    def sample_order_ranks(self, key: jax.Array, n_orders: int) -> jax.Array:
        """Uniform orders consistent with the chain (for asymmetric values), else uniform orders."""
        if not self.asymmetric:
            return super().sample_order_ranks(key, n_orders)
        return consistent_order_ranks(key, self.components, self.n_features, n_orders)

    def antithetic_ranks(self, ranks: jax.Array) -> jax.Array | None:
        """For asymmetric values, each component reversed in place (the reverse of a consistent
        order is not consistent; this partner is, and as likely); else the reverse (``None``)."""
        if not self.asymmetric:
            return super().antithetic_ranks(ranks)
        return reverse_within_components(ranks, self.components, self.n_features)


class Asymmetric(ChainMasker):
    r"""The inner masker's game, attributed as asymmetric Shapley values over a causal ordering.

    Frye, Rowat & Feige (2020), "Asymmetric Shapley values: incorporating causal knowledge into
    model-agnostic explainability": only the orders in which every feature of a component comes
    after all the features of the components before it count, so causes get the credit their
    effects would share with them under Shapley values. For feature ``i`` of component
    :math:`\tau_k`, :math:`\phi_i` is its Shapley value in the game
    :math:`w(T) = v(\tau_{<k} \cup T)` over the features of :math:`\tau_k`: exact values need
    :math:`1 + \sum_k (2^{|\tau_k|} - 1)` coalitions instead of :math:`2^M`. Efficiency holds:
    :math:`\sum_i \phi_i = v(N) - v(\emptyset)`. With one component they are the Shapley values.

    With the inner masker's conditional values (such as :class:`Gaussian`'s) these are shapr's
    asymmetric conditional Shapley values; wrap a :class:`Causal` masker for asymmetric causal
    values. ``ExactExplainer`` computes them; ``PermutationExplainer`` samples consistent
    orders, each walked with its partner that reverses every component in place (the reverse
    of a consistent order is not consistent); ``KernelExplainer`` refuses them (no regression
    form).

    Args:
      masker: the inner masker; its attribution must be Shapley values.
      causal_ordering: the chain components, first to last: a list of lists of features
        (positions or names of the inner masker's features), a partition of them.

    Raises:
      ValueError: for components that overlap, are empty or leave features out, or an inner
        masker whose attribution is not Shapley values.
    """

    def __init__(self, masker: Masker, causal_ordering: Any):
        super().__init__(masker)
        self._require_shapley("Asymmetric")
        self._set_chain(causal_ordering, True)

    def __repr__(self) -> str:
        return f"Asymmetric({self.masker!r}, components: {len(self.components)})"

