r"""Oblivious (symmetric) trees: path-dependent TreeSHAP as one table per tree, read by leaf index.

A tree is *oblivious* when every node of a level splits on the same condition (CatBoost's
default trees). A row then reaches leaf ``c = sum_j bit_j 2**j`` (``bit_j``: the row meets level
``j``'s condition, i.e. goes right), and its path-dependent game on the tree depends on the row
only through ``c``: the leaf game's "row follows the slot" indicators are the agreements of the
row's bits with the leaf's. So the tree's Shapley values are a table ``[2**d, d]`` over the
``2**d`` leaf indices, and a row costs ``d`` comparisons and one gather instead of ``2**d`` path
products. Its levels are read as the slots of one pseudo-path (the conditions, not merged by
feature), whose followed pattern is ``c``; the table kind of
:mod:`jaxshap._explainers._tree_kernels` does the rest.

The tables come from a recursion over levels, not from ``4**d`` (row, leaf) pairs. With the
multilinear form of Quadrature-TreeSHAP (:mod:`._quadrature`), feature ``u``'s value at leaf
index ``r`` is

.. math::

    \phi_u(r) = \int_0^1 \sum_c v_c\, (O_u - Z_u) \prod_{g \ne u} \big(Z_g + t (O_g - Z_g)\big)\, dt,

with, per feature ``g`` of the tree, :math:`O_g = \prod_{j \in J_g} [c_j = r_j]` and
:math:`Z_g = \prod_{j \in J_g} z_j(c)` over its levels ``J_g`` (``z_j``: the cover share of
leaf ``c``'s child at level ``j``). A feature on one level contributes the per-level factor
``alpha [c_j = r_j] + beta z_j(c)`` (``alpha = t, beta = 1 - t``; for ``u`` itself ``1, -1``); a
feature on several levels is the sum of two such products over its levels (all ``[c_j = r_j]``, or
all ``z_j``), so each of its *branches* is again per-level. For one choice of branches,
``H(r) = sum_c v_c prod_j (alpha_j [c_j = r_j] + beta_j z_j(c))`` for every ``r`` at once folds the
levels from the leaves up: after folding levels ``j..d-1`` the state is indexed by the leaf's
bits of levels ``0..j-1`` and the row's of levels ``j..d-1`` (``2**d`` numbers), and folding
level ``j`` replaces the leaf's bit ``c_j`` by the row's ``r_j``:
``S'(r_j) = alpha_j S(c_j = r_j) + beta_j sum_b z_j(c_j = b) S(c_j = b)``. So a tree costs ``O(d^2 B Q 2**d)`` (``B``
branch choices, ``Q = ceil(d / 2)`` Gauss-Legendre nodes, exact for the degree-``d - 1``
polynomials), against ``O(n 2**d d Q)`` for ``n`` rows through the path kernel.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._ensemble import TreeEnsemble
from ._paths import Paths, split_tests
from ._quadrature import gauss_legendre

MAX_DEPTH = 12
"""Deepest oblivious trees tabulated (a table of ``2**d * d`` entries per tree and output)."""

MAX_BRANCHES = 8
"""Most branch choices a tree may need (features split on at several levels: ``2**m``);
trees with more stay with the path kernel."""

STATE_ELEMENTS = 2**22
"""Elements of the recursion's state per chunk of trees."""


@dataclasses.dataclass(frozen=True)
class Oblivious:
    """The oblivious trees of one depth ``d`` (``T`` of them).

    Attributes:
      tree: ``[T]`` their indices in the ensemble.
      node: ``[T, d]`` one (flat per tree) node of each level, root first.
      feature: ``[T, d]`` each level's feature.
      value: ``[T, 2**d, K]`` leaf values by leaf index (bit ``j``: right at level ``j``).
      share: ``[T, d, 2**d]`` leaf ``c``'s cover share at level ``j`` (child over node).
    """

    tree: np.ndarray
    node: np.ndarray
    feature: np.ndarray
    value: np.ndarray
    share: np.ndarray

    @property
    def depth(self) -> int:
        return self.node.shape[1]

    def take(self, keep: np.ndarray) -> "Oblivious":
        """The trees ``keep`` (a boolean mask or indices)."""
        return Oblivious(*(a[keep] for a in (self.tree, self.node, self.feature, self.value, self.share)))


def _same(a: np.ndarray) -> np.ndarray:
    """``[T]``: whether every entry of ``a`` ``[T, n, ...]`` equals the first along axis 1."""
    eq = a == a[:, :1]
    return eq.reshape(eq.shape[0], -1).all(axis=1)


