"""The compiled TreeSHAP kernels of one build: blocks of paths against chunks of rows.

A chunk of routed rows (ranks, see :mod:`jaxshap._tree._rows`) is held with the rows along
the minor axis (``[M, r]``). Each group of paths (same number of slots ``U``) is cut into blocks
of paths; a ``lax.scan`` over the blocks computes each block's ``[paths, slots, rows]``
contributions and scatter-adds them into the ``[features * outputs, rows]`` accumulator, whole
vectors of rows at a time. So the working set is one block, whatever the number of trees, and
the program has one loop body per group, whatever the depth. A group's blocks hold, by kind:

* ``"A1"`` (path-dependent): the factors of :mod:`jaxshap._tree._quadrature`;
* ``"table"``: the values of every pattern of followed slots, read at the row's pattern:
  interventional short paths, from the background's pattern histogram
  (:func:`jaxshap._tree._interventional.tables_host`), and path-dependent oblivious trees, one
  pseudo-path of level conditions per tree, whose pattern is the row's leaf index
  (:mod:`jaxshap._tree._oblivious`);
* ``"value"`` (interventional): the pair games in closed form against chunks of background rows
  (:func:`jaxshap._tree._interventional.pair_block`), an inner ``lax.scan`` over those chunks;
* ``"saabas"``: Saabas' attributions along the row's own path.

A transformed output rescales each background row's pair values (see :mod:`jaxshap._tree._interventional`):
for one output, short paths (``"S"`` groups) sum each row's rescaling over the background's
follow patterns (one matrix product against their one-hot codes) and contract that histogram
with the pattern game's table; longer paths, and the softmax's classes, sum the rescaled pair
games directly.
Interaction values of any order run the same loops with :mod:`jaxshap._tree._quadrature`'s
product terms (:func:`chunk_terms`).

"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._core._chunking import map_chunks
from .._engine._rows import RowExplainer
from .._estimators._interactions import interaction_tensor, ksii_from_sii
from .._tree import _interventional
from .._tree._interventional import pair_block, pair_terms
from .._tree._paths import follows
from .._tree._quadrature import product_terms, shapley_block


CPU_CHUNK_ROWS = 256
"""Rows per chunk on a CPU (fewer when the memory budget says so): enough for the rows axis to
fill the vector units; each path block's working set stays in cache."""


def _pattern(follow: jax.Array) -> jax.Array:
    """``[P, r]`` int32 codes of the followed slots (slot ``u`` is bit ``u``)."""
    u = follow.shape[1]
    weights = jnp.left_shift(jnp.int32(1), jnp.arange(u, dtype=jnp.int32))[None, :, None]
    return jnp.sum(jnp.where(follow, weights, 0), axis=1, dtype=jnp.int32)


def _background_scan(fn, carry, background):
    """Fold ``fn(carry, codes [b, M], weight [b], extra)`` over the chunks of background rows."""
    def body(c, chunk):
        return fn(c, *chunk), None

    return jax.lax.scan(body, carry, background)[0]


def _contributions(group: dict, blk: dict, follow: jax.Array, xt: jax.Array, background) -> jax.Array:
    """``[P, U, r]``: one block's contributions to its slots' features (raw output)."""
    if "saabas" in blk:  # the row's own path only: Saabas' per-split changes of the mean
        return jnp.where(jnp.all(follow, axis=1, keepdims=True), blk["saabas"][..., None], 0.0)
    if "A1" in blk:
        return shapley_block(blk, follow)
    if "table" in blk:
        vals = jnp.take_along_axis(blk["table"], _pattern(follow)[:, :, None], axis=1)  # [P, r, U]
        return jnp.swapaxes(vals, 1, 2)

    def add(acc, codes, weight, _):
        fb = follows(blk["slots"], codes.T)
        return acc + pair_block(follow, fb, group["wa"], group["wb"], weight[None, None, :, None])[..., 0]

    acc = _background_scan(add, jnp.zeros(follow.shape, xt.dtype), background)
    return acc * blk["value"][:, None, None]


def chunk_values(groups: list, X: jax.Array, n_features: int, n_outputs: int, background) -> jax.Array:
    """``[r, M, K]`` Shapley values of a chunk of routed rows ``X`` ``[r, M]`` (traced)."""
    xt = X.T
    r = X.shape[0]

    def run(acc, group):
        def body(acc, blk):
            follow = follows(blk["slots"], xt)
            contrib = _contributions(group, blk, follow, xt, background)
            return acc.at[blk["index"].reshape(-1)].add(contrib.reshape(-1, r), mode="promise_in_bounds"), None

        return jax.lax.scan(body, acc, group["blocks"])[0]

    acc = jnp.zeros((n_features * n_outputs, r), X.dtype)
    for group in groups:
        acc = run(acc, group)
    return jnp.transpose(acc.reshape(n_features, n_outputs, r), (2, 0, 1))


