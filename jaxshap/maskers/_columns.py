"""Partitions of the features named by the user: groups of columns, components of a causal chain."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


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