def oblivious_trees(e: TreeEnsemble, max_depth: int = MAX_DEPTH) -> list[Oblivious]:
    """The ensemble's oblivious trees of depth ``1..max_depth`` with known covers, by depth.

    All trees walk down together one level per step; a tree stays a candidate while each level's
    nodes are all inner with one condition (feature, threshold, missing rule, default way and
    category set), and is oblivious of depth ``d`` when level ``d`` holds only leaves.
    """
    t, n = e.feature.shape
    rows = np.arange(t)[:, None]
    fronts = [np.zeros((t, 1), np.int64)]
    going = np.ones(t, bool)
    depth = np.zeros(t, np.int64)
    conditions = [e.feature, e.threshold, e.default_left, e.missing] + [a for a in (e.cat_left, e.cat_invalid_left)
                                                                         if a is not None]
    for j in range(max_depth + 1):
        front = fronts[-1]
        inner = e.feature[rows, front] >= 0
        leaves = ~inner.any(axis=1)
        depth[going & leaves & (j > 0)] = j
        going &= inner.all(axis=1)
        if j == max_depth or not going.any():
            break
        for a in conditions:
            going &= _same(a[rows, front])
        fronts.append(np.concatenate([np.where(going[:, None], e.left[rows, front], 0),
                                      np.where(going[:, None], e.right[rows, front], 0)], axis=1))
    depth[~np.isfinite(e.cover).all(axis=1)] = 0
    out = []
    for d in np.unique(depth[depth > 0]):
        idx = np.flatnonzero(depth == d)
        r = idx[:, None]
        cover = [e.cover[r, fronts[j][idx]] for j in range(d + 1)]  # [T, 2**j]
        share = np.stack([_child_share(cover[j], cover[j + 1], d) for j in range(d)], axis=1)
        out.append(Oblivious(tree=idx, node=np.stack([fronts[j][idx, 0] for j in range(d)], axis=1),
                             feature=np.stack([e.feature[idx, fronts[j][idx, 0]] for j in range(d)], axis=1),
                             value=e.value[r, fronts[d][idx]], share=share))
    return out


