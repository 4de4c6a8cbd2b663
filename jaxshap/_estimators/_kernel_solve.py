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
residuals, :math:`\tilde e_u = e_u / (1 - A_{uu})` with :math:`A` the hat matrix of the whole
(ridge) fit; then :math:`G_{:, u} \tilde e_u` is exactly the change of the estimate when the unit is
left out, and the variance is the (stratified) jackknife variance (the unit-level HC3 correction
of MacKinnon & White, 1985; Efron & Stein, 1981).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, solve_triangular

from .._platform._host_lapack import spd_inverse
from .._platform._lapack_order import after
from ._control_variates import odd_kernel, walsh_controls
from ._precision import full_precision
from ._sweep import sweep_inverse

SMALL_RIDGE = 1e-3
"""Ridge (relative to the mean curvature) of plans whose budget does not identify the regression:
it pulls the estimate toward the equal split ``Delta / M`` in the directions the sample misses."""

MIN_PIVOT = 1e-4
"""Floor on ``1 - h`` of a row (a row the fit interpolates exactly would otherwise give an
unbounded leave-one-out residual)."""


class KernelOperator(NamedTuple):
    """The solve of one design (a pytree of arrays), on *rows*: complementary pairs and singles.

    Every design column (the projected indicators and the odd controls) changes sign under
    complementation, so a pair ``(S, N \\ S)`` with weights ``w_1, w_2`` enters the weighted fit
    exactly as one row ``x_S`` of weight ``w_1 + w_2`` whose response is the weighted odd part
    ``o = (w_1 r_S - w_2 r_{N \\ S}) / (w_1 + w_2)``; unpaired coalitions are rows of their own.
    This halves every factorisation, and the even part of the game never enters.

    Attributes:
      first, second: ``[U]`` the coalitions of each row (equal for singles).
      a, b: ``[U]`` the row's response is ``a r[first] + b r[second]``.
      unit: ``[U]`` the plan's sampling unit of each row (for the variance).
      phi: ``[M, U]`` ``G``: the first-order estimate is ``Delta / M + G o``.
      basis, solve, weight: the residual ``e = o - basis (solve (basis^T (weight o)))`` (first-order
        fit or explicit controls), or ``None``.
      resid: ``[U, U]`` the residual operator of the kernel form, or ``None``.
      inflate: ``[U]`` ``1 / (1 - h_u)``: the leave-one-row-out correction.
      frac: ``[C]`` ``|S| / M``.
    """

    first: jax.Array
    second: jax.Array
    a: jax.Array
    b: jax.Array
    unit: jax.Array
    phi: jax.Array
    basis: jax.Array | None
    solve: jax.Array | None
    weight: jax.Array | None
    resid: jax.Array | None
    inflate: jax.Array
    frac: jax.Array


def _safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite gradient at 0 (enumerated estimates have zero variance)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _centre(g: jax.Array) -> jax.Array:
    """Remove the rounding error along ``1`` from ``G`` (exactly zero in exact arithmetic), so
    that efficiency holds to float precision even for ill-conditioned designs."""
    return g - g.mean(0, keepdims=True)


def _inflation(one_minus_h, xp=jnp):
    return 1.0 / xp.maximum(one_minus_h, MIN_PIVOT)


def _spd_inverse(h, deps: Any, xp):
    """The inverse of a symmetric positive-definite matrix by Cholesky: in JAX after ``deps``, or
    on the host in float64 (:func:`jaxshap._platform._host_lapack.spd_inverse`).

    In JAX, ``h = L L^T`` gives ``h^{-1} = X X^T`` with ``X = L^{-T}``: one triangular solve
    against the identity, where ``cho_solve`` would take two (and longer to compile on a CPU).
    """
    if xp is np:
        return spd_inverse(h)
    eye = jnp.eye(h.shape[-1], dtype=h.dtype)
    x = solve_triangular(jnp.linalg.cholesky(after(h, deps)), eye, lower=True, trans=1)
    return x @ x.T