def raw_margins(groups: list, xt: jax.Array, raw_base: jax.Array) -> jax.Array:
    """``[r, K]`` the ensemble's raw output at the rows ``xt`` ``[M, r]`` (traced)."""
    k = raw_base.shape[0]

    def body(acc, blk):
        reach = jnp.all(follows(blk["slots"], xt), axis=1)  # [P, r]
        leaf = jnp.where(reach, blk["value"][:, None], 0.0)
        return acc + jax.ops.segment_sum(leaf, blk["output"], num_segments=k), None

    acc = jnp.zeros((k, xt.shape[1]), xt.dtype)
    for group in groups:
        acc = jax.lax.scan(body, acc, group["blocks"])[0]
    return acc.T + raw_base


def chunk_values_transformed(groups, X, y, raw_base, background, n_features, n_outputs, transform):
    """``([r, M, K], [r, K])``: values and base values of the transformed output ``g(f(x))`` for a
    chunk of rows, rescaling each background row's pair values (see :mod:`jaxshap._tree._interventional`)."""
    xt = X.T
    r, k = X.shape[0], n_outputs
    fx = raw_margins(groups, xt, raw_base)  # [r, K]

    def rescale(chunk):  # [r, b, K(k), K(j)] weighted, and the weighted g(f(b)) summed
        _, weight, fb = chunk
        mats, gb = jax.vmap(lambda f, yy: _interventional.rescale_matrix(transform, f, fb, yy))(fx, y)
        return mats * weight[None, :, None, None], jnp.einsum("rbk,b->rk", gb, weight)

    mats, gb = jax.lax.map(rescale, background)  # once per chunk of rows, for every path block
    chunks = (background[0], mats)

    def pairs(group, blk, follow):  # [P, U, r, K]: the pair games summed over the background
        def add(c, codes, mats):
            w = jnp.moveaxis(mats[:, :, :, blk["output"]], 3, 0)  # [P, r, b, K(k)]
            fb_follow = follows(blk["slots"], codes.T)
            return c + pair_block(follow, fb_follow, group["wa"], group["wb"], w)

        return _background_scan(add, jnp.zeros(follow.shape + (k,), X.dtype), chunks)

    def histogram(group, blk, follow):  # the same from each row's weighted pattern histogram
        size = group["S"].shape[0]

        def add(h, codes, mats):  # one output: every path shares the rows' rescaling
            seen = _pattern(follows(blk["slots"], codes.T))  # [P, b]
            onehot = (seen[..., None] == jnp.arange(size, dtype=seen.dtype)).astype(X.dtype)  # [P, b, 2**U]
            return h + jnp.einsum("rb,pbq->prq", mats[:, :, 0, 0], onehot)

        h = _background_scan(add, jnp.zeros((follow.shape[0], r, size), X.dtype), chunks)
        table = jnp.take(group["S"], _pattern(follow), axis=0)  # [P, r, 2**U, U]
        return jnp.einsum("prq,prqu->pur", h, table)[..., None]

    def run(acc, group):
        def body(acc, blk):
            follow = follows(blk["slots"], xt)
            total = (histogram if "S" in group else pairs)(group, blk, follow)
            contrib = total * blk["value"][:, None, None, None]  # [P, U, r, K]
            index = blk["slots"]["feature"][:, :, None] * k + jnp.arange(k)  # [P, U, K]
            return acc.at[index.reshape(-1)].add(jnp.moveaxis(contrib, 3, 2).reshape(-1, r)), None

        return jax.lax.scan(body, acc, group["blocks"])[0]

    acc = jnp.zeros((n_features * k, r), X.dtype)
    for group in groups:
        acc = run(acc, group)
    return jnp.transpose(acc.reshape(n_features, k, r), (2, 0, 1)), gb.sum(0)


def _tuple_index(feature: jax.Array, output: jax.Array, t: int, n_features: int, n_outputs: int) -> jax.Array:
    """``[P, U**t]``: the flat index ``(f_1 M^{t-1} + ... + f_t) K + output`` of each slot tuple."""
    p, u = feature.shape
    flat = jnp.zeros((p,) + (1,) * t, jnp.int32)
    for i in range(t):
        flat = flat * n_features + feature.reshape((p,) + tuple(u if j == i else 1 for j in range(t)))
    return (flat.reshape(p, -1) * n_outputs + output[:, None]).astype(jnp.int32)


