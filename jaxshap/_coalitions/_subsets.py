"""Uniform subsets of a fixed size, one source for the compiled (``xp=jnp``) and the NumPy (``xp=np``) draw.

* By rank: the combinatorial number system numbers the ``k``-subsets of ``range(n)`` in
  colexicographic order, ``rank = sum_i C(c_i, i)`` over the members ``c_1 < ... < c_k``, so a
  uniform rank in ``[0, C(n, k))`` is a uniform subset. Ranks are kept in ``int32``: a population
  above :data:`MAX_RANKED` is drawn by scores instead.
* By scores: the ``k`` positions of smallest score among ``n`` i.i.d. uniform scores.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._combinatorics import binomial_table

MAX_RANKED = 2**30
"""Populations above this are drawn by scores, *with* replacement (ranks would not fit in
``int32``); the chance that two of ``n`` draws coincide is below ``n**2 / 2**31`` there."""


def ranked(population: int) -> bool:
    """Whether a population of subsets is drawn by rank (without replacement)."""
    return population <= MAX_RANKED


def unrank(ranks: Any, n_items: int, ks: Any, xp: Any = np) -> Any:
    """Subsets from their colexicographic ranks, ``ranks.shape + (n_items,)`` bools.

    ``ks`` holds the subset size of each row of ``ranks`` (shape ``ranks.shape[:-1]``). Members
    are recovered greedily from the largest position down: position ``p`` is taken when
    ``C(p, left) <= rank``, which then drops by that amount. A rank below ``C(n', k)`` gives a
    subset of ``range(n')``, so rows over fewer items share the scan (their top positions stay
    empty). Negative (padding) ranks give arbitrary rows. With ``xp=jnp`` the positions are one
    ``lax.scan``; with ``xp=np``, a Python loop of the same step.
    """
    ks = np.asarray(ks)
    # Entries a row can use are at most its population (< 2**31); larger ones only need to stay
    # larger than every rank.
    table = binomial_table(n_items, int(ks.max()) + 1, dtype=object)
    table = xp.asarray(np.minimum(table, np.iinfo(np.int32).max).astype(np.int32))
    left0 = xp.broadcast_to(xp.asarray(ks, xp.int32)[..., None], ranks.shape)

    def step(carry, p):
        rank, left = carry
        c = table[p, left]
        take = (left > 0) & (c <= rank)
        return (xp.where(take, rank - c, rank), xp.where(take, left - 1, left)), take

    if xp is np:
        carry, taken = (ranks, left0), []
        for p in range(n_items - 1, -1, -1):
            carry, take = step(carry, p)
            taken.append(take)
        taken = np.stack(taken)
    else:
        _, taken = jax.lax.scan(step, (ranks, left0), jnp.arange(n_items - 1, -1, -1))
    return xp.moveaxis(taken[::-1], 0, -1)  # last axis = position


def smallest(scores: Any, ks: Any, xp: Any = np) -> Any:
    """Each row's ``k`` positions of smallest score (a uniform ``k``-subset for i.i.d. uniform scores).

    ``ks`` broadcasts against ``scores.shape[:-1]``.
    """
    return xp.argsort(xp.argsort(scores, axis=-1), axis=-1) < xp.asarray(ks)[..., None]
