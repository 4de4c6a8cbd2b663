r"""The KernelSHAP solve as a linear operator of the coalition values, built once per draw.

The constrained Shapley regression (see :func:`jaxshap.estimators.kernel_solve`) and its control
variates depend on the coalition values only through the right-hand side: for fixed coalitions
and weights the estimate is :math:`\hat\phi = \Delta / M + G o` with ``G [M, U]`` fixed and ``o``
the responses of one game. :func:`plan_operators` factorises a draw once (its cost does not
depend on the rows); :func:`apply_plan` then costs two matrix products per game, so every row
that shares the draw shares the factorisation.

**Standard error.** The estimator is linear in the values, so its error is :math:`G e` with
``e`` the residual of the fit; the variance is the stratified design variance of the sum of the
:math:`\psi_u = G_{:, u} e_u` over the plan's sampling units (complementary pairs): the sandwich
(linearisation) variance of the joint regression, first-order and control coefficients
together. Fitted residuals are shrunk by the fit, badly so when the controls' effective number
of parameters nears the number of sampled pairs, so each unit's residuals are replaced by its
leave-one-unit-out residuals :math:`e_u / (1 - A_{uu})` (:math:`A` the hat matrix of the whole
ridge fit): :math:`G_{:, u} \tilde e_u` is then exactly the change of the estimate when the unit
is left out, and the variance is the stratified jackknife variance (the unit-level HC3
correction of MacKinnon & White, 1985; Efron & Stein, 1981).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, solve_triangular

from .._coalitions._kernel_sampling import plan_rows
from .._core._platform import after
from ._control_variates import odd_kernel, walsh_controls
from ._exact import full_precision

SMALL_RIDGE = 1e-3
"""Ridge (relative to the mean curvature) of plans whose budget does not identify the regression:
it pulls the estimate toward the equal split ``Delta / M`` in the directions the sample misses."""

MIN_PIVOT = 1e-4
"""Floor on ``1 - h`` of a row (a row the fit interpolates would give an unbounded residual)."""


class KernelOperator(NamedTuple):
    r"""The solve of one design (a pytree of arrays), on *rows*: complementary pairs and singles.

    Every design column (the projected indicators and the odd controls) changes sign under
    complementation, so a pair ``(S, N \ S)`` with weights ``w_1, w_2`` enters the weighted fit
    as one row ``x_S`` of weight ``w_1 + w_2`` whose response is the weighted odd part
    ``o = (w_1 r_S - w_2 r_{N \ S}) / (w_1 + w_2)``; unpaired coalitions are rows of their own.
    This halves every factorisation, and the even part of the game never enters.

    Attributes:
      first, second: ``[U]`` the coalitions of each row (equal for singles).
      a, b: ``[U]`` the row's response is ``a r[first] + b r[second]``.
      unit: ``[U]`` the plan's sampling unit of each row (for the variance).
      phi: ``[M, U]`` ``G``: the first-order estimate is ``Delta / M + G o``.
      basis, solve, weight: the residual ``e = o - basis (solve (basis^T (weight o)))`` (explicit
        columns), or ``None``; resid: ``[U, U]`` the residual operator of the kernel form, or ``None``.
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


def safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite gradient at 0 (enumerated estimates have zero variance)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _centre(g: jax.Array) -> jax.Array:
    """Remove the rounding error along ``1`` from ``G`` (zero in exact arithmetic): efficiency then
    holds to float precision even for ill-conditioned designs."""
    return g - g.mean(0, keepdims=True)


def _inflation(one_minus_h):
    return 1.0 / jnp.maximum(one_minus_h, MIN_PIVOT)


def spd_inverse(h: jax.Array, deps: Any = ()) -> jax.Array:
    """The inverse of a symmetric positive-definite ``h``, computed after ``deps``
    (:func:`jaxshap._core._platform.after`): ``h = L L^T`` gives ``h^{-1} = X X^T`` with
    ``X = L^{-T}``, one triangular solve against the identity."""
    eye = jnp.eye(h.shape[-1], dtype=h.dtype)
    x = solve_triangular(jnp.linalg.cholesky(after(h, deps)), eye, lower=True, trans=1)
    return x @ x.T


