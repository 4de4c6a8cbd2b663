"""The players an explainer attributes: groups, causal values and asymmetric values on any masker."""

from __future__ import annotations

from typing import Any, Sequence

from .._core._validate import flag
from ._asymmetric import Asymmetric
from ._base import Masker
from ._causal import Causal
from ._columns import resolve_partition
from ._grouped import Grouped
from ._wrapped import Wrapped


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
