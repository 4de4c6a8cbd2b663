r"""Interventional TreeSHAP: each leaf's pair game in closed form, against chunks of background rows,
and explaining a transformed output (probability, loss) per background row.

With background row ``b`` the value of a coalition ``S`` is the tree's output at the hybrid row
``(x_S, b_{-S})``: a leaf's product game (:mod:`._quadrature`) with ``alpha = a`` (slots the
explained row follows) and ``beta = c`` (slots ``b`` follows). Its factors
:math:`f_u(p) = c_u + p (a_u - c_u)` are ``p`` on the slots ``A`` only ``x`` follows, ``1 - p`` on
the slots ``B`` only ``b`` follows, ``1`` on the shared ones and ``0`` where neither does (the leaf
is unreachable). So every term is a moment: with :math:`L_t` the index's functional,
``n_A = |A|``, ``n_B = |B|``, for a set ``T`` of ``t_A`` slots of ``A`` and ``t_B`` of ``B``,

.. math::

    I_T = (-1)^{t_B} L_t\big(p^{n_A - t_A} (1 - p)^{n_B - t_B}\big),

a table lookup (:func:`jaxshap._tree._quadrature.moments`). The Shapley values (``t = 1``) are
``(n_A - 1)! n_B! / (n_A + n_B)!`` on ``A`` and ``-n_A! (n_B - 1)! / (n_A + n_B)!`` on ``B``
(Lundberg et al. 2020; Janzing et al. 2020). Averaged over the background rows this is exactly
``ExactExplainer`` with the ``Independent`` masker.

For a block of paths, a chunk of rows and a chunk of background rows the counts come from one
batched product of the follow indicators (:math:`n_A = |a| - a \cdot c`, :math:`n_B = |c| - a \cdot c`,
reached iff :math:`U - |a| - |c| + a \cdot c = 0`), and a reached background row has ``B`` equal to
the slots ``x`` does not follow, so each slot's sum over background rows is a second batched
product. Nothing of size rows x background x leaves is held beyond one such chunk.

For short paths the values depend on the background only through the histogram of its follow
patterns, and are tabulated once per pattern of the explained row (:func:`tables_host`). With
per-row weights (a transformed output, below) the histogram is the explained row's own, and the
values are its contraction with the pattern game's table (:func:`pattern_values`).

Transformed outputs (:func:`rescale`, :func:`rescale_matrix`). For ``model_output`` other than the raw margin, the output is ``g(f(x))`` with ``f`` the
ensemble's raw output (margin) and ``g`` the output transform (sigmoid, softmax) or the loss given the
label ``y``. As in shap's interventional TreeSHAP (Lundberg et al. 2020, Methods, "Explaining
transformed outputs"), each background row ``b`` gives the raw Shapley values
``phi^{(b)}(x)`` of the pair game ``S -> f(x_S, b_{-S})`` (exact, leaf by leaf, see
above), whose sum is ``f(x) - f(b)``; they are rescaled per output ``k`` by

.. math::

    r_k(x, b) = \frac{g_k(f(x)) - g_k(f(b))}{f_k(x) - f_k(b)}

(the derivative ``g_k'`` when the two margins coincide) and averaged over ``b``. So each pair
sums to ``g_k(f(x)) - g_k(f(b))`` and the values sum to ``g_k(f(x)) - mean_b g_k(f(b))``:
efficiency holds in the transformed output's units, with base value ``mean_b g_k(f(b))``.

The softmax couples the classes: probability ``k`` changes when any class's margin does. Its
change between ``f(b)`` and ``f(x)`` is first shared among the classes' margins by the Shapley
values ``psi_{kj}`` of the ``K``-player game ``T -> softmax_k(m_T)``, where ``m_T`` takes the
margins of the classes in ``T`` from ``f(x)`` and the others from ``f(b)`` (so
``sum_j psi_{kj} = g_k(f(x)) - g_k(f(b))`` exactly); then class ``j``'s raw pair values are
rescaled by ``r_{kj} = psi_{kj} / (f_j(x) - f_j(b))``. For one output this is the rescaling
above; every pair still sums to the change in ``g_k``.

Transforms (``y`` the label of the explained row):

* ``"sigmoid"``: ``sigmoid(m)``; ``"softmax"``: ``softmax(m)_k`` (the margins of all classes
  enter; the rescaling is per class);
* ``"logistic_nlogloss"``: ``-(y log p + (1 - y) log(1 - p))`` with ``p = sigmoid(m)``;
* ``"squared_loss"``: ``(m - y)^2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._combinatorics import all_codes_bits, shapley_weights, subset_sums
from ._quadrature import moments, product_terms


def shapley_tables(width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(wa, wb)`` ``[W + 1, W + 1]``: ``wa[a, b] = (a-1)! b! / (a+b)!`` (0 at ``a = 0``) and
    ``wb[a, b] = a! (b-1)! / (a+b)!`` (0 at ``b = 0``), float64."""
    mom = moments("SII", 1, width)[0]
    wa, wb = np.zeros_like(mom), np.zeros_like(mom)
    wa[1:, :] = mom[:-1, :]
    wb[:, 1:] = mom[:, :-1]
    return wa, wb


