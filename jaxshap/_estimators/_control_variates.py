r"""Odd-order Fourier (Walsh) control variates for KernelSHAP, as features or as a kernel.

With :math:`u = 2 z - 1 \in \{-1, 1\}^M` the signed coalition indicator, a game is a sum of Walsh
terms :math:`u_T = \prod_{j \in T} u_j`. An even-order term has no Shapley value; an odd one of
order :math:`k` gives :math:`2 / k` to each member of :math:`T`. Complementary pairs cancel the
even part of the game and the efficiency-constrained regression fits the first-order part
exactly, so the sampling error of paired KernelSHAP comes from the odd terms of order 3, 5, ...

Each such term enters the regression through its *residualised* form

.. math::

    r_T(S) = u_T(S) - \frac1k \sum_{j \in T} u_j(S) ,

the part of :math:`u_T` that its own Shapley values leave unexplained (zero at the empty and full
coalitions, and kernel-orthogonal to the additive fit over all coalitions, so its coefficient
does not move the estimand; over a sample it is a control variate).

There are :math:`\binom Mk` of them. Ridge regression on all of them with one penalty
:math:`\lambda_k` per order is the same as generalised least squares whose extra covariance is
the kernel :math:`K(S, S') = \sum_k \lambda_k^{-1} \sum_{|T| = k} r_T(S) r_T(S')` (a Gaussian
prior on the coefficients). For sign vectors that kernel has a closed form in three numbers, the
inner product :math:`p = u \cdot u'` and the sums :math:`s = \sum u`, :math:`s' = \sum u'`, so
it costs :math:`O(M)` per pair of coalitions whatever the order (:func:`odd_kernel`). This is the
kernel form of the polynomial (k-additive) view of KernelSHAP (Pelegrina et al., 2023; Fumagalli
et al., 2025, "PolySHAP") restricted to odd orders, which paired sampling makes sufficient
(the point of OddSHAP), used as a regression adjustment (Witter et al., 2025, "Regression-adjusted
Monte Carlo estimators for Shapley values and probabilistic values").
"""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np

from ._exact import full_precision


@full_precision
def walsh_controls(masks, order: int, dtype):
    r"""The residualised Walsh terms :math:`r_T` of one odd ``order``, ``[C, C(M, order)]`` (explicit).

    Used for small ``M`` (the explicit columns are then cheaper than the kernel) and by the tests.
    """
    m = masks.shape[-1]
    sets = np.array(list(itertools.combinations(range(m), order)), dtype=np.int32).reshape(-1, order)
    u = 2.0 * jnp.asarray(masks).astype(dtype) - 1.0
    cols = u[:, sets]  # [C, T, k]
    return jnp.prod(cols, axis=-1) - cols.sum(-1) / order


def _esym_polynomial(n: int, k: int) -> np.ndarray:
    r"""Coefficients ``c [k + 1]`` (lowest first) of :math:`e_k` of ``n`` signs as a polynomial of their sum ``t``.

    Newton's identities with the power sums of signs, :math:`p_i = t` for odd ``i`` and ``n`` for
    even ``i``, on coefficient vectors (exact in float64 for the small orders used here).
    """
    e = [np.array([1.0])]
    for j in range(1, k + 1):
        acc = np.zeros(j + 1)
        for i in range(1, j + 1):
            prev = e[j - i]
            term = np.concatenate([[0.0], prev]) if i % 2 else float(n) * prev  # times t, or times n
            acc[: len(term)] += (-1) ** (i - 1) * term
        e.append(acc / j)
    return e[k]


def _esym(t, n: int, k: int):
    r"""Elementary symmetric polynomial :math:`e_k` of ``n`` signs summing to ``t`` (elementwise):
    :func:`_esym_polynomial` evaluated by Horner's rule."""
    coef = _esym_polynomial(n, k)
    out = jnp.full_like(t, coef[k])
    for c in coef[k - 1 :: -1]:
        out = out * t + c
    return out


