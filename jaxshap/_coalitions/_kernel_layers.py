"""The layers of KernelSHAP's coalition sizes, and the budgets they fix.

A *layer* is the set of coalitions of sizes ``{s, M - s}`` for ``s = 1, ..., floor(M / 2)``
(a size and the size of its complement; the middle size ``M / 2`` of an even ``M`` is a layer
on its own). The empty and the full coalition belong to no layer: the regression holds them as
constraints.
"""

from __future__ import annotations

import math

MIN_BUDGET = 2
"""The smallest budget of a :class:`~jaxshap._coalitions._kernel_design.KernelPlan`: one complementary pair."""


def max_coalitions(n_features: int) -> int:
    """Number of coalitions other than the empty and the full one: ``2**M - 2``."""
    return 2**n_features - 2


def min_coalitions(n_features: int) -> int:
    """Smallest budget of a plan: one complementary pair (:data:`MIN_BUDGET`), or every coalition for ``M < 2``.

    Budgets below :func:`stratified_coalitions` are sampled with replacement from pooled layers
    (:class:`~jaxshap._coalitions._kernel_design.Pooled`); below about ``2 (M - 1)`` the
    regression is not identified and the estimate is only a ridge-regularised guess with an
    infinite standard error.
    """
    return min(max_coalitions(n_features), MIN_BUDGET)


def stratified_coalitions(n_features: int) -> int:
    """Smallest budget of a fully stratified plan: the size-1 layer enumerated and one pair in every other layer.

    That is ``2 M + 2 (floor(M / 2) - 1)`` coalitions, or every coalition for small ``M``.
    """
    m = n_features
    return min(max_coalitions(m), 2 * m + 2 * (m // 2 - 1))


def sides(n_features: int, size: int) -> int:
    """Sizes in the layer ``{s, M - s}``: 1 for the middle layer ``2 s = M``, else 2."""
    return 1 if 2 * size == n_features else 2


def layer_count(n_features: int, size: int) -> int:
    """Coalitions in the layer ``{s, M - s}``: ``C(M, s)`` per side."""
    return math.comb(n_features, size) * sides(n_features, size)


def layers(n_features: int) -> list[tuple[int, bool, int]]:
    """``(s, middle, coalitions)`` for the layers ``{s, M - s}``, ``s = 1 .. floor(M / 2)``, outermost first."""
    m = n_features
    return [(s, 2 * s == m, layer_count(m, s)) for s in range(1, m // 2 + 1)]