def pair_block(fx: jax.Array, fb: jax.Array, wa: jax.Array, wb: jax.Array, weight: jax.Array) -> jax.Array:
    """``[P, U, r, K]``: a block of paths' Shapley values for a chunk of rows against a chunk of
    background rows, summed over the background rows with weights (unit leaf values; traced).

    Args:
      fx: ``[P, U, r]`` booleans, the explained rows follow the slot.
      fb: ``[P, U, b]`` booleans, the background rows follow the slot.
      wa, wb: :func:`shapley_tables`.
      weight: ``[P or 1, r, b, K]`` the weight of each (row, background row) pair, per output
        (``1 / B``, or a transformed output's rescaling).
    """
    dtype = weight.dtype
    a, c = fx.astype(dtype), fb.astype(dtype)
    u = a.shape[1]
    g = jnp.einsum("pur,pub->prb", a, c)
    na, nc = jnp.sum(a, axis=1)[:, :, None], jnp.sum(c, axis=1)[:, None, :]
    reach = (u - na - nc + g) == 0
    n_a = (na - g).astype(jnp.int32)
    n_b = (nc - g).astype(jnp.int32)
    cell = n_a * wa.shape[1] + n_b
    s_a = jnp.where(reach, jnp.take(wa.reshape(-1), cell), 0.0)[..., None] * weight  # [P, r, b, K]
    s_b = jnp.where(reach, jnp.take(wb.reshape(-1), cell), 0.0)[..., None] * weight
    only_x = jnp.sum(s_a, axis=2)[:, None] - jnp.einsum("prbk,pub->purk", s_a, c)  # sum over b not following u
    return jnp.where(fx[..., None], only_x, -jnp.sum(s_b, axis=2)[:, None])


def pair_terms(fx: jax.Array, fb: jax.Array, nodes: np.ndarray, weights: np.ndarray, orders, weight: jax.Array,
               interior: int | None = None) -> dict:
    """``{t: [P, U**t, r]}``: the order-``t`` terms of an index (a :func:`jaxshap._tree._quadrature.rule`)
    for a block of paths, summed over a chunk of background rows with weights ``[r, b]`` (unit
    leaf values; traced)."""
    a = fx.astype(weight.dtype)[..., None]  # [P, U, r, 1]
    c = fb.astype(weight.dtype)[:, :, None, :]  # [P, U, 1, b]
    terms = product_terms(a, c, nodes, weights, orders, interior)
    return {t: jnp.einsum("psrb,rb->psr", v, weight) for t, v in terms.items()}


