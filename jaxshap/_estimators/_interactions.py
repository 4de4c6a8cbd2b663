r"""Exact interaction indices of one game from all ``2**M`` coalition values.

Every index here is linear in the game. For a set ``T`` of ``t`` features write the discrete
derivative :math:`\Delta_T v(S) = \sum_{L \subseteq T} (-1)^{t - |L|} v(S \cup L)` for
:math:`S \subseteq N \setminus T`. The indices are

* **SII**, the Shapley interaction index (Grabisch & Roubens, 1999, "An axiomatic approach to
  the concept of interaction among players in cooperative games"):
  :math:`I_T = \sum_{S \subseteq N \setminus T} \frac{(M - |S| - t)!\,|S|!}{(M - t + 1)!}
  \Delta_T v(S)`; its order-1 terms are the Shapley values.
* **BII**, the Banzhaf interaction index (same paper): weights :math:`2^{-(M - t)}`; its
  order-1 terms are the Banzhaf values.
* **STII**, the Shapley-Taylor index of order ``k`` (Sundararajan, Dhamdhere & Agarwal, 2020,
  "The Shapley Taylor interaction index"): :math:`\Delta_T v(\emptyset)` for ``t < k`` and
  :math:`\frac{k}{M} \sum_{S \subseteq N \setminus T} \binom{M - 1}{|S|}^{-1} \Delta_T v(S)`
  for ``t = k``.
* **k-SII** (Bordt & von Luxburg, 2023, "From Shapley values to generalized additive models and
  back"): :math:`\Phi_T = \sum_{j = 0}^{k - t} B_j \sum_{K \subseteq N \setminus T, |K| = j}
  I_{T \cup K}` with the Bernoulli numbers :math:`B_0 = 1, B_1 = -1/2, B_2 = 1/6, \dots`
* **FSII**, Faith-SHAP (Tsai, Yeh & Ravikumar, 2023, "Faith-Shap: the faithful Shapley
  interaction index"): the coefficients :math:`E_T` (``1 <= t <= k``) of the best ``k``-additive
  fit :math:`\min_E \sum_{\emptyset \ne S \ne N} \mu(S) (v(S) - v(\emptyset) - \sum_{T
  \subseteq S} E_T)^2` under :math:`\sum_T E_T = v(N) - v(\emptyset)`, with the Shapley kernel
  :math:`\mu(S) = (M - 1) / (\binom{M}{|S|} |S| (M - |S|))`.

k-SII, STII and FSII are efficient: their terms of all orders up to ``k`` sum to
:math:`v(N) - v(\emptyset)`.

**Computation.** For SII, BII and STII the weight of a coalition ``R`` in :math:`I_T` depends
only on ``s = |R|`` and ``a = |R \cap T|``: :math:`c_t(s, a) = (-1)^{t - a} \mu_t(s - a)`.
Möbius inversion over the subsets of ``T`` writes it as :math:`c_t(s, |R \cap T|) = \sum_{B
\subseteq R \cap T} g_t(s, |B|)` with :math:`g_t(s, b) = \sum_i (-1)^{b - i} \binom{b}{i}
c_t(s, i)`, so

.. math::

    I_T = \sum_{B \subseteq T} m_{|B|}(B), \qquad
    m_b(B) = \sum_R g_t(|R|, b)\, v(R) \prod_{i \in B} [i \in R],

sums of *weighted moments* of the coalition indicators: for order 2, one matrix product
``Z^T diag(u) Z`` over the ``[2**M, M]`` coalition matrix ``Z``. The cost is
``O(2**M M**k)`` per game, with no coefficient matrix of ``2**M`` rows per feature set. Faith-SHAP
needs only the moments with the Shapley-kernel weights (the right-hand side of its normal
equations); its Gram matrix depends only on the sizes ``|T u T'|`` and is solved once, in float64,
for the given ``M`` and ``k``. That solved map multiplies rounding errors of the moments by at
most its largest absolute row sum: about 20 for ``k = 2``, 100 for ``k = 3`` and 800 for
``k = 4`` (so in float32, Faith-SHAP of order 3 and up is good to about ``1e-5`` relative;
enable ``jax_enable_x64`` for more).

Results are dense symmetric tensors: order ``t`` is ``[M] * t + [...]``, zero wherever two
indices repeat, and ``I[i, j] == I[j, i]``.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_masks, exact_coefficients, shapley_kernels, shapley_weight, static_cache
from ._exact import full_precision
from .._core._validate import integer

ValueFn = Callable[[jax.Array], jax.Array]

INDICES = ("SII", "k-SII", "STII", "FSII", "BII")
"""Interaction indices computed by :func:`exact_interactions`."""

MAX_MOMENT_ELEMENTS = 2**29
"""Largest ``2**M * M**(k - 1)`` working array of the order-``k`` moments (about 2 GiB in float32)."""

_BERNOULLI = (1.0, -0.5, 1.0 / 6.0, 0.0, -1.0 / 30.0, 0.0, 1.0 / 42.0, 0.0, -1.0 / 30.0, 0.0, 5.0 / 66.0)


def check_index(index: str, order: int, n_features: int) -> tuple[str, int]:
    """Validate ``index`` and ``order`` (static); return them normalised."""
    if not isinstance(index, str) or index not in INDICES:
        raise ValueError(f"`index` must be one of {INDICES}; got {index!r}.")
    order = integer(order, "order", least=1, rule="a positive int (2 for pairwise interactions)")
    if order > n_features:
        raise ValueError(f"`order` ({order}) cannot exceed the number of features ({n_features}).")
    if index == "k-SII" and order >= len(_BERNOULLI):
        raise ValueError(f"k-SII is implemented up to order {len(_BERNOULLI) - 1}; got order={order}.")
    return index, order


# --- static weight tables (NumPy, float64) ----------------------------------------------------
def derivative_weights(index: str, n_features: int, t: int, order: int) -> np.ndarray:
    r"""``mu_t(q)``, ``q = 0 .. M - t``: the weight of :math:`\Delta_T v(S)` with ``|S| = q``."""
    m = n_features
    q = np.arange(m - t + 1)
    if index in ("SII", "k-SII"):
        return np.array([shapley_weight(m - t + 1, int(i)) for i in q])
    if index == "BII":
        return np.full(q.shape, 2.0 ** -(m - t))
    if index == "STII":
        if t < order:
            return (q == 0).astype(np.float64)
        return np.array([t * shapley_weight(m, int(i)) for i in q])
    raise ValueError(f"no derivative weights for index {index!r}")


def moment_weights(mu: np.ndarray, n_features: int, t: int) -> np.ndarray:
    """``g_t(s, b)`` of the module docstring, ``[M + 1, t + 1]`` (``s = 0..M``, ``b = 0..t``)."""
    m = n_features
    c = np.zeros((m + 1, t + 1))
    for s in range(m + 1):
        for a in range(t + 1):
            q = s - a
            if 0 <= q <= m - t:
                c[s, a] = (-1.0) ** (t - a) * mu[q]
    g = np.zeros_like(c)
    for b in range(t + 1):
        for i in range(b + 1):
            g[:, b] += (-1.0) ** (b - i) * math.comb(b, i) * c[:, i]
    return g


@static_cache(64)
def faith_solution(n_features: int, order: int) -> tuple[tuple[tuple[int, ...], ...], np.ndarray, np.ndarray]:
    r"""The exact Faith-SHAP map for ``M`` features and order ``k``, in float64.

    Unknowns are the sets ``T`` with ``1 <= |T| <= k`` (lexicographic within each size). The
    Gram matrix of the indicator features ``[T \subseteq S]`` under the Shapley kernel is
    :math:`G_{T T'} = \sum_{s} \mu(s) \binom{M - u}{s - u}` with ``u = |T \cup T'|``. The
    efficiency constraint enters through the KKT system
    ``[[G, 1], [1^T, 0]] [E; lambda] = [b; v(N) - v(empty)]``.

    Returns:
      ``(sets, A, a)`` with ``E = A b + a (v(N) - v(empty))`` where ``b_T = sum_S mu(S) [T <= S]
      (v(S) - v(empty))``.
    """
    m, k = n_features, order
    sets = tuple(c for t in range(1, k + 1) for c in itertools.combinations(range(m), t))
    mu = shapley_kernels(m)
    by_union = np.array(
        [sum(mu[s] * math.comb(m - u, s - u) for s in range(u, m)) for u in range(m + 1)], dtype=np.float64
    )
    n = len(sets)
    bits = np.zeros((n, m), bool)
    for i, c in enumerate(sets):
        bits[i, list(c)] = True
    union = (bits[:, None, :] | bits[None, :, :]).sum(-1)
    kkt = np.zeros((n + 1, n + 1))
    kkt[:n, :n] = by_union[union]
    kkt[:n, n] = kkt[n, :n] = 1.0
    inverse = np.linalg.inv(kkt)
    return sets, inverse[:n, :n], inverse[:n, n]


# --- moments -----------------------------------------------------------------------------------
def weighted_moments(z: jax.Array, u: jax.Array, order: int) -> list[jax.Array]:
    r"""``[m_0, ..., m_k]`` with :math:`m_b[i_1..i_b, w] = \sum_c z_{c i_1} \cdots z_{c i_b} u_{c w}`.

    Args:
      z: ``[C, M]`` coalition indicators (float).
      u: ``[C, W]`` weighted values.
      order: ``k``.

    Returns:
      ``m_b`` of shape ``[M] * b + [W]``, for ``b = 0..k``.
    """
    c, m = z.shape
    out = [u.sum(0)]
    if order == 0:
        return out
    out.append(z.T @ u)
    for b in range(2, order + 1):
        if c * m ** (b - 1) * u.shape[1] > MAX_MOMENT_ELEMENTS:
            raise ValueError(
                f"order-{b} interactions of {m} features need a working array of "
                f"{c * m ** (b - 1) * u.shape[1]:,} elements; use a lower `order` or fewer features."
            )
        inner = u
        for _ in range(b - 1):
            inner = (z[:, :, None] * inner[:, None, :]).reshape(c, -1)
        out.append((z.T @ inner).reshape((m,) * b + (u.shape[1],)))
    return out


def distinct_mask(n_features: int, t: int) -> np.ndarray:
    """``[M] * t`` boolean: True where all ``t`` indices differ."""
    if t == 1:
        return np.ones(n_features, bool)
    grids = np.indices((n_features,) * t)
    keep = np.ones((n_features,) * t, bool)
    for a, b in itertools.combinations(range(t), 2):
        keep &= grids[a] != grids[b]
    return keep


def assemble(moments: list[jax.Array], t: int, col: int, n_features: int) -> jax.Array:
    r"""Order-``t`` tensor :math:`I_T = \sum_{B \subseteq T} m_{|B|}(B)` from the moments' column ``col``."""
    total = None
    for b in range(t + 1):
        mom = moments[b][..., col, :]  # [M]*b + [K]
        for axes in itertools.combinations(range(t), b):
            others = [a for a in range(t) if a not in axes]
            term = jnp.expand_dims(mom, others) if others else mom
            total = term if total is None else total + term
    shape = (n_features,) * t + moments[0].shape[-1:]
    total = jnp.broadcast_to(total, shape)
    keep = jnp.asarray(distinct_mask(n_features, t)).reshape((n_features,) * t + (1,))
    return jnp.where(keep, total, 0.0)