def operator_form(m: int, n_rows: int, controls: tuple, form: str = "auto") -> tuple[str, int]:
    """``(form, columns)`` of :func:`kernel_operator`: ``"primal"`` without controls or while the
    ``M`` first-order and the control columns are no more than the rows, else ``"dual"``."""
    controls = tuple((k, rho) for k, rho in controls if 3 <= k <= m)
    n_cols = sum(math.comb(m, k) for k, _ in controls)
    if form not in ("auto", "primal", "dual"):
        raise ValueError(f"`form` must be 'auto', 'primal' or 'dual'; got {form!r}.")
    if not controls:
        form = "primal"
    elif form == "auto":
        form = "primal" if m + n_cols <= n_rows else "dual"
    return form, n_cols


def operator_shapes(plan, controls: tuple, dtype) -> tuple:
    """Shapes and dtypes of :func:`plan_operators`' ``(op, check, spans)`` (``jax.ShapeDtypeStruct``
    leaves), from the plan alone: what a host computation of them must return."""
    m, c = plan.n_features, plan.n_coalitions
    u = len(_rows(plan)[0])
    index = jax.ShapeDtypeStruct((u,), jax.dtypes.canonicalize_dtype(np.int64))
    real = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731

    def one(controls):
        form, n_cols = operator_form(m, u, controls)
        p = m + n_cols
        solve = (real(u, p), real(p, p), real(u), None) if form == "primal" else (None, None, None, real(u, u))
        return KernelOperator(index, index, real(u), real(u), index, real(m, u), *solve, real(u), real(c))

    check = one(()) if plan.pooled is not None and controls else None
    spans = jax.ShapeDtypeStruct((), jnp.bool_) if plan.pooled is not None and plan.identified else None
    return one(tuple(controls)), check, spans


@full_precision
def kernel_operator(
    masks: jax.Array,
    weights: jax.Array,
    controls: tuple[tuple[int, float], ...] = (),
    *,
    dtype=jnp.float32,
    form: str = "auto",
    ridge: float = 0.0,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    deps: Any = (),
    xp: Any = jnp,
) -> KernelOperator:
    r"""Factorise the constrained, kernel-weighted regression of one set of coalitions.

    Without controls, with ``D = Z P`` (``P = I - 1 1^T / M``) and ``W`` the normalised weights,
    ``G = (D^T W D + c 1 1^T)^{-1} D^T W`` (the ``1 1^T`` term only fixes the null direction).

    With controls ``((k, rho_k), ...)``, every residualised Walsh term of order ``k``
    (:mod:`._control_variates`) joins the regression with a ridge penalty
    ``lambda_k = rho_k * tr(D^T W D) / M`` on its coefficient (``rho`` relative to the mean
    curvature of the first-order block). Two equal forms: ``"primal"`` adds the
    ``C(M, k)`` columns explicitly (cheap while they are fewer than the rows);
    ``"dual"`` profiles them out as generalised least squares with covariance
    ``W^{-1} + sum_k K_k / lambda_k`` (:func:`._control_variates.odd_kernel`), a ``U x U``
    factorisation whatever ``M``. ``"auto"`` picks the cheaper.

    Args:
      masks: ``[C, M]`` boolean coalitions.
      weights: ``[C]`` positive regression weights (rescaled to sum to one).
      controls: ``((order, rho), ...)`` odd orders of at least 3 with their relative ridge.
      dtype: floating dtype of the operator.
      form: ``"auto"``, ``"primal"`` or ``"dual"``.
      ridge: a ridge on the first-order block, relative to its mean curvature (0 unless the
        budget is too small to identify the regression; see :data:`SMALL_RIDGE`).
      rows: static ``(first, second, unit)`` of the rows (:func:`jaxshap.coalitions.plan_rows`);
        by default every coalition is a row and a sampling unit of its own.
      deps: arrays the factorisation waits for (:func:`jaxshap._platform._lapack_order.after`):
        the outputs of an earlier LAPACK call that is otherwise independent of this one.
      xp: the array namespace, ``jax.numpy`` (traced, the default) or ``numpy`` (on the host, in
        the inputs' precision; see :mod:`jaxshap._estimators._host_plan`).
    """
    m = masks.shape[-1]
    rw = regression_rows(masks, weights, rows, dtype, xp)
    design, wu, curvature = rw.design, rw.wu, rw.curvature
    null = curvature / (m * (m - 1))  # fixes the null direction 1
    eye_ridge = ridge * curvature / m * xp.eye(m, dtype=dtype)
    controls = tuple((k, rho) for k, rho in controls if 3 <= k <= m)
    lambdas = [rho * curvature / m for _, rho in controls]
    form, n_cols = operator_form(m, len(wu), controls, form)
    if form == "primal":
        cols = [walsh_controls(xp.asarray(masks)[rw.first], k, dtype) for k, _ in controls]
        x = xp.concatenate([design] + cols, axis=1) if cols else design
        h = (x * wu[:, None]).T @ x
        if cols:
            pen = [xp.full(col.shape[1], lam, dtype) for col, lam in zip(cols, lambdas)]
            h = h + xp.diag(xp.concatenate([xp.zeros(m, dtype)] + pen))
        extra = h.shape[0] - m
        h = h + xp.pad(null + eye_ridge, ((0, extra), (0, extra)))  # on the first-order block
        solve = _spd_inverse(h, deps, xp)
        g = _centre(solve[:m] @ (x * wu[:, None]).T)  # [M, U]
        lev = wu * ((x @ solve) * x).sum(-1)
        return KernelOperator(*rw.statics, g, x, solve, wu, None, _inflation(1.0 - lev, xp), rw.frac)
    u = 2.0 * rw.z - 1.0
    kernel = sum(odd_kernel(u, u, k) / lam for (k, _), lam in zip(controls, lambdas))
    return gls_operator(rw, kernel, null + eye_ridge, deps, xp)


