r"""SHAP interaction values of tree ensembles, path by path (path-dependent and interventional).

SHAP interaction values (Lundberg et al. 2020, "From local explanations to global understanding
with explainable AI for trees", Nature Machine Intelligence 2:56-67, eq. for
:math:`\Phi_{i,j}`) split the Shapley interaction index (Grabisch & Roubens, 1999) evenly over the
two orders of a pair and put the rest of each Shapley value on the diagonal:

.. math::

    \Phi_{ij} = \tfrac12 \sum_{S \subseteq N \setminus \{i, j\}}
        \frac{|S|!\,(M - |S| - 2)!}{(M - 1)!} \Delta_{ij} v(S), \qquad
    \Phi_{ii} = \phi_i - \sum_{j \ne i} \Phi_{ij}

(the order-2 k-SII of Bordt & von Luxburg, 2023, in matrix form). The pair term is the change of
``i``'s Shapley value when ``j`` is made present rather than absent:
:math:`2 \Phi_{ij} = \phi_i(v \mid j \in S) - \phi_i(v \mid j \notin S)`, each a Shapley value
in the game of the other players. Both tree games are sums over leaves of products over a path's
slots (distinct features), so this is computed per path, and per slot ``w``:

* **path-dependent** (leaf game ``prod_{u in S} o_u prod_{u not in S} z_u``): making ``w``
  present multiplies the game of the other slots by ``o_w``, absent by ``z_w``, so
  :math:`2 \Phi_{uw} = (o_w - z_w)\, \phi_u^{(-w)}`, with :math:`\phi^{(-w)}` the path's Shapley
  values with slot ``w`` made a null slot (``z_w = o_w = 1``);
* **interventional** (leaf game ``1[A <= S, B cap S = empty]`` for one background row, see
  :mod:`._interventional`): present ``w`` leaves ``(A - w, B)`` if ``w in A`` and an unreachable
  leaf if ``w in B``; absent ``w`` the reverse, so
  :math:`2 \Phi_{uw} = ([w \in A] - [w \in B])\, \phi_u(A - w, B - w)`, then averaged over the
  background rows.

As for the Shapley values, a path's interaction values depend on the explained row only through
its pattern of followed slots, so for short paths they are tabulated per pattern (``[P, 2**U,
U, U]``) when the explainer first computes interactions; explaining is then a gather per path
and a scatter-add into ``[M, M]``, ``vmap``-ped over rows. Longer paths (or tables beyond the
memory budget) are evaluated directly per row.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits
from .._core._chunking import map_chunks
from ._interventional import pair_shapley, pattern_table
from ._path_dependent import path_shapley, path_tables_host
from ._paths import follows, follows_host, pattern, slot_arrays
from .._coalitions._static_cache import static_cache

GROUP_WIDTHS = (2, 4, 6, 8)
MAX_PATH_SLOTS = 10  # path-dependent tables: 2**U U**2 per path
MAX_INTERVENTIONAL_SLOTS = 7  # interventional tables go through a [4**U, U, U] pair table


def _finish(pairs: np.ndarray | jax.Array, phi, xp=np):
    """``[..., U, U]`` matrix from the doubled pair terms ``pairs[..., u, w]`` and Shapley values ``phi [..., U]``."""
    u = pairs.shape[-1]
    eye = xp.eye(u, dtype=bool)
    half = xp.where(eye, 0.0, pairs / 2)
    return xp.where(eye, (phi - half.sum(-1))[..., :, None], half)


# --- tables (host, NumPy float64) ----------------------------------------------------------------
def path_interaction_tables_host(zero_fraction: np.ndarray) -> np.ndarray:
    """``[P, 2**U, U, U]`` path-dependent interaction values of every pattern, unit leaf value."""
    p, n = zero_fraction.shape
    codes = np.arange(2**n)
    bits = all_codes_bits(n).astype(np.float64)  # [2**U, U]
    phi = path_tables_host(zero_fraction)  # [P, 2**U, U]
    pairs = np.zeros((p, 2**n, n, n))
    for w in range(n):
        z = np.array(zero_fraction, np.float64)
        z[:, w] = 1.0
        cond = path_tables_host(z)[:, codes | (1 << w), :]  # slot w made null (followed, z = 1)
        factor = bits[None, :, w] - np.asarray(zero_fraction, np.float64)[:, None, w]  # [P, 2**U]
        pairs[..., w] = factor[..., None] * cond
    return _finish(pairs, phi)


@static_cache(8)
def interventional_pair_table(n_slots: int) -> np.ndarray:
    """``[2**U (x pattern), 2**U (b pattern), U, U]`` interaction values of one leaf for every
    pair of patterns (unit leaf value)."""
    n = n_slots
    phi = pattern_table(n, np.float64)  # [x, b, U]
    codes = np.arange(2**n)
    bits = all_codes_bits(n)
    pairs = np.zeros((2**n, 2**n, n, n))
    for w in range(n):
        in_a = bits[:, None, w] & ~bits[None, :, w]
        in_b = ~bits[:, None, w] & bits[None, :, w]
        sign = in_a.astype(np.float64) - in_b
        both = codes | (1 << w)  # slot w followed by both rows: a null slot
        pairs[..., w] = sign[..., None] * phi[both[:, None], both[None, :]]
    return _finish(pairs, phi)


def interventional_interaction_tables_host(bg_codes: np.ndarray, n_slots: int) -> np.ndarray:
    """``[P, 2**U, U, U]``: per path and x pattern, the mean over background rows (through the
    histogram of their patterns) of :func:`interventional_pair_table`."""
    n_bg, p = bg_codes.shape
    size = 2**n_slots
    flat = np.arange(p)[None, :] * size + bg_codes
    counts = np.bincount(flat.reshape(-1), minlength=p * size).reshape(p, size) / n_bg
    pair = interventional_pair_table(n_slots).transpose(1, 0, 2, 3).reshape(size, -1)  # [b, x U U]
    return (counts @ pair).reshape(p, size, n_slots, n_slots)


# --- direct evaluation (JAX, per row) ------------------------------------------------------------
def path_interactions(zero_fraction: jax.Array, one: jax.Array) -> jax.Array:
    """``[U, U]`` path-dependent interaction values of one path for one row (unit leaf value)."""
    n = zero_fraction.shape[0]
    phi = path_shapley(zero_fraction, one)
    cond = jax.vmap(lambda w: path_shapley(zero_fraction.at[w].set(1.0), one.at[w].set(True)))(jnp.arange(n))
    pairs = ((one.astype(zero_fraction.dtype) - zero_fraction)[:, None] * cond).T  # [u, w]
    return _finish(pairs, phi, jnp)


def pair_interactions(x_follows: jax.Array, b_follows: jax.Array, dtype=jnp.float32) -> jax.Array:
    """``[U, U]`` interventional interaction values of one leaf for one (row, background row) pair."""
    n = x_follows.shape[0]
    phi = pair_shapley(x_follows, b_follows, dtype)
    cond = jax.vmap(lambda w: pair_shapley(x_follows.at[w].set(True), b_follows.at[w].set(True), dtype))(
        jnp.arange(n)
    )
    sign = (x_follows & ~b_follows).astype(dtype) - (b_follows & ~x_follows).astype(dtype)
    return _finish((sign[:, None] * cond).T, phi, jnp)


# --- groups of paths and the compiled program ------------------------------------------------------
def build_groups(paths, background, dtype, memory_budget: int) -> list[dict]:
    """Per group of paths (by number of slots): slot tests, the ``[P, U, U]`` scatter index into
    ``[M * M * K]``, and a table or the inputs of the direct evaluation."""
    m, k = paths.n_features, paths.n_outputs
    table_budget = memory_budget
    limit = MAX_PATH_SLOTS if background is None else MAX_INTERVENTIONAL_SLOTS
    groups = []
    for _, g in paths.by_width(GROUP_WIDTHS):
        u = g.n_slots
        f = g.feature.astype(np.int64)
        index = (f[:, :, None] * m + f[:, None, :]) * k + g.output[:, None, None]
        params = {"slots": slot_arrays(g, dtype), "pair_index": jax.device_put(index.astype(np.int32))}
        table_bytes = g.n_paths * 2**u * u * u * np.dtype(dtype).itemsize
        tabled = u <= limit and table_bytes <= table_budget
        value = g.value[:, None, None, None]
        if background is None:
            if tabled:
                table_budget -= table_bytes
                params["table"] = jax.device_put(np.asarray(path_interaction_tables_host(g.zero_fraction) * value, dtype))
            else:
                params["zero_fraction"] = jax.device_put(np.asarray(g.zero_fraction, dtype))
                params["value"] = jax.device_put(np.asarray(g.value, dtype))
        else:
            follow = follows_host(g, np.asarray(background))  # [B, P, U]
            if tabled:
                table_budget -= table_bytes
                table = interventional_interaction_tables_host(pattern(follow, np), u) * value
                params["table"] = jax.device_put(np.asarray(table, dtype))
            else:
                params["background"] = jax.device_put(follow)
                params["value"] = jax.device_put(np.asarray(g.value, dtype))
        groups.append(params)
    return groups


def _row_interactions(params: dict, x: jax.Array) -> jax.Array:
    """``[P, U, U]`` interaction contributions of each path for row ``x``."""
    fx = follows(params["slots"], x)
    if "table" in params:
        table = params["table"]
        return table[jnp.arange(table.shape[0]), pattern(fx)]
    value = params["value"][:, None, None]
    if "background" not in params:
        return jax.vmap(path_interactions)(params["zero_fraction"], fx) * value
    dtype = value.dtype

    def add(acc, fb):
        return acc + jax.vmap(lambda a, b: pair_interactions(a, b, dtype))(fx, fb), None

    total, _ = jax.lax.scan(add, jnp.zeros(fx.shape + fx.shape[-1:], dtype), params["background"])
    return total / params["background"].shape[0] * value


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def interaction_rows(groups: list, X: jax.Array, n_features: int, n_outputs: int, rows_per_chunk: int) -> jax.Array:
    """``[n, M, M, K]`` interaction values: per row, every path's ``[U, U]`` block scatter-added."""
    size = n_features * n_features * n_outputs

    def one_row(x):
        out = jnp.zeros(size, X.dtype)
        for params in groups:
            out = out.at[params["pair_index"].reshape(-1)].add(_row_interactions(params, x).reshape(-1))
        return out

    out = map_chunks(jax.vmap(one_row), X, rows_per_chunk)
    return out.reshape(X.shape[0], n_features, n_features, n_outputs)


def rows_per_chunk(groups: list, n_rows: int, n_features: int, n_outputs: int, memory_budget: int, itemsize: int) -> int:
    """Rows per chunk so that the gathered ``[rows, P, U, U]`` blocks stay within a cache-sized
    share of the budget (at most 32 MiB)."""
    per_row = 4 * n_features * n_features * n_outputs
    for params in groups:
        p, u, _ = params["pair_index"].shape
        per_row += 3 * p * u * u
    budget = min(memory_budget, 32 * 2**20)
    return max(1, min(n_rows, budget // max(per_row * itemsize, 1)))


def interaction_values(groups: list, X: jax.Array, n_features: int, n_outputs: int, memory_budget: int) -> jax.Array:
    """``[n, M, M, K]`` interaction values of routed rows ``X`` (the codes a build's router gives)
    with the groups of :func:`build_groups`, in chunks under ``memory_budget``."""
    chunk = rows_per_chunk(groups, X.shape[0], n_features, n_outputs, memory_budget, X.dtype.itemsize)
    return interaction_rows(groups, X, n_features, n_outputs, chunk)
