"""Peer baselines for observational Shapley values, in plain NumPy (no jaxshap imports).

:func:`empirical_shapley_numpy` is Aas, Jullum & Loland's (2021) empirical method written from
the paper, with loops over coalitions and the subset formula: the reference the conditional
bench scenarios (and the tests of ``maskers.Empirical``) compare against.
"""

from __future__ import annotations

import itertools
from math import comb, factorial
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


def _weights_all_rows(
    data: np.ndarray, X: np.ndarray, subset: list[int], sigma: float, eta: float,
    categorical: Sequence[int], max_samples: int | None,
) -> np.ndarray:
    """:func:`empirical_weights` for every row of ``X`` at once: ``[n, N]``, each row normalised."""
    n, big_n = X.shape[0], data.shape[0]
    if not subset:
        return np.full((n, big_n), 1.0 / big_n)
    cont = [j for j in subset if j not in categorical]
    cats = [j for j in subset if j in categorical]
    d2 = np.zeros((n, big_n))
    if cont:
        precision = np.linalg.inv(np.atleast_2d(np.cov(data[:, cont], rowvar=False)))
        diff = X[:, None, cont] - data[None, :, cont]  # [n, N, |S_cont|]
        d2 = np.einsum("rki,ij,rkj->rk", diff, precision, diff) / len(cont)
    log_w = -(d2 - d2.min(1, keepdims=True)) / (2.0 * sigma**2)
    if cats:
        misses = (data[None, :, cats] != X[:, None, cats]).sum(-1)  # [n, N]
        best = misses == misses.min(1, keepdims=True)
        top = np.where(best, log_w, -np.inf).max(1, keepdims=True)
        log_w = np.where(best, log_w - top, -np.inf)
    w = np.exp(log_w)
    w = w / w.sum(1, keepdims=True)
    order = np.argsort(-w, axis=1, kind="stable")
    ranked = np.take_along_axis(w, order, 1)
    if eta < 1.0:  # rank i is taken while the share before it is below eta (and rank 0 always)
        before = np.cumsum(ranked, 1)[:, :-1]
        taken = 1 + (before < eta).sum(1)
    else:
        taken = np.full(n, big_n)
    last = ranked[np.arange(n), taken - 1]
    kept = np.where(w >= last[:, None], w, 0.0)  # rows tied with the last one kept count too
    if max_samples is not None:
        np.put_along_axis(kept, order[:, max_samples:], 0.0, 1)
    return kept / kept.sum(1, keepdims=True)


def _evaluate(model_np: Callable, rows: np.ndarray, chunk: int = 1 << 16) -> tuple[np.ndarray, bool]:
    """``(outputs [R, K], whether the model returns one output per row as a 1-D array)``: the
    model on ``rows`` in chunks of one fixed size (the last one padded), so a jitted model
    compiles once."""
    outs, flat = [], False
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        pad = chunk - len(part) if len(rows) > chunk else 0
        padded = np.concatenate([part, np.repeat(part[:1], pad, 0)]) if pad else part
        out = np.asarray(model_np(padded), np.float64)
        flat = out.ndim == 1
        outs.append(out[: len(part)].reshape(len(part), -1))
    return np.concatenate(outs), flat


def _shapley_from_table(values: np.ndarray, m: int) -> np.ndarray:
    """Shapley values ``[n, M, K]`` from the values of every coalition ``[n, 2**M, K]`` (bit ``j``
    of the coalition's index is feature ``j``), by the subset formula."""
    codes = np.arange(2**m)
    sizes = np.array([bin(c).count("1") for c in codes])
    phi = np.zeros((values.shape[0], m, values.shape[2]))
    for j in range(m):
        without = codes[(codes >> j) & 1 == 0]
        weight = 1.0 / (m * np.array([comb(m - 1, int(s)) for s in sizes[without]]))
        phi[:, j] = np.einsum("c,rck->rk", weight, values[:, without | (1 << j)] - values[:, without])
    return phi


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

    ``v_x(S) = sum_k w_k(x, S) f(x_S, d_{k,-S})`` with :func:`empirical_weights`' weights; for
    each coalition the weights of every explained row come at once, the model is evaluated only
    on the (row, training row) pairs with a positive weight, all coalitions in one batched pass,
    and the Shapley values follow by the subset formula.

    Args:
      model_np: NumPy model ``[n, M] -> [n]`` or ``[n, K]``.
      data: training rows ``[N, M]``.
      X: rows to explain ``[n, M]``.
      sigma, eta: the kernel's bandwidth and the share of weight kept.
      categorical: indices of categorical columns (matched exactly).
      max_samples: at most this many rows per coalition (``None``: no cap).
      return_base: also return ``v(empty)`` per row.
    """
    data = np.asarray(data, np.float64)
    X = np.atleast_2d(np.asarray(X, np.float64))
    n, m = X.shape
    if m > 10:
        raise ValueError(f"empirical_shapley_numpy enumerates 2**M coalitions; M = {m} is over 10.")
    categorical = tuple(categorical)
    row, coalition, train, weight = [], [], [], []
    for code in range(2**m):
        subset = [j for j in range(m) if (code >> j) & 1]
        w = _weights_all_rows(data, X, subset, sigma, eta, categorical, max_samples)
        r, k = np.nonzero(w)
        row.append(r), coalition.append(np.full(len(r), code)), train.append(k), weight.append(w[r, k])
    row, coalition, train, weight = (np.concatenate(a) for a in (row, coalition, train, weight))
    inside = ((coalition[:, None] >> np.arange(m)) & 1).astype(bool)  # [E, M]: the coalition's features
    out, flat = _evaluate(model_np, np.where(inside, X[row], data[train]))  # [E, K]
    values = np.zeros((n, 2**m, out.shape[1]))
    np.add.at(values, (row, coalition), weight[:, None] * out)
    phi = _shapley_from_table(values, m)
    base = values[:, 0]
    if flat:
        phi, base = phi[..., 0], base[..., 0]
    return (phi, base) if return_base else phi


def empirical_shapley_loops(
    model_np: Callable[[np.ndarray], np.ndarray],
    data: np.ndarray,
    X: np.ndarray,
    sigma: float = 0.1,
    eta: float = 0.95,
    *,
    categorical: Sequence[int] = (),
    max_samples: int | None = None,
) -> np.ndarray:
    """:func:`empirical_shapley_numpy` one row and one coalition at a time (the model on every
    training row, zero weights included): the definition, slow, for the tests."""
    X = np.atleast_2d(np.asarray(X, np.float64))
    m = X.shape[1]
    games = [empirical_game(model_np, data, x, sigma, eta, categorical, max_samples) for x in X]
    return np.stack([shapley_values(g, m) for g in games])
