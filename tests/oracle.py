"""Brute-force NumPy oracles written from the definitions (independent of jaxshap's code)."""

from __future__ import annotations

import itertools
from math import factorial

import numpy as np


def shapley_from_game(value, n_features: int) -> np.ndarray:
    """Shapley values of ``value(frozenset) -> array`` by the subset formula, in float64.

    Each coalition's value is computed once and cached.
    """
    m = n_features
    cache: dict = {}

    def v(s):
        if s not in cache:
            cache[s] = np.asarray(value(s), np.float64)
        return cache[s]

    players = range(m)
    out = None
    for j in players:
        others = [p for p in players if p != j]
        total = 0.0
        for size in range(m):
            weight = factorial(size) * factorial(m - size - 1) / factorial(m)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                total = total + weight * (v(s | {j}) - v(s))
        out = [total] if out is None else out + [total]
    return np.stack(out)


def interventional_game(model, x: np.ndarray, background: np.ndarray):
    """``v(S) = mean_b model(x_S, b_-S)``: each coalition's rows built with a Python loop over the
    background. When every coalition's rows fit in ``_ONE_CALL_ROWS``, the model is called once on
    all of them (the first time a value is asked for) and each value is read from that table; else
    once per coalition."""
    x = np.asarray(x, np.float64)
    background = np.asarray(background, np.float64)
    m = x.shape[0]

    def rows(subset):
        out = []
        for b in background:
            z = b.copy()
            for j in subset:
                z[j] = x[j]
            out.append(z)
        return np.stack(out)

    if 2**m * len(background) > _ONE_CALL_ROWS:
        return lambda subset: np.asarray(model(rows(subset)), np.float64).mean(axis=0)

    table: dict = {}

    def value(subset):
        if not table:
            subsets = [frozenset(c) for size in range(m + 1) for c in itertools.combinations(range(m), size)]
            out = np.asarray(model(np.concatenate([rows(s) for s in subsets])), np.float64)
            out = out.reshape((len(subsets), len(background)) + out.shape[1:]).mean(axis=1)
            table.update(zip(subsets, out))
        return table[frozenset(subset)]

    return value


_ONE_CALL_ROWS = 200_000


def interventional_shapley(model, X: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Oracle interventional Shapley values ``[n, M]`` (or ``[n, M, K]``)."""
    m = X.shape[1]
    return np.stack([shapley_from_game(interventional_game(model, x, background), m) for x in X])


def tabulated_game(table: np.ndarray):
    """A game given as a table over coalitions indexed by bitmask (bit j = feature j)."""

    def value(subset):
        return table[sum(1 << j for j in subset)]

    return value


def path_dependent_shapley(e, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``([M, K] values, [K] base)``: Shapley values of the path-dependent game of a tree
    ensemble ``e`` (a ``TreeEnsemble``) at one row, ``v(S) = base + sum_t E_cover[tree_t | x_S]``:
    follow ``x`` at splits on features in ``S``, average the children by cover elsewhere
    (Lundberg et al. 2020, Alg. 1), by recursion over each tree and every coalition."""
    from jaxshap._tree._ensemble import go_left

    def expect(t, node, S):
        f = e.feature[t, node]
        if f < 0:
            return e.value[t, node]
        left, right = e.left[t, node], e.right[t, node]
        if f in S:
            cats = None if e.cat_left is None else (e.cat_left[t, node], e.cat_invalid_left[t, node])
            gl = go_left(np.float64(x[f]), e.threshold[t, node], e.default_left[t, node], e.missing[t, node], cats)
            return expect(t, left if gl else right, S)
        c = e.cover[t, node]
        return (e.cover[t, left] * expect(t, left, S) + e.cover[t, right] * expect(t, right, S)) / c

    def v(S):
        return e.base + sum(expect(t, 0, S) for t in range(e.n_trees))

    return shapley_from_game(v, e.n_features), v(frozenset())

