"""A masker built on another masker: everything it does not change is the inner masker's."""

from __future__ import annotations

from typing import Callable

import jax

from ._base import SHAPLEY, Masker


class Wrapped(Masker):
    """Base of the maskers that wrap another one (:class:`Grouped`, :class:`Causal`,
    :class:`Asymmetric`): sizes, dtype, names, rows, coalition values and conditional draws are
    the inner masker's unless a subclass overrides them.

    Args:
      masker: the inner masker.
    """

    def __init__(self, masker: Masker):
        if not isinstance(masker, Masker):
            raise TypeError(f"{type(self).__name__} wraps a jaxshap masker; got {type(masker).__name__}.")
        self.masker = masker
        self.feature_names = masker.feature_names

    def _require_shapley(self, what: str) -> None:
        """Raise when the inner masker asks for another attribution than Shapley values."""
        if self.masker.attribution != SHAPLEY:
            raise ValueError(
                f"{what} cannot be combined with a {type(self.masker).__name__} masker, whose {self.masker.attribution} "
                "values are defined over its own structure of the features; use maskers.Independent (or another "
                "masker of Shapley values) underneath."
            )

    @property
    def n_features(self) -> int:
        return self.masker.n_features

    @property
    def n_columns(self) -> int:
        return self.masker.n_columns

    @property
    def column_names(self):
        return self.masker.column_names

    @property
    def fitted_rows(self):
        return self.masker.fitted_rows

    @property
    def column_categories(self) -> dict[int, tuple]:
        return self.masker.column_categories

    @property
    def dtype(self):
        return self.masker.dtype

    @property
    def evals_per_coalition(self) -> int:
        return self.masker.evals_per_coalition

    @property
    def bytes_per_coalition(self) -> int:
        return self.masker.bytes_per_coalition

    @property
    def probe_rows(self) -> jax.Array:
        return self.masker.probe_rows

    def check_model(self, f: Callable[[jax.Array], jax.Array]) -> None:
        """The inner masker's check of the model it is asked to explain."""
        self.masker.check_model(f)

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """The inner masker's ``v_x(S)`` for each coalition ``[C, M]``."""
        return self.masker.coalition_values(f, x, masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """The inner masker's conditional draw (see :meth:`Masker.draw_conditional`)."""
        return self.masker.draw_conditional(key, rows, given)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.masker!r})"
