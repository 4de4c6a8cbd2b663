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
    """``v(S) = mean_b model(x_S, b_-S)``, evaluated row by row with a Python loop over the background."""
    x = np.asarray(x, np.float64)
    background = np.asarray(background, np.float64)

    def value(subset):
        rows = []
        for b in background:
            z = b.copy()
            for j in subset:
                z[j] = x[j]
            rows.append(z)
        return np.asarray(model(np.stack(rows)), np.float64).mean(axis=0)

    return value


def interventional_shapley(model, X: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Oracle interventional Shapley values ``[n, M]`` (or ``[n, M, K]``)."""
    m = X.shape[1]
    return np.stack([shapley_from_game(interventional_game(model, x, background), m) for x in X])


def tabulated_game(table: np.ndarray):
    """A game given as a table over coalitions indexed by bitmask (bit j = feature j)."""

    def value(subset):
        return table[sum(1 << j for j in subset)]

    return value
