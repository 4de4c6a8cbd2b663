r"""KernelSHAP: Shapley values, and Faith-SHAP interactions of large games, as efficiency-constrained,
kernel-weighted least-squares fits on sampled coalitions.

Shapley values (:func:`kernel_shapley`, :func:`kernel_solve`): the coalitions of a plan are
drawn from a key, the fit's operators are built once per draw (:func:`draw_operators`), and the
values of each row are one solve.

Faith-SHAP of order ``k`` (:func:`kernel_interactions`; Tsai, Yeh & Ravikumar, 2023,
"Faith-Shap: the faithful Shapley interaction index") is the solution of

.. math::

    \min_E \sum_{\emptyset \ne S \ne N} \mu(S) \Bigl(v(S) - v(\emptyset) - \sum_{T \subseteq S,\,
    1 \le |T| \le k} E_T\Bigr)^2 \quad \text{subject to} \quad \sum_T E_T = v(N) - v(\emptyset),

with the Shapley kernel :math:`\mu(S) = (M - 1) / (\binom{M}{|S|} |S| (M - |S|))`. As in
KernelSHAP, the sums over coalitions are replaced by Horvitz-Thompson estimates from coalitions
drawn by :func:`jaxshap.coalitions.sample_kernel_coalitions` (small layers enumerated, the rest
complementary pairs without replacement), which is the regression approach to interaction
indices of Tsai et al. (2023) and of KernelSHAP-IQ (Fumagalli et al., 2024, "KernelSHAP-IQ:
weighted least square optimization for Shapley interactions"). A budget of ``2**M - 2`` or more
enumerates every coalition and is exact.

The constraint is eliminated as in :func:`kernel_solve`: the total is first spread over the
order-1 terms (``E^0_i = Delta / M``), and the correction ``delta`` is confined to
``1^T delta = 0`` with the projection ``P = I - 1 1^T / n`` (``n`` unknowns), solved by one
Cholesky factorisation of ``P X^T W X P + c 1 1^T``.

The interactions' standard errors linearise the estimate around its solution (sandwich /
Horvitz-Thompson variance): coalition ``S`` contributes ``psi_S = H^{-1} P x_S w_S e_S`` with
``e_S`` its residual, and the variance is the stratified without-replacement variance of the
per-pair sums of ``psi`` over the plan's sampling units. Enumerated coalitions contribute none.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._coalitions._kernel_plan import KernelPlan, kernel_plan, max_coalitions
from .._coalitions._kernel_sampling import sample_coalitions
from .._core._validate import integer
from ._exact import full_precision
from ._interactions import dense_from_sets
from ._kernel_priors import RowPrior
from ._kernel_solve import design_variance, plan_operators, safe_sqrt, spd_inverse


ValueFn = Callable[[jax.Array], jax.Array]

THIRD_ORDER_RIDGE = 0.05
"""Ridge on the third-order coefficients, relative to the mean curvature of the Shapley block
(up to 16 features; see :func:`third_order_ridge`)."""


def third_order_ridge(n_features: int) -> float:
    """The relative ridge of the third-order controls: :data:`THIRD_ORDER_RIDGE` times
    ``max(1, C(M, 3) / C(16, 3))``, so the prior variance of the whole third-order part stays
    that of 16 features. With thousands of terms and a few hundred sampled pairs a smaller ridge
    lets the fit interpolate the sample, and then no residual-based standard error (nor float32)
    can tell the remaining error."""
    return THIRD_ORDER_RIDGE * max(1.0, math.comb(n_features, 3) / math.comb(16, 3))


def _controls(m: int, third_order: bool, controls) -> tuple:
    return tuple(controls) if controls is not None else (((3, third_order_ridge(m)),) if third_order else ())


@full_precision
def draw_operators(key: jax.Array, plan: KernelPlan, controls: tuple = (), prior: Any = "isotropic", *, dtype=jnp.float32, deps: Any = ()):
    """``(masks, ops, parts)``: the coalitions of ``plan`` drawn from ``key``
    (:func:`jaxshap.coalitions.sample_kernel_coalitions`), their solve operators
    (:func:`jaxshap._estimators._kernel_solve.plan_operators`, factorised after ``deps``) and the
    ``prior``'s parts (:meth:`jaxshap.estimators.RowPrior.parts`). A pure function of the key: the
    explainer draws it once per call and every row applies it (:meth:`~jaxshap.estimators.RowPrior.apply`)."""
    prior = RowPrior.resolve(prior)
    masks, weights = sample_coalitions(key, plan, dtype)
    ops = plan_operators(plan, masks, weights, controls, dtype=dtype, deps=deps)
    return masks, ops, prior.parts(plan, masks, weights, controls, dtype=dtype, deps=ops)  # after the operators' LAPACK calls


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
    |S| Delta / M)``, ``delta`` solves ``(P A P + c 1 1^T) delta = P b`` for any ``c > 0``, by a
    Cholesky factorisation: a fixed linear operator of the values
    (:func:`jaxshap._estimators._kernel_solve.kernel_operator`), which the explainer builds once for
    all rows that share coalitions.

    **Control variates** (``third_order=True``, or ``controls``). With complementary pairs the
    even-order Fourier (Walsh) terms of the game cancel and the first-order ones are fitted
    exactly, so the error comes from odd terms of order three and up. The regression then also
    holds every residualised odd Walsh term of the given orders with a ridge-penalised
    coefficient (:mod:`jaxshap._estimators._control_variates`): kernel-orthogonal to the additive
    fit, they leave the estimand unchanged (exact under full enumeration) and soak up that part
    of the residual (a regression adjustment of the Monte Carlo estimate; Pelegrina et al., 2023;
    Witter et al., 2025). Up to ``C(M, k)`` columns are added explicitly, beyond that the same fit
    is done in kernel form. ``third_order=True`` means ``controls=((3, third_order_ridge(M)),)``.
    The ``prior`` sets the variances of the third-order coefficients
    (:mod:`jaxshap._estimators._kernel_priors`).

    The standard error is the linearised (sandwich) variance of the whole fit under the
    stratified sampling design, with leave-one-unit-out residuals; enumerated coalitions
    contribute none.

    Args:
      plan: the static plan the coalitions were drawn with.
      masks: ``[C, M]`` boolean coalitions; weights: ``[C]`` regression weights.
      values: ``[C, K]`` coalition values; v_empty, v_full: ``[K]``.
      third_order: add the third-order control variates (static).
      controls: ``((order, relative_ridge), ...)`` instead of ``third_order`` (static).
      prior: a :class:`jaxshap.estimators.RowPrior` or the name of a registered one (static).

    Returns:
      ``(phi, stderr)``, both ``[M, K]``.
    """
    controls, prior = _controls(masks.shape[-1], third_order, controls), RowPrior.resolve(prior)
    # factorise once the values are in: the game may run batched LAPACK calls itself (a Gaussian
    # masker's conditioning), and two side by side can deadlock (jaxshap._core._platform)
    ops = plan_operators(plan, masks, weights, controls, dtype=values.dtype, deps=(values, v_empty, v_full))
    parts = prior.parts(plan, masks, weights, controls, dtype=values.dtype, deps=ops)
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

    The Shapley values solve the weighted least-squares problem over all coalitions with the
    Shapley kernel ``k(M, s) = (M - 1) / (C(M, s) s (M - s))``, ``v(empty)`` as intercept and
    ``sum_j phi_j = v(N) - v(empty)`` as a constraint (Charnes et al., 1988). The sums over
    coalitions are estimated from ``n_coalitions`` coalitions drawn by
    :func:`jaxshap.coalitions.sample_kernel_coalitions` (small layers enumerated, the rest in
    complementary pairs without replacement) and the regression is solved by
    :func:`kernel_solve` (Covert & Lee, 2021, "Improving KernelSHAP: practical Shapley value
    estimation via linear regression"). A budget of ``2**M - 2`` or more is exact. Cost: one call
    of ``value_fn`` on ``n_coalitions + 2`` coalitions (the empty and the full one besides).

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static).
      n_coalitions: coalitions other than the empty and the full one (static; capped at
        ``2**M - 2``; at least :func:`jaxshap.coalitions.min_kernel_coalitions`, one pair).
      sampler: ``"paired"``, ``"leverage"`` or ``"middle"`` (see :func:`jaxshap.coalitions.kernel_plan`).
      third_order, controls, prior: the control variates and their prior (static; see :func:`kernel_solve`).

    Returns:
      ``(phi, stderr, v_empty, v_full)``: ``phi`` and ``stderr`` of shape ``[M, ...]`` (``stderr``
      zero where the estimate is exact), and the values of the empty and full coalitions.
      ``phi.sum(0) == v_full - v_empty`` up to rounding.
    """
    m = n_features
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    if m == 1:
        v = value_fn(ends)
        return (v[1] - v[0])[None], jnp.zeros_like(v[0])[None], v[0], v[1]
    plan = kernel_plan(m, int(n_coalitions), sampler)
    masks, weights = sample_coalitions(key, plan)
    v = value_fn(jnp.concatenate([ends, masks], axis=0))
    tail = v.shape[1:]
    flat = v[2:].reshape(v.shape[0] - 2, -1)
    phi, stderr = kernel_solve(
        plan, masks, weights.astype(v.dtype), flat, v[0].reshape(-1), v[1].reshape(-1), third_order=third_order,
        controls=controls, prior=prior,
    )
    return phi.reshape((m,) + tail), stderr.reshape((m,) + tail), v[0], v[1]


def n_terms(n_features: int, order: int) -> int:
    """Number of unknowns ``sum_{t = 1..k} C(M, t)``."""
    return sum(math.comb(n_features, t) for t in range(1, order + 1))


@full_precision
def _fit(plan, design, w, r, delta, m):
    """``(E [n, K], stderr [n, K])``: ``E = E^0 + H^{-1} D^T W r`` with ``H = D^T W D + c 1 1^T``
    (``c = tr / (n (n - 1))`` fixes the null direction of the projected design ``D``), and the
    design variance of the per-coalition terms ``psi_S = H^{-1} d_S w_S e_S``."""
    n = design.shape[1]
    weighted = design * w[:, None]
    h = weighted.T @ design
    inverse = spd_inverse(h + jnp.trace(h) / (n * (n - 1)))
    theta = inverse @ (weighted.T @ r)
    base = jnp.zeros((n, delta.shape[0]), design.dtype).at[:m].set(delta / m)
    psi = (inverse @ design.T).T[:, :, None] * (w[:, None] * (r - design @ theta))[:, None, :]  # [C, n, K]
    return base + theta, safe_sqrt(design_variance(plan, psi, jnp.asarray(plan.unit)))


def kernel_interactions(
    key: jax.Array,
    value_fn: ValueFn,
    n_features: int,
    n_coalitions: int,
    *,
    order: int = 2,
    sampler: str = "paired",
) -> tuple[list[jax.Array], list[jax.Array], jax.Array, jax.Array]:
    """Faith-SHAP interactions (orders ``1..k``) of one game from sampled coalitions, with standard errors.

    Cost: one call of ``value_fn`` on ``n_coalitions + 2`` coalitions, and a Cholesky
    factorisation of size ``sum_t C(M, t)`` (``M + M (M - 1) / 2`` for pairs).

    Args:
      key: PRNG key.
      value_fn: maps boolean coalitions ``[C, M]`` to values ``[C, ...]``.
      n_features: ``M`` (static; at least 2).
      n_coalitions: coalitions other than the empty and the full one (static; capped at
        ``2**M - 2``, where the result is exact); at least the number of unknowns plus one.
      order: ``k`` (static).
      sampler: ``"paired"``, ``"leverage"`` or ``"middle"`` (see :func:`jaxshap.coalitions.kernel_plan`).

    Returns:
      ``(terms, stderr, v_empty, v_full)``: ``terms[t - 1]`` and ``stderr[t - 1]`` are dense
      symmetric ``[M] * t + [...]`` tensors as in :func:`jaxshap.estimators.exact_interactions`
      (``stderr`` zero where the estimate is exact). All terms (each set once) sum to
      ``v_full - v_empty``.

    Example::

        terms, se, v0, v1 = kernel_interactions(jax.random.key(0), game, 40, 20_000)
        matrix = jaxshap.estimators.interaction_matrix(terms)   # [40, 40]
    """
    m = int(n_features)
    if m < 2:
        raise ValueError(f"kernel_interactions needs at least 2 features; got n_features={n_features!r}.")
    order = integer(order, "order", least=1, most=m - 1, rule=f"an int between 1 and M - 1 = {m - 1}")
    n = n_terms(m, order)
    budget = min(int(n_coalitions), max_coalitions(m))
    if budget < n + 1:
        raise ValueError(
            f"`n_coalitions` ({n_coalitions}) must be more than the {n} unknowns of order-{order} "
            f"interactions of {m} features; use at least {n + 1} (a few times more for accuracy)."
        )
    plan = kernel_plan(m, budget, sampler)
    masks, weights = sample_coalitions(key, plan)
    ends = jnp.stack([jnp.zeros(m, bool), jnp.ones(m, bool)])
    v = value_fn(jnp.concatenate([ends, masks], axis=0))
    v0, v1 = v[0], v[1]
    tail = v.shape[1:]
    values = v[2:].reshape(v.shape[0] - 2, -1)
    dtype = values.dtype

    sets = tuple(c for t in range(1, order + 1) for c in itertools.combinations(range(m), t))
    z = masks.astype(dtype)
    columns = [z]
    for t in range(2, order + 1):
        combos = np.array([c for c in sets if len(c) == t], dtype=np.int32)
        prod = z[:, combos[:, 0]]
        for i in range(1, t):
            prod = prod * z[:, combos[:, i]]
        columns.append(prod)
    x = jnp.concatenate(columns, axis=1)  # [C, n]: [T <= S]

    w = weights.astype(dtype)
    w = w / w.sum()
    delta = (v1 - v0).reshape(-1)  # [K]
    r = values - v0.reshape(-1) - (z.sum(-1, keepdims=True) / m) * delta  # residual of E^0
    design = x @ (jnp.eye(n, dtype=dtype) - 1.0 / n)
    e, stderr = _fit(plan, design, w, r, delta, m)
    terms = dense_from_sets(e, sets, m, order)
    errors = dense_from_sets(stderr, sets, m, order)
    reshape = lambda a, t: a.reshape((m,) * t + tail)
    return (
        [reshape(a, t + 1) for t, a in enumerate(terms)],
        [reshape(a, t + 1) for t, a in enumerate(errors)],
        v0,
        v1,
    )
