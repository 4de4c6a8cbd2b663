"""Players made of columns: partitions of the features named by the user (groups of columns,
components of a causal chain), the base of the maskers built on another masker
(:class:`Wrapped`: everything it does not change is the inner masker's), and groups of columns
as the players (``maskers.Grouped``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._base import SHAPLEY, Masker


def resolve_player(item: Any, names: Sequence[str] | None, n: int, what: str) -> int:
    """One player given by position or by name, as an index in ``range(n)``.

    Raises:
      ValueError: for an unknown name (listing the names), an index out of range, or a name
        when no names are known.
    """
    if isinstance(item, (bool, np.bool_)):
        raise ValueError(f"`{what}` lists {item!r}; list feature positions (int) or names (str).")
    if isinstance(item, (int, np.integer)):
        if not -n <= int(item) < n:
            raise ValueError(f"`{what}` lists position {int(item)}, outside the {n} features.")
        return int(item) % n
    if isinstance(item, str):
        if names is None:
            raise ValueError(
                f"`{what}` names {item!r} but the features have no names; pass a DataFrame background, "
                "feature_names=, or feature positions."
            )
        names = [str(x) for x in names]
        if item not in names:
            raise ValueError(f"`{what}` names {item!r}, which is not a feature; the features are {names}.")
        return names.index(item)
    raise ValueError(f"`{what}` lists {item!r}; list feature positions (int) or names (str).")


def resolve_partition(spec: Any, names: Sequence[str] | None, n: int, what: str) -> tuple[tuple[int, ...], ...]:
    """A list of lists of players (positions or names) as a partition of ``range(n)``.

    Every player must be in exactly one part and no part may be empty (as shapr requires of
    ``group`` and ``causal_ordering``); a part may be a single player.

    Raises:
      ValueError: naming ``what`` for an empty part, a player listed twice, or players left out.
    """
    if isinstance(spec, (str, bytes)) or not hasattr(spec, "__iter__"):
        raise ValueError(f"`{what}` must be a list of lists of features; got {spec!r}.")
    parts, seen = [], {}
    for k, part in enumerate(spec):
        items = [part] if isinstance(part, (str, int, np.integer)) else list(part)
        if not items:
            raise ValueError(f"`{what}` part {k} is empty; every part needs at least one feature.")
        idx = []
        for item in items:
            j = resolve_player(item, names, n, what)
            if j in seen:
                raise ValueError(f"`{what}` lists feature {_label(j, names)} twice (parts {seen[j]} and {k}); "
                                 "every feature must be in exactly one part.")
            seen[j] = k
            idx.append(j)
        parts.append(tuple(idx))
    missing = [j for j in range(n) if j not in seen]
    if missing:
        raise ValueError(f"`{what}` leaves out {[_label(j, names) for j in missing]}; every feature must be in "
                         "exactly one part (a feature of its own is a part of one).")
    return tuple(parts)


def resolve_groups(groups: Any, names: Any, columns: Sequence[str] | None, n_columns: int
                   ) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
    """Groups of columns (a list of lists, or a dict ``{name: columns}``) and their names.

    The groups must partition the columns (:func:`resolve_partition`). Without names, a group is
    named by its columns' names joined by ``" + "`` (``"age + sex"``; a single column keeps its
    name), or ``"Group g"`` when the columns have no names.

    Returns:
      ``(groups, names)``: the groups as tuples of column positions, and one name per group.

    Raises:
      ValueError: for names given both as dict keys and ``names``, names of the wrong length or
        repeated, and as :func:`resolve_partition` raises.
    """
    if isinstance(groups, Mapping):
        if names is not None:
            raise ValueError("pass group names either as the keys of a `groups` dict or as `names`, not both.")
        names, groups = [str(k) for k in groups], list(groups.values())
    parts = resolve_partition(groups, columns, n_columns, "groups")
    if names is None:
        names = [f"Group {g}" if columns is None else " + ".join(str(columns[j]) for j in cols)
                 for g, cols in enumerate(parts)]
    names = tuple(str(n) for n in names)
    if len(names) != len(parts):
        raise ValueError(f"`names` has {len(names)} entries for {len(parts)} groups.")
    if len(set(names)) != len(names):
        raise ValueError(f"group names must differ; got {list(names)}.")
    return parts, names


def _label(j: int, names: Sequence[str] | None) -> Any:
    return str(names[j]) if names is not None else j


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

    @property
    def calls_model_once(self) -> bool:
        """As the inner masker (whose :meth:`coalition_values` this one calls)."""
        return self.masker.calls_model_once

    def coalition_values(self, f: Callable[[jax.Array], jax.Array], x: jax.Array, masks: jax.Array) -> jax.Array:
        """The inner masker's ``v_x(S)`` for each coalition ``[C, M]``."""
        return self.masker.coalition_values(f, x, masks)

    def draw_conditional(self, key: jax.Array, rows: jax.Array, given: jax.Array) -> jax.Array:
        """The inner masker's conditional draw (see :meth:`Masker.draw_conditional`)."""
        return self.masker.draw_conditional(key, rows, given)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.masker!r})"


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
