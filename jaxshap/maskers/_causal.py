"""Causal chains of players: asymmetric Shapley values over a chain of components
(``maskers.Asymmetric``), causal Shapley values from interventional expectations along it
(``maskers.Causal``), and the players an explainer attributes (:func:`player_masker`: groups,
causal values and asymmetric values on any masker).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import static_cache
from .._coalitions._hierarchy import (
    asymmetric_plan,
    chain_coalition_count,
    consistent_order_ranks,
    reverse_within_components,
)
from .._core._inputs import as_key, key_bits
from .._core._validate import flag, integer
from .._estimators._exact import owen_exact
from ._base import Masker, ValueFn
from ._grouped import Grouped, Wrapped, resolve_partition


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


DEFAULT_SAMPLES = 1024
"""Monte-Carlo draws per coalition value (shapr's ``n_MC_samples`` is 1000; even, for the
Gaussian masker's antithetic pairs)."""


class Causal(ChainMasker):
    r"""Causal coalition values :math:`v_x(S) = E[f(X) \mid do(X_S = x_S)]` over a causal chain.

    Heskes, Sijben, Bucur & Claassen (2020), "Causal Shapley values: exploiting causal knowledge to
    explain individual predictions of complex models". The features are split into chain
    components :math:`\tau_1, \dots, \tau_K` (a partial causal order: earlier components cause
    later ones, features within a component are not ordered). Under the intervention
    :math:`do(X_S = x_S)` the other features are drawn component by component, in causal order:
    for :math:`\tau_j`, the features of :math:`\tau_j \setminus S` come from

    * :math:`p(X_{\tau_j \setminus S} \mid X_{\tau_{<j}}, X_{\tau_j \cap S} = x_{\tau_j \cap S})`
      if :math:`\tau_j` is not confounded (intervening on a part of the component is then the
      same as conditioning on it);
    * :math:`p(X_{\tau_j \setminus S} \mid X_{\tau_{<j}})` if it is confounded (the intervened
      features are set but do not inform the draw),

    where :math:`X_{\tau_{<j}}` are the values of the earlier components in the same draw
    (the explained row's where they are in ``S``, drawn ones elsewhere); the features of
    :math:`\tau_j \cap S` keep :math:`x`. Features of later components in ``S`` never inform
    the draw of earlier ones. :math:`v_x(S)` is the mean of ``f`` over ``n_samples`` such draws,
    made by the inner masker's :meth:`~Masker.draw_conditional` (its model of the observational
    distribution: :class:`Gaussian` exactly, :class:`Independent` ignoring the given values).
    The draws' key is fixed when the masker is built and shared by every coalition and row
    (common random numbers). Each coalition costs ``n_samples`` model evaluations and ``K``
    conditional draws.

    Special cases (Heskes et al.): one component without confounding gives the
    inner masker's conditional (observational) values; one confounded component gives the
    marginal (interventional) values :math:`E[f(x_S, X_{\bar S})]`; with every feature a
    component of its own, confounding makes no difference.

    ``asymmetric=True`` attributes the game as asymmetric Shapley values over the same chain
    (see :class:`Asymmetric`); else explainers give the (symmetric) causal Shapley values.

    Args:
      masker: the inner masker of the features' distribution; it must implement
        :meth:`~Masker.draw_conditional` and give Shapley values (not a :class:`Grouped` one:
        group the causal masker instead).
      causal_ordering: the chain components, first to last: a list of lists of features
        (positions or names), a partition of the features.
      confounding: one bool for every component, or one per component.
      asymmetric: attribute asymmetric Shapley values over the chain.
      n_samples: Monte-Carlo draws per coalition value.
      key: PRNG key of the draws; ``None`` means ``jax.random.key(0)``.

    Raises:
      ValueError: for a bad ordering, a ``confounding`` of the wrong length, an inner masker
        without conditional draws, grouped, or not of Shapley values, or a bad ``n_samples``.
    """

    def __init__(
        self,
        masker: Masker,
        causal_ordering: Any,
        confounding: Any = False,
        asymmetric: bool = False,
        n_samples: int = DEFAULT_SAMPLES,
        key: Any = None,
    ):
        super().__init__(masker)
        self._require_shapley("Causal")
        if masker.n_columns != masker.n_features:
            raise ValueError("Causal draws columns one component after another: wrap the column-level masker in "
                             "Causal and group the result (maskers.Grouped(maskers.Causal(...), groups)).")
        if type(masker).draw_conditional is Masker.draw_conditional:
            raise ValueError(
                f"Causal needs a masker that draws from a conditional distribution; {type(masker).__name__} has none. "
                "Use maskers.Gaussian (observational) or maskers.Independent (interventional)."
            )
        self._set_chain(causal_ordering, flag(asymmetric, "asymmetric"))
        k = len(self.components)
        if isinstance(confounding, (bool, np.bool_)) or not hasattr(confounding, "__iter__"):
            confounding = (flag(confounding, "confounding"),) * k
        confounding = tuple(flag(c, "confounding") for c in confounding)
        if len(confounding) != k:
            raise ValueError(f"`confounding` has {len(confounding)} entries for {k} components of `causal_ordering`; "
                             "pass one bool per component, or one bool for all.")
        self.confounding = confounding
        self.n_samples = integer(n_samples, "n_samples", least=1, rule=f"a positive integer ({DEFAULT_SAMPLES} is the default)")
        key = as_key(key)
        self._key_bits = tuple(int(b) for b in np.asarray(key_bits(key)).reshape(-1))  # static: never a traced leaf

    @property
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs: ``n_samples``."""
        return self.n_samples

    def interventional_samples(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        """``n_samples`` draws of ``X`` under ``do(X_S = x_S)`` for one coalition: ``[N, M]``."""
        m = self.n_features
        key = jax.random.wrap_key_data(jnp.asarray(self._key_bits, jnp.uint32))
        rows = jnp.broadcast_to(x, (self.n_samples, m))
        before = np.zeros(m, bool)
        for k, (comp, confounded) in enumerate(zip(self.components, self.confounding)):
            inside = np.zeros(m, bool)
            inside[list(comp)] = True
            given = jnp.asarray(before) if confounded else jnp.asarray(before) | (jnp.asarray(inside) & mask)
            draw = self.masker.draw_conditional(jax.random.fold_in(key, k), rows, given)
            rows = jnp.where(jnp.asarray(inside)[None, :], jnp.where(mask[None, :], x[None, :], draw), rows)
            before = before | inside
        return rows

    calls_model_once = True  # on every coalition's interventional draws at once

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S) = E[f(X) | do(X_S = x_S)]`` for each coalition ``[C, M]``: ``[C, K]`` (Monte-Carlo means)."""
        return f(jax.vmap(lambda mask: self.interventional_samples(x, mask))(masks)).mean(axis=1)

    def __repr__(self) -> str:
        return f"Causal({self.masker!r}, components: {len(self.components)}, n_samples: {self.n_samples})"


class _Named(Wrapped):
    """The inner masker with column names given by the explainer's ``feature_names=``."""

    def __init__(self, masker: Masker, names: Sequence[str]):
        super().__init__(masker)
        self.feature_names = tuple(str(n) for n in names)

    @property
    def column_names(self):
        return self.feature_names


def player_masker(
    masker: Masker,
    groups: Any = None,
    causal_ordering: Any = None,
    confounding: Any = None,
    asymmetric: bool = False,
    column_names: Sequence[str] | None = None,
) -> Masker:
    """``masker`` wrapped for the explainers' ``groups=``, ``causal_ordering=``, ``confounding=``
    and ``asymmetric=`` (shapr's arguments), or ``masker`` itself when none is given.

    * ``confounding`` given (a bool, or one per component): causal values
      (:class:`Causal`) over ``causal_ordering`` (default: one component of every feature);
    * ``groups``: the players are the groups (:class:`Grouped`), and ``causal_ordering`` lists
      groups;
    * ``asymmetric=True``: asymmetric Shapley values over ``causal_ordering``
      (:class:`Asymmetric`); with ``confounding=None`` of the masker's own values (shapr's
      asymmetric conditional values).

    ``column_names`` (the explainer's ``feature_names=``) name the columns when the masker does not.

    Raises:
      ValueError: for ``causal_ordering`` without ``confounding`` or ``asymmetric=True`` (it would
        change nothing), and as the wrappers raise.
    """
    asymmetric = flag(asymmetric, "asymmetric")
    if groups is None and causal_ordering is None and confounding is None and not asymmetric:
        return masker
    if causal_ordering is not None and confounding is None and not asymmetric:
        raise ValueError(
            "`causal_ordering` changes nothing alone: pass `confounding=` (causal Shapley values) and/or "
            "`asymmetric=True` (asymmetric Shapley values), as in shapr."
        )
    if column_names is not None and masker.column_names is None:
        masker = _Named(masker, column_names)
    grouped = None if groups is None else Grouped(masker, groups)
    players = grouped if grouped is not None else masker
    ordering = causal_ordering if causal_ordering is not None else [list(range(players.n_features))]
    components = resolve_partition(ordering, players.feature_names, players.n_features, "causal_ordering")
    if confounding is not None:
        columns = components if grouped is None else tuple(
            tuple(j for g in comp for j in grouped.groups[g]) for comp in components
        )
        masker = Causal(masker, columns, confounding)
        players = masker if groups is None else Grouped(masker, groups)
    if asymmetric:
        players = Asymmetric(players, components)
    return players
