"""KernelSHAP: Shapley values as an efficiency-constrained, kernel-weighted least-squares fit."""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from .._coalitions._kernel_design import KernelPlan
from .._coalitions._kernel_plan import kernel_plan
from .._coalitions._kernel_sampling import sample_coalitions
from ._control_variates import walsh_controls
from ._kernel_solve import _safe_sqrt, plan_operators  # noqa: F401  (_safe_sqrt: used by _kernel_interactions)
from ._precision import full_precision
from ._priors import RowPrior

ValueFn = Callable[[jax.Array], jax.Array]


THIRD_ORDER_RIDGE = 0.05
"""Ridge on the third-order coefficients, relative to the mean curvature of the Shapley block
(up to 16 features; see :func:`third_order_ridge`)."""


def third_order_ridge(n_features: int) -> float:
    """The relative ridge of the third-order controls: :data:`THIRD_ORDER_RIDGE` times
    ``max(1, C(M, 3) / C(16, 3))``, so the prior variance of the whole third-order part stays
    that of 16 features. With thousands of terms and a few hundred sampled pairs a smaller
    ridge lets the fit interpolate the sample, and then no residual-based standard error (nor
    float32) can tell the remaining error; on XGBoost games at ``M = 30`` the squared error
    moved by under 3% for ridges from 0.05 to 8."""
    return THIRD_ORDER_RIDGE * max(1.0, math.comb(n_features, 3) / math.comb(16, 3))


def third_order_controls(masks: jax.Array, dtype) -> jax.Array:
    r"""The residualised third-order Fourier terms of coalitions, ``[C, C(M, 3)]``.

    With :math:`u = 2 z - 1`, each triple :math:`T = \{a, b, c\}` gives
    :math:`q_T = u_a u_b u_c`, whose Shapley values are :math:`2/3` for each member of ``T`` and
    zero otherwise. The control is :math:`r_T(S) = q_T(S) - \tfrac13 (u_a + u_b + u_c)`: the part
    of :math:`q_T` that its own Shapley values leave unexplained (see :mod:`._control_variates`).
    """
    return walsh_controls(masks, 3, dtype)


