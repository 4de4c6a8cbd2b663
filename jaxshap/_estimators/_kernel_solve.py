r"""The KernelSHAP solve as a linear operator of the coalition values, built once per design.

The constrained Shapley regression (see :func:`jaxshap.estimators.kernel_solve`) and its
control variates depend on the coalition values only through the right-hand side: for fixed
coalitions and weights the estimate is :math:`\hat\phi = \Delta / M + G r` with ``G [M, C]``
fixed and ``r`` the centred values of one row. :func:`kernel_operator` factorises the design once
(its cost does not depend on the rows); :func:`apply_operator` then costs two matrix products
per row. When the explainer shares one draw of coalitions among all rows (the default) every
row reuses the same operator.

**Standard error.** The estimator is linear in the values, so its error is :math:`G e` with
``e`` the residual of the fit; each coalition contributes :math:`\psi_S = G_{:, S}\, e_S` and the
variance is the stratified design variance of the sum of the :math:`\psi` over the sampling units
of the plan (complementary pairs). This is the sandwich (linearisation) variance of the joint
regression, first-order and control coefficients together. Fitted residuals are shrunk by the
fit, badly so when the controls' effective number of parameters approaches the number of
sampled pairs, so each sampling unit's residuals are replaced by its leave-one-unit-out
residuals, :math:`\tilde e_u = (I - A_{uu})^{-1} e_u` with :math:`A` the hat matrix of the whole
(ridge) fit; then :math:`G_{:, u} \tilde e_u` is exactly the change of the estimate when the unit is
left out, and the variance is the (stratified) jackknife variance (the unit-level HC3 correction
of MacKinnon & White, 1985; Efron & Stein, 1981).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, cho_solve, solve_triangular

from ._control_variates import odd_kernel, walsh_controls

SMALL_RIDGE = 1e-3
"""Ridge (relative to the mean curvature) of plans whose budget does not identify the regression:
it pulls the estimate toward the equal split ``Delta / M`` in the directions the sample misses."""

MIN_PIVOT = 1e-4
"""Floor on the determinant of a unit's block of ``I - A`` (a unit the fit interpolates exactly
would otherwise give an unbounded leave-one-out residual)."""


class KernelOperator(NamedTuple):
    """The solve of one design (a pytree of arrays).

    Attributes:
      phi: ``[M, C]`` ``G``: the first-order estimate is ``Delta / M + G r``.
      design: ``[C, M]`` the projected indicators ``P z`` (the residual without controls is ``r - D G r``).
      resid: ``[C, C]`` the residual operator with controls, or ``None`` without them.
      jack: ``[C, 2]`` leave-one-unit-out residuals are ``jack[:, 0] e + jack[:, 1] e[partner]``.
      partner: ``[C]`` the other coalition of the coalition's sampling unit (itself for singles).
      frac: ``[C]`` ``|S| / M``.
    """

    phi: jax.Array
    design: jax.Array
    resid: jax.Array | None
    jack: jax.Array
    partner: jax.Array
    frac: jax.Array


def _safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite gradient at 0 (enumerated estimates have zero variance)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _jackknife(block, partner: np.ndarray) -> jax.Array:
    """``[C, 2]`` coefficients of the leave-one-unit-out residuals from ``block(i, j) = (I - A)_{ij}``."""
    i = np.arange(len(partner))
    a, b, c, d = block(i, i), block(i, partner), block(partner, i), block(partner, partner)
    single = jnp.asarray(partner == i)
    det = jnp.where(single, a, a * d - b * c)
    det = jnp.maximum(det, MIN_PIVOT)
    return jnp.stack([jnp.where(single, 1.0, d) / det, jnp.where(single, 0.0, -b) / det], axis=-1)


def kernel_operator(
    masks: jax.Array,
    weights: jax.Array,
    controls: tuple[tuple[int, float], ...] = (),
    *,
    dtype=jnp.float32,
    form: str = "auto",
    ridge: float = 0.0,
    partner: np.ndarray | None = None,
) -> KernelOperator:
    r"""Factorise the constrained, kernel-weighted regression of one set of coalitions.

    Without controls, with ``D = Z P`` (``P = I - 1 1^T / M``) and ``W`` the normalised weights,
    ``G = (D^T W D + c 1 1^T)^{-1} D^T W`` (the ``1 1^T`` term only fixes the null direction).

    With controls ``((k, rho_k), ...)``, every residualised Walsh term of order ``k``
    (:mod:`._control_variates`) joins the regression with a ridge penalty
    ``lambda_k = rho_k * tr(D^T W D) / M`` on its coefficient (``rho`` relative to the mean
    curvature of the first-order block). Two equal forms: ``"primal"`` adds the
    ``C(M, k)`` columns explicitly (cheap while they are fewer than the coalitions);
    ``"dual"`` profiles them out as generalised least squares with covariance
    ``W^{-1} + sum_k K_k / lambda_k`` (:func:`._control_variates.odd_kernel`), a ``C x C``
    factorisation whatever ``M``. ``"auto"`` picks the cheaper.

    Args:
      masks: ``[C, M]`` boolean coalitions.
      weights: ``[C]`` positive regression weights (rescaled to sum to one).
      controls: ``((order, rho), ...)`` odd orders of at least 3 with their relative ridge.
      dtype: floating dtype of the operator.
      form: ``"auto"``, ``"primal"`` or ``"dual"``.
      ridge: a ridge on the first-order block, relative to its mean curvature (0 unless the
        budget is too small to identify the regression; see :data:`SMALL_RIDGE`).
      partner: ``[C]`` static: the other coalition of each coalition's sampling unit, itself for
        singles (:func:`jaxshap.coalitions.unit_partners`); by default every coalition is a unit.
    """
    m = masks.shape[-1]
    c = masks.shape[0]
    partner = np.arange(c) if partner is None else np.asarray(partner)
    z = masks.astype(dtype)
    w = weights.astype(dtype)
    w = w / w.sum()
    frac = z.mean(-1)
    design = z - frac[:, None]  # z P
    curvature = jnp.einsum("c,cm,cm->", w, design, design)  # tr(D^T W D)
    null = curvature / (m * (m - 1))  # fixes the null direction 1
    eye_ridge = ridge * curvature / m * jnp.eye(m, dtype=dtype)
    controls = tuple((k, rho) for k, rho in controls if 3 <= k <= m)
    if not controls:
        h = (design * w[:, None]).T @ design + null + eye_ridge
        inverse = cho_solve(cho_factor(h, lower=True), jnp.eye(m, dtype=dtype))
        g = inverse @ (design * w[:, None]).T  # [M, C]
        block = lambda i, j: (i == j).astype(dtype) - jnp.einsum("cm,mc->c", design[i], g[:, j])
        return KernelOperator(g, design, None, _jackknife(block, partner), jnp.asarray(partner), frac)
    lambdas = [rho * curvature / m for _, rho in controls]
    n_cols = sum(_n_cols(m, k) for k, _ in controls)
    if form == "auto":
        form = "primal" if m + n_cols <= c else "dual"
    if form == "primal":
        cols = [walsh_controls(masks, k, dtype) for k, _ in controls]
        x = jnp.concatenate([design] + cols, axis=1)
        pen = jnp.concatenate([jnp.zeros(m, dtype)] + [jnp.full(col.shape[1], lam, dtype) for col, lam in zip(cols, lambdas)])
        h = (x * w[:, None]).T @ x + jnp.diag(pen)
        h = h.at[:m, :m].add(null + eye_ridge)
        full = cho_solve(cho_factor(h, lower=True), (x * w[:, None]).T)  # [p, C]
        resid = jnp.eye(c, dtype=dtype) - x @ full  # I - hat matrix
        block = lambda i, j: resid[i, j]
        return KernelOperator(full[:m], design, resid, _jackknife(block, partner), jnp.asarray(partner), frac)
    if form != "dual":
        raise ValueError(f"`form` must be 'auto', 'primal' or 'dual'; got {form!r}.")
    u = 2.0 * z - 1.0
    ws = jnp.sqrt(w)
    kern = sum(odd_kernel(u, u, k) / lam for (k, _), lam in zip(controls, lambdas))
    b = jnp.eye(c, dtype=dtype) + ws[:, None] * kern * ws[None, :]
    low = jnp.linalg.cholesky(b)
    dt = solve_triangular(low, ws[:, None] * design, lower=True)  # L^{-1} W^{1/2} D
    zz = solve_triangular(low.T, dt, lower=False)  # B^{-1} W^{1/2} D
    h = dt.T @ dt + null + eye_ridge
    inverse = cho_solve(cho_factor(h, lower=True), jnp.eye(m, dtype=dtype))
    g = inverse @ (zz * ws[:, None]).T  # [M, C]
    binv = cho_solve((low, True), jnp.eye(c, dtype=dtype))
    # e = W^{-1/2} B^{-1} W^{1/2} (r - D G r)
    resid = (binv * ws[None, :]) / ws[:, None] - (zz / ws[:, None]) @ g
    block = lambda i, j: resid[i, j]
    return KernelOperator(g, design, resid, _jackknife(block, partner), jnp.asarray(partner), frac)


def _n_cols(m: int, k: int) -> int:
    return math.comb(m, k)


def apply_operator(op: KernelOperator, plan, values, v_empty, v_full):
    """Estimate and standard error of one game from its coalition values (``[C, K]``).

    Args:
      op: the design's :class:`KernelOperator`.
      plan: the :class:`jaxshap.coalitions.KernelPlan` the coalitions were drawn with (its
        sampling units and strata give the variance).
      values: ``[C, K]`` values of the coalitions; ``v_empty``, ``v_full``: ``[K]``.

    Returns:
      ``(phi, stderr)``, both ``[M, K]``.
    """
    m = op.phi.shape[0]
    dtype = values.dtype
    delta = v_full - v_empty
    r = values - v_empty - op.frac.astype(dtype)[:, None] * delta
    theta = op.phi.astype(dtype) @ r
    phi = delta / m + theta
    if op.resid is None:
        e = r - op.design.astype(dtype) @ theta
    else:
        e = op.resid.astype(dtype) @ r
    jack = op.jack.astype(dtype)
    e = jack[:, :1] * e + jack[:, 1:] * e[op.partner]
    psi = op.phi.T.astype(dtype)[:, :, None] * e[:, None, :]  # [C, M, K]
    return phi, _safe_sqrt(design_variance(plan, psi))


def design_variance(plan, psi: jax.Array) -> jax.Array:
    """Stratified design variance of ``sum_S psi_S`` over the plan's sampling units, ``psi [C, ...]``."""
    dtype = psi.dtype
    n_units, n_groups = plan.unit_group.shape[0], plan.group_factor.shape[0]
    totals = jax.ops.segment_sum(psi, jnp.asarray(plan.unit), num_segments=n_units)
    groups = jnp.asarray(plan.unit_group)
    expand = (slice(None),) + (None,) * (psi.ndim - 1)
    means = jax.ops.segment_sum(totals, groups, num_segments=n_groups) / jnp.asarray(plan.group_count, dtype)[expand]
    means = means * jnp.asarray(plan.group_centred, dtype)[expand]
    squares = jax.ops.segment_sum((totals - means[groups]) ** 2, groups, num_segments=n_groups)
    return jnp.tensordot(jnp.asarray(plan.group_factor, dtype), squares, axes=1)


