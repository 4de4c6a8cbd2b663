"""Partitions of the features named by the user: groups of columns, components of a causal chain."""

from __future__ import annotations

from typing import Any, Sequence

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


def _label(j: int, names: Sequence[str] | None) -> Any:
    return str(names[j]) if names is not None else j
