r"""The exact interventional functional decomposition of a tree ensemble, leaf by leaf, with the
main effects and pairs as tables over the routed rows' cells.

With background rows ``b`` the value of a feature set ``T`` at ``x`` is
``v_x(T) = mean_b f(x_T, b_{-T})`` and the components are its Möbius transform
``m_S(x) = sum_{T subseteq S} (-1)^{|S|-|T|} v_x(T)``, so that ``f(x) = sum_S m_S(x)`` with
``m_emptyset = v_x(emptyset)`` the mean prediction over the background (Hiabu, Meyer & Wright,
2023, "Unifying local and global model explanations by functional decomposition of low
dimensional structures", AISTATS; the R package glex).

A leaf ``l`` with value ``w_l`` whose path tests the distinct features ``P_l`` (one slot per
feature, the splits on it merged, see :mod:`._paths`) is reached by the hybrid row
``(x_T, b_{-T})`` iff every slot ``j`` is followed by ``x`` when ``j in T`` (``a_j(x) = 1``)
and by ``b`` otherwise (``c_j(b) = 1``). So the leaf's part of ``v_x(T)`` is
``w_l mean_b prod_{j in P_l} (j in T ? a_j : c_j)``, which is zero outside ``P_l``'s subsets
in the Möbius transform: the leaf only gives components ``S subseteq P_l``, and

.. math::

    m^{(l)}_S(x) = w_l \sum_{R \subseteq S} (-1)^{|S|-|R|}
                   \Big[\prod_{j \in R} a_j(x)\Big]\, \beta_l(P_l \setminus R),
    \qquad \beta_l(Q) = \operatorname{mean}_b \prod_{j \in Q} c_j(b),

where ``beta_l`` (a superset sum of the histogram of the background's follow patterns) does
not depend on ``x``. With ``x``'s pattern ``A`` (the slots it follows) the sum runs over
``R subseteq S cap A``, so with the host table
``Z_l(Q) = sum_{R subseteq Q} w_l (-1)^{|R|} beta_l(P_l \ R)`` (computed once per leaf)

.. math::

    m^{(l)}_S(x) = (-1)^{|S|}\, Z_l(S \cap A),

one gather per (path, subset ``S``, row); only the subsets up to ``max_order`` are
computed. A segment sum then adds each (path, local subset)
into its global feature set. Paths are grouped by their number of distinct features ``U`` so
that no path is padded; the ``2**U`` subsets of a group's paths are a static axis. Rows run
along the minor axis, so the scatter moves whole vectors of rows.

Main effects and pairs (:func:`low_order_tables`, :func:`add_low_order`). A component ``m_S`` depends on ``x`` only through ``x_S``, and a routed value (see
:mod:`._rows`) only matters through its rank among the feature's thresholds, or its being
missing. So with ``cell_j(x) = rank_j(x)`` (``t_j + 1`` for NaN, ``t_j`` thresholds) every main
effect is a vector over the ``t_j + 2`` cells of its feature and every pair a matrix over the
cells of its two features: one gather per component and row instead of one per
(path, subset) and row. The tables are the sums over paths of the leaf terms above,
``m^{(l)}_S = (-1)^{|S|} Z_l(S \cap A)``, written with the follow indicators ``f_u`` of the path's slots: for a slot ``u``, ``-(Z_0 + f_u (Z_u - Z_0))``; for
two slots ``u < v``,
``Z_0 + f_u (Z_u - Z_0) + f_v (Z_v - Z_0) + f_u f_v (Z_{uv} - Z_u - Z_v + Z_0)``, whose last
term sums over the paths as one matrix product per pair. Categorical splits (codes, not
ranks) keep every component on the path kernel.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits, subset_sums
from ._paths import Paths, follows_host, host_slots, pattern, slot_follows
from ._rows import Router


MAX_SLOTS = 16
"""Paths with more distinct features than this are refused (``2**U`` subsets per path and row)."""


@dataclasses.dataclass(frozen=True)
class DecompositionTables:
    """What the kernel needs, built once per (ensemble, background, ``max_order``).

    Attributes:
      groups: one dict per path width ``U``: ``slots`` (the slot tests, ``[P, U, 1]``),
        ``totals`` ``[P * 2**U]`` (``Z_l(Q)``), ``subsets`` ``[C]`` the codes of the kept
        subsets (``1 <= |S| <= max_order``), ``sign`` ``[C]`` (``(-1)^{|S|}``), ``target``
        ``[P * C]`` int32 (the column ``set * K + output`` each path's subset adds to),
        ``value`` ``[P]`` and ``output`` ``[P]`` (for the prediction).
      low: the tables of the main effects and pairs (see :func:`low_order_tables`), or ``None``.
      sets: the global feature sets, sorted tuples ordered by size, then lexicographically.
      intercept: ``[K]`` float64, ``mean_b f(b)``.
      base: ``[K]`` float64 the ensemble's constant plus its single-leaf trees (rows' prediction offset).
      n_outputs: ``K``.
    """

    groups: tuple
    low: dict | None
    sets: tuple
    intercept: np.ndarray
    base: np.ndarray
    n_outputs: int

    @property
    def n_columns(self) -> int:
        return len(self.sets) * self.n_outputs


def _group_coefficients(g: Paths, background: np.ndarray) -> np.ndarray:
    """``[P, 2**U]``: ``w_l (-1)^{|R|} beta_l(P_l \\ R)`` for each path of a group and subset ``R``."""
    u, size, p = g.n_slots, 2**g.n_slots, g.n_paths
    codes = pattern(follows_host(g, background), np)  # [B, P]
    flat = (np.arange(p)[None, :] * size + codes).reshape(-1)
    hist = np.bincount(flat, minlength=p * size).reshape(p, size) / background.shape[0]
    beta = subset_sums(hist, superset=True)  # beta[l, Q]: share of the background following every slot of Q
    full = size - 1
    parity = all_codes_bits(u).sum(1) % 2
    complement = full ^ np.arange(size)
    return g.value[:, None] * np.where(parity == 1, -1.0, 1.0)[None, :] * beta[:, complement]


def _local_sets(g: Paths, max_order: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keys [P * 2**U, U], keep [P * 2**U])``: each (path, subset)'s features, sorted, padded
    with ``n_features``; whether the subset is kept (``1 <= |S| <= max_order``)."""
    u = g.n_slots
    bits = all_codes_bits(u)  # [2**U, U]
    size = bits.sum(1)
    keys = np.where(bits[None, :, :], g.feature[:, None, :], g.n_features)  # slots are sorted by feature
    keys = np.sort(keys, axis=-1).reshape(-1, u)
    keep = np.broadcast_to((size >= 1) & (size <= max_order), (g.n_paths, 2**u)).reshape(-1)
    return keys, keep