class RegressionRows(NamedTuple):
    """The regression rows of a set of coalitions (see :class:`KernelOperator`), in one namespace.

    Attributes:
      first: ``[U]`` static indices of each row's first coalition.
      statics: ``(first, second, a, b, unit)``, the leading fields of a :class:`KernelOperator`.
      z: ``[U, M]`` the first coalition of each row, as 0/1 floats.
      wu: ``[U]`` the row weights (the normalised weights of a pair's two coalitions summed).
      design: ``[U, M]`` ``P z``, the projected indicators.
      frac: ``[C]`` ``|S| / M`` of every coalition.
      curvature: ``tr(D^T W D)``, the scale of the first-order block.
    """

    first: Any
    statics: tuple
    z: Any
    wu: Any
    design: Any
    frac: Any
    curvature: Any


def regression_rows(masks, weights, rows=None, dtype=jnp.float32, xp: Any = jnp) -> RegressionRows:
    """The rows of the paired regression: ``rows = (first, second, unit)`` static (by default every
    coalition a row and a unit of its own); weights rescaled to sum to one."""
    c = masks.shape[0]
    if rows is None:
        rows = (np.arange(c), np.arange(c), np.arange(c))
    first, second, unit = (np.asarray(a) for a in rows)
    paired = xp.asarray(first != second)
    z = xp.asarray(masks).astype(dtype)
    w = xp.asarray(weights).astype(dtype)
    w = w / w.sum()
    frac = z.mean(-1)
    w1, w2 = w[first], xp.where(paired, w[second], 0.0)
    wu = w1 + w2
    design = z[first] - frac[first][:, None]  # P z of each row's first coalition
    curvature = xp.einsum("u,um,um->", wu, design, design)  # tr(D^T W D)
    statics = (xp.asarray(first), xp.asarray(second), w1 / wu, -w2 / wu, xp.asarray(unit))
    return RegressionRows(first, statics, z[first], wu, design, frac, curvature)


