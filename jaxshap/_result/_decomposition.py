r"""The functional decomposition of a model at explained rows, and what it gives.

``f(x) = m_emptyset + sum_S m_S(x)`` with the interventional components
``m_S(x) = sum_{T subseteq S} (-1)^{|S|-|T|} v_x(T)``, ``v_x(T) = mean_b f(x_T, b_{-T})``
(Hiabu, Meyer & Wright, 2023, "Unifying local and global model explanations by functional
decomposition of low dimensional structures", AISTATS). From them: the interventional SHAP
values ``phi_j = sum_{S ni j} m_S / |S|``, glex's importance ``mean_i |m_S(x_i)|`` and the
prediction with every component touching some features removed (de-biasing), and the same
decomposition with groups of features as the players.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..maskers._grouped import resolve_groups


class Importance(NamedTuple):
    """Variable importance of a decomposition (as glex's ``glex_vi``).

    Attributes:
      by_component: ``{S: mean_i |m_S(x_i)|}`` for every component ``S`` (a float, or ``[K]``).
      by_order: ``{k: sum of by_component over the components of order k}``.
    """

    by_component: dict
    by_order: dict


class Decomposition:
    r"""The components ``m_S`` of a functional decomposition at ``n`` rows.

    Attributes:
      components: ``{S: [n]}`` (``[n, K]`` for ``K`` outputs): one entry per feature set ``S``
        (a sorted tuple of feature positions, ordered by size, then lexicographically) that the
        model's structure allows; sets no root-to-leaf path uses jointly are absent.
      intercept: ``m_emptyset``, the mean prediction over the background (scalar, or ``[K]``).
      remainder: ``[n]`` (``[n, K]``): the sum of the components above ``max_order`` that were
        not computed, ``f(x) - intercept - sum_S m_S(x)`` (zeros when none was dropped).
      max_order: the largest order computed (``None``: every order).
      feature_names: the ``M`` names.
      output_names: the ``K`` output names, or ``None`` for one output.
      data: ``[n, M]`` the explained rows.
    """

    def __init__(self, values, sets, intercept, remainder, feature_names, output_names=None, data=None,
                 max_order=None, truncated=False):
        self._values = np.asarray(values)  # [n, C, K]: row, component, output
        self.sets = tuple(tuple(s) for s in sets)
        self._single = self._values.shape[-1] == 1
        self.intercept = self._squeeze(np.asarray(intercept))
        self.remainder = self._squeeze(np.asarray(remainder))
        self.feature_names = tuple(feature_names)
        self.output_names = None if output_names is None else tuple(output_names)
        self.data = data
        self.max_order, self.truncated = max_order, bool(truncated)

    def _squeeze(self, a: np.ndarray) -> np.ndarray:
        return a[..., 0] if self._single else a

    @property
    def components(self) -> dict:
        """``{S: [n]}`` (or ``[n, K]``), see the class docstring."""
        return {s: self._squeeze(self._values[:, i]) for i, s in enumerate(self.sets)}

    @property
    def n_rows(self) -> int:
        return self._values.shape[0]

    def predict(self) -> np.ndarray:
        """``intercept + sum_S m_S + remainder``: the model's raw output ``f(x)`` ``[n]`` (``[n, K]``)."""
        return self._squeeze(self._values.sum(1)) + self.intercept + self.remainder

    def shap_values(self) -> np.ndarray:
        r"""Interventional SHAP values ``phi_j = sum_{S ni j} m_S / |S|``: ``[n, M]`` (``[n, M, K]``).

        Equal to :class:`jaxshap.TreeExplainer`'s interventional values with the same
        background. With ``max_order`` truncation only the computed components are shared out
        (the remainder is not), so they then sum to ``f(x) - intercept - remainder``.
        """
        m = len(self.feature_names)
        share = np.zeros((len(self.sets), m), self._values.dtype)
        for i, s in enumerate(self.sets):
            share[i, list(s)] = 1.0 / len(s)
        return self._squeeze(np.einsum("ncK,cm->nmK", self._values, share))

    def importance(self) -> Importance:
        """glex's variable importance: ``mean_i |m_S(x_i)|`` per component and summed per order.

        Returns:
          An :class:`Importance` named tuple ``(by_component, by_order)`` of dicts, keyed by
          the feature set and by the order ``|S|``.
        """
        mean_abs = np.abs(self._values).mean(0)  # [C, K]
        by_component = {s: self._squeeze(mean_abs[i]) for i, s in enumerate(self.sets)}
        by_order: dict = {}
        for s, v in by_component.items():
            by_order[len(s)] = by_order.get(len(s), 0.0) + v
        return Importance(by_component, by_order)

    def _positions(self, features: Any) -> set:
        items = [features] if isinstance(features, (str, int, np.integer)) else list(features)
        out = set()
        for f in items:
            if isinstance(f, str):
                if f not in self.feature_names:
                    raise ValueError(f"`features` names {f!r}, which is not a feature; the features are {list(self.feature_names)}.")
                out.add(self.feature_names.index(f))
            elif isinstance(f, (int, np.integer)) and not isinstance(f, bool) and 0 <= f < len(self.feature_names):
                out.add(int(f))
            else:
                raise ValueError(f"`features` must hold feature positions in [0, {len(self.feature_names)}) or names; got {f!r}.")
        return out

    def without(self, features: Any) -> np.ndarray:
        """The prediction with every component that contains any of ``features`` removed:
        ``intercept + sum_{S cap F = emptyset} m_S`` (glex's de-biasing, e.g. of a protected
        feature), ``[n]`` (``[n, K]``).

        Args:
          features: one feature (position or name) or a sequence of them.

        Raises:
          ValueError: for an unknown feature, or a decomposition truncated by ``max_order``
            (its remainder mixes components with and without them).
        """
        drop = self._positions(features)
        if self.truncated:
            raise ValueError(
                f"without() needs every component, but this decomposition stops at max_order={self.max_order}; "
                "decompose with max_order=None."
            )
        keep = np.array([not drop.intersection(s) for s in self.sets], bool)
        return self._squeeze(self._values[:, keep].sum(1)) + self.intercept

    def group(self, groups: Any, names: Any = None) -> "Decomposition":
        r"""The decomposition with groups of features as its players (glex's ``group_components``).

        With groups :math:`g_1, \dots, g_G` partitioning the features, a component's group set is
        :math:`\tau(S) = \{k : S \cap g_k \neq \emptyset\}` and the grouped components are
        :math:`m'_T = \sum_{S:\, \tau(S) = T} m_S`. This is exact: :math:`m'_T` is the Möbius
        transform of the groups' game :math:`u_x(T) = v_x(\bigcup_{k \in T} g_k)`, so the grouped
        components still add up to the prediction, and ``.shap_values()`` of the result are the
        groups' interventional Shapley values, :math:`\phi_k = \sum_{T \ni k} m'_T / |T|` (those
        of ``ExactExplainer(..., groups=groups)`` with the same background). A one-hot encoded
        factor, split over its dummy columns, becomes one feature again; so does any block of
        related features. ``max_order`` and ``remainder`` keep their meaning (orders of features).

        Args:
          groups: a list of groups, each a list of features (positions or names), or a dict
            ``{group name: features}``; every feature in exactly one group.
          names: group names for a list of groups; by default the features' names joined by
            ``" + "`` (a group of one feature keeps its name).

        Returns:
          A :class:`Decomposition` whose features are the groups (``data`` is ``None``: a group
          has no single value).

        Raises:
          ValueError: for groups that overlap, leave a feature out or name an unknown feature, and
            for repeated or miscounted names.
        """
        parts, group_names = resolve_groups(groups, names, self.feature_names, len(self.feature_names))
        owner = np.empty(len(self.feature_names), np.int64)
        for k, cols in enumerate(parts):
            owner[list(cols)] = k
        members: dict = {}
        for i, s in enumerate(self.sets):
            members.setdefault(tuple(sorted({int(owner[j]) for j in s})), []).append(i)
        sets = sorted(members, key=lambda t: (len(t), t))
        values = np.zeros(self._values[:, :0].shape, self._values.dtype)  # [n, 0, K]: a constant model
        if sets:
            values = np.stack([self._values[:, members[t]].sum(1) for t in sets], axis=1)
        wide = (lambda a: np.asarray(a)[..., None]) if self._single else np.asarray
        return Decomposition(values, sets, wide(self.intercept), wide(self.remainder), group_names, self.output_names,
                             None, self.max_order, self.truncated)

    def __repr__(self) -> str:
        orders = sorted({len(s) for s in self.sets})
        return (f"Decomposition(rows: {self.n_rows}, features: {len(self.feature_names)}, components: {len(self.sets)}, "
                f"orders: {orders}, max_order: {self.max_order})")
