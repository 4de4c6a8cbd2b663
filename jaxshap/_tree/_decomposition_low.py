r"""Main effects and pairs of the tree decomposition as tables over the routed rows' cells.

A component ``m_S`` depends on ``x`` only through ``x_S``, and a routed value (see
:mod:`._routing`) only matters through its rank among the feature's thresholds, or its being
missing. So with ``cell_j(x) = rank_j(x)`` (``t_j + 1`` for NaN, ``t_j`` thresholds) every main
effect is a vector over the ``t_j + 2`` cells of its feature and every pair a matrix over the
cells of its two features: one gather per component and row instead of one per
(path, subset) and row. The tables are the sums over paths of the leaf terms of
:mod:`._decomposition`, ``m^{(l)}_S = (-1)^{|S|} Z_l(S \cap A)``, written with the follow
indicators ``f_u`` of the path's slots: for a slot ``u``, ``-(Z_0 + f_u (Z_u - Z_0))``; for
two slots ``u < v``,
``Z_0 + f_u (Z_u - Z_0) + f_v (Z_v - Z_0) + f_u f_v (Z_{uv} - Z_u - Z_v + Z_0)``, whose last
term sums over the paths as one matrix product per pair. Categorical splits (codes, not
ranks) keep every component on the path kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._paths import Paths
from ._routing import Router

TABLE_ORDER = 2
"""Components of at most this many features are tabulated (when their tables fit the budget)."""


def _slot_pairs(u: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)``: every pair of slots ``a < b`` of a path with ``u`` slots."""
    a, b = np.triu_indices(u, 1)
    return a.astype(np.int64), b.astype(np.int64)


def _ranges(n_rows: int, n_cells: int, row, start, end, weight) -> np.ndarray:
    """``[n_rows, n_cells]``: the sum of ``weight`` over cells ``start .. end`` of table row ``row``
    (arrays of one shape), through a difference array."""
    side = n_cells + 1
    row, start, end, w = np.broadcast_arrays(row, start, end, weight)
    index = np.concatenate([(row * side + start).reshape(-1), (row * side + end + 1).reshape(-1)])
    diff = np.bincount(index, np.concatenate([w.reshape(-1), -w.reshape(-1)]), minlength=n_rows * side)
    return diff.reshape(n_rows, side).cumsum(1)[:, :n_cells]


def _tables(parts: list, router_cells: tuple, set_id: dict, k: int, n1: int, n2: int, order: int):
    """``(T1 [n1 * K, cells], T2 [n2 * K, cells, cells])``: the main-effect and pair tables,
    rows ``set * K + output`` (main effects are the sets ``0 .. n1 - 1``, pairs the next ``n2``)."""
    n_cells = int(router_cells[1].max()) + 2
    rows2 = n2 * k if order >= 2 else 0
    t1 = np.zeros((n1 * k, n_cells))
    t2 = np.zeros((rows2, n_cells, n_cells))
    boxes = []
    const, rows, cols = np.zeros(rows2), np.zeros((rows2, n_cells)), np.zeros((rows2, n_cells))
    for g, totals in parts:
        start, end, weight = _segments(g, router_cells)  # [P, U, 3]
        z0 = totals[:, :1]
        one = totals[:, 1 << np.arange(g.n_slots)]  # [P, U]
        col = set_id["single"][g.feature] * k + g.output[:, None]  # [P, U]
        t1 -= np.bincount(col.reshape(-1), np.broadcast_to(z0, col.shape).reshape(-1), minlength=n1 * k)[:, None]
        t1 -= _ranges(n1 * k, n_cells, col[:, :, None], start, end, (one - z0)[:, :, None] * weight)
        a, b = _slot_pairs(g.n_slots)
        if order < 2 or not a.size:
            continue
        col = (set_id["pair"][g.feature[:, a], g.feature[:, b]] - n1) * k + g.output[:, None]  # [P, E]
        d = totals[:, (1 << a) | (1 << b)] - one[:, a] - one[:, b] + z0
        const += np.bincount(col.reshape(-1), np.broadcast_to(z0, col.shape).reshape(-1), minlength=rows2)
        rows += _ranges(rows2, n_cells, col[:, :, None], start[:, a], end[:, a], (one[:, a] - z0)[:, :, None] * weight[:, a])
        cols += _ranges(rows2, n_cells, col[:, :, None], start[:, b], end[:, b], (one[:, b] - z0)[:, :, None] * weight[:, b])
        index, w = _box_corners(col, d, (start[:, a], end[:, a], weight[:, a]), (start[:, b], end[:, b], weight[:, b]),
                                n_cells + 1)
        boxes.append((index, w))
    if rows2:
        t2 += const[:, None, None] + rows[:, :, None] + cols[:, None, :]
        index, w = (np.concatenate(x) for x in zip(*boxes))
        corners = np.bincount(index, w, minlength=rows2 * (n_cells + 1) ** 2)
        t2 += corners.reshape(-1, n_cells + 1, n_cells + 1).cumsum(1).cumsum(2)[:, :n_cells, :n_cells]
    return t1, t2