def sweep_inverse(a: jax.Array) -> jax.Array:
    r"""``a^{-1}`` of a small symmetric positive-definite ``a [n, n]`` in XLA operations only (no LAPACK call).

    Sweeping pivot :math:`k` (Beaton, 1964; Goodnight, 1979, "A tutorial on the SWEEP operator")
    sets :math:`A'_{kk} = -1 / A_{kk}`, :math:`A'_{ik} = A_{ik} / A_{kk}` and :math:`A'_{ij} = A_{ij}
    - A_{ik} A_{kj} / A_{kk}`; sweeping every pivot once gives :math:`-A^{-1}`. It is Gauss-Jordan
    elimination without pivoting, stable for a positive-definite matrix (every pivot is a Schur
    complement), ``n^3`` multiply-adds in a ``lax.fori_loop``: for the small per-row matrices of a
    batched program (a row's ``M x M`` Gram matrix, the leading-terms prior's ``r x r`` update),
    where a LAPACK call per row would need ordering against the program's others
    (:mod:`jaxshap._core._platform`). ``a`` is symmetrised first, ``(a + a^T) / 2``.
    """
    n = a.shape[-1]
    a = (a + a.T) / 2
    index = jnp.arange(n)

    def sweep(k, a):
        col = jax.lax.dynamic_index_in_dim(a, k, axis=1, keepdims=False)
        pivot = jax.lax.dynamic_index_in_dim(col, k, keepdims=False)
        at_k = index == k
        off = jnp.where(at_k, 0.0, col)
        a = a - jnp.outer(off, off) / pivot
        edge = jnp.where(at_k, -1.0, col) / pivot  # the new row and column k
        a = jnp.where(at_k[:, None], edge[None, :], a)
        return jnp.where(at_k[None, :], edge[:, None], a)

    return -jax.lax.fori_loop(0, n, sweep, a)


