r"""Feature sets up to an order, and the Möbius transform of centred partial dependences over them.

The functional ANOVA component of a feature set ``S`` is the inclusion-exclusion (Möbius
transform over the subset lattice) of the centred partial dependences of its subsets,

.. math::

    g_S = \sum_{T \subseteq S} (-1)^{|S| - |T|} \hat F_T, \qquad \hat F_\emptyset = 0,

(Hooker, 2004, "Discovering additive structure in black box functions"; Friedman & Popescu,
2008, section 8, eqs. 45-47 for two and three features), and its inverse is
:math:`\hat F_U = \sum_{S \subseteq U} g_S`. Over a family of sets closed under taking subsets
the transform runs one feature at a time (the fast subset transform): for feature ``j``,
every set ``S`` holding ``j`` subtracts the current value of ``S \ {j}``. After the step for
``j`` the value of ``S`` sums, with signs, over the subsets of ``S`` that differ from it in the
features done so far, so after the last step it is :math:`g_S`. With the features in
descending order the steps group by rank (:func:`mobius_plan`): ``max |S|`` array operations
whatever the number of features. Sets are bit masks: set ``S`` is the integer with bit ``j``
set for each ``j`` in ``S`` (a Python int, so any number of features fits).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

MAX_SETS = 2**16 - 1
"""The most feature sets one exact decomposition computes: every non-empty set of 16 features."""


def count_sets(n_features: int, max_order: int) -> int:
    """The number of non-empty feature sets of at most ``max_order`` features: ``sum_j C(M, j)``."""
    return sum(math.comb(n_features, j) for j in range(1, max_order + 1))


def check_set_count(n_features: int, max_order: int, n_rows: int, arg: str) -> None:
    """Refuse an order above 2 whose sets are too many to compute exactly, naming the cost.

    Orders 1 and 2 (main effects and all pairs: ``M (M + 1) / 2`` sets, the H statistics'
    default) pass whatever ``M``, their cost growing as ``M^2``.

    Raises:
      ValueError: when ``max_order > 2`` and ``sum_{j <= max_order} C(M, j)`` exceeds :data:`MAX_SETS`.
    """
    if max_order <= 2:
        return
    n_sets = count_sets(n_features, max_order)
    if n_sets > MAX_SETS:
        raise ValueError(
            f"`{arg}={max_order}` with {n_features} features needs the partial dependences of {n_sets:,} "
            f"feature sets, {n_rows}^2 = {n_rows**2:,} model evaluations each ({n_sets * n_rows**2:.2e} in all); "
            f"at most {MAX_SETS:,} sets (every set of 16 features) are computed exactly. Lower `{arg}`."
        )


def sets_up_to(n_features: int, max_order: int) -> list[tuple[int, ...]]:
    """Every sorted feature tuple with 1 to ``max_order`` features, by size, then lexicographically."""
    out: list[tuple[int, ...]] = []
    for size in range(1, max_order + 1):
        out.extend(itertools.combinations(range(n_features), size))
    return out


def set_code(features: Sequence[int]) -> int:
    """The bit mask of a feature set (a Python int, so any number of features fits)."""
    return sum(1 << int(j) for j in features)


def mobius_plan(sets: Sequence[tuple[int, ...]], family: Sequence[tuple[int, ...]]) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Index arrays of the fast subset transform over ``family``, as rows of ``sets``.

    Step ``p`` (``p = 1, 2, ...``) takes every set ``S`` of at least ``max(p, 2)`` features and
    subtracts the value of ``S`` without its ``p``-th largest feature, all sets at once (each
    reading the values the previous step left). That is the feature-by-feature transform with
    the features in descending order, run in ``max |S|`` steps instead of ``M``: when ``S``
    drops its ``p``-th largest feature ``j``, both ``S`` and that parent have dropped exactly
    the features of ``S`` above ``j`` so far. A pair's component is ``(F_jk - F_j) - F_k``,
    the subtraction order of :func:`jaxshap.h_statistic`.

    Args:
      sets: the feature sets in the order of the rows of the array to transform.
      family: the sets to transform, closed under taking non-empty subsets; each is in ``sets``.

    Returns:
      One ``(members, parents)`` pair of row indices per step. Singletons have the empty set
      as parent, which is 0, and are left out.

    Raises:
      ValueError: when ``family`` is not closed under taking subsets (an internal error).
    """
    row = {set_code(s): r for r, s in enumerate(sets)}
    closed = {set_code(s) for s in family}
    steps: list[tuple[list[int], list[int]]] = []
    for s in family:
        s = tuple(sorted(s))
        code = set_code(s)
        for p in range(1, len(s) + 1 if len(s) > 1 else 1):
            parent = code ^ (1 << s[-p])
            if parent not in closed:
                raise ValueError(f"internal: the set {s} lacks its subset {tuple(k for k in s if k != s[-p])}.")
            while len(steps) < p:
                steps.append(([], []))
            steps[p - 1][0].append(row[code])
            steps[p - 1][1].append(row[parent])
    return tuple((np.asarray(m, dtype=np.int32), np.asarray(q, dtype=np.int32)) for m, q in steps)


def mobius(F: jax.Array, plan: Sequence[tuple[jax.Array, jax.Array]]) -> jax.Array:
    r"""The Möbius transform :math:`g_S = \sum_{T \subseteq S} (-1)^{|S|-|T|} F_T` along axis 0.

    Rows outside the plan's family keep their value. Each step gathers the parents' values
    as the previous step left them, then scatter-adds their negatives onto the members.
    """
    for members, parents in plan:
        F = F.at[members].add(-F[parents])
    return F


def by_size(sets: Sequence[tuple[int, ...]]) -> dict[int, np.ndarray]:
    """The rows of ``sets`` grouped by set size: ``{size: [rows]}``, sizes ascending."""
    out: dict[int, list[int]] = {}
    for r, s in enumerate(sets):
        out.setdefault(len(s), []).append(r)
    return {k: np.asarray(v, dtype=np.int32) for k, v in sorted(out.items())}


def split_rows(values: jax.Array, sets: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], jax.Array]:
    """``{set: values[r]}`` for the rows ``r`` of ``sets`` (one host copy, then one array per set)."""
    host = np.asarray(values)
    return {s: jnp.asarray(host[r]) for r, s in enumerate(sets)}
