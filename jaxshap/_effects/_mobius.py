r"""Feature sets up to an order: the families over which the global effects take the Möbius
transform of centred partial dependences (the transform itself:
:func:`jaxshap._coalitions._combinatorics.mobius`).

The functional ANOVA component of a feature set ``S`` is the inclusion-exclusion (Möbius
transform over the subset lattice) of the centred partial dependences of its subsets,

.. math::

    g_S = \sum_{T \subseteq S} (-1)^{|S| - |T|} \hat F_T, \qquad \hat F_\emptyset = 0,

(Hooker, 2004, "Discovering additive structure in black box functions"; Friedman & Popescu,
2008, section 8, eqs. 45-47 for two and three features), and its inverse is
:math:`\hat F_U = \sum_{S \subseteq U} g_S`. Over a family of sets closed under taking subsets
the transform runs one feature at a time (the fast subset transform), in ``max |S|`` array
operations whatever the number of features.
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