@full_precision
def odd_kernel(ua, ub, order: int):
    r"""``sum_{|T| = order} r_T(a) r_T(b)`` for sign matrices ``ua [A, M]``, ``ub [B, M]``: ``[A, B]``.

    With :math:`p = u_a \cdot u_b`, :math:`s_a, s_b` the row sums and :math:`F(t)` the elementary
    symmetric polynomial :math:`e_{k-1}` of ``M - 1`` signs summing to ``t``:

    .. math::

        \sum_T u_T(a) u_T(b) = e_k(u_a \circ u_b), \qquad
        \sum_T u_T(a) \sum_{j \in T} u_j(b) = \tfrac{s_b + p}2 F(s_a - 1) - \tfrac{s_b - p}2 F(s_a + 1),

        \sum_T \sum_{i \in T} u_i(a) \sum_{j \in T} u_j(b) = \tbinom{M-1}{k-1} p + \tbinom{M-2}{k-2} (s_a s_b - p),

    and :math:`e_k(u_a \circ u_b)` is a polynomial of degree ``k`` in ``p`` alone (:func:`_esym_polynomial`).
    Collected, the kernel is that polynomial with a linear coefficient shifted per row and per
    column, plus a rank-four outer product of the rows' and columns' terms, so it costs one
    matrix product for ``p``, ``k`` multiply-adds per entry and one small matrix product.
    """
    m, k = ua.shape[-1], order
    ua, ub = jnp.asarray(ua), jnp.asarray(ub)
    p = ua @ ub.T
    sa, sb = ua.sum(-1), ub.sum(-1)
    fa_lo, fa_hi = _esym(sa - 1.0, m - 1, k - 1), _esym(sa + 1.0, m - 1, k - 1)  # [A]
    fb_lo, fb_hi = _esym(sb - 1.0, m - 1, k - 1), _esym(sb + 1.0, m - 1, k - 1)  # [B]
    c1, c2 = math.comb(m - 1, k - 1), math.comb(m - 2, k - 2)
    coef = _esym_polynomial(m, k)
    # K = e_k(p) - cross / k + linear / k^2, with
    #   cross = (s_b (F_a^- - F_a^+) + s_a (F_b^- - F_b^+)) / 2 + p (F_a^- + F_a^+ + F_b^- + F_b^+) / 2
    #   linear = (c1 - c2) p + c2 s_a s_b
    lin_a = coef[1] + (c1 - c2) / k**2 - (fa_lo + fa_hi) / (2 * k)  # the linear coefficient: lin_a + lin_b
    lin_b = -(fb_lo + fb_hi) / (2 * k)
    rest_a = jnp.stack([jnp.ones_like(sa), sa, fa_lo - fa_hi, sa], axis=-1)  # [A, 4]
    rest_b = jnp.stack([jnp.full_like(sb, coef[0]), c2 / k**2 * sb, -sb / (2 * k), -(fb_lo - fb_hi) / (2 * k)], axis=-1)
    # Horner in p for the degrees of 2 and more; then the per-row and per-column linear coefficient
    inner = coef[k] * p
    for c in coef[k - 1 : 1 : -1]:
        inner = (inner + c) * p
    return (inner + lin_a[:, None] + lin_b[None, :]) * p + rest_a @ rest_b.T


@full_precision
def weighted_triple_kernel(ua, ub, scales):
    r"""``sum_{|T| = 3} a_T r_T(a) r_T(b)`` with product weights :math:`a_T = \prod_{j \in T} a_j`: ``[A, B]``.

    The third-order :func:`odd_kernel` with a weight per feature (``scales [M]``, ``a_j >= 0``);
    all ones gives :func:`odd_kernel` of order 3. With :math:`w = a \circ u_a \circ u_b`, power
    sums :math:`P_1 = \sum_j a_j u_{aj} u_{bj}`, :math:`S_2 = \sum_j a_j^2`,
    :math:`P_3 = \sum_j a_j^3 u_{aj} u_{bj}`, and :math:`e_k(x)` the elementary symmetric
    polynomials of the row :math:`x = a \circ u_a`:

    .. math::

        \sum_T a_T u_T(a) u_T(b) = e_3(w) = \tfrac16 (P_1^3 - 3 P_1 S_2 + 2 P_3),

        \sum_T a_T u_T(a) \sum_{j \in T} u_j(b) = e_2(x) P_1 - e_1(x) \textstyle\sum_j a_j^2 u_{bj} + P_3,

        \sum_T a_T \sum_{i \in T} u_i(a) \sum_{j \in T} u_j(b) = u_a^\top Q u_b, \quad
        Q_{ij} = a_i a_j (E_1 - a_i - a_j) \ (i \ne j), \quad Q_{ii} = a_i (E_2 - a_i E_1 + a_i^2),

    (Newton's identities, with :math:`u^2 = 1`; :math:`E_1, E_2` the elementary symmetric
    polynomials of ``a``), collected as for :func:`odd_kernel`: three ``[A, M] x [M, B]``
    products whatever ``M``.
    """
    ua, ub = jnp.asarray(ua), jnp.asarray(ub)
    a = jnp.asarray(scales).astype(ua.dtype)
    a2 = a * a
    p1 = (ua * a) @ ub.T
    p3 = (ua * (a2 * a)) @ ub.T
    s2 = a2.sum()
    e1_a, e1_b = ua @ a, ub @ a
    q_a, q_b = ua @ a2, ub @ a2
    e2_a, e2_b = (e1_a * e1_a - s2) / 2, (e1_b * e1_b - s2) / 2
    cubic = (p1 * p1 * p1 - 3.0 * s2 * p1 + 2.0 * p3) / 6.0
    # both cross terms: sum_T a_T u_T(a) sum_{j in T} u_j(b), and the same with a and b swapped
    cross = (e2_a[:, None] + e2_b[None, :]) * p1 - e1_a[:, None] * q_b[None, :] - q_a[:, None] * e1_b[None, :] + 2.0 * p3
    total, pairs = a.sum(), (a.sum() ** 2 - s2) / 2
    q = a[:, None] * a[None, :] * (total - a[:, None] - a[None, :])
    eye = jnp.eye(a.shape[0], dtype=ua.dtype)
    q = q * (1.0 - eye) + eye * (a * (pairs - a * total + a2))[:, None]
    return cubic - cross / 3.0 + ((ua @ q) @ ub.T) / 9.0


def triple_mass(scales):
    r""":math:`\sum_{|T| = 3} \prod_{j \in T} a_j = e_3(a)`, the weights' total (``C(M, 3)`` for ones)."""
    s1, s2, s3 = scales.sum(), (scales * scales).sum(), (scales * scales * scales).sum()
    return (s1 * s1 * s1 - 3.0 * s1 * s2 + 2.0 * s3) / 6.0
