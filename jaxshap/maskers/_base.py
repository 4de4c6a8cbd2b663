"""The masker protocol: what an explainer asks of a value function."""

from __future__ import annotations

import abc
from typing import Callable

import jax


class Masker(abc.ABC):
    r"""Abstract base of the maskers: turns a model, a row and coalitions into coalition values.

    A masker defines the game :math:`v_x(S)` that an explainer attributes: the expected model
    output when the features in ``S`` take the row's values and the others are filled in (from
    background rows, a fitted distribution, ...). Explainers only call :meth:`coalition_values`
    and read the properties below; a masker is a JAX pytree (arrays as leaves, configuration as
    static data) so that it can pass through ``jax.jit``.

    Subclasses define:

    * ``n_features`` (``M``), ``dtype`` (the floating dtype rows are computed in);
    * ``evals_per_coalition``: model evaluations one coalition value costs (chunk planning);
    * ``probe_rows``: a few valid input rows ``[b, M]`` to probe a model's output shape;
    * ``feature_names``: names of the ``M`` features, or ``None``;
    * :meth:`coalition_values`.

    Concrete maskers: :class:`jaxshap.maskers.Independent` (interventional),
    :class:`jaxshap.maskers.Partition` (interventional, Owen values over a feature hierarchy) and
    :class:`jaxshap.maskers.Gaussian` (observational).
    """

    feature_names: tuple[str, ...] | None = None

    @property
    @abc.abstractmethod
    def n_features(self) -> int:
        """``M``, the number of features."""

    @property
    @abc.abstractmethod
    def dtype(self):
        """The floating dtype of the rows the model is evaluated on."""

    @property
    @abc.abstractmethod
    def evals_per_coalition(self) -> int:
        """Model evaluations that one coalition value costs."""

    @property
    @abc.abstractmethod
    def probe_rows(self) -> jax.Array:
        """A few valid input rows ``[b, M]``, to probe a model's output shape."""

    @abc.abstractmethod
    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``v_x(S)`` for each coalition.

        Args:
          f: model mapping ``[..., M]`` to ``[..., K]``.
          x: the explained row, ``[M]``.
          masks: ``[C, M]`` boolean coalitions (``True``: the feature takes the row's value).

        Returns:
          ``[C, K]`` coalition values.
        """