def _derivative_index(index: str, z: jax.Array, size: jax.Array, y: jax.Array, order: int, orders) -> list[jax.Array]:
    """Orders ``orders`` of SII / BII / STII (index ``index`` of top order ``order``), ``[M]*t + [K]``."""
    m = z.shape[1]
    tables = np.stack(
        [
            np.pad(moment_weights(derivative_weights(index, m, t, order), m, t), ((0, 0), (0, order - t)))
            for t in orders
        ],
        axis=1,
    )  # [M + 1, n_orders, order + 1]: g_t(s, b)
    top = max(orders)
    per_b = []
    for b in range(top + 1):
        g = jnp.asarray(tables[:, :, b], y.dtype)[size]  # [C, n_orders]
        u = (g[:, :, None] * y[:, None, :]).reshape(y.shape[0], -1)
        per_b.append(u)
    # one moment pass per b with that b's weights (lower moments are cheap)
    moments = []
    for b in range(top + 1):
        mom = weighted_moments(z, per_b[b], b)[b]
        moments.append(mom.reshape(mom.shape[:-1] + (len(orders), y.shape[1])))
    return [assemble(moments, t, i, m) for i, t in enumerate(orders)]


def _faith(z: jax.Array, size: jax.Array, y: jax.Array, y_full: jax.Array, order: int) -> list[jax.Array]:
    """Faith-SHAP orders ``1..k``, ``[M]*t + [K]``."""
    m = z.shape[1]
    sets, a_mat, a_vec = faith_solution(m, order)
    mu = jnp.asarray(shapley_kernels(m), y.dtype)[size]
    moments = weighted_moments(z, mu[:, None] * y, order)  # m_b [M]*b + [K]
    rhs = jnp.stack([moments[len(s)][s] for s in sets])  # [n_sets, K]
    e = jnp.asarray(a_mat, y.dtype) @ rhs + jnp.asarray(a_vec, y.dtype)[:, None] * y_full[None, :]
    return dense_from_sets(e, sets, m, order)