def _check_size(g: Paths, max_bytes: int) -> None:
    if g.n_slots > MAX_SLOTS or g.n_paths * 2**g.n_slots * 16 > max_bytes:
        raise ValueError(
            f"The decomposition needs the 2**U subsets of each root-to-leaf path's U distinct features; "
            f"{g.n_paths} paths have U = {g.n_slots} (at most {MAX_SLOTS}, and within memory_budget={max_bytes} "
            "bytes): explain shallower trees (e.g. a smaller max_depth) or raise `memory_budget`."
        )


def _global_sets(parts: list, n_features: int) -> tuple[tuple, list]:
    """The global feature sets (sorted by size, then lexicographically) and, per group, each kept
    (feature set, subset)'s position among them."""
    width = max([1] + [keys.shape[1] for keys, _ in parts])
    pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=n_features)
    kept = [pad(keys[keep]) for keys, keep in parts]
    rows = np.concatenate(kept) if kept else np.zeros((0, width), np.int64)
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    order = np.lexsort(tuple(uniq[:, ::-1].T) + ((uniq < n_features).sum(1),))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    sets = tuple(tuple(int(f) for f in row if f < n_features) for row in uniq[order])
    ids = rank[inverse.reshape(-1)]
    return sets, np.split(ids, np.cumsum([k.shape[0] for k in kept])[:-1])


def _merge_by_feature_set(g: Paths) -> tuple[Paths, np.ndarray, np.ndarray]:
    """``(paths sorted by (features, output), segment [P], first path of each segment)``: paths with
    the same features and output add to the same components, so they are summed before the scatter."""
    order = np.lexsort((g.output,) + tuple(g.feature[:, ::-1].T))
    g = g.subset(order, g.n_slots)
    key = np.concatenate([g.feature, g.output[:, None]], axis=1)
    first = np.ones(g.n_paths, bool)
    first[1:] = np.any(key[1:] != key[:-1], axis=1)
    return g, np.cumsum(first) - 1, np.flatnonzero(first)