class RegressionRows(NamedTuple):
    """The regression rows of a draw (see :class:`KernelOperator`).

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


def regression_rows(masks, weights, rows=None, dtype=jnp.float32) -> RegressionRows:
    """The rows of the paired regression: ``rows = (first, second, unit)`` static (by default every
    coalition a row and a unit of its own); weights rescaled to sum to one."""
    if rows is None:
        rows = (np.arange(masks.shape[0]),) * 3
    first, second, unit = (np.asarray(a) for a in rows)
    z = jnp.asarray(masks).astype(dtype)
    w = jnp.asarray(weights).astype(dtype)
    w = w / w.sum()
    frac = z.mean(-1)
    w1, w2 = w[first], jnp.where(first != second, w[second], 0.0)
    wu = w1 + w2
    design = z[first] - frac[first][:, None]  # P z of each row's first coalition
    curvature = jnp.einsum("u,um,um->", wu, design, design)  # tr(D^T W D)
    statics = (jnp.asarray(first), jnp.asarray(second), w1 / wu, -w2 / wu, jnp.asarray(unit))
    return RegressionRows(first, statics, z[first], wu, design, frac, curvature)


def operator_form(m: int, n_rows: int, controls: tuple, form: str = "auto") -> str:
    """``"primal"`` without controls or while the ``M`` first-order and the control columns are no
    more than the rows, else ``"dual"``."""
    n_cols = sum(math.comb(m, k) for k, _ in controls if 3 <= k <= m)
    if form not in ("auto", "primal", "dual"):
        raise ValueError(f"`form` must be 'auto', 'primal' or 'dual'; got {form!r}.")
    if not n_cols:
        return "primal"
    return ("primal" if m + n_cols <= n_rows else "dual") if form == "auto" else form


@full_precision
def kernel_operator(masks, weights, controls=(), *, dtype=jnp.float32, form="auto", ridge=0.0, rows=None, deps=()):
    r"""Factorise the constrained, kernel-weighted regression of one set of coalitions.

    Without controls, with ``D = Z P`` (``P = I - 1 1^T / M``) and ``W`` the normalised weights,
    ``G = (D^T W D + c 1 1^T)^{-1} D^T W`` (the ``1 1^T`` term only fixes the null direction).
    With controls ``((k, rho_k), ...)`` every residualised Walsh term of order ``k`` joins the
    regression with a ridge ``lambda_k = rho_k tr(D^T W D) / M`` on its coefficient, in one of two
    equal forms: ``"primal"`` adds the ``C(M, k)`` columns (cheap while they are fewer than the
    rows); ``"dual"`` profiles them out as generalised least squares with covariance
    ``W^{-1} + sum_k K_k / lambda_k`` (:func:`._control_variates.odd_kernel`), a ``U x U``
    factorisation whatever ``M`` (:func:`gls_operator`). ``"auto"`` picks the cheaper.

    Args:
      masks: ``[C, M]`` boolean coalitions; weights: ``[C]`` positive regression weights.
      controls: ``((order, rho), ...)`` odd orders of at least 3 with their relative ridge.
      dtype: floating dtype of the operator; form: ``"auto"``, ``"primal"`` or ``"dual"``.
      ridge: a ridge on the first-order block, relative to its mean curvature (:data:`SMALL_RIDGE`
        where the budget does not identify the regression, else 0).
      rows: static ``(first, second, unit)`` (:func:`jaxshap._coalitions._kernel_sampling.plan_rows`);
        by default every coalition is a row and a unit of its own.
      deps: arrays the factorisation waits for (:func:`jaxshap._core._platform.after`).
    """
    m = masks.shape[-1]
    rw = regression_rows(masks, weights, rows, dtype)
    design, wu, curvature = rw.design, rw.wu, rw.curvature
    h_first = curvature / (m * (m - 1)) + ridge * curvature / m * jnp.eye(m, dtype=dtype)  # null direction 1, ridge
    controls = tuple((k, rho) for k, rho in controls if 3 <= k <= m)
    lambdas = [rho * curvature / m for _, rho in controls]
    if operator_form(m, len(wu), controls, form) == "dual":
        u = 2.0 * rw.z - 1.0
        return gls_operator(rw, sum(odd_kernel(u, u, k) / lam for (k, _), lam in zip(controls, lambdas)), h_first, deps)
    x = jnp.concatenate([design] + [walsh_controls(jnp.asarray(masks)[rw.first], k, dtype) for k, _ in controls], axis=1)
    pen = [jnp.zeros(m, dtype)] + [jnp.full(math.comb(m, k), lam, dtype) for (k, _), lam in zip(controls, lambdas)]
    extra = x.shape[1] - m
    h = (x * wu[:, None]).T @ x + jnp.diag(jnp.concatenate(pen)) + jnp.pad(h_first, ((0, extra), (0, extra)))
    solve = spd_inverse(h, deps)
    g = _centre(solve[:m] @ (x * wu[:, None]).T)  # [M, U]
    lev = wu * ((x @ solve) * x).sum(-1)
    return KernelOperator(*rw.statics, g, x, solve, wu, None, _inflation(1.0 - lev), rw.frac)


@full_precision
def gls_operator(rows: RegressionRows, kernel, h_first, deps: Any = ()) -> KernelOperator:
    r"""The dual (kernel) form: generalised least squares with covariance ``C = W^{-1} + kernel``.

    ``G = (D^T C^{-1} D + H_0)^{-1} D^T C^{-1}`` (``H_0 = h_first [M, M]``: the null-direction fix
    and any ridge); the residual operator is ``W^{-1} C^{-1} (I - D G)``. ``C^{-1}`` is formed as
    ``W^{1/2} (I + W^{1/2} K W^{1/2})^{-1} W^{1/2}``, whose factorised matrix has every eigenvalue
    at least one (well conditioned in float32 whatever the weights).
    """
    design, wu = rows.design, rows.wu
    s = jnp.sqrt(wu)
    white = s[:, None] * kernel * s[None, :] + jnp.eye(wu.shape[0], dtype=wu.dtype)
    cinv = s[:, None] * spd_inverse(white, deps) * s[None, :]
    cd = cinv @ design  # C^{-1} D
    g = _centre(spd_inverse(design.T @ cd + h_first) @ cd.T)  # [M, U]
    resid = (cinv - cd @ g) / wu[:, None]
    return KernelOperator(*rows.statics, g, None, None, None, resid, _inflation(jnp.diagonal(resid)), rows.frac)


@full_precision
def gls_apply(rows: RegressionRows, kernel, h_first, plan, values, v_empty, v_full, deps: Any = ()):
    r"""``(phi, stderr)`` of one game by :func:`gls_operator`'s regression, its operators left unformed.

    For a solve used by one game: with ``L`` the Cholesky factor of ``I + W^{1/2} K W^{1/2}``,
    ``C^{-1} x = W^{1/2} L^{-T} L^{-1} W^{1/2} x`` is applied to ``D`` and to the responses only
    (:func:`gls_finish`): about ``4/3 U^3`` where forming ``C^{-1}`` and the residual operator
    costs ``7/3 U^3 + 2 U^2 M``.
    """
    wu = rows.wu
    s, eye = jnp.sqrt(wu), jnp.eye(wu.shape[0], dtype=wu.dtype)
    white = s[:, None] * kernel * s[None, :] + eye
    linv = solve_triangular(cho_factor(after(white, deps), lower=True)[0], eye, lower=True)
    whiten = lambda x: linv.T @ (linv @ x)  # noqa: E731
    white_design = whiten(s[:, None] * rows.design)
    return gls_finish(rows, whiten, white_design, (linv * linv).sum(0), h_first, plan, values, v_empty, v_full)


@full_precision
def gls_finish(rows: RegressionRows, whiten, white_design, whiten_diag, h_first, plan, values, v_empty, v_full, gram=None):
    r"""``(phi, stderr)`` of the generalised least squares with ``C^{-1} = W^{1/2} A W^{1/2}``.

    ``A = (I + W^{1/2} K W^{1/2})^{-1}`` comes as the map ``whiten(x) = A x`` (``x [U, P]``), its
    product ``white_design = A W^{1/2} D``, its diagonal ``whiten_diag [U]`` and optionally
    ``gram = D^T C^{-1} D``; ``G = (D^T C^{-1} D + H_0)^{-1} D^T C^{-1}`` (the ``M x M`` inverse by
    :func:`sweep_inverse`, no LAPACK call per row); the residual
    ``W^{-1} (C^{-1} o - C^{-1} D G o)`` is corrected row by row with the residual operator's
    diagonal ``(w_u A_{uu} - (C^{-1} D G)_{uu}) / w_u`` (leave one row out).
    """
    design, wu = rows.design, rows.wu
    s = jnp.sqrt(wu)
    cd = s[:, None] * white_design  # C^{-1} D
    gram = design.T @ cd if gram is None else gram
    g = _centre(sweep_inverse(gram + h_first) @ cd.T)  # [M, U]
    op = KernelOperator(*rows.statics, g, None, None, None, None, None, rows.frac)
    phi, o = estimate(op, values, v_empty, v_full)
    o = o.astype(g.dtype)
    e = (s[:, None] * whiten(s[:, None] * o) - cd @ (g @ o)) / wu[:, None]
    hat = (wu * whiten_diag - (cd * g.T).sum(-1)) / wu
    e = (e * _inflation(hat)[:, None]).astype(values.dtype)
    return phi, safe_sqrt(design_variance(plan, g.T.astype(values.dtype)[:, :, None] * e[:, None, :], op.unit))


@full_precision
def estimate(op: KernelOperator, values, v_empty, v_full):
    """``(phi [M, K], o [U, K])``: the estimate of one game from its values ``[C, K]``, and its
    rows' responses (the weighted odd part of the centred values, see :class:`KernelOperator`)."""
    dtype = values.dtype
    delta = v_full - v_empty
    r = values - v_empty - op.frac.astype(dtype)[:, None] * delta
    o = op.a.astype(dtype)[:, None] * r[op.first] + op.b.astype(dtype)[:, None] * r[op.second]  # [U, K]
    return delta / op.phi.shape[0] + op.phi.astype(dtype) @ o, o