def dense_from_sets(flat: jax.Array, sets, n_features: int, order: int) -> list[jax.Array]:
    """Scatter per-set values ``[len(sets), K]`` (sets of sizes ``1..k`` in order) into dense
    symmetric tensors ``[M] * t + [K]``, zero where indices repeat."""
    m = n_features
    out = []
    start = 0
    for t in range(1, order + 1):
        combos = [s for s in sets if len(s) == t]
        block = flat[start : start + len(combos)]
        start += len(combos)
        dense = jnp.zeros((m,) * t + flat.shape[1:], flat.dtype)
        for perm in itertools.permutations(range(t)):
            idx = tuple(np.array([c[p] for c in combos]) for p in perm)
            dense = dense.at[idx].set(block)
        out.append(dense)
    return out


def ksii_from_sii(sii: list[jax.Array]) -> list[jax.Array]:
    r"""k-SII of orders ``1..k`` (``k = len(sii)``) from the SII terms of orders ``1..k``
    (``[M] * t + [...]``, symmetric, zero where indices repeat): :math:`\Phi_T = \sum_{j=0}^{k-t}
    B_j \sum_{K \subseteq N \setminus T, |K| = j} I_{T \cup K}` (each ``K`` appears ``j!`` times
    among the ordered indices, hence the ``1 / j!``)."""
    order = len(sii)
    out = []
    for t in range(1, order + 1):
        total = sii[t - 1]
        for j in range(1, order - t + 1):
            if _BERNOULLI[j] == 0.0:
                continue
            summed = sii[t + j - 1].sum(axis=tuple(range(t, t + j))) / math.factorial(j)
            total = total + _BERNOULLI[j] * summed
        out.append(total)
    return out