def plan_operators(plan, masks: jax.Array, weights: jax.Array, controls=(), *, dtype=jnp.float32):
    """The operators of one draw of ``plan``: ``(op, check)`` for :func:`apply_plan`.

    ``check`` is the first-order operator, kept only for pooled (small-budget) plans with
    controls: there a handful of units cannot tell how much of the error the controls remove,
    so the larger of the two standard errors is reported.
    """
    ridge = 0.0 if plan.identified else SMALL_RIDGE
    partner = _partners(plan)
    op = kernel_operator(masks, weights, tuple(controls), dtype=dtype, ridge=ridge, partner=partner)
    check = None
    if plan.pooled is not None and controls:
        check = kernel_operator(masks, weights, (), dtype=dtype, ridge=ridge, partner=partner)
    return op, check


def apply_plan(ops, plan, values, v_empty, v_full):
    """``(phi, stderr)`` of one game from :func:`plan_operators`' operators (``values [C, K]``).

    The standard error is infinite where the plan does not identify the regression.
    """
    op, check = ops
    phi, stderr = apply_operator(op, plan, values, v_empty, v_full)
    if check is not None:
        stderr = jnp.maximum(stderr, apply_operator(check, plan, values, v_empty, v_full)[1])
    if not plan.identified:
        stderr = jnp.full_like(stderr, jnp.inf)
    return phi, stderr


def _partners(plan) -> np.ndarray:
    from .._coalitions._kernel_sampling import unit_partners

    return unit_partners(plan)