@full_precision
def apply_operator(op: KernelOperator, plan, values, v_empty, v_full):
    """``(phi, stderr)``, both ``[M, K]``, of one game from its values ``[C, K]`` and ``[K]``
    (``plan``: the :class:`jaxshap.coalitions.KernelPlan`, whose units and strata give the variance)."""
    dtype = values.dtype
    phi, o = estimate(op, values, v_empty, v_full)
    if op.resid is not None:
        e = op.resid.astype(dtype) @ o
    else:
        basis = op.basis.astype(dtype)
        e = o - basis @ (op.solve.astype(dtype) @ (basis.T @ (op.weight.astype(dtype)[:, None] * o)))
    e = e * op.inflate.astype(dtype)[:, None]
    return phi, safe_sqrt(design_variance(plan, op.phi.T.astype(dtype)[:, :, None] * e[:, None, :], op.unit))


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


def _draw_spans(masks, weights, dtype, deps: Any = ()) -> jax.Array:
    """Whether a pooled draw identifies the regression (its projected Gram matrix has rank
    ``M - 1``): sizes sampled with replacement may leave two features never apart."""
    z = jnp.asarray(masks).astype(dtype)
    m = z.shape[-1]
    d = z - z.mean(-1, keepdims=True)
    gram = (d * jnp.asarray(weights).astype(dtype)[:, None]).T @ d
    gram = gram + jnp.trace(gram) / m**2 * jnp.ones((m, m), dtype)  # fills the null direction 1
    eig = jnp.linalg.eigvalsh(after(gram, deps))
    return eig[0] > 1e-5 * eig[-1]


