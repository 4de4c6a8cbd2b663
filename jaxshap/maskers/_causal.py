"""Causal Shapley values: interventional expectations along a causal chain, ``maskers.Causal``."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core._inputs import as_key, key_bits
from .._core._validate import flag, integer
from ._asymmetric import ChainMasker
from ._base import Masker

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

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S) = E[f(X) | do(X_S = x_S)]`` for each coalition ``[C, M]``: ``[C, K]`` (Monte-Carlo means)."""
        return f(jax.vmap(lambda mask: self.interventional_samples(x, mask))(masks)).mean(axis=1)

    def __repr__(self) -> str:
        return f"Causal({self.masker!r}, components: {len(self.components)}, n_samples: {self.n_samples})"