@full_precision
def gls_operator(rows: RegressionRows, kernel, h_first, deps: Any = (), xp: Any = jnp) -> KernelOperator:
    r"""The dual (kernel) form: generalised least squares with covariance ``C = W^{-1} + kernel``.

    ``G = (D^T C^{-1} D + H_0)^{-1} D^T C^{-1}`` (``H_0 = h_first``, ``[M, M]``: the null-direction
    fix and any ridge); the residual operator is ``W^{-1} C^{-1} (I - D G)``, the GLS residual
    scaled back to the response. ``C^{-1}`` is formed as ``W^{1/2} (I + W^{1/2} K W^{1/2})^{-1}
    W^{1/2}``, whose factorised matrix has every eigenvalue at least one (well conditioned in
    float32 whatever the weights).
    """
    design, wu = rows.design, rows.wu
    s = xp.sqrt(wu)
    white = s[:, None] * kernel * s[None, :] + xp.eye(wu.shape[0], dtype=wu.dtype)
    cinv = s[:, None] * _spd_inverse(white, deps, xp) * s[None, :]
    cd = cinv @ design  # C^{-1} D
    inverse = _spd_inverse(design.T @ cd + h_first, (), xp)
    g = _centre(inverse @ cd.T)  # [M, U]
    resid = (cinv - cd @ g) / wu[:, None]
    return KernelOperator(*rows.statics, g, None, None, None, resid, _inflation(xp.diagonal(resid), xp), rows.frac)


@full_precision
def gls_apply(rows: RegressionRows, kernel, h_first, plan, values, v_empty, v_full, deps: Any = ()):
    r"""``(phi, stderr)`` of one game by :func:`gls_operator`'s regression, its operators left unformed.

    Equal to :func:`apply_operator` of :func:`gls_operator` (traced only), for a solve used by one
    game: with ``L`` the Cholesky factor of ``I + W^{1/2} K W^{1/2}``, ``C^{-1} x = W^{1/2} L^{-T}
    L^{-1} W^{1/2} x`` is applied to ``D`` and to the responses only (:func:`gls_finish`). One
    factorisation and one triangular inverse (about ``4/3 U^3``), where forming ``C^{-1}`` and the
    ``U x U`` residual operator costs about ``7/3 U^3 + 2 U^2 M``.
    """
    wu = rows.wu
    u = wu.shape[0]
    s = jnp.sqrt(wu)
    white = s[:, None] * kernel * s[None, :] + jnp.eye(u, dtype=wu.dtype)
    linv = solve_triangular(cho_factor(after(white, deps), lower=True)[0], jnp.eye(u, dtype=wu.dtype), lower=True)
    whiten = lambda x: linv.T @ (linv @ x)  # noqa: E731
    white_design = whiten(s[:, None] * rows.design)
    return gls_finish(rows, whiten, white_design, (linv * linv).sum(0), h_first, plan, values, v_empty, v_full)