def build_tables(paths: Paths, background: np.ndarray, max_order: int, dtype, max_bytes: int,
                 router: Router | None = None) -> DecompositionTables:
    """Host tables of :func:`chunk_components` (see :class:`DecompositionTables`).

    Args:
      paths: the routed paths (bounds as ranks, see :func:`jaxshap._tree._paths.decompose`).
      background: ``[B, M]`` the routed background rows.
      max_order: largest component order kept.
      dtype: compute dtype.
      max_bytes: a ``ValueError`` is raised before one group's per-row subsets pass this.
      router: the rows' router; given, the main effects and pairs are tabulated over its cells
        when their tables fit in ``max_bytes`` (and no split is categorical).
    """
    k = paths.n_outputs
    stump = paths.length == 0
    base = paths.base + np.bincount(paths.output[stump], paths.value[stump], minlength=k)
    intercept = base.copy()
    parts = []
    for _, g in paths.by_width(tuple(range(1, paths.n_slots + 1))):
        if g.length.min() == 0:
            continue
        _check_size(g, max_bytes)
        g, segment, first = _merge_by_feature_set(g)
        coef = _group_coefficients(g, background)
        intercept += np.bincount(g.output, coef[:, 0], minlength=k)
        parts.append((g, subset_sums(coef), segment, first))
    local = [_local_sets(g.subset(first, g.n_slots), max_order) for g, _, _, first in parts]
    sets, ids = _global_sets(local, paths.n_features)
    low, tabled = low_order_tables([(g, z) for g, z, _, _ in parts], sets, paths, router, max_order, dtype, max_bytes)
    groups = []
    for (g, totals, segment, first), (_, keep), gid in zip(parts, local, ids):
        size = 2**g.n_slots
        kept = np.flatnonzero(keep[:size])  # the subset codes kept, the same for every path
        target = (gid * k + np.repeat(g.output[first], kept.size)).reshape(-1, kept.size)
        on_paths = all_codes_bits(g.n_slots)[kept].sum(1) > tabled  # the rest is tabulated
        kept, target = kept[on_paths], target[:, on_paths]
        target = target[segment].reshape(-1)  # per path: its feature set's columns
        sign = np.where(all_codes_bits(g.n_slots)[kept].sum(1) % 2 == 1, -1.0, 1.0)
        slots = {name: jax.device_put(a[:, :, None] if name != "cat_words" else a[:, :, None, :])
                 for name, a in host_slots(g, dtype).items()}
        groups.append({
            "slots": slots, "totals": jax.device_put(totals.reshape(-1).astype(dtype)),
            "sign": jax.device_put(sign.astype(dtype)), "subsets": jax.device_put(kept.astype(np.int32)),
            "target": jax.device_put(target.astype(np.int32)), "value": jax.device_put(g.value.astype(dtype)),
            "output": jax.device_put(g.output.astype(np.int32)),
        })
    return DecompositionTables(tuple(groups), low, sets, intercept, base, k)


def bytes_per_row(tables: DecompositionTables, itemsize: int) -> int:
    """Working memory of one row in :func:`chunk_components`."""
    per_row = tables.n_columns * itemsize
    for params in tables.groups:
        per_row += 3 * params["target"].size * itemsize
    return max(per_row, 1)


def chunk_components(groups: tuple, low: dict | None, X: jax.Array, n_columns: int,
                     n_outputs: int) -> tuple[jax.Array, jax.Array]:
    """``(components [n_columns, r], trees' sum [K, r])`` of a chunk of routed rows ``X`` ``[r, M]``
    (traced); the trees' sum excludes the constant and single-leaf trees."""
    r = X.shape[0]
    xt = X.T  # [M, r]: rows along the minor axis
    out = jnp.zeros((n_columns, r), X.dtype)
    if low is not None:
        out = add_low_order(low, xt, out)
    fx = jnp.zeros((n_outputs, r), X.dtype)
    for params in groups:
        slots = params["slots"]
        p, u = slots["feature"].shape[:2]
        size = 2**u
        follow = slot_follows(slots, xt[slots["feature"][:, :, 0]], jnp)  # [P, U, r]
        a = jnp.sum(jnp.where(follow, (1 << jnp.arange(u, dtype=jnp.int32))[None, :, None], 0), axis=1)  # [P, r]
        reach = jnp.where(a == size - 1, params["value"][:, None], 0.0)
        fx = fx + jax.ops.segment_sum(reach, params["output"], num_segments=n_outputs)
        if not params["subsets"].size:
            continue
        totals = params["totals"].reshape(p, size, 1)
        index = params["subsets"][None, :, None] & a[:, None, :]  # S cap A, [P, S, r]
        m = jnp.take_along_axis(totals, index, axis=1) * params["sign"][None, :, None]
        out = out.at[params["target"]].add(m.reshape(-1, r))
    return out, fx


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
