"""Root-to-leaf paths: the form both TreeSHAP kernels work on.

Every leaf of every tree becomes one path (as in GPUTreeShap, Mitchell et al. 2022). A path
reaches its leaf when each split on it goes the path's way. Splits on the same feature are
merged into one *slot* per distinct feature, so a path is a short list of ``U`` slots, padded
to a common ``U`` (the largest number of distinct features on a path) with dummy slots. Per slot:

* ``feature``: the feature tested;
* ``(lower, upper]``: the interval of values that follow the path through all its splits on
  that feature (``x <= t`` goes left, so a left turn lowers ``upper`` to ``t``, a right turn
  raises ``lower`` to ``t``);
* ``nan_ok`` / ``zero_ok``: whether a NaN (or, under LightGBM's ``Zero`` missing type, a zero)
  follows the path, given each split's default direction;
* ``zero_fraction``: the product over the slot's splits of ``cover(child) / cover(node)``,
  the share of training data that follows the path (Lundberg et al. 2020, Alg. 2).

A dummy slot is always satisfied and has ``zero_fraction = 1``: in both games below it is a
null player, so it changes no one's Shapley value and gets none itself. Multi-output trees
give one path per (leaf, output) that the tree writes to.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ._ensemble import MISSING_AS_ZERO, MISSING_CATEGORICAL, MISSING_ZERO, ZERO_THRESHOLD, TreeEnsemble


@dataclasses.dataclass(frozen=True)
class Paths:
    """The ensemble's paths as NumPy arrays ``[P, U]`` (slots) and ``[P]`` (per path).

    Attributes:
      feature, lower, upper, nan_ok, zero_missing, zero_ok, zero_fraction: ``[P, U]`` slots.
      value: ``[P]`` the leaf's value for output ``output``.
      output: ``[P]`` int32 output column the path adds to.
      base: ``[K]`` the ensemble's constant.
      n_features, n_outputs: ``M`` and ``K``.
      length: ``[P]`` number of real (non-dummy) slots of each path; they come first.
      saabas: ``[P, U]`` Saabas attribution of each slot (only when asked for).
      cat, cat_words, cat_invalid_ok: for models with categorical splits: ``[P, U]`` whether the
        slot tests set membership, ``[P, U, W]`` the bit set of category codes that follow the
        path, and whether a negative or out-of-range code does; ``None`` otherwise.
      tree: ``[P]`` the tree each path belongs to (``None`` when not recorded).
    """

    feature: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    nan_ok: np.ndarray
    zero_missing: np.ndarray
    zero_ok: np.ndarray
    zero_fraction: np.ndarray
    value: np.ndarray
    output: np.ndarray
    base: np.ndarray
    n_features: int
    n_outputs: int
    length: np.ndarray
    saabas: np.ndarray | None = None
    cat: np.ndarray | None = None
    cat_words: np.ndarray | None = None
    cat_invalid_ok: np.ndarray | None = None
    tree: np.ndarray | None = None

    def by_width(self, widths: tuple[int, ...]):
        """Yield ``(width, group)``: the paths with more slots than the previous width and at
        most ``width``, cut to ``width`` slots, for each of ``widths`` below ``n_slots`` and then
        ``n_slots`` itself (empty groups are skipped). Grouping paths by length keeps short paths
        from being padded to the longest one."""
        lower = 0
        for width in [w for w in widths if w < self.n_slots] + [self.n_slots]:
            keep = (self.length > lower) & (self.length <= width)
            lower = width
            if keep.any():
                yield width, self.subset(keep, width)

    def subset(self, keep: np.ndarray, width: int) -> "Paths":
        """The paths ``keep`` (boolean ``[P]``), with slots cut to the first ``width`` columns
        (valid when those paths have at most ``width`` real slots)."""
        cut = lambda a: a[keep][:, :width]
        return dataclasses.replace(
            self,
            feature=cut(self.feature), lower=cut(self.lower), upper=cut(self.upper), nan_ok=cut(self.nan_ok),
            zero_missing=cut(self.zero_missing), zero_ok=cut(self.zero_ok), zero_fraction=cut(self.zero_fraction),
            value=self.value[keep], output=self.output[keep], length=self.length[keep],
            saabas=None if self.saabas is None else cut(self.saabas),
            cat=None if self.cat is None else cut(self.cat),
            cat_words=None if self.cat_words is None else cut(self.cat_words),
            cat_invalid_ok=None if self.cat_invalid_ok is None else cut(self.cat_invalid_ok),
            tree=None if self.tree is None else self.tree[keep],
        )

    @property
    def n_paths(self) -> int:
        return self.feature.shape[0]

    @property
    def n_slots(self) -> int:
        return self.feature.shape[1]


def _parents(e: TreeEnsemble) -> tuple[np.ndarray, np.ndarray]:
    """Flat ``[T*N]`` parent index (``-1`` at roots and unreachable padding) and depth
    (``-1`` where unreachable), computed level by level without a loop over nodes."""
    t, n = e.feature.shape
    flat = np.arange(t * n).reshape(t, n)
    parent = np.full(t * n, -1, np.int64)
    inner = e.feature >= 0
    for child in (e.left, e.right):
        parent[(child + flat - np.arange(n))[inner]] = flat[inner]
    depth = np.full(t * n, -1, np.int64)
    frontier = flat[:, 0]
    d = 0
    left, right = e.left.reshape(-1), e.right.reshape(-1)
    base = (flat - np.arange(n)).reshape(-1)
    while frontier.size:
        depth[frontier] = d
        kids = frontier[left[frontier] >= 0]
        frontier = np.concatenate([left[kids] + base[kids], right[kids] + base[kids]])
        d += 1
    return parent, depth


def node_means(e: TreeEnsemble) -> np.ndarray:
    """``[T*N, K]`` each node's cover-weighted mean leaf value (its leaf value at leaves),
    bottom-up one level at a time."""
    t, n = e.feature.shape
    _, depth = _parents(e)
    mean = e.value.reshape(t * n, -1).copy()
    left, right = e.left.reshape(-1), e.right.reshape(-1)
    base = np.repeat(np.arange(t) * n, n)
    cover = e.cover.reshape(-1)
    for d in range(int(depth.max()) - 1, -1, -1):
        nodes = np.flatnonzero((depth == d) & (left >= 0))
        li, ri = left[nodes] + base[nodes], right[nodes] + base[nodes]
        wl, wr = cover[li][:, None], cover[ri][:, None]
        total = wl + wr
        mean[nodes] = np.where(total > 0, (wl * mean[li] + wr * mean[ri]) / np.where(total > 0, total, 1.0), 0.0)
    return mean


# How the splits of one path on one feature merge into a slot, and a dummy slot's fill.
_MERGE = {
    "lower": np.maximum, "upper": np.minimum, "nan_ok": np.logical_and, "zero_ok": np.logical_and,
    "zero_missing": np.logical_or, "zero_fraction": np.multiply, "cat": np.logical_or,
    "cat_words": np.bitwise_and, "cat_invalid_ok": np.logical_and, "saabas": np.add,
}
_FILL = {
    "feature": (0, np.int32), "lower": (-np.inf, np.float64), "upper": (np.inf, np.float64),
    "nan_ok": (True, bool), "zero_missing": (False, bool), "zero_ok": (True, bool),
    "zero_fraction": (1.0, np.float64), "cat": (False, bool), "cat_words": (0xFFFFFFFF, np.uint32),
    "cat_invalid_ok": (True, bool), "saabas": (0.0, np.float64),
}


def _leaf_paths(e: TreeEnsemble, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(leaves, leaf_rep, out_rep)``: the reachable leaves (flat node indices) and one path per
    (leaf, output that the leaf's tree writes to), as an index into ``leaves`` and an output."""
    n = e.feature.shape[1]
    leaves = np.flatnonzero((e.feature.reshape(-1) < 0) & (depth >= 0))
    writes = np.any(e.value != 0, axis=1)  # [T, K]
    writes[~writes.any(axis=1), 0] = True
    leaf_rep, out_rep = np.nonzero(writes[leaves // n])
    return leaves, leaf_rep, out_rep


def _path_splits(parent: np.ndarray, leaves: np.ndarray, depths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(leaf_of, child)``: one entry per split on each leaf's path, the leaf (index into
    ``leaves``) and the child the path goes to; all leaves walk up together, one level per step."""
    leaf_of = np.repeat(np.arange(leaves.size), depths)
    child = np.empty(int(depths.sum()), np.int64)
    offsets = np.concatenate([[0], np.cumsum(depths)])
    cur = leaves.copy()
    alive = np.flatnonzero(depths > 0)  # a single-leaf tree's root is a leaf with no splits
    step = 0
    while alive.size:
        child[offsets[alive] + step] = cur[alive]
        cur[alive] = parent[cur[alive]]
        step += 1
        alive = alive[depths[alive] > step]
    return leaf_of, child


def split_tests(e: TreeEnsemble, node: np.ndarray, child: np.ndarray) -> dict:
    """Per split entry (``node`` going to ``child``): the feature, the interval ``(lower, upper]``
    that follows the path, the missing and zero rules, the cover ratio and, for categorical
    splits, the category codes that follow the path."""
    t, n = e.feature.shape
    went_left = e.left.reshape(-1)[node] + (node - node % n) == child
    thr = e.threshold.reshape(-1)[node]
    code = e.missing.reshape(-1)[node]
    default_way = e.default_left.reshape(-1)[node] == went_left
    zero_way = (0.0 <= thr) == went_left
    is_cat = code == MISSING_CATEGORICAL
    cover = e.cover.reshape(-1)
    cn = cover[node]
    tests = {
        "feature": e.feature.reshape(-1)[node].astype(np.int64),
        "lower": np.where(went_left | is_cat, -np.inf, thr),
        "upper": np.where(went_left & ~is_cat, thr, np.inf),
        "nan_ok": np.where(code == MISSING_AS_ZERO, zero_way, default_way),
        "zero_ok": np.where(is_cat, True, np.where(code == MISSING_ZERO, default_way, zero_way)),
        "zero_missing": code == MISSING_ZERO,
        "zero_fraction": np.where(cn > 0, cover[child] / np.where(cn > 0, cn, 1.0), 0.0),
    }
    if e.cat_left is not None and bool(is_cat.any()):
        words = e.cat_left.reshape(t * n, -1)[node]  # [E, W]
        tests["cat"] = is_cat
        tests["cat_words"] = np.where(is_cat[:, None], np.where(went_left[:, None], words, ~words),
                                      np.uint32(0xFFFFFFFF))
        tests["cat_invalid_ok"] = ~is_cat | (e.cat_invalid_left.reshape(-1)[node] == went_left)
    return tests


def _reduce(ufunc, a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return ufunc.reduceat(a, starts, axis=0) if starts.size else a[:0]


def _check_size(max_bytes: int | None, n_paths: int, n_cells: float, what: str) -> None:
    """Raise before path tables of ``n_cells`` (path, slot) cells, about 64 bytes each, pass ``max_bytes``."""
    if max_bytes is not None and 64 * n_cells > max_bytes:
        raise ValueError(
            f"The model's path tables ({n_paths} root-to-leaf paths, {what}) need about "
            f"{64 * n_cells / 2**20:.0f} MiB, more than memory_budget={max_bytes} bytes allows; raise "
            "`memory_budget`, or explain fewer or shallower trees (e.g. with `tree_limit`)."
        )


def decompose(e: TreeEnsemble, max_bytes: int | None = None, saabas: bool = False) -> Paths:
    """Split an ensemble into padded root-to-leaf paths with merged per-feature slots.

    Vectorised over all leaves of all trees: each leaf walks up to its root one level per step
    (as many steps as the deepest leaf), collecting one entry per split; entries are then sorted
    by (path, feature) and merged into slots with segment reductions (:data:`_MERGE`).

    Args:
      e: the ensemble.
      max_bytes: when given, a ``ValueError`` is raised before the path tables (about 64 bytes
        per path and slot, host and device together) would take more than this.
      saabas: also give each slot its Saabas attribution: the sum, over the slot's splits, of
        the change ``E[child] - E[node]`` in the cover-weighted mean leaf value.
    """
    parent, depth = _parents(e)
    leaves, leaf_rep, out_rep = _leaf_paths(e, depth)
    depths = depth[leaves]
    n_paths, n_splits = leaf_rep.size, int(depths.sum())
    _check_size(max_bytes, n_paths, n_splits * n_paths / max(1, leaves.size), f"{n_splits} splits")
    leaf_of, child = _path_splits(parent, leaves, depths)
    node = parent[child]
    tests = split_tests(e, node, child)
    if saabas:
        mean = node_means(e)
        tests["saabas"] = mean[child] - mean[node]  # [E, K]
    order = np.lexsort((tests["feature"], leaf_of))
    key_leaf, key_f = leaf_of[order], tests["feature"][order]
    first = np.ones(order.size, bool)
    first[1:] = (key_leaf[1:] != key_leaf[:-1]) | (key_f[1:] != key_f[:-1])
    starts = np.flatnonzero(first)
    slots = {name: _reduce(_MERGE[name], tests[name][order], starts) for name in _MERGE if name in tests}
    if np.any(slots["zero_missing"] != _reduce(np.logical_and, tests["zero_missing"][order], starts)):
        raise ValueError("Mixed LightGBM missing-value types on one feature are not supported.")
    slots["feature"] = key_f[starts]
    s_leaf = key_leaf[starts]
    length = np.bincount(s_leaf, minlength=leaves.size)
    slot_pos = np.arange(starts.size) - np.concatenate([[0], np.cumsum(length)])[s_leaf]
    n_slots = max(1, int(length.max()) if length.size else 1)
    _check_size(max_bytes, n_paths, n_paths * n_slots, f"up to {n_slots} distinct features each")

    def table(name: str) -> np.ndarray:  # [leaves, U, ...], dummy slots filled
        fill, dtype = _FILL[name]
        a = np.full((leaves.size, n_slots) + slots[name].shape[1:], fill, dtype)
        a[s_leaf, slot_pos] = slots[name]
        return a

    columns = {name: table(name)[leaf_rep] for name in slots if name != "saabas"}
    value = e.value.reshape(-1, e.n_outputs)[leaves[leaf_rep], out_rep]
    return Paths(
        **columns, value=value.astype(np.float64), output=out_rep.astype(np.int32), base=e.base.copy(),
        n_features=e.n_features, n_outputs=e.n_outputs, length=length[leaf_rep].astype(np.int32),
        saabas=table("saabas")[leaf_rep, :, out_rep] if saabas else None, tree=leaves[leaf_rep] // e.feature.shape[1],
    )


def round_down(a: np.ndarray, dtype) -> np.ndarray:
    """Largest values of ``dtype`` not above ``a``: ``x <= a`` and ``x <= round_down(a)`` agree
    (and so do ``x > a`` and ``x > round_down(a)``) for every ``x`` of that dtype."""
    d = np.asarray(a, dtype=np.float64)
    r = d.astype(dtype)
    with np.errstate(invalid="ignore"):
        too_big = r.astype(np.float64) > d
    return np.where(too_big, np.nextafter(r, dtype(-np.inf)), r).astype(dtype)


def host_slots(paths: Paths, dtype) -> dict:
    """The slot tests as NumPy arrays, bounds rounded down to ``dtype`` (the form :func:`follows` reads)."""
    dtype = np.dtype(dtype)
    host = {
        "feature": paths.feature.astype(np.int32),
        "lower": round_down(paths.lower, dtype.type),
        "upper": round_down(paths.upper, dtype.type),
        "nan_ok": paths.nan_ok,
        "zero_missing": paths.zero_missing,
        "zero_ok": paths.zero_ok,
    }
    if paths.cat is not None:
        host.update(cat=paths.cat, cat_words=paths.cat_words, cat_invalid_ok=paths.cat_invalid_ok)
    return host


def _category_follows(words, invalid_ok, v, xp):
    """Set membership of category codes ``v`` (NaN already handled) in ``words [..., W]``."""
    n_bits = 32 * words.shape[-1]
    valid = (v >= 0) & (v < n_bits)
    code = xp.where(valid, v, 0).astype(xp.int32)
    word = xp.take_along_axis(words, (code // 32)[..., None], axis=-1)[..., 0]
    bit = (word >> (code % 32).astype(xp.uint32)) & xp.uint32(1)
    return xp.where(valid, bit == 1, invalid_ok)


def slot_follows(slots: dict, v, xp):
    """Whether values ``v`` ``[..., P, U]`` (a row's values at the slots' features) follow each
    path through each slot: the one definition behind :func:`follows` (``xp = jax.numpy``) and
    :func:`follows_host` (``xp = numpy``).

    A NaN follows where the slot's ``nan_ok`` says; a value in the zero band under LightGBM's
    ``Zero`` missing type where ``zero_ok`` says; any other value when it lies in
    ``(lower, upper]`` (numeric slots) or in the slot's category set (categorical slots).
    """
    nan = xp.isnan(v)
    vc = xp.where(nan, 0.0, v)
    zero = slots["zero_missing"] & (xp.abs(vc) <= ZERO_THRESHOLD)
    inside = (vc > slots["lower"]) & (vc <= slots["upper"])
    if "cat" in slots:
        words = xp.broadcast_to(slots["cat_words"], v.shape + slots["cat_words"].shape[-1:])
        inside = xp.where(slots["cat"], _category_follows(words, slots["cat_invalid_ok"], vc, xp), inside)
    return xp.where(nan, slots["nan_ok"], xp.where(zero, slots["zero_ok"], inside))


def follows(slots: dict, xt: jax.Array) -> jax.Array:
    """``[P, U, r]`` booleans: whether the rows ``xt`` ``[M, r]`` (rows along the minor axis)
    follow each path ``[P, U]`` of the slot tests ``slots`` (:func:`host_slots` on the device) through each slot (traced)."""
    tests = {k: (v[..., None, :] if k == "cat_words" else v[..., None]) for k, v in slots.items() if k != "feature"}
    return slot_follows(tests, xt[slots["feature"]], jnp)


def follows_host(paths: Paths, X: np.ndarray) -> np.ndarray:
    """The slot tests in NumPy for many rows: ``[n, P, U]``, bounds rounded to ``X``'s dtype."""
    return slot_follows(host_slots(paths, X.dtype), X[:, paths.feature], np)


def pattern(bits, xp=jnp):
    """Pack booleans ``[..., U]`` into int32 codes ``[...]`` (slot ``u`` is bit ``u``); ``xp``:
    ``jax.numpy`` (traced) or ``numpy``. The inverse of :func:`jaxshap._coalitions._combinatorics.code_bits`."""
    weights = xp.left_shift(xp.int32(1), xp.arange(bits.shape[-1], dtype=xp.int32))
    return xp.sum(xp.where(bits, weights, 0), axis=-1, dtype=xp.int32)