def chunk_terms(groups: list, X: jax.Array, n_features: int, n_outputs: int, background, rules: dict) -> list:
    """``[[r] + [M] * t + [K] for t in orders]``: an index's terms of a chunk of routed rows (traced).

    Args:
      groups: the build's groups (path-dependent ``"A1"`` or interventional ``"value"`` blocks).
      rules: ``{"nodes": [Q], "weights": [k, Q], "orders": tuple, "interior": int}`` (a
        :func:`jaxshap._tree._quadrature.rule` and its :func:`~jaxshap._tree._quadrature.interior_nodes`).
    """
    xt = X.T
    r = X.shape[0]
    orders = rules["orders"]

    def run(accs, group):
        def body(accs, blk):
            follow = follows(blk["slots"], xt)
            if "z" in blk:  # path-dependent: beta = cover shares
                terms = product_terms(follow.astype(X.dtype), blk["z"][..., None], rules["nodes"], rules["weights"], orders,
                                      rules["interior"])
            else:
                def add(c, codes, weight, _):
                    fb = follows(blk["slots"], codes.T)
                    new = pair_terms(follow, fb, rules["nodes"], rules["weights"], orders,
                                     weight[None, :] + jnp.zeros((r, 1), X.dtype), rules["interior"])
                    return {t: c[t] + new[t] for t in orders}

                zero = {t: jnp.zeros((follow.shape[0], follow.shape[1] ** t, r), X.dtype) for t in orders}
                terms = _background_scan(add, zero, background)
            out = []
            for t, acc in zip(orders, accs):
                index = _tuple_index(blk["slots"]["feature"], blk["output"], t, n_features, n_outputs)
                out.append(acc.at[index.reshape(-1)].add((terms[t] * blk["value"][:, None, None]).reshape(-1, r)))
            return out, None

        return jax.lax.scan(body, accs, group["blocks"])[0]

    accs = [jnp.zeros((n_features**t * n_outputs, r), X.dtype) for t in orders]
    for group in groups:
        accs = run(accs, group)
    return [jnp.moveaxis(acc.reshape((n_features,) * t + (n_outputs, r)), -1, 0) for t, acc in zip(orders, accs)]


class TreeRows(RowExplainer):
    """One build's TreeSHAP kernels on the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`).

    Its leaves are the build's groups of path blocks, the raw base value and, for the
    interventional game, the routed background rows in chunks (codes ``[C, b, M]``, weights
    ``[C, b]`` and, for a transformed output, margins ``[C, b, K]``); the rest is static. So
    every call on a build of the same shapes reuses one compiled program, and chunks, padding,
    host blocks (progress, streams) and devices come from the runtime. A row is the routed row's
    codes ``[M]``, followed by its label for a transformed output (``[M + 1]``).
    """

    def __init__(self, groups, n_features, n_outputs, base, background, transform, bytes_per_row, memory_budget,
                 rows_per_chunk):
        self.groups, self.base, self.background = groups, base, background
        self.n_features, self.n_outputs, self.transform = n_features, n_outputs, transform
        self.bytes_per_row, self.memory_budget, self.rows_per_chunk = bytes_per_row, memory_budget, rows_per_chunk

    def _bytes_per_row(self) -> int:
        return self.bytes_per_row

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, None]:
        """Rows per chunk: the build's (the path blocks are sized for it), within ``memory_budget``."""
        rows = max(1, min(self.rows_per_chunk, self.memory_budget // max(self.bytes_per_row, 1)))
        return (min(rows, max(n_rows, 1)) if exact else rows), None

    def _validate(self, X):  # the rows are routed and checked by TreeExplainer
        return X

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        del keys  # exact: no sampling
        m, k = self.n_features, self.n_outputs
        if self.transform == "identity":
            phi = chunk_values(self.groups, X, m, k, self.background)
            return phi, jnp.broadcast_to(self.base, (X.shape[0], k)), None
        phi, base = chunk_values_transformed(self.groups, X[:, :m], X[:, m], self.base, self.background, m, k,
                                             self.transform)
        return phi, base, None

    def _wrap(self, phi, base, stderr, X, names):  # TreeExplainer wraps the results itself
        return phi, base


def plan_block(n_paths: int, per_path: int, target: int) -> int:
    """Paths per block: about ``target`` elements of the block's main temporary (``per_path`` each)."""
    return int(max(1, min(n_paths, target // max(per_path, 1))))


def pad_blocks(arrays: dict, n_paths: int, block: int, fills: dict) -> dict:
    """Host arrays ``[P, ...]`` padded to whole blocks and reshaped ``[n_blocks, block, ...]``."""
    n_blocks = -(-n_paths // block)
    extra = n_blocks * block - n_paths
    out = {}
    for name, a in arrays.items():
        if isinstance(a, dict):
            out[name] = pad_blocks(a, n_paths, block, fills)
            continue
        if extra:
            a = np.concatenate([a, np.full((extra,) + a.shape[1:], fills.get(name, 0), a.dtype)])
        out[name] = a.reshape((n_blocks, block) + a.shape[1:])
    return out


@functools.partial(jax.jit, static_argnames=("interior", "n_features", "n_outputs", "order", "ksii", "rows"))
def interaction_rows(groups, X, background, nodes, weights, interior, n_features, n_outputs, order, ksii, rows):
    """``[n] + [M] * k + [K]``: the order-``k`` tensor (:func:`interaction_tensor`) of an index's
    terms of orders ``1..k`` (:func:`chunk_terms` over chunks of ``rows`` rows; k-SII assembled
    from SII when ``ksii``)."""
    rules = {"nodes": nodes, "weights": weights, "orders": tuple(range(1, order + 1)), "interior": interior}
    terms = map_chunks(lambda x: tuple(chunk_terms(groups, x, n_features, n_outputs, background, rules)), X, rows)
    terms = [jnp.moveaxis(t, 0, -2) for t in terms]  # [M] * t + [n, K]
    if ksii:
        terms = ksii_from_sii(terms)
    return jnp.moveaxis(interaction_tensor(terms, order), -2, 0)