@full_precision
def _weighted_fit(design: jax.Array, w: jax.Array, r: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """(Used by :mod:`._kernel_interactions`.) Ridge-stabilised weighted least squares ``theta = H^{-1} X^T W r`` and ``H^{-1}`` (``None`` with controls).

    The first ``m`` columns of ``X`` are the projected coalition indicators; ``c 1 1^T`` with
    ``c = trace / (m (m - 1))`` fixes their null direction. Further columns (controls) get a ridge
    of ``THIRD_ORDER_RIDGE`` times the mean diagonal of the first block.
    """
    n, dtype = design.shape[1], design.dtype
    weighted = design * w[:, None]
    h = weighted.T @ design
    ridge = jnp.trace(h[:m, :m]) / (m * (m - 1))
    h = h.at[:m, :m].add(ridge * jnp.ones((m, m), dtype))
    if n > m:
        h = h.at[m:, m:].add(THIRD_ORDER_RIDGE * (m - 1) * ridge * jnp.eye(n - m, dtype=dtype))
    factor = cho_factor(h, lower=True)
    if n > m:  # only the solution is needed: a direct solve is the more accurate in float32
        return cho_solve(factor, weighted.T @ r), None
    # The inverse is formed once from the factor: applying it to the C coalitions is a matrix
    # product, far faster than C triangular solves on a CPU.
    inverse = cho_solve(factor, jnp.eye(n, dtype=dtype))
    return inverse @ (weighted.T @ r), inverse


@full_precision
def kernel_solve(
    plan: KernelPlan,
    masks: jax.Array,
    weights: jax.Array,
    values: jax.Array,
    v_empty: jax.Array,
    v_full: jax.Array,
    *,
    third_order: bool = False,
    controls: tuple[tuple[int, float], ...] | None = None,
    prior: str | RowPrior = "isotropic",
) -> tuple[jax.Array, jax.Array]:
    r"""Solve the constrained Shapley regression from sampled coalitions of one game.

    With ``z_S`` the coalition's indicator vector, ``Delta = v(N) - v(empty)`` and weights ``w_S``,

    .. math::

        \hat\phi = \arg\min_{\phi} \sum_S w_S \bigl(v(S) - v(\emptyset) - z_S^\top \phi\bigr)^2
        \quad \text{subject to} \quad \mathbf 1^\top \phi = \Delta .

    The constraint is eliminated exactly: ``phi = Delta / M + delta`` with ``delta`` orthogonal to
    ``1``. With ``P = I - 1 1^T / M``, ``A = sum w z z^T`` and ``b = sum w z (v(S) - v(empty) -
    |S| Delta / M)``, ``delta`` solves ``(P A P + c 1 1^T) delta = P b`` for any ``c > 0`` (the
    ``1 1^T`` term only fixes the null direction, whose component is then zero), by a Cholesky
    factorisation. The solve is a fixed linear operator of the values
    (:func:`jaxshap._estimators._kernel_solve.kernel_operator`), which the explainer builds once
    for all rows that share coalitions.

    **Control variates** (``third_order=True``, or ``controls``). With complementary pairs the
    even-order Fourier (Walsh) terms of the game cancel and the first-order ones are fitted
    exactly, so the error comes from odd terms of order three and up. The regression then also
    includes every residualised odd Walsh term of the given orders, each with its own
    ridge-penalised coefficient (:mod:`jaxshap._estimators._control_variates`): kernel-orthogonal
    to the additive fit, they leave the estimand unchanged (exact under full enumeration) and
    soak up that part of the residual (a regression adjustment of the Monte Carlo estimate;
    Pelegrina et al., 2023; Witter et al., 2025). Up to ``C(M, k)`` extra columns are added
    explicitly; beyond that the same fit is done in kernel form, a ``C x C`` factorisation.
    ``third_order=True`` means ``controls=((3, third_order_ridge(M)),)``. The ``prior`` sets the
    variances of the third-order coefficients: the same for every term (``"isotropic"``, a fixed
    linear operator of the values) or following the game's own first-order estimate
    (``"hierarchical"``, :class:`jaxshap.estimators.Hierarchical`, a second solve; ``"leading"``,
    :class:`jaxshap.estimators.Leading`, the same on the row's largest terms, an update of the first).

    The standard error is the linearised (sandwich) variance of the whole fit under the
    stratified sampling design, with leverage-corrected residuals (see
    :mod:`jaxshap._estimators._kernel_solve`). Enumerated coalitions contribute none.

    Args:
      plan: the static plan the coalitions were drawn with.
      masks: ``[C, M]`` boolean coalitions.
      weights: ``[C]`` regression weights.
      values: ``[C, K]`` coalition values.
      v_empty, v_full: ``[K]`` values of the empty and the full coalition.
      third_order: add the third-order control variates (static).
      controls: ``((order, relative_ridge), ...)`` instead of ``third_order`` (static).
      prior: a :class:`jaxshap.estimators.RowPrior` or the name of a registered one (static).

    Returns:
      ``(phi, stderr)``, both ``[M, K]``.
    """
    if controls is None:
        controls = ((3, third_order_ridge(masks.shape[-1])),) if third_order else ()
    prior = RowPrior.resolve(prior)
    # Factorise once the values are in: the game may run LAPACK itself (a Gaussian masker's
    # conditioning, a model's own solves), and batched LAPACK calls side by side can deadlock
    # XLA's CPU thread pool (jaxshap._platform._lapack_order).
    ops = plan_operators(plan, masks, weights, tuple(controls), dtype=values.dtype, deps=(values, v_empty, v_full))
    # the prior's own factorisations (the leading-terms prior's A_0) after the operators'
    parts = prior.parts(plan, masks, weights, tuple(controls), dtype=values.dtype, deps=ops, xp=jnp)
    return prior.apply(ops, parts, plan, values, v_empty, v_full)


def kernel_shapley(
    key: jax.Array,
    value_fn: ValueFn,
    n_features: int,
    n_coalitions: int,
    *,
    sampler: str = "paired",
    third_order: bool = False,
    controls: tuple[tuple[int, float], ...] | None = None,
    prior: str | RowPrior = "isotropic",
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    r"""Shapley values of one game by KernelSHAP (Lundberg & Lee, 2017), with an exact
    efficiency constraint and standard errors.

    The Shapley values are the solution of the weighted least-squares problem over all
    coalitions with the Shapley kernel ``k(M, s) = (M - 1) / (C(M, s) s (M - s))``, with
    ``v(empty)`` as intercept and ``sum_j phi_j = v(N) - v(empty)`` as a constraint (Charnes et
    al., 1988; Lundberg & Lee, 2017). The sums over coalitions are estimated from
    ``n_coalitions`` coalitions drawn by :func:`jaxshap.coalitions.sample_kernel_coalitions`
    (small layers enumerated, the rest sampled in complementary pairs without replacement), and
    the regression is solved by :func:`kernel_solve` (Covert & Lee, 2021, "Improving KernelSHAP:
    practical Shapley value estimation via linear regression"). A budget of ``2**M - 2`` or more
    enumerates every coalition and returns the exact Shapley values.

    Cost: one call of ``value_fn`` on ``n_coalitions + 2`` coalitions (the empty and the full
    coalition are evaluated in addition to the budget).

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static).
      n_coalitions: coalitions other than the empty and the full one (static; capped at
        ``2**M - 2``; at least :func:`jaxshap.coalitions.min_kernel_coalitions`, one pair; small
        budgets sample pooled layers, see :func:`jaxshap.coalitions.kernel_plan`).
      sampler: ``"paired"`` (strata in proportion to kernel mass), ``"leverage"`` (uniform
        over sizes; Musco & Witter, 2025) or ``"middle"`` (mostly the sizes nearest ``M / 2``,
        for the third-order controls; see :func:`jaxshap.coalitions.kernel_plan`).
      third_order: add the third-order Fourier terms as control variates (static; see
        :func:`kernel_solve`). Same evaluations, far lower error for ``M`` up to about 16.
      controls: ``((order, relative_ridge), ...)``, the control variates in full (static; see
        :func:`kernel_solve`); overrides ``third_order``.
      prior: the prior of the third-order coefficients (static; see :func:`kernel_solve`).

    Returns:
      ``(phi, stderr, v_empty, v_full)``: ``phi`` and ``stderr`` of shape ``[M, ...]`` (``stderr``
      is zero where the estimate is exact), and the values of the empty and full coalitions.
      ``phi.sum(0) == v_full - v_empty`` up to rounding.
    """
    m = n_features
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    if m == 1:
        v = value_fn(ends)
        v0, v1 = v[0], v[1]
        return (v1 - v0)[None], jnp.zeros_like(v0)[None], v0, v1
    plan = kernel_plan(m, int(n_coalitions), sampler)
    masks, weights = sample_coalitions(key, plan)
    v = value_fn(jnp.concatenate([ends, masks], axis=0))
    v0, v1 = v[0], v[1]
    tail = v.shape[1:]
    flat = v[2:].reshape(v.shape[0] - 2, -1)
    phi, stderr = kernel_solve(
        plan, masks, weights.astype(v.dtype), flat, v0.reshape(-1), v1.reshape(-1), third_order=third_order,
        controls=controls, prior=prior,
    )
    return phi.reshape((m,) + tail), stderr.reshape((m,) + tail), v0, v1
