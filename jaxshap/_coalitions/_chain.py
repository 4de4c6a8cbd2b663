r"""Coalitions and orders of asymmetric Shapley values over a causal chain of components.

Asymmetric Shapley values (Frye, Rowat & Feige, 2020, "Asymmetric Shapley values: incorporating
causal knowledge into model-agnostic explainability") average marginal contributions only over
the orders consistent with a partial causal order: the players are split into components
:math:`\tau_1, \dots, \tau_K` and every player of :math:`\tau_k` comes after every player of
:math:`\tau_{<k} = \tau_1 \cup \dots \cup \tau_{k-1}`. Such an order is a uniform order of each
component, one after another, so a player :math:`i \in \tau_k` always finds all of
:math:`\tau_{<k}` before it and a uniformly ordered part of its own component: its value is its
Shapley value in the game :math:`w_k(T) = v(\tau_{<k} \cup T)` over the players of
:math:`\tau_k`,

.. math::

    \phi_i = \sum_{T \subseteq \tau_k \setminus \{i\}} \frac{|T|!\,(|\tau_k| - |T| - 1)!}{|\tau_k|!}
             \bigl[v(\tau_{<k} \cup T \cup \{i\}) - v(\tau_{<k} \cup T)\bigr],

which needs :math:`1 + \sum_k (2^{|\tau_k|} - 1)` coalitions instead of :math:`2^M`. The values
of component ``k`` sum to :math:`v(\tau_{\le k}) - v(\tau_{<k})`, so all of them sum to
:math:`v(N) - v(\emptyset)` (efficiency).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._combinatorics import all_codes_bits, shapley_weights
from ._masks import permutation_ranks

Components = tuple[tuple[int, ...], ...]


def chain_coalition_count(components: Components) -> int:
    """Coalitions the exact asymmetric values need: ``1 + sum_k (2**|tau_k| - 1)``."""
    return 1 + sum(2 ** len(c) - 1 for c in components)


def asymmetric_plan(components: Components, n_players: int) -> tuple[np.ndarray, np.ndarray]:
    r"""``(masks [C, M], coef [M, C])`` with the exact asymmetric Shapley values ``coef @ v(masks)``.

    ``masks[0]`` is the empty coalition and ``masks[-1]`` the full one; component ``k``
    contributes the coalitions :math:`\tau_{<k} \cup T` for the non-empty :math:`T \subseteq
    \tau_k` (the empty ``T`` is the previous component's full one), in the order of their bit
    codes.

    Args:
      components: the chain components, a partition of ``range(n_players)``, first to last.
      n_players: ``M``.
    """
    masks = [np.zeros(n_players, bool)]
    coef_blocks = []
    before = np.zeros(n_players, bool)
    for comp in components:
        comp = np.asarray(comp, np.int64)
        n = comp.shape[0]
        bits = all_codes_bits(n)  # [2**n, n]
        block = np.repeat(before[None, :], 2**n, axis=0)
        block[:, comp] = bits
        start = len(masks) - 1  # row of T = empty: the last coalition so far
        rows = np.concatenate([[start], start + np.arange(1, 2**n)])
        masks.extend(block[1:])
        codes = np.arange(2**n)
        sizes = bits.sum(axis=1)
        weights = shapley_weights(n)
        coef_k = {}
        for p in range(n):
            without = codes[(codes >> p) & 1 == 0]
            w = weights[sizes[without]]
            coef_k[p] = (rows[without | (1 << p)], rows[without], w)
        coef_blocks.append((comp, coef_k))
        before = before.copy()
        before[comp] = True
    masks = np.stack(masks)
    coef = np.zeros((n_players, masks.shape[0]))
    for comp, coef_k in coef_blocks:
        for p, (plus, minus, w) in coef_k.items():
            np.add.at(coef[comp[p]], plus, w)
            np.add.at(coef[comp[p]], minus, -w)
    return masks, coef


def component_index(components: Components, n_players: int) -> np.ndarray:
    """``[M]`` int: the position of each player's component in the chain."""
    index = np.zeros(n_players, np.int32)
    for k, comp in enumerate(components):
        index[list(comp)] = k
    return index


def consistent_order_ranks(key: jax.Array, components: Components, n_players: int, n_orders: int) -> jax.Array:
    """Ranks ``[n_orders, M]`` of uniform orders consistent with the chain: the players of each
    component in a uniform order, components one after another (sorting by component, ties
    broken by uniform keys)."""
    index = jnp.asarray(component_index(components, n_players), jnp.float32)
    u = jax.random.uniform(key, (n_orders, n_players), jnp.float32, 0.0, 0.5)
    return permutation_ranks(jnp.argsort(index[None, :] + u, axis=1))


def reverse_within_components(ranks: jax.Array, components: Components, n_players: int) -> jax.Array:
    """The antithetic partner of consistent orders: each component's players reversed in place
    (the partner is again consistent, and as likely)."""
    index = component_index(components, n_players)
    sizes = np.array([len(c) for c in components], np.int32)
    offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    lo, n = jnp.asarray(offset[index]), jnp.asarray(sizes[index])
    return lo + (n - 1 - (ranks - lo))