def pattern_values(n_slots: int) -> np.ndarray:
    r"""``[2**U, 2**U, U]``: the pair game's Shapley values (unit leaf value) for each pattern ``a``
    of slots the explained row follows and ``c`` of slots the background row follows (NumPy,
    float64).

    With ``A = a & ~c`` and ``B = c & ~a``: ``w_a(|A|, |B|)`` on the slots of ``A``,
    ``-w_b(|A|, |B|)`` on those of ``B`` (:func:`shapley_tables`), 0 on the shared slots, and 0
    everywhere when some slot is followed by neither (the leaf is unreachable). It depends on
    ``U`` alone, not on the paths: a weighted histogram ``h`` of the background's patterns gives
    a row's values as ``sum_c h[c] S[a, c, u]``.
    """
    bits = all_codes_bits(n_slots)  # [2**U, U]
    only_x = bits[:, None, :] & ~bits[None, :, :]  # [a, c, U]
    only_b = ~bits[:, None, :] & bits[None, :, :]
    reach = np.all(bits[:, None, :] | bits[None, :, :], axis=-1, keepdims=True)
    n_a, n_b = only_x.sum(-1), only_b.sum(-1)
    wa, wb = shapley_tables(n_slots)
    values = np.where(only_x, wa[n_a, n_b][..., None], 0.0) - np.where(only_b, wb[n_a, n_b][..., None], 0.0)
    return np.where(reach, values, 0.0)


