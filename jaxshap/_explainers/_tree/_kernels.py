"""The compiled TreeSHAP kernels of one build: per row, every path's contributions scatter-added.

A row is the routed row's codes ``[M]`` (see :mod:`jaxshap._tree._routing`). For each group of
paths (see :func:`jaxshap._tree._paths.Paths.by_width`) a path's contribution to its slots'
features is, by what the build holds for the group:

* ``"table"``: a gather from the tabulated values of every pattern of followed slots;
* ``"zero_fraction"``: the path-dependent closed form (:func:`jaxshap._tree._path_dependent.path_shapley`);
* ``"background"``: the interventional pair values against each background row
  (:func:`jaxshap._tree._interventional.pair_shapley`), averaged;
* ``"saabas"``: Saabas' attributions along the row's own path.

A transformed output rescales each background row's pair values (see
:mod:`jaxshap._tree._transforms`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..._engine._rows import RowExplainer
from ..._tree import _transforms
from ..._tree._interventional import pair_shapley
from ..._tree._path_dependent import path_shapley
from ..._tree._paths import follows, pattern

CPU_CHUNK_ROWS = 64
"""Rows per chunk of the TreeSHAP kernels on a CPU (fewer when the memory budget says so): the
gathered path tables of a chunk stay in cache. On accelerators only the budget limits the chunk."""


def _row_contributions(params: dict, x: jax.Array) -> jax.Array:
    """``[P, U]``: each path's contribution to each of its slots' features for row ``x``."""
    fx = follows(params["slots"], x)
    if "saabas" in params:  # the row's own path only: Saabas' per-split changes of the mean
        return jnp.where(jnp.all(fx, axis=-1, keepdims=True), params["saabas"], 0.0)
    if "table" in params:
        table = params["table"]
        return table[jnp.arange(table.shape[0]), pattern(fx)]
    value = params["value"][:, None]
    if "background" not in params:
        return jax.vmap(path_shapley)(params["zero_fraction"], fx) * value
    background = params["background"]

    def add(acc, fb):
        return acc + pair_shapley(fx, fb, acc.dtype), None

    total, _ = jax.lax.scan(add, jnp.zeros(fx.shape, value.dtype), background)
    return total / background.shape[0] * value


def chunk_values(groups: list, X: jax.Array, n_features: int, n_outputs: int) -> jax.Array:
    """``[r, M, K]`` Shapley values of a chunk of rows: per row, every group's path
    contributions scatter-added into the features (traced)."""

    def one_row(x):
        phi = jnp.zeros(n_features * n_outputs, X.dtype)
        for params in groups:
            contrib = _row_contributions(params, x)
            phi = phi.at[params["index"].reshape(-1)].add(contrib.reshape(-1))
        return phi

    return jax.vmap(one_row)(X).reshape(X.shape[0], n_features, n_outputs)


def chunk_values_transformed(groups, X, y, raw_base, fb, n_features, n_outputs, transform):
    """``([r, M, K], [r, K])``: values and base values of the transformed output ``g(f(x))`` for
    a chunk of rows, rescaling each background row's pair values (see :mod:`._transforms`)."""

    def one_row(args):
        x, yx = args
        fxs, fx_raw = [], raw_base
        for params in groups:
            fx = follows(params["slots"], x)
            reach = jnp.all(fx, axis=-1)
            fx_raw = fx_raw + jax.ops.segment_sum(
                jnp.where(reach, params["value"], 0.0), params["output"], num_segments=n_outputs
            )
            fxs.append(fx)
        r, gb = _transforms.rescale_matrix(transform, fx_raw, fb, yx)  # [B, K(k), K(j)]
        phi = jnp.zeros(n_features * n_outputs, X.dtype)
        for params, fx in zip(groups, fxs):
            rp = jnp.swapaxes(r[:, :, params["output"]], 1, 2)  # [B, P, K(k)]

            def add(acc, inputs):
                b_follows, rb = inputs
                return acc + pair_shapley(fx, b_follows, acc.dtype)[:, :, None] * rb[:, None, :], None

            shape = fx.shape + (n_outputs,)
            total, _ = jax.lax.scan(add, jnp.zeros(shape, X.dtype), (params["background"], rp))
            contrib = total / fb.shape[0] * params["value"][:, None, None]  # [P, U, K]
            index = params["slots"]["feature"][:, :, None] * n_outputs + jnp.arange(n_outputs)
            phi = phi.at[index.reshape(-1)].add(contrib.reshape(-1))
        return phi, gb.mean(axis=0)

    phi, base = jax.vmap(one_row)((X, y))
    return phi.reshape(X.shape[0], n_features, n_outputs), base


class TreeRows(RowExplainer):
    """One build's TreeSHAP kernels on the shared runtime (:class:`jaxshap._engine._rows.RowExplainer`).

    Its leaves are the build's tables and slot tests (``groups``), the raw base value and, for
    a transformed output, the background margins; the rest is static. So every call on a build
    of the same shapes (another explainer of the same model, another number of rows within a
    capacity) reuses one compiled program, and chunks, padding, host blocks (progress, streams)
    and devices come from the runtime. A row is the routed row's codes ``[M]``, followed by its
    label for a transformed output (``[M + 1]``).
    """

    def __init__(self, groups, n_features, n_outputs, base, fb, transform, bytes_per_row, memory_budget):
        self.groups, self.base, self.fb = groups, base, fb
        self.n_features, self.n_outputs, self.transform = n_features, n_outputs, transform
        self.bytes_per_row, self.memory_budget = bytes_per_row, memory_budget

    def _bytes_per_row(self) -> int:
        return self.bytes_per_row

    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, None]:
        """Rows per chunk: as many as ``memory_budget`` holds, at most :data:`CPU_CHUNK_ROWS` on a CPU."""
        rows = max(1, self.memory_budget // max(self.bytes_per_row, 1))
        if jax.default_backend() == "cpu":
            rows = min(rows, CPU_CHUNK_ROWS)
        return (min(rows, max(n_rows, 1)) if exact else rows), None

    def _validate(self, X):  # the rows are routed and checked by TreeExplainer
        return X

    def _explain_rows(self, X: jax.Array, keys: jax.Array):
        del keys  # exact: no sampling
        m, k = self.n_features, self.n_outputs
        if self.transform == "identity":
            return chunk_values(self.groups, X, m, k), jnp.broadcast_to(self.base, (X.shape[0], k)), None
        phi, base = chunk_values_transformed(self.groups, X[:, :m], X[:, m], self.base, self.fb, m, k, self.transform)
        return phi, base, None

    def _wrap(self, phi, base, stderr, X, names):  # TreeExplainer wraps the results itself
        return phi, base
