"""Peer baselines for observational Shapley values, in plain NumPy (no jaxshap imports).

:func:`empirical_shapley_numpy` is Aas, Jullum & Loland's (2021) empirical method written from
the paper, with loops over coalitions and the subset formula: the reference the conditional
bench scenarios (and the tests of ``maskers.Empirical``) compare against.
"""

from __future__ import annotations

import itertools
from math import factorial
from typing import Callable, Sequence

import numpy as np


def empirical_weights(
    data: np.ndarray,
    x: np.ndarray,
    subset: Sequence[int],
    sigma: float = 0.1,
    eta: float = 0.95,
    categorical: Sequence[int] = (),
    max_samples: int | None = None,
) -> np.ndarray:
    """Normalised weights ``[N]`` of the training rows for coalition ``subset`` and row ``x``.

    ``D^2 = (x_S - d_S)' Sigma_S^{-1} (x_S - d_S) / |S|`` over the continuous features of ``S``
    (``Sigma`` the sample covariance, ``ddof=1``), ``w = exp(-D^2 / (2 sigma^2))``, times an
    indicator that the categorical features of ``S`` match exactly (the rows with the fewest
    mismatches when none matches all); then the fewest largest weights holding a share ``eta``
    of the total (and the rows tied with the last of them), at most ``max_samples`` of them. The empty coalition weighs every row alike.
    """
    data = np.asarray(data, np.float64)
    x = np.asarray(x, np.float64)
    n = data.shape[0]
    if len(subset) == 0:
        return np.full(n, 1.0 / n)
    cont = [j for j in subset if j not in categorical]
    cats = [j for j in subset if j in categorical]
    d2 = np.zeros(n)
    if cont:
        precision = np.linalg.inv(np.atleast_2d(np.cov(data[:, cont], rowvar=False)))
        diff = x[cont] - data[:, cont]
        d2 = np.einsum("ki,ij,kj->k", diff, precision, diff) / len(cont)
    log_w = -(d2 - d2.min()) / (2.0 * sigma**2)
    if cats:
        misses = (data[:, cats] != x[cats]).sum(1)
        log_w = np.where(misses > misses.min(), -np.inf, log_w - log_w[misses == misses.min()].max())
    w = np.exp(log_w)
    w = w / w.sum()
    order = np.argsort(-w, kind="stable")
    total, last = 0.0, 0.0
    for k in order:  # the fewest largest weights holding a share eta of the total
        if eta < 1.0 and total >= eta:
            break
        total, last = total + w[k], w[k]
    kept = np.where(w >= last, w, 0.0)  # rows tied with the last one kept count too
    if max_samples is not None:
        kept[order[max_samples:]] = 0.0
    return kept / kept.sum()


def empirical_game(
    model_np: Callable[[np.ndarray], np.ndarray],
    data: np.ndarray,
    x: np.ndarray,
    sigma: float = 0.1,
    eta: float = 0.95,
    categorical: Sequence[int] = (),
    max_samples: int | None = None,
) -> dict:
    """``{coalition (frozenset): v_x(S)}`` over all ``2**M`` coalitions, ``v`` the weighted mean
    of ``model_np(x_S, d_{k,-S})`` over the rows with :func:`empirical_weights`."""
    data = np.asarray(data, np.float64)
    m = data.shape[1]
    values = {}
    for size in range(m + 1):
        for subset in itertools.combinations(range(m), size):
            w = empirical_weights(data, x, subset, sigma, eta, categorical, max_samples)
            rows = data.copy()
            rows[:, list(subset)] = np.asarray(x, np.float64)[list(subset)]
            out = np.asarray(model_np(rows), np.float64)
            values[frozenset(subset)] = np.tensordot(w, out, axes=(0, 0))
    return values


def shapley_values(values: dict, m: int) -> np.ndarray:
    """Shapley values ``[M, ...]`` of a game given on every coalition, by the subset formula."""
    phi = []
    for j in range(m):
        others = [p for p in range(m) if p != j]
        total = 0.0
        for size in range(m):
            weight = factorial(size) * factorial(m - size - 1) / factorial(m)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                total = total + weight * (values[s | {j}] - values[s])
        phi.append(total)
    return np.stack(phi)


def empirical_shapley_numpy(
    model_np: Callable[[np.ndarray], np.ndarray],
    data: np.ndarray,
    X: np.ndarray,
    sigma: float = 0.1,
    eta: float = 0.95,
    *,
    categorical: Sequence[int] = (),
    max_samples: int | None = None,
    return_base: bool = False,
):
    """Exact Shapley values ``[n, M]`` (``[n, M, K]`` for ``K`` outputs) of Aas et al.'s empirical
    game for each row of ``X``, over all ``2**M`` coalitions (``M <= 10``).

    Args:
      model_np: NumPy model ``[n, M] -> [n]`` or ``[n, K]``.
      data: training rows ``[N, M]``.
      X: rows to explain ``[n, M]``.
      sigma, eta: the kernel's bandwidth and the share of weight kept.
      categorical: indices of categorical columns (matched exactly).
      max_samples: at most this many rows per coalition (``None``: no cap).
      return_base: also return ``v(empty)`` per row.
    """
    X = np.atleast_2d(np.asarray(X, np.float64))
    m = X.shape[1]
    if m > 10:
        raise ValueError(f"empirical_shapley_numpy enumerates 2**M coalitions; M = {m} is over 10.")
    phis, bases = [], []
    for x in X:
        game = empirical_game(model_np, data, x, sigma, eta, categorical, max_samples)
        phis.append(shapley_values(game, m))
        bases.append(game[frozenset()])
    phi = np.stack(phis)
    return (phi, np.stack(bases)) if return_base else phi