def _child_share(parent: np.ndarray, child: np.ndarray, d: int) -> np.ndarray:
    """``[T, 2**d]``: for each leaf index, its level's child cover over the node's (0 at an empty node)."""
    size = child.shape[1]
    codes = np.arange(2**d) % size
    num, den = child[:, codes], parent[:, codes % (size // 2)]
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def level_paths(e: TreeEnsemble, ob: Oblivious) -> Paths:
    """The trees' levels as pseudo-paths ``[T * K, d]`` of "goes right" slots, one per (tree,
    output): a row follows slot ``j`` iff it meets level ``j``'s condition, so its pattern is
    its leaf index. ``value`` and ``zero_fraction`` are placeholders (the tables hold the values)."""
    t, d = ob.node.shape
    k = e.n_outputs
    n = e.feature.shape[1]
    node = (ob.tree[:, None] * n + ob.node).reshape(-1)
    child = ob.tree[:, None] * n + e.right[ob.tree[:, None], ob.node]
    tests = split_tests(e, node, child.reshape(-1))
    per = lambda a: np.repeat(a.reshape((t, d) + a.shape[1:]), k, axis=0)  # noqa: E731  [T * K, d, ...]
    cat = {}
    if e.cat_left is not None:
        cat = {"cat": per(tests.get("cat", np.zeros(t * d, bool))),
               "cat_words": per(tests.get("cat_words", np.full((t * d, e.cat_left.shape[-1]), 0xFFFFFFFF, np.uint32))),
               "cat_invalid_ok": per(tests.get("cat_invalid_ok", np.ones(t * d, bool)))}
    return Paths(
        feature=per(tests["feature"]), lower=per(tests["lower"]), upper=per(tests["upper"]),
        nan_ok=per(tests["nan_ok"]), zero_missing=per(tests["zero_missing"]), zero_ok=per(tests["zero_ok"]),
        zero_fraction=np.ones((t * k, d)), value=np.zeros(t * k), output=np.tile(np.arange(k, dtype=np.int32), t),
        base=e.base.copy(), n_features=e.n_features, n_outputs=k, length=np.full(t * k, d, np.int32),
        tree=np.repeat(ob.tree, k), **cat,
    )


def _levels(feature: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, lead, multi)`` ``[T, d]``: the first level of each level's feature, whether a level
    is its feature's first, and the index among the tree's features on several levels of that
    feature (``-1`` for a feature on one level)."""
    d = feature.shape[1]
    same = feature[:, :, None] == feature[:, None, :]  # [T, j, j']
    first = np.argmax(same, axis=2)
    lead = first == np.arange(d)
    repeated = lead & (same.sum(axis=2) > 1)
    rank = np.cumsum(repeated, axis=1) - 1
    multi = np.where(np.take_along_axis(repeated, first, axis=1), np.take_along_axis(rank, first, axis=1), -1)
    return first, lead, multi


def _branch_count(multi: np.ndarray) -> np.ndarray:
    """``[T]``: ``2**m`` for ``m`` features on several levels (``multi`` of :func:`_levels`)."""
    return 2 ** (multi.max(axis=1) + 1)


def n_branches(feature: np.ndarray) -> np.ndarray:
    """``[T]``: the branch choices each tree needs, ``2**m`` for ``m`` features on several levels."""
    return _branch_count(_levels(feature)[2])


def _coefficients(feature: np.ndarray, t: np.ndarray, n_branch: int) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` ``[T, U = d, B, d, Q]``: each level's factor ``alpha [c_j = r_j] + beta z_j``
    for target level ``u`` (its feature's first level; other targets are all zero) and branch
    choice ``b`` (bit ``i``: the ``i``-th feature on several levels takes its ``z`` branch;
    choices past the tree's own are all zero)."""
    first, lead, multi = _levels(feature)
    d = feature.shape[1]
    n = feature.shape[0]
    shape = (n, d, n_branch, d, t.size)
    u = np.arange(d)[None, :, None, None, None]
    b = np.arange(n_branch)[None, None, :, None, None]
    fj = first[:, None, None, :, None]
    ld = lead[:, None, None, :, None]
    mj = multi[:, None, None, :, None]
    target = fj == u
    on_z = (b >> np.maximum(mj, 0)) & 1 == 1
    several = mj >= 0
    a_other = np.where(several, np.where(on_z, 0.0, np.where(ld, t, 1.0)), t)
    b_other = np.where(several, np.where(on_z, np.where(ld, 1.0 - t, 1.0), 0.0), 1.0 - t)
    a_target = np.where(several & on_z, 0.0, 1.0)
    b_target = np.where(several, np.where(on_z, np.where(ld, -1.0, 1.0), 0.0), -1.0)
    live = lead[:, :, None, None, None] & (b < _branch_count(multi)[:, None, None, None, None])
    alpha = np.where(live, np.where(target, a_target, a_other), 0.0)
    beta = np.where(live, np.where(target, b_target, b_other), 0.0)
    return np.broadcast_to(alpha, shape), np.broadcast_to(beta, shape)


def tables(ob: Oblivious) -> np.ndarray:
    """``[T, K, 2**d, d]``: each tree's path-dependent Shapley values by leaf index (rows) and
    level (the value of a feature sits at its first level; the others hold 0). Trees are folded in
    chunks of :data:`STATE_ELEMENTS` state elements, those needing fewer branch choices together."""
    t_count, d = ob.node.shape
    k = ob.value.shape[-1]
    nodes, weights = gauss_legendre((d + 1) // 2)
    size = 2**d
    branches = n_branches(ob.feature)
    order = np.argsort(branches, kind="stable")
    out = np.empty((t_count, k, size, d))
    s = 0
    while s < t_count:
        b = int(branches[order[s]])
        step = max(1, STATE_ELEMENTS // (d * b * nodes.size * k * size))
        idx = order[s : s + step]
        idx = idx[branches[idx] == b]
        s += idx.size
        alpha, beta = _coefficients(ob.feature[idx], nodes, b)  # [T, U, B, d, Q]
        n = idx.size
        state = np.broadcast_to(np.moveaxis(ob.value[idx], 1, 2)[:, None, None, None],
                                (n, d, b, nodes.size, k, size)).copy()  # [T, U, B, Q, K, 2**d]
        for j in range(d - 1, -1, -1):  # fold level j: leaf bit j becomes row bit j
            lead = state.shape[:-1]
            folded = state.reshape(lead + (size >> (j + 1), 2, 1 << j))  # [..., hi, b, p]
            z = ob.share[idx, j, : 2 << j].reshape((n,) + (1,) * 5 + (2, 1 << j))
            mixed = (z * folded).sum(axis=-2, keepdims=True)  # [..., hi, 1, p]
            a, bt = (c[:, :, :, j][..., None, None, None, None] for c in (alpha, beta))
            state = (a * folded + bt * mixed).reshape(lead + (size,))
        out[idx] = np.einsum("tubqkr,q->tkru", state, weights)
    return out
