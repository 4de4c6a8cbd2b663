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
features done so far, so after the last step it is :math:`g_S`. Sets are bit masks: set ``S``
is the integer with bit ``j`` set for each ``j`` in ``S``.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

MAX_SETS = 2**16 - 1
"""The most feature sets one exact decomposition computes: every non-empty set of 16 features."""


def count_sets(n_features: int, max_order: int) -> int:
    """The number of non-empty feature sets of at most ``max_order`` features: ``sum_j C(M, j)``."""
    return sum(math.comb(n_features, j) for j in range(1, max_order + 1))


def check_set_count(n_features: int, max_order: int, n_rows: int, arg: str) -> None:
    """Refuse an order whose sets are too many to compute exactly, naming the cost.

    Raises:
      ValueError: when ``sum_{j <= max_order} C(M, j)`` exceeds :data:`MAX_SETS`.
    """
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

    Args:
      sets: the feature sets in the order of the rows of the array to transform.
      family: the sets to transform, closed under taking non-empty subsets; each is in ``sets``.

    Returns:
      One ``(members, parents)`` pair per feature that some set of ``family`` holds, features in
      descending order (so a pair's component is ``(F_jk - F_j) - F_k``, the subtraction order
      of :func:`jaxshap.h_statistic`): ``members`` are the rows of the sets holding the feature
      and ``parents`` the rows of those sets without it (singletons have the empty set as
      parent, which is 0, and are left out).

    Raises:
      ValueError: when ``family`` is not closed under taking subsets (an internal error).
    """
    row = {set_code(s): r for r, s in enumerate(sets)}
    codes = [set_code(s) for s in family]
    features = sorted({j for s in family for j in s}, reverse=True)
    plan = []
    for j in features:
        bit = 1 << j
        members, parents = [], []
        for code in codes:
            if code & bit and code != bit:
                if code ^ bit not in row:
                    raise ValueError(f"internal: the set {bin(code)} lacks its subset {bin(code ^ bit)}.")
                members.append(row[code])
                parents.append(row[code ^ bit])
        if members:
            plan.append((np.asarray(members, dtype=np.int32), np.asarray(parents, dtype=np.int32)))
    return tuple(plan)


def mobius(F: jax.Array, plan: Sequence[tuple[jax.Array, jax.Array]]) -> jax.Array:
    r"""The Möbius transform :math:`g_S = \sum_{T \subseteq S} (-1)^{|S|-|T|} F_T` along axis 0.

    Rows outside the plan's family keep their value. Within one step the rows read (sets
    without the feature) and the rows written (sets with it) are disjoint.
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