@full_precision
def plan_operators(plan, masks, weights, controls=(), *, dtype=jnp.float32, deps: Any = ()):
    """The operators of one draw of ``plan``: ``(op, check, spans)`` for :func:`apply_plan`.

    ``check`` is the first-order operator, kept only for pooled (small-budget) plans with
    controls: a handful of units cannot tell how much of the error the controls remove, so the
    larger of the two standard errors is reported. ``spans`` (pooled plans only, else ``None``)
    says whether this draw identifies the regression with a residual to spare; a draw that does
    not is solved with the small ridge (finite, still efficient) and reported with an infinite
    ``stderr``. The LAPACK calls run one after the other, the first after ``deps``
    (:mod:`jaxshap._core._platform`).
    """
    ridge, spans, rows = (0.0 if plan.identified else SMALL_RIDGE), None, plan_rows(plan)
    if plan.pooled is not None and plan.identified:
        spans = _draw_spans(masks, weights, dtype, deps)
        ridge, deps = jnp.where(spans, 0.0, SMALL_RIDGE).astype(dtype), spans
        # a residual for a stderr needs more distinct rows than unknowns; pooled draws are with
        # replacement, and a repeated pair (or its mirror image) adds no row
        u = 2.0 * jnp.asarray(masks)[rows[0]].astype(dtype) - 1.0
        repeats = jnp.tril(jnp.abs(u @ u.T) > masks.shape[-1] - 0.5, -1).any(1).sum()
        spans = spans & (len(rows[0]) - repeats > masks.shape[-1] - 1)
    op = kernel_operator(masks, weights, tuple(controls), dtype=dtype, ridge=ridge, rows=rows, deps=deps)
    check = None
    if plan.pooled is not None and controls:  # after op's last factorisation (op.phi comes out of it)
        check = kernel_operator(masks, weights, (), dtype=dtype, ridge=ridge, rows=rows, deps=op.phi)
    return op, check, spans


@full_precision
def apply_plan(ops, plan, values, v_empty, v_full):
    """``(phi, stderr)`` of one game from :func:`plan_operators`' operators (``values [C, K]``)."""
    return plan_stderr(ops, plan, values, v_empty, v_full, *apply_operator(ops[0], plan, values, v_empty, v_full))


@full_precision
def plan_stderr(ops, plan, values, v_empty, v_full, phi, stderr):
    """``(phi, stderr)`` with :func:`apply_plan`'s checks on ``stderr``: the first-order ``check``
    operator's larger one (pooled plans with controls), infinite where the plan or the draw does
    not identify the regression (``ops`` as for :func:`apply_plan`; its first operator unused)."""
    _, check, spans = ops
    if check is not None:
        stderr = jnp.maximum(stderr, apply_operator(check, plan, values, v_empty, v_full)[1])
    if not plan.identified:
        return phi, jnp.full_like(stderr, jnp.inf)
    return phi, stderr if spans is None else jnp.where(spans, stderr, jnp.inf)
