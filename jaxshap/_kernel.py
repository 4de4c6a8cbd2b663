"""KernelSHAP: Shapley values as an efficiency-constrained, kernel-weighted least-squares fit."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve

from ._kernel_sampling import KernelPlan, kernel_plan, sample_coalitions

ValueFn = Callable[[jax.Array], jax.Array]


def _safe_sqrt(x: jax.Array) -> jax.Array:
    """``sqrt(max(x, 0))`` with a finite gradient at 0 (enumerated estimates have zero variance)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def kernel_solve(
    plan: KernelPlan, masks: jax.Array, weights: jax.Array, values: jax.Array, v_empty: jax.Array, v_full: jax.Array
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
    factorisation; ``c`` is chosen so that for full enumeration the matrix is a multiple of ``I``.
    All outputs share one factorisation.

    The standard error linearises the estimator around its solution (the sandwich or
    Horvitz-Thompson variance of a ratio estimator): each coalition contributes
    ``psi_S = G P z_S w_S e_S`` with ``G`` the inverse above and ``e_S`` its residual, and the
    variance is the stratified, without-replacement variance of the sum of the ``psi`` over the
    sampling units of the plan (complementary pairs). Enumerated coalitions contribute none.

    Args:
      plan: the static plan the coalitions were drawn with.
      masks: ``[C, M]`` boolean coalitions.
      weights: ``[C]`` regression weights.
      values: ``[C, K]`` coalition values.
      v_empty, v_full: ``[K]`` values of the empty and the full coalition.

    Returns:
      ``(phi, stderr)``, both ``[M, K]``.
    """
    m = masks.shape[-1]
    dtype = values.dtype
    z = masks.astype(dtype)
    w = weights.astype(dtype)
    w = w / w.sum()  # scale-free; keeps float32 comfortable
    delta = v_full - v_empty  # [K]
    r = values - v_empty - (z.sum(-1, keepdims=True) / m) * delta  # [C, K]
    proj = jnp.eye(m, dtype=dtype) - 1.0 / m
    a = proj @ ((z * w[:, None]).T @ z) @ proj
    ridge = jnp.trace(a) / (m * (m - 1))
    chol = cho_factor(a + ridge * jnp.ones((m, m), dtype), lower=True)
    b = proj @ ((z * w[:, None]).T @ r)  # [M, K]
    d = proj @ cho_solve(chol, b)
    phi = delta / m + d

    # Linearised variance over the sampling units of the plan.
    residual = r - z @ d  # [C, K]
    gz = proj @ cho_solve(chol, proj @ z.T)  # [M, C]
    psi = gz.T[:, :, None] * (w[:, None] * residual)[:, None, :]  # [C, M, K]
    n_units, n_groups = plan.unit_group.shape[0], plan.group_factor.shape[0]
    totals = jax.ops.segment_sum(psi, jnp.asarray(plan.unit), num_segments=n_units)
    groups = jnp.asarray(plan.unit_group)
    means = jax.ops.segment_sum(totals, groups, num_segments=n_groups) / jnp.asarray(plan.group_count, dtype)[
        :, None, None
    ]
    squares = jax.ops.segment_sum((totals - means[groups]) ** 2, groups, num_segments=n_groups)
    var = jnp.tensordot(jnp.asarray(plan.group_factor, dtype), squares, axes=1)
    return phi, _safe_sqrt(var)


def kernel_shapley(
    key: jax.Array, value_fn: ValueFn, n_features: int, n_coalitions: int, *, sampler: str = "paired"
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
        ``2**M - 2``; at least :func:`jaxshap.coalitions.min_kernel_coalitions`).
      sampler: ``"paired"`` (strata in proportion to kernel mass) or ``"leverage"`` (uniform
        over sizes; Musco & Witter, 2025).

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
    phi, stderr = kernel_solve(plan, masks, weights.astype(v.dtype), flat, v0.reshape(-1), v1.reshape(-1))
    return phi.reshape((m,) + tail), stderr.reshape((m,) + tail), v0, v1