def _segments(g: Paths, router_cells: tuple) -> tuple:
    """``(start, end, weight)`` ``[P, U, 3]``: a slot's follow indicator over its feature's cells
    as three weighted cell ranges: the interval ``(lower, upper]`` of ranks, the missing cell
    (weight ``nan_ok``) and, for LightGBM's ``Zero`` type, the zero cell's correction."""
    zero_rank, n_thresholds = router_cells
    zr, t = zero_rank[g.feature], n_thresholds[g.feature]
    lo = np.where(np.isfinite(g.lower), g.lower + zr + 1, 0).astype(np.int64)
    hi = np.where(np.isfinite(g.upper), g.upper + zr, t).astype(np.int64)
    inside = (lo <= zr) & (zr <= hi)
    zero_w = np.where(g.zero_missing, g.zero_ok.astype(np.float64) - inside, 0.0)
    start = np.stack([lo, t + 1, zr], -1)
    end = np.stack([hi, t + 1, zr], -1)
    weight = np.stack([(lo <= hi).astype(np.float64), g.nan_ok.astype(np.float64), zero_w], -1)
    return start, end, weight


def _box_corners(col, d, seg_a, seg_b, side: int) -> np.ndarray:
    """The 2-D difference array ``[n2 * K * side * side]`` of ``sum d f_a (x) f_b`` over the
    entries (``col`` ``[P, E]``), each product of weighted ranges being a box (four corners)."""
    (sa, ea, wa), (sb, eb, wb) = seg_a, seg_b  # [P, E, 3]
    col = col.astype(np.int64)
    w = d[:, :, None, None] * wa[:, :, :, None] * wb[:, :, None, :]  # [P, E, 3, 3]
    r0, r1 = sa[:, :, :, None], ea[:, :, :, None] + 1
    c0, c1 = sb[:, :, None, :], eb[:, :, None, :] + 1
    base = (col * side * side)[:, :, None, None]
    index = np.stack([base + r0 * side + c0, base + r1 * side + c0, base + r0 * side + c1, base + r1 * side + c1])
    weights = np.stack([w, -w, -w, w])
    ok = np.broadcast_to(w != 0, weights.shape)
    return index[ok], weights[ok]


def low_order_tables(parts: list, sets: tuple, paths: Paths, router: Router | None, max_order: int, dtype,
                     max_bytes: int) -> tuple[dict | None, int]:
    """``(params, order)``: the tables of the components of at most ``order`` features (``order``
    0 and ``None`` when nothing is tabulated: categorical splits, no router, or over budget).

    Args:
      parts: ``(paths, Z tables [P, 2**U])`` per group of paths.
      sets: the global feature sets (ordered by size).
      paths: all routed paths (for ``n_features``, ``n_outputs`` and categorical splits).
      router: the rows' router (thresholds per feature).
      max_order, dtype, max_bytes: as :func:`jaxshap._tree._decomposition.build_tables`.
    """
    if router is None or paths.cat is not None:
        return None, 0
    k, m = paths.n_outputs, paths.n_features
    n_cells = max(t.size for t in router.thresholds) + 2
    n1 = sum(len(s) == 1 for s in sets)
    n2 = sum(len(s) == 2 for s in sets)
    order = min(TABLE_ORDER, max_order)
    if order >= 2 and 8 * n2 * k * n_cells**2 > max_bytes:
        order = 1
    if 8 * n1 * k * n_cells > max_bytes:
        return None, 0
    set_id = {"single": np.full(m, -1, np.int64), "pair": np.full((m, m), -1, np.int64)}
    for i, s in enumerate(sets):
        if len(s) <= 2:
            set_id["single" if len(s) == 1 else "pair"][s] = i
    router_cells = (router.zero_rank.astype(np.int64), np.asarray([t.size for t in router.thresholds], np.int64))
    t1, t2 = _tables(parts, router_cells, set_id, k, n1, n2, order)
    main = np.arange(n1 * k)
    pair = np.arange(t2.shape[0]) + n1 * k
    params = {
        "zero_rank": router.zero_rank.astype(np.int32),
        "nan_cell": np.asarray([t.size + 1 for t in router.thresholds], np.int32),
        "t1": t1.astype(dtype), "t1_feature": np.asarray([sets[c // k][0] for c in main], np.int32),
        "t2": t2.reshape(t2.shape[0], n_cells * n_cells).astype(dtype),
        "t2_a": np.asarray([sets[c // k][0] for c in pair], np.int32),
        "t2_b": np.asarray([sets[c // k][1] for c in pair], np.int32),
    }
    return {name: jax.device_put(a) for name, a in params.items()}, order


def add_low_order(low: dict, xt: jax.Array, out: jax.Array) -> jax.Array:
    """``out`` ``[columns, r]`` plus the tabulated components of routed rows ``xt`` ``[M, r]`` (traced)."""
    n1, n_cells = low["t1"].shape
    n2 = low["t2"].shape[0]
    cell = jnp.where(jnp.isnan(xt), low["nan_cell"][:, None], jnp.nan_to_num(xt) + low["zero_rank"][:, None])
    cell = cell.astype(jnp.int32)  # [M, r]
    out = out.at[:n1].add(jnp.take_along_axis(low["t1"], cell[low["t1_feature"]], axis=1))
    if n2:
        index = cell[low["t2_a"]] * n_cells + cell[low["t2_b"]]
        out = out.at[n1 : n1 + n2].add(jnp.take_along_axis(low["t2"], index, axis=1))
    return out
