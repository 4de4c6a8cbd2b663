"""Exact Winter values of one game over a nested (multi-level, non-binary) coalition structure."""

from __future__ import annotations

from typing import Any, Callable

import jax

from .._coalitions._nested import check_hierarchy, winter_plan
from ._owen import owen_exact

ValueFn = Callable[[jax.Array], jax.Array]


def winter_values(value_fn: ValueFn, hierarchy: Any) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Exact Winter values: Shapley values of the quotient game at every level of a hierarchy.

    The players are grouped into nested groups (any number of children per node, any depth).
    Every group's members arrive together, recursively, each node ordering its children
    uniformly at random; a player's value is its mean marginal contribution over those orders
    (Winter, 1989; Owen, 1977 for one level of groups). For player ``i`` whose ancestor at level
    ``k`` is one of ``n_k`` children with siblings ``G_k``,

    .. math::

        \phi_i = \sum_{T_1 \subseteq G_1} \cdots \sum_{T_d \subseteq G_d}
                 \prod_{k=1}^{d} \frac{|T_k|!\,(n_k - |T_k| - 1)!}{n_k!}
                 \bigl[v(U_T \cup \{i\}) - v(U_T)\bigr], \qquad U_T = \bigcup_k \bigcup_{g \in T_k} g.

    A flat hierarchy of single players gives the Shapley values, a binary one the Owen values.
    Each distinct coalition is evaluated once, in one batched call of ``value_fn``: ``2**n +
    sum_k 2**(n - 1) (c_k - 2)`` of them for a node with ``n`` children that need ``c_k`` each
    (:func:`jaxshap._coalitions._nested.coalition_count`), far fewer than ``2**M`` when groups
    are small. The result is ``phi = C (v - v(empty))`` with the plan's coefficients ``C``.

    Example::

        phi, v0, v1 = winter_values(v, [[0, 1], [2, [3, 4]]])   # groups {0, 1} and {2, {3, 4}}

    Args:
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      hierarchy: nested lists (or tuples) of the player positions ``0..M-1``, each exactly once;
        every inner list is a group (static).

    Returns:
      ``(phi, v_empty, v_full)``: ``phi`` of shape ``[M, ...]`` and the values of the empty and the
      full coalition (``phi.sum(0) == v_full - v_empty``: efficiency).

    Raises:
      ValueError: for a hierarchy whose leaves are not ``0..M-1`` each once, or with an empty group.
    """
    hierarchy, _ = check_hierarchy(hierarchy)
    return owen_exact(value_fn, *winter_plan(hierarchy))