def tables_host(hist: np.ndarray, n_slots: int, max_chunk_bytes: int = 4 * 2**20) -> np.ndarray:
    r"""``[P, 2**U, U]``: for each path and pattern ``a`` of the explained row (the slots it
    follows), the (weighted) mean over background rows of the Shapley values (NumPy, float64).

    Args:
      hist: ``[P, 2**U]`` the share of the background rows that follow each pattern of each
        path's slots (each row sums to 1).
      n_slots: ``U``.

    Only background patterns ``b`` with ``a | b`` full reach the leaf, i.e. ``b = ~a | c`` with
    ``c subseteq a``; then ``A = a & ~b`` has ``|a| - |c|`` slots and ``B = ~a`` has ``U - |a|``,
    so the values depend on ``b`` only through ``|b|`` (and, for ``u in a``, whether ``u in b``).
    With the background's pattern shares ``h`` and the ranked superset sums
    ``Z_j[x] = sum_{b supseteq x, |b| = j} h[b]`` (one zeta transform per rank ``j``):

    .. math::

        T[a, u] = -\sum_k w_b(|a| - k, U - |a|)\, Z_{U-|a|+k}[\bar a] \quad (u \notin a), \qquad
        T[a, u] = \sum_k w_a(|a| - k, U - |a|)\,
                  \big(Z_{U-|a|+k}[\bar a] - Z_{U-|a|+k}[\bar a \cup \{u\}]\big) \quad (u \in a),

    in ``O(U^2 2^U)`` per path, whatever the number of background rows.
    """
    p = hist.shape[0]
    u = n_slots
    size = 2**u
    wa, wb = shapley_tables(u)
    wb = -wb
    codes = np.arange(size)
    in_a = all_codes_bits(u)  # [2**U, U]
    pc = in_a.sum(1)
    nota = (size - 1) ^ codes
    bits = 1 << np.arange(u)
    out = np.empty((p, size, u))
    chunk = max(1, max_chunk_bytes // (8 * (u + 1) * size * (u + 2)))
    for start in range(0, p, chunk):
        h = hist[start : start + chunk]  # [c, 2**U]
        c = h.shape[0]
        z = np.zeros((c, u + 1, size))
        z[:, pc, codes] = h
        z = subset_sums(z, superset=True)
        z = z.reshape(c, (u + 1) * size)
        s_a = np.zeros((c, size))
        s_b = np.zeros((c, size))
        d = np.zeros((c, size, u))
        for k in range(u + 1):
            ok = k <= pc
            j = np.where(ok, u - pc + k, 0) * size
            wa_k = np.where(ok, wa[np.clip(pc - k, 0, u), u - pc], 0.0)
            wb_k = np.where(ok, wb[np.clip(pc - k, 0, u), u - pc], 0.0)
            zk = np.take(z, j + nota, axis=1)  # [c, 2**U]
            s_a += zk * wa_k
            s_b += zk * wb_k
            d += np.take(z, (j + nota)[:, None] | bits[None, :], axis=1) * wa_k[:, None]
        out[start : start + chunk] = np.where(in_a[None], s_a[:, :, None] - d, s_b[:, :, None])
    return out


TRANSFORMS = ("identity", "sigmoid", "softmax", "logistic_nlogloss", "squared_loss")


def apply(transform: str, m: jax.Array, y: jax.Array) -> jax.Array:
    """``g(m)`` for margins ``m`` ``[..., K]`` and the label ``y`` (a scalar)."""
    if transform == "identity":
        return m
    if transform == "sigmoid":
        return jax.nn.sigmoid(m)
    if transform == "softmax":
        return jax.nn.softmax(m, axis=-1)
    if transform == "logistic_nlogloss":
        # -log sigmoid(m) = softplus(-m), -log(1 - sigmoid(m)) = softplus(m)
        return y * jax.nn.softplus(-m) + (1.0 - y) * jax.nn.softplus(m)
    if transform == "squared_loss":
        return (m - y) ** 2
    raise ValueError(f"Unknown transform {transform!r}.")  # pragma: no cover


def derivative(transform: str, m: jax.Array, y: jax.Array) -> jax.Array:
    """``d g_k / d m_k`` (the limit of the rescaling when the two margins coincide)."""
    if transform == "identity":
        return jnp.ones_like(m)
    if transform == "sigmoid":
        p = jax.nn.sigmoid(m)
        return p * (1.0 - p)
    if transform == "softmax":
        p = jax.nn.softmax(m, axis=-1)
        return p * (1.0 - p)
    if transform == "logistic_nlogloss":
        return jax.nn.sigmoid(m) - y
    if transform == "squared_loss":
        return 2.0 * (m - y)
    raise ValueError(f"Unknown transform {transform!r}.")  # pragma: no cover


def _class_game_tables(k: int):
    """For the ``K``-class Shapley values: per class ``j``, the coalitions ``T`` without ``j``,
    ``T | {j}``, and the Shapley weights ``|T|! (K-|T|-1)! / K!``; and all ``2**K`` coalition masks."""
    codes = np.arange(2**k)
    masks = all_codes_bits(k)
    without = np.stack([codes[~masks[:, j]] for j in range(k)])  # [K, 2**(K-1)]
    with_ = without | (1 << np.arange(k))[:, None]
    return masks, without, with_, shapley_weights(k)[masks.sum(1)[without]]


MAX_SOFTMAX_CLASSES = 12


def rescale_matrix(transform: str, fx: jax.Array, fb: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``R`` ``[B, K, K]`` and ``g(f(b))`` ``[B, K]``: output ``k``'s value is
    ``sum_j R[b, k, j]`` times class ``j``'s raw pair values (diagonal except for softmax)."""
    if transform != "softmax":
        r, gb = rescale(transform, fx, fb, y)
        return jax.vmap(jnp.diag)(r), gb
    k = fx.shape[-1]
    masks, without, with_, weight = _class_game_tables(k)
    m = jnp.where(jnp.asarray(masks)[None], fx[None, None, :], fb[:, None, :])  # [B, 2**K, K]
    v = jax.nn.softmax(m, axis=-1)  # [B, 2**K, K(k)]
    psi = jnp.einsum("bjtk,jt->bkj", v[:, with_] - v[:, without], jnp.asarray(weight, fx.dtype))
    d = fx[None, :] - fb  # [B, K(j)]
    tiny = jnp.abs(d) <= 1e-6 * (1.0 + jnp.abs(fx[None, :]))
    p = jax.nn.softmax(fx)
    grad = p[:, None] * (jnp.eye(k, dtype=fx.dtype) - p[None, :])  # d p_k / d m_j at f(x)
    r = jnp.where(tiny[:, None, :], grad[None], psi / jnp.where(tiny, 1.0, d)[:, None, :])
    return r, jax.nn.softmax(fb, axis=-1)


def rescale(transform: str, fx: jax.Array, fb: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per background row and output, the factor ``r_k(x, b)`` ``[B, K]`` and ``g_k(f(b))``.

    Args:
      fx: ``[K]`` the explained row's margins.
      fb: ``[B, K]`` the background rows' margins.
      y: the explained row's label (ignored by sigmoid and softmax).
    """
    gx = apply(transform, fx, y)
    gb = apply(transform, fb, y)
    d = fx[None, :] - fb
    tiny = jnp.abs(d) <= 1e-6 * (1.0 + jnp.abs(fx[None, :]))
    ratio = (gx[None, :] - gb) / jnp.where(tiny, 1.0, d)
    return jnp.where(tiny, derivative(transform, fx, y)[None, :], ratio), gb