@full_precision
def gls_finish(rows: RegressionRows, whiten, white_design, whiten_diag, h_first, plan, values, v_empty, v_full, gram=None):
    r"""``(phi, stderr)`` of the generalised least squares with ``C^{-1} = W^{1/2} A W^{1/2}``.

    ``A = (I + W^{1/2} K W^{1/2})^{-1}`` is given as the map ``whiten(x) = A x`` (``x [U, P]``),
    its product with the weighted design ``white_design = A W^{1/2} D`` (the caller may have it at
    hand), its diagonal ``whiten_diag [U]`` and, optionally, the Gram matrix ``gram = D^T C^{-1} D``
    (else formed from ``white_design``); ``G = (D^T C^{-1} D + H_0)^{-1} D^T C^{-1}`` is formed
    (the ``M x M`` inverse by :func:`jaxshap._estimators._sweep.sweep_inverse`), the
    residual ``W^{-1} (C^{-1} o - C^{-1} D G o)`` of the responses is corrected row by row with the
    residual operator's diagonal ``(w_u A_{uu} - (C^{-1} D G)_{uu}) / w_u`` (leave one row out),
    and the standard error is the design variance of the units' influence terms.
    """
    design, wu = rows.design, rows.wu
    s = jnp.sqrt(wu)
    cinv = lambda x: s[:, None] * whiten(s[:, None] * x)  # noqa: E731
    cd = s[:, None] * white_design  # C^{-1} D
    if gram is None:
        gram = design.T @ cd
    g = _centre(sweep_inverse(gram + h_first) @ cd.T)  # [M, U]; no LAPACK call per row
    op = KernelOperator(*rows.statics, g, None, None, None, None, None, rows.frac)
    phi, o = estimate(op, values, v_empty, v_full)
    o = o.astype(g.dtype)
    e = (cinv(o) - cd @ (g @ o)) / wu[:, None]
    hat = (wu * whiten_diag - (cd * g.T).sum(-1)) / wu
    e = (e * _inflation(hat)[:, None]).astype(values.dtype)
    psi = g.T.astype(values.dtype)[:, :, None] * e[:, None, :]  # [U, M, K]
    return phi, _safe_sqrt(design_variance(plan, psi, op.unit))


@full_precision
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
    dtype = values.dtype
    phi, o = estimate(op, values, v_empty, v_full)
    if op.resid is not None:
        e = op.resid.astype(dtype) @ o
    else:
        basis = op.basis.astype(dtype)
        e = o - basis @ (op.solve.astype(dtype) @ (basis.T @ (op.weight.astype(dtype)[:, None] * o)))
    e = e * op.inflate.astype(dtype)[:, None]
    psi = op.phi.T.astype(dtype)[:, :, None] * e[:, None, :]  # [U, M, K]
    return phi, _safe_sqrt(design_variance(plan, psi, op.unit))


@full_precision
def estimate(op: KernelOperator, values, v_empty, v_full):
    """``(phi [M, K], o [U, K])``: the estimate of one game, and its rows' responses (the weighted
    odd part of the centred values, see :class:`KernelOperator`)."""
    m = op.phi.shape[0]
    dtype = values.dtype
    delta = v_full - v_empty
    r = values - v_empty - op.frac.astype(dtype)[:, None] * delta
    o = op.a.astype(dtype)[:, None] * r[op.first] + op.b.astype(dtype)[:, None] * r[op.second]  # [U, K]
    return delta / m + op.phi.astype(dtype) @ o, o


@full_precision
def design_variance(plan, psi: jax.Array, unit: jax.Array) -> jax.Array:
    """Stratified design variance of ``sum_u psi_u`` over the plan's sampling units (``unit [U]`` of each ``psi_u``)."""
    dtype = psi.dtype
    n_units, n_groups = plan.unit_group.shape[0], plan.group_factor.shape[0]
    totals = jax.ops.segment_sum(psi, unit, num_segments=n_units)
    groups = jnp.asarray(plan.unit_group)
    expand = (slice(None),) + (None,) * (psi.ndim - 1)
    means = jax.ops.segment_sum(totals, groups, num_segments=n_groups) / jnp.asarray(plan.group_count, dtype)[expand]
    means = means * jnp.asarray(plan.group_centred, dtype)[expand]
    squares = jax.ops.segment_sum((totals - means[groups]) ** 2, groups, num_segments=n_groups)
    return jnp.tensordot(jnp.asarray(plan.group_factor, dtype), squares, axes=1)


def _draw_spans(masks: jax.Array, weights: jax.Array, dtype, deps: Any = (), xp: Any = jnp) -> jax.Array:
    """Whether one draw's coalitions identify the regression (its projected Gram matrix has
    rank ``M - 1``). A pooled plan samples sizes with replacement, so a draw of a budget that can
    identify the regression may still miss a direction (two features never apart)."""
    z = masks.astype(dtype)
    m = z.shape[-1]
    d = z - z.mean(-1, keepdims=True)
    gram = (d * weights.astype(dtype)[:, None]).T @ d
    gram = gram + xp.trace(gram) / m**2 * xp.ones((m, m), dtype)  # fills the null direction 1
    eig = xp.linalg.eigvalsh(gram if xp is np else after(gram, deps))
    return eig[0] > 1e-5 * eig[-1]


