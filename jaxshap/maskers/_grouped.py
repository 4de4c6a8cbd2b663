"""Groups of columns as the players: ``maskers.Grouped``."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._base import Masker
from ._columns import resolve_groups
from ._wrapped import Wrapped


def group_matrix(groups: tuple[tuple[int, ...], ...], n_columns: int) -> np.ndarray:
    """``[G, M]`` bool: row ``g`` marks the columns of group ``g``."""
    a = np.zeros((len(groups), n_columns), bool)
    for g, cols in enumerate(groups):
        a[g, list(cols)] = True
    return a


class Grouped(Wrapped):
    r"""The inner masker's game with groups of columns as its players.

    With groups :math:`g_1, \dots, g_G`, a partition of the ``M`` columns, the game of the groups
    is :math:`u_x(T) = v_x\bigl(\bigcup_{g \in T} g\bigr)` for :math:`T \subseteq \{1..G\}`: a
    coalition of groups is the coalition of all their columns. Explainers attribute :math:`u_x`,
    so each group gets one value (its Shapley value as a player), and efficiency holds over the
    groups, :math:`\sum_g \phi_g = f(x) - v_x(\emptyset)`. A group's value is not the sum of its
    columns' Shapley values in general (Jullum, Redelmeier & Aas, 2021, "groupShapley: Efficient
    prediction explanation with Shapley values for feature groups"); with ``G`` players exact
    values cost ``2**G`` coalitions.

    The explained rows keep their ``M`` columns (``n_columns``, ``column_names``); the players
    are the groups (``n_features = G``, ``feature_names`` = the group names). An explanation's
    ``values`` are ``[n, G]``, its ``feature_names`` the group names and its ``data`` ``None``:
    a group has no single value to show (the rows explained are ``X`` itself).

    Args:
      masker: the inner masker of the columns; its attribution must be Shapley values
        (a :class:`Partition` masker's Owen values are over its own hierarchy: refused).
      groups: a list of groups, each a list of columns (positions or, when the inner masker
        knows them, names), or a dict ``{group name: columns}``. Every column must be in exactly
        one group and no group may be empty (shapr's rule). A single column may be a group.
      names: group names for a list of groups; by default a group's column names joined by
        ``" + "`` (``"age + sex"``; a single column keeps its name), or ``"Group g"`` when the
        columns have no names.

    Raises:
      ValueError: for overlapping or empty groups, columns left out, unknown names, names of
        the wrong length, or an inner masker whose attribution is not Shapley values.

    Example::

        masker = jaxshap.maskers.Grouped(jaxshap.maskers.Independent(X_df), {"demo": ["age", "sex"], "bmi": ["bmi"]})
        expl = jaxshap.ExactExplainer(model, masker)(X_df)        # expl.values: [n, 2]
    """

    def __init__(self, masker: Masker, groups: Any, names: Any = None):
        super().__init__(masker)
        self._require_shapley("Grouped")
        self.groups, names = resolve_groups(groups, names, masker.column_names, masker.n_columns)
        self.feature_names = names

    @property
    def n_features(self) -> int:
        """``G``, the number of groups (the players)."""
        return len(self.groups)

    def column_masks(self, masks: jax.Array) -> jax.Array:
        """Coalitions of groups ``[C, G]`` as coalitions of columns ``[C, M]``."""
        a = jnp.asarray(group_matrix(self.groups, self.masker.n_columns), jnp.int32)
        return (masks.astype(jnp.int32) @ a) > 0

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """``u_x(T) = v_x(union of T's columns)`` for group coalitions ``masks`` ``[C, G]``; ``x`` is ``[M]``."""
        return self.masker.coalition_values(f, x, self.column_masks(masks))

    def __repr__(self) -> str:
        return f"Grouped({self.masker!r}, groups: {len(self.groups)})"