def _set_partitions(items: list) -> list:
    """Every partition of ``items`` into blocks (lists), blocks ordered by their first item."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for part in _set_partitions(rest):
        out.append([[first]] + part)
        for i in range(len(part)):
            out.append(part[:i] + [[first] + part[i]] + part[i + 1 :])
    return [sorted(p, key=min) for p in out]


def interaction_tensor(terms: list[jax.Array], order: int) -> jax.Array:
    r"""The ``[M] * k + [...]`` tensor of an index's terms of orders ``1..k`` (``k = order``), shap's
    layout generalised: the entry at ``(i_1, ..., i_k)`` is the term of the set
    ``T = {i_1, ..., i_k}`` divided by the number of ``k``-tuples with that set (the surjections of
    ``k`` positions onto ``T``, ``t! S(k, t)``). So summing every entry gives the sum of all terms
    (``v(N) - v(empty)`` for the efficient indices), and for k-SII summing over all axes but the
    first gives the Shapley values (:math:`\phi_i = \sum_{T \ni i} \Phi_T / |T|`). For ``k = 2``
    this is shap's matrix: the order-1 terms on the diagonal, each pair's term split evenly
    between ``[i, j]`` and ``[j, i]``.

    Args:
      terms: order ``t`` as ``[M] * t + [...]`` (symmetric, zero where indices repeat), ``t = 1..k``.
      order: ``k``.
    """
    m = terms[0].shape[0]
    tail = terms[0].shape[1:]
    eye = jnp.eye(m, dtype=terms[0].dtype)
    total = jnp.zeros((m,) * order + tail, terms[0].dtype)
    for part in _set_partitions(list(range(order))):
        t = len(part)
        surjections = sum((-1) ** j * math.comb(t, j) * (t - j) ** order for j in range(t + 1))
        block_of = {pos: b for b, blk in enumerate(part) for pos in blk}
        # term t's axes go to each block's first position; the others repeat their block's index
        x = terms[t - 1].reshape(tuple(m if pos == part[block_of[pos]][0] else 1 for pos in range(order)) + tail)
        for pos in range(order):
            first = part[block_of[pos]][0]
            if pos != first:
                shape = [1] * order
                shape[first] = shape[pos] = m
                x = x * eye.reshape(tuple(shape) + (1,) * len(tail))
        total = total + x / surjections
    return total


@full_precision
def interactions_from_values(v: jax.Array, masks: jax.Array, index: str = "k-SII", order: int = 2) -> list[jax.Array]:
    """The index's terms of orders ``1..k`` from the values ``v [2**M, ...]`` of ``masks = all_masks(M)``.

    The pass over coalition values that :func:`exact_interactions` makes, exposed so that an
    explainer that already holds ``v`` (to compute Shapley values) reuses it.

    Returns:
      A list of ``k`` arrays, order ``t`` of shape ``[M] * t + v.shape[1:]``.
    """
    m = masks.shape[-1]
    index, order = check_index(index, order, m)
    tail = v.shape[1:]
    y = (v - v[0]).reshape(v.shape[0], -1)
    z = masks.astype(y.dtype)
    size = masks.sum(-1)
    if index == "FSII":
        out = _faith(z, size, y, y[-1], order)
    elif index == "k-SII":
        out = ksii_from_sii(_derivative_index("SII", z, size, y, order, list(range(1, order + 1))))
    else:
        out = _derivative_index(index, z, size, y, order, list(range(1, order + 1)))
    return [o.reshape((m,) * (t + 1) + tail) for t, o in enumerate(out)]


def exact_interactions(
    value_fn: ValueFn, n_features: int, index: str = "k-SII", order: int = 2
) -> tuple[list[jax.Array], jax.Array, jax.Array]:
    r"""An interaction index of one game, exactly, from all ``2**M`` coalition values.

    See the module docstring for the definitions (SII, k-SII, STII, FSII, BII) and references.

    Args:
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static).
      index: ``"SII"``, ``"k-SII"``, ``"STII"``, ``"FSII"`` or ``"BII"`` (static).
      order: highest interaction order ``k`` (static). Cost ``O(2**M M**k)``.

    Returns:
      ``(terms, v_empty, v_full)``: ``terms[t - 1]`` is the order-``t`` tensor ``[M] * t + [...]``,
      symmetric and zero where indices repeat (``terms[1][i, j]`` is the pair ``{i, j}``).

    Example::

        terms, v0, v1 = exact_interactions(game, 6, index="k-SII", order=2)
        matrix = interaction_matrix(terms)  # [M, M]: rows sum to the Shapley values
    """
    index, order = check_index(index, order, n_features)
    masks = all_masks(n_features)
    v = value_fn(masks)
    return _from_values(v, masks, index, order), v[0], v[-1]


_from_values = jax.jit(interactions_from_values, static_argnums=(2, 3))


@full_precision
def interaction_matrix(terms: list[jax.Array]) -> jax.Array:
    """The ``[M, M, ...]`` matrix of order-1 and order-2 terms, shap's layout.

    The diagonal holds the order-1 terms and each pair's term is split evenly between
    ``[i, j]`` and ``[j, i]`` (:func:`interaction_tensor` of order 2). For an efficient order-2
    index (k-SII, STII, FSII) the rows then sum to the Shapley values (k-SII: exactly shap's SHAP
    interaction values, Lundberg et al., 2020; STII: shap's ``ExactExplainer`` ``interactions=2``).
    """
    if len(terms) < 2:
        raise ValueError("interaction_matrix needs the order-1 and order-2 terms (compute with order=2).")
    return interaction_tensor(list(terms[:2]), 2)


def banzhaf_values(value_fn: ValueFn, n_features: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Banzhaf values of one game: :math:`\beta_j = 2^{-(M-1)} \sum_{S \subseteq N \setminus \{j\}}
    [v(S \cup \{j\}) - v(S)]` (Banzhaf, 1965), the order-1 Banzhaf interaction index.

    Returns:
      ``(beta [M, ...], v_empty, v_full)``.
    """
    terms, v0, v1 = exact_interactions(value_fn, n_features, "BII", 1)
    return terms[0], v0, v1


@full_precision
def shapley_and_interactions(v: jax.Array, masks: jax.Array, index: str, order: int = 2) -> tuple[jax.Array, jax.Array]:
    """Shapley values ``[M, ...]`` and the order-``k`` interaction tensor ``[M] * k + [...]``
    (:func:`interaction_tensor`) from one set of values."""
    coef = exact_coefficients(masks, dtype=v.dtype)
    phi = jnp.tensordot(coef, v - v[0], axes=1)
    m = masks.shape[-1]
    if m == 1:  # one feature: every index's only term is v(N) - v(empty), at the tuple (0, ..., 0)
        return phi, phi.reshape((1,) * order + phi.shape[1:])
    if m < order:
        raise ValueError(f"`interactions` asks for order {order}, but the model has {m} features; pass at most {m}.")
    return phi, interaction_tensor(interactions_from_values(v, masks, index, order), order)