@full_precision
def plan_operators(
    plan, masks: jax.Array, weights: jax.Array, controls=(), *, dtype=jnp.float32, deps: Any = (), xp: Any = jnp
):
    """The operators of one draw of ``plan``: ``(op, check, spans)`` for :func:`apply_plan`.

    ``check`` is the first-order operator, kept only for pooled (small-budget) plans with
    controls: there a handful of units cannot tell how much of the error the controls remove,
    so the larger of the two standard errors is reported. ``spans`` (pooled plans only, else
    ``None``) says whether this draw identifies the regression with a residual to spare; a draw
    that does not identify it is solved with the small ridge (finite, still efficient), and either
    is reported with an infinite ``stderr``.

    The LAPACK calls (the eigensolver of ``spans``, then each operator's factorisations) run
    one after the other, the first after ``deps``: on a CPU, batched LAPACK calls side by side
    can deadlock XLA's thread pool (:mod:`jaxshap._platform._lapack_order`). With ``xp=numpy``
    everything is computed on the host, in ``dtype`` (:mod:`jaxshap._estimators._host_plan`).
    """
    ridge = 0.0 if plan.identified else SMALL_RIDGE
    spans = None
    if plan.pooled is not None and plan.identified:
        spans = _draw_spans(masks, weights, dtype, deps, xp)
        ridge = xp.where(spans, 0.0, SMALL_RIDGE).astype(dtype)
        deps = spans
    rows = _rows(plan)
    if spans is not None:
        # A residual for a stderr needs more distinct regression rows than unknowns. Pooled
        # draws are with replacement: a repeated pair (or its mirror image) adds no row, and a
        # draw with as many distinct rows as unknowns is fitted exactly (zero residuals, a
        # stderr of zero for an estimate that may be far off).
        m = masks.shape[-1]
        u = 2.0 * xp.asarray(masks)[rows[0]].astype(dtype) - 1.0
        repeats = xp.tril(xp.abs(u @ u.T) > m - 0.5, -1).any(1).sum()
        spans = spans & (len(rows[0]) - repeats > m - 1)
    op = kernel_operator(masks, weights, tuple(controls), dtype=dtype, ridge=ridge, rows=rows, deps=deps, xp=xp)
    check = None
    if plan.pooled is not None and controls:
        # op.phi comes out of op's last factorisation
        check = kernel_operator(masks, weights, (), dtype=dtype, ridge=ridge, rows=rows, deps=op.phi, xp=xp)
    return op, check, spans


@full_precision
def apply_plan(ops, plan, values, v_empty, v_full):
    """``(phi, stderr)`` of one game from :func:`plan_operators`' operators (``values [C, K]``).

    The standard error is infinite where the plan (or this draw) does not identify the regression.
    """
    op, check, spans = ops
    return plan_stderr((None, check, spans), plan, values, v_empty, v_full, *apply_operator(op, plan, values, v_empty, v_full))


@full_precision
def plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr):
    """``(phi, stderr)`` with :func:`apply_plan`'s checks on ``stderr``: the first-order ``check``
    operator's larger one (pooled plans with controls), infinite where the plan or the draw does
    not identify the regression (``ops`` as for :func:`apply_plan`; its first operator unused)."""
    _, check, spans = ops
    if check is not None:
        stderr = jnp.maximum(stderr, apply_operator(check, plan, values, v_empty, v_full)[1])
    if not plan.identified:
        stderr = jnp.full_like(stderr, jnp.inf)
    elif spans is not None:
        stderr = jnp.where(spans, stderr, jnp.inf)
    return phi, stderr


def _rows(plan):
    from .._coalitions._kernel_design import plan_rows

    return plan_rows(plan)
